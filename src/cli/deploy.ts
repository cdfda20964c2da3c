// `krane deploy` and `krane deployments list | get | delete`: new revisions of an environment and
// the revisions themselves, through ctrl's DeploymentService. (`krane scale` is a rollout
// command: see rollout.ts.)
import type { Command } from "commander";
import type { Deployment } from "../gen/krane/ctrl/v1/api_pb.js";
import {
  collect,
  intArg,
  parseKeyValue,
  splitTarget,
  userAction,
  when,
  withConnection,
  type ConnectionFlags,
} from "./command.js";

interface DeployFlags extends ConnectionFlags {
  image: string;
  replicas?: number;
  cpu?: number;
  memory?: number;
  port?: number;
  protocol?: string;
  env: string[];
  command: string[];
  arg: string[];
  buildId?: string;
  healthPath?: string;
}

const DEPLOYMENT_HEAD = ["ID", "REVISION", "IMAGE", "REGIONS", "K8S NAME", "CREATED"];

function deploymentRow(d: Deployment): (string | number)[] {
  return [
    d.id,
    Number(d.revision),
    d.image,
    d.regions.map((r) => `${r.region}=${r.replicas}`).join(" ") || "-",
    d.k8sName,
    when(d.createdAtUnixMs),
  ];
}

export function registerDeployCommands(program: Command): void {
  withConnection(
    program
      .command("deploy <project/env>")
      .description("create a new deployment (revision) of an environment")
      .requiredOption("--image <image>", "container image")
      .option("--replicas <n>", "replicas per region (also becomes the environment's count)", intArg("--replicas"))
      .option("--cpu <millicores>", "CPU millicores (default 250)", intArg("--cpu"))
      .option("--memory <mib>", "memory MiB (default 256)", intArg("--memory"))
      .option("--port <port>", "port the app listens on (default 8080)", intArg("--port"))
      .option("--protocol <protocol>", "what the app speaks on its port: http1, h2c or grpc (default http1)")
      .option("--env <KEY=VALUE>", "environment variable (repeatable)", collect, [])
      .option("--command <arg>", "override the image's entrypoint (repeatable, one word each)", collect, [])
      .option("--arg <arg>", "argument (repeatable)", collect, [])
      .option("--build-id <id>", "build this image came from")
      .option("--health-path <path>", "HTTP health check path"),
    { workspace: true },
  ).action(
    userAction(async (x, target: string, f: DeployFlags) => {
      const { deployment } = await x.ctrl.client(x.api.DeploymentService).createDeployment({
        workspace: await x.ctrl.workspace(),
        ...splitTarget(target),
        image: f.image,
        command: f.command,
        args: f.arg,
        port: f.port ?? 0,
        protocol: f.protocol ?? "",
        env: f.env.map((e) => {
          const { key, value } = parseKeyValue("--env", e);
          return { name: key, value };
        }),
        cpuMillicores: BigInt(f.cpu ?? 0),
        memoryMib: BigInt(f.memory ?? 0),
        buildId: f.buildId ?? "",
        replicas: f.replicas,
        healthCheck: f.healthPath === undefined ? undefined : { path: f.healthPath },
      });
      if (!deployment) return;
      if (x.json) x.printJson(x.api.DeploymentSchema, deployment);
      else x.printTable(DEPLOYMENT_HEAD, [deploymentRow(deployment)]);
    }),
  );

  const deps = program.command("deployments").description("deployments (revisions)");
  withConnection(deps.command("list [project[/env]]").description("list deployments, newest first"), {
    workspace: true,
  }).action(
    userAction(async (x, target: string | undefined) => {
      const [project, environment] =
        target === undefined
          ? ["", ""]
          : target.includes("/")
            ? [splitTarget(target).project, splitTarget(target).environment]
            : [target, ""];
      const workspace = await x.ctrl.workspace();
      const deployments = x.ctrl.client(x.api.DeploymentService);
      const res = await x.ctrl.allPages("deployments", (pageToken) =>
        deployments.listDeployments({ workspace, project, environment, pageToken, pageSize: x.ctrl.pageSize }),
      );
      if (x.json) x.printJson(x.api.ListDeploymentsResponseSchema, res);
      else x.printTable(DEPLOYMENT_HEAD, res.deployments.map(deploymentRow));
    }),
  );
  withConnection(deps.command("get <id>").description("show a deployment")).action(
    userAction(async (x, id: string) => {
      const { deployment } = await x.ctrl.client(x.api.DeploymentService).getDeployment({ deploymentId: id });
      if (!deployment) return;
      if (x.json) {
        x.printJson(x.api.DeploymentSchema, deployment);
        return;
      }
      x.printTable(DEPLOYMENT_HEAD, [deploymentRow(deployment)]);
      x.printTable(
        ["NAMESPACE", "PORT", "PROTOCOL", "CPU", "MEMORY", "COMMAND", "ARGS", "ENV"],
        [
          [
            deployment.k8sNamespace,
            deployment.port,
            deployment.protocol || "http1",
            `${deployment.cpuMillicores}m`,
            `${deployment.memoryMib}Mi`,
            deployment.command.join(" ") || "-",
            deployment.args.join(" ") || "-",
            deployment.env.map((e) => e.name).join(" ") || "-",
          ],
        ],
      );
    }),
  );
  withConnection(deps.command("delete <id>").description("delete a deployment from every region")).action(
    userAction(async (x, id: string) => {
      await x.ctrl.client(x.api.DeploymentService).deleteDeployment({ deploymentId: id });
      if (x.json) process.stdout.write(`${JSON.stringify({ deleted: id })}\n`);
      else process.stdout.write(`deleted ${id}\n`);
    }),
  );
}

// `krane deploy` and `krane deployments list | get | delete`: new revisions of an environment and
// the revisions themselves, through ctrl's DeploymentService. (`krane scale` is a rollout
// command: see rollout.ts.)
import type { Command } from "commander";
import type { Deployment } from "../gen/krane/ctrl/v1/api_pb.js";
import {
  collect,
  environmentRef,
  intArg,
  parseKeyValue,
  splitTarget,
  userCommand,
  when,
  workspaceCommand,
  type ConnectionFlags,
  type UserContext,
} from "./command.js";

interface DeployFlags extends ConnectionFlags {
  image?: string;
  source?: string;
  dockerfile?: string;
  /** false with --no-inherit. */
  inherit: boolean;
  envUnset: string[];
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
  unpin?: boolean;
}

// DESIRED NOW: the replicas of this revision the rollout wants in each region at this moment (a
// new revision starts low and grows as the rollout goes; an old one shrinks to nothing).
const DEPLOYMENT_HEAD = ["ID", "REVISION", "IMAGE", "DESIRED NOW", "K8S NAME", "CREATED"];
const SETTINGS_HEAD = ["NAMESPACE", "PORT", "PROTOCOL", "CPU", "MEMORY", "HEALTH", "COMMAND", "ARGS", "ENV"];

function settingsRow(d: Deployment): (string | number)[] {
  return [
    d.k8sNamespace,
    d.port,
    d.protocol || "http1",
    `${d.cpuMillicores}m`,
    `${d.memoryMib}Mi`,
    d.healthCheck ? `${d.healthCheck.method || "GET"} ${d.healthCheck.path}` : "-",
    d.command.join(" ") || "-",
    d.args.join(" ") || "-",
    d.env.map((e) => e.name).join(" ") || "-",
  ];
}

/** "local=3 eu=2" */
function perRegion(rs: readonly { region: string; replicas: number }[]): string {
  return rs.map((r) => `${r.region}=${r.replicas}`).join(" ");
}

function deploymentRow(d: Deployment): (string | number)[] {
  return [d.id, Number(d.revision), d.image, perRegion(d.regions) || "-", d.k8sName, when(d.createdAtUnixMs)];
}

/** One deployment: as JSON, or its row and its settings' row. */
function printDeployment(x: UserContext, d: Deployment): void {
  if (x.json) {
    x.printJson(x.api.DeploymentSchema, d);
    return;
  }
  x.printTable(DEPLOYMENT_HEAD, [deploymentRow(d)]);
  x.printTable(SETTINGS_HEAD, [settingsRow(d)]);
}

export function registerDeployCommands(program: Command): void {
  workspaceCommand(
    program
      .command("deploy <project/env>")
      .description(
        "create a new revision of an environment: the image given, every other setting the current revision's unless given here (--no-inherit: the defaults)",
      )
      .addHelpText(
        "after",
        `
Carried over from the environment's current revision (the one its rollout targets: the newest,
or after \`krane rollout undo\` the one it went back to): --port, --protocol, --cpu, --memory,
--health-path (the whole health check), --command, --arg (each list replaced whole when given)
and the --env variables (those given are added or replace one of the same name; --env-unset
NAME drops one). Not carried: --build-id (it belongs to its image). Every revision takes the
environment's configuration and secrets as they are now (\`krane config\`). --no-inherit starts
from the defaults instead (port 8080, http1, 250m CPU, 256 MiB, no health check, the image's
entrypoint, no variables): the way to drop a carried command, argument list or health check.
--replicas changes the environment's count, not the revision.`,
      )
      .option("--image <image>", "container image")
      .option("--source <dir>", "build this directory from source and deploy the result (instead of --image)")
      .option("--dockerfile <path>", "with --source: a Dockerfile's path in the source")
      .option("--replicas <n>", "replicas per region (also becomes the environment's count)", intArg("--replicas"))
      .option("--cpu <millicores>", "CPU millicores (default: carried, else 250)", intArg("--cpu"))
      .option("--memory <mib>", "memory MiB (default: carried, else 256)", intArg("--memory"))
      .option("--port <port>", "port the app listens on (default: carried, else 8080)", intArg("--port"))
      .option(
        "--protocol <protocol>",
        "what the app speaks on its port: http1, h2c or grpc (default: carried, else http1)",
      )
      .option("--env <KEY=VALUE>", "environment variable, added to the carried ones (repeatable)", collect, [])
      .option("--env-unset <KEY>", "drop a carried environment variable (repeatable)", collect, [])
      .option("--command <arg>", "override the image's entrypoint (repeatable, one word each)", collect, [])
      .option("--arg <arg>", "argument (repeatable)", collect, [])
      .option("--build-id <id>", "build this image came from (not carried)")
      .option("--health-path <path>", "HTTP health check path")
      .option("--no-inherit", "start from the defaults: carry nothing over from the current revision")
      .option(
        "--unpin",
        "lift the pin `krane rollback` left: this revision rolls out (without it a pinned environment only records it)",
      ),
    async (x, target: string, f: DeployFlags) => {
      if (!f.inherit && f.envUnset.length > 0)
        throw new Error("--env-unset drops a carried variable: it cannot be combined with --no-inherit");
      if ((f.image === undefined) === (f.source === undefined))
        throw new Error("give either --image (a built image) or --source (a directory to build), not both");
      if (f.dockerfile !== undefined && f.source === undefined) throw new Error("--dockerfile goes with --source");
      if (f.source !== undefined) {
        // The build deploys its digest with the current revision's settings: the others are --image's.
        const others = [f.replicas, f.cpu, f.memory, f.port, f.protocol, f.buildId, f.healthPath, f.unpin];
        if (
          others.some((v) => v !== undefined) ||
          f.env.length + f.command.length + f.arg.length + f.envUnset.length > 0 ||
          !f.inherit
        )
          throw new Error(
            "--source deploys with the current revision's settings: set them with a deploy of --image, or krane.yaml",
          );
        const { sourceBuild } = await import("./build.js");
        const b = await sourceBuild(x, target, { source: f.source, dockerfile: f.dockerfile }, true);
        const got = await x.ctrl.client(x.api.DeploymentService).getDeployment({ deploymentId: b.deploymentId });
        if (got.deployment) printDeployment(x, got.deployment);
        return;
      }
      const ref = await environmentRef(x, target);
      const { deployment, pinnedDeploymentId } = await x.ctrl.client(x.api.DeploymentService).createDeployment({
        ...ref,
        unpin: f.unpin === true,
        image: f.image ?? "",
        inherit: f.inherit,
        command: f.command,
        args: f.arg,
        port: f.port ?? 0,
        protocol: f.protocol ?? "",
        env: f.env.map((e) => {
          const { key, value } = parseKeyValue("--env", e);
          return { name: key, value };
        }),
        envUnset: f.envUnset,
        cpuMillicores: BigInt(f.cpu ?? 0),
        memoryMib: BigInt(f.memory ?? 0),
        buildId: f.buildId ?? "",
        replicas: f.replicas,
        healthCheck: f.healthPath === undefined ? undefined : { path: f.healthPath },
      });
      if (!deployment) return;
      printDeployment(x, deployment);
      if (x.json) return;
      // The revision's count grows as the rollout goes: say where it is going. The revision is
      // made already: a failed read only leaves this line out.
      const environment = await x.ctrl
        .client(x.api.EnvironmentService)
        .getEnvironment(ref)
        .then((r) => r.environment)
        .catch(() => undefined);
      if (pinnedDeploymentId !== "")
        process.stdout.write(
          `the environment is pinned to ${pinnedDeploymentId} by \`krane rollback\`: revision ${deployment.revision} is recorded but takes no traffic until \`krane rollback --unpin ${target}\` (or a deploy with --unpin)\n`,
        );
      else if (environment && environment.regions.length > 0)
        process.stdout.write(
          `revision ${deployment.revision} rolls out to ${perRegion(environment.regions)} replicas (desired now: ${
            perRegion(deployment.regions) || "none yet"
          }); \`krane rollout status ${target}\` follows it\n`,
        );
    },
  );

  const deps = program.command("deployments").description("deployments (revisions)");
  workspaceCommand(
    deps.command("list [project[/env]]").description("list deployments, newest first"),
    async (x, target: string | undefined) => {
      const [project, environment] =
        target === undefined
          ? ["", ""]
          : target.includes("/")
            ? [splitTarget(target).project, splitTarget(target).environment]
            : [target, ""];
      const workspace = await x.ctrl.workspace();
      const deployments = x.ctrl.client(x.api.DeploymentService);
      const res = await x.ctrl.allPages("deployments", (page) =>
        deployments.listDeployments({ workspace, project, environment, ...page }),
      );
      if (x.json) x.printJson(x.api.ListDeploymentsResponseSchema, res);
      else x.printTable(DEPLOYMENT_HEAD, res.deployments.map(deploymentRow));
    },
  );
  userCommand(deps.command("get <id>").description("show a deployment"), async (x, id: string) => {
    const { deployment } = await x.ctrl.client(x.api.DeploymentService).getDeployment({ deploymentId: id });
    if (deployment) printDeployment(x, deployment);
  });
  userCommand(
    deps.command("delete <id>").description("delete a deployment from every region"),
    async (x, id: string) => {
      await x.ctrl.client(x.api.DeploymentService).deleteDeployment({ deploymentId: id });
      if (x.json) process.stdout.write(`${JSON.stringify({ deleted: id })}\n`);
      else process.stdout.write(`deleted ${id}\n`);
    },
  );
}

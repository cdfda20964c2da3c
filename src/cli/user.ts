// User commands against ctrl's public API: workspaces, projects, environments, regions and
// cluster tokens, deploy, deployments and status. Tables by default, JSON with --output json.
import { create, toJson } from "@bufbuild/protobuf";
import type { Command } from "commander";
import {
  ClusterSchema,
  CreateClusterTokenResponseSchema,
  CreateDeploymentRequestSchema,
  DeploymentSchema,
  DeploymentService,
  EnvironmentSchema,
  EnvironmentService,
  GetEnvironmentStatusResponseSchema,
  ListClustersResponseSchema,
  ListDeploymentsResponseSchema,
  ListEnvironmentsResponseSchema,
  ListProjectsResponseSchema,
  ListRegionsResponseSchema,
  ListWorkspacesResponseSchema,
  ProjectSchema,
  ProjectService,
  RegionSchema,
  RegionService,
  RolloutStrategy,
  StatusService,
  WorkspaceSchema,
  WorkspaceService,
  type Deployment,
  type Environment,
} from "../gen/krane/ctrl/v1/api_pb.js";
import { RolloutService, RolloutStatusSchema } from "../gen/krane/ctrl/v1/rollout_pb.js";
import { renderEnvironmentStatus } from "./status-view.js";
import { Ctrl, collect, intArg, printJson, printTable, run, splitTarget, when, withConnection, type ConnectionFlags } from "./user-client.js";

function envRow(e: Environment): (string | number)[] {
  return [e.slug, e.regions.map((r) => `${r.region}=${r.replicas}`).join(" ") || "-", e.sentinel ? e.sentinel.image : "-", e.id];
}

function deploymentRow(d: Deployment): (string | number)[] {
  return [d.id, Number(d.revision), d.image, d.regions.map((r) => `${r.region}=${r.replicas}`).join(" ") || "-", d.k8sName, when(d.createdAtUnixMs)];
}

function parseKeyValue(what: string, v: string): { key: string; value: string } {
  const i = v.indexOf("=");
  if (i <= 0) throw new Error(`${what}: expected KEY=VALUE, got "${v}"`);
  return { key: v.slice(0, i), value: v.slice(i + 1) };
}

function parseStrategy(v: string): RolloutStrategy {
  if (v === "RollingUpdate") return RolloutStrategy.ROLLING_UPDATE;
  if (v === "Recreate") return RolloutStrategy.RECREATE;
  throw new Error("--strategy: expected RollingUpdate or Recreate");
}

/** The environment, then its rollout policy. */
function printEnvironment(c: Ctrl, environment: Environment): void {
  if (c.json) {
    printJson(EnvironmentSchema, environment);
    return;
  }
  printTable(["ENV", "REGIONS", "SENTINEL", "ID"], [envRow(environment)]);
  const r = environment.rollout;
  if (!r) return;
  const strategy = r.strategy === RolloutStrategy.RECREATE ? "Recreate" : "RollingUpdate";
  printTable(
    ["STRATEGY", "MAX SURGE", "MAX UNAVAILABLE", "MIN READY", "DEADLINE", "HISTORY", "PAUSED"],
    [[strategy, r.maxSurge, r.maxUnavailable, `${r.minReadySeconds}s`, `${r.progressDeadlineSeconds}s`, r.revisionHistoryLimit ?? 10, r.paused ? "yes" : "no"]],
  );
}

export function registerUserCommands(program: Command): void {
  // ---------------------------------------------------------------- workspaces
  const ws = program.command("workspace").description("workspaces (tenants)");
  withConnection(ws.command("create <slug>").description("create a workspace").option("--name <name>", "display name"))
    .action((slug: string, f: ConnectionFlags & { name?: string }) =>
      run(async () => {
        const c = new Ctrl(f);
        const { workspace } = await c.client(WorkspaceService).createWorkspace({ slug, name: f.name ?? "" });
        if (!workspace) return;
        if (c.json) printJson(WorkspaceSchema, workspace);
        else printTable(["SLUG", "NAMESPACE", "ID"], [[workspace.slug, workspace.k8sNamespace, workspace.id]]);
      }),
    );
  withConnection(ws.command("list").description("list workspaces")).action((f: ConnectionFlags) =>
    run(async () => {
      const c = new Ctrl(f);
      const res = await c.client(WorkspaceService).listWorkspaces({});
      if (c.json) printJson(ListWorkspacesResponseSchema, res);
      else printTable(["SLUG", "NAME", "NAMESPACE", "ID"], res.workspaces.map((w) => [w.slug, w.name, w.k8sNamespace, w.id]));
    }),
  );
  withConnection(ws.command("get <workspace>").description("show a workspace")).action((ref: string, f: ConnectionFlags) =>
    run(async () => {
      const c = new Ctrl(f);
      const { workspace } = await c.client(WorkspaceService).getWorkspace({ workspace: ref });
      if (!workspace) return;
      if (c.json) printJson(WorkspaceSchema, workspace);
      else printTable(["SLUG", "NAME", "NAMESPACE", "ID", "CREATED"], [[workspace.slug, workspace.name, workspace.k8sNamespace, workspace.id, when(workspace.createdAtUnixMs)]]);
    }),
  );

  // ---------------------------------------------------------------- projects
  const prj = program.command("project").description("projects of a workspace");
  withConnection(prj.command("create <slug>").description("create a project").option("--name <name>", "display name"), { workspace: true }).action(
    (slug: string, f: ConnectionFlags & { name?: string }) =>
      run(async () => {
        const c = new Ctrl(f);
        const { project } = await c.client(ProjectService).createProject({ workspace: await c.workspace(), slug, name: f.name ?? "" });
        if (!project) return;
        if (c.json) printJson(ProjectSchema, project);
        else printTable(["SLUG", "ID"], [[project.slug, project.id]]);
      }),
  );
  withConnection(prj.command("list").description("list projects"), { workspace: true }).action((f: ConnectionFlags) =>
    run(async () => {
      const c = new Ctrl(f);
      const res = await c.client(ProjectService).listProjects({ workspace: await c.workspace() });
      if (c.json) printJson(ListProjectsResponseSchema, res);
      else printTable(["SLUG", "NAME", "ID"], res.projects.map((p) => [p.slug, p.name, p.id]));
    }),
  );
  withConnection(prj.command("get <project>").description("show a project"), { workspace: true }).action((ref: string, f: ConnectionFlags) =>
    run(async () => {
      const c = new Ctrl(f);
      const { project } = await c.client(ProjectService).getProject({ workspace: await c.workspace(), project: ref });
      if (!project) return;
      if (c.json) printJson(ProjectSchema, project);
      else printTable(["SLUG", "NAME", "ID", "CREATED"], [[project.slug, project.name, project.id, when(project.createdAtUnixMs)]]);
    }),
  );

  // ---------------------------------------------------------------- environments
  const env = program.command("env").description("environments of a project");
  interface EnvFlags extends ConnectionFlags {
    region: string[];
    sentinelImage?: string;
    sentinelReplicas?: number;
    sentinelCpu?: number;
    sentinelMemory?: number;
    strategy?: string;
    maxSurge?: string;
    maxUnavailable?: string;
    minReadySeconds?: number;
    progressDeadlineSeconds?: number;
    revisionHistoryLimit?: number;
    paused?: boolean;
  }
  const envCreate = env
    .command("create <project/env>")
    .description("create an environment")
    .option("--region <region=replicas>", "a region and its replica count (repeatable)", collect, [])
    .option("--sentinel-image <image>", "run a sentinel with this image in each region");
  withSettingsOptions(envCreate, { surge: " (default 25%)", unavailable: " (default 25%)", deadline: " (default 600)", history: " (default 10)" });
  withConnection(envCreate.option("--paused", "create the environment with rollouts paused"), { workspace: true }).action((target: string, f: EnvFlags) =>
    run(async () => {
      const c = new Ctrl(f);
      const { project, environment } = splitTarget(target);
      const regions = f.region.map((r) => {
        const { key, value } = parseKeyValue("--region", r.includes("=") ? r : `${r}=1`);
        return { region: key, replicas: intArg("--region")(value) };
      });
      const strategy = f.strategy === undefined ? RolloutStrategy.UNSPECIFIED : parseStrategy(f.strategy);
      const { environment: created } = await c.client(EnvironmentService).createEnvironment({
        workspace: await c.workspace(),
        project,
        slug: environment,
        regions,
        sentinel:
          f.sentinelImage === undefined
            ? undefined
            : { image: f.sentinelImage, replicas: f.sentinelReplicas ?? 0, cpuMillicores: BigInt(f.sentinelCpu ?? 0), memoryMib: BigInt(f.sentinelMemory ?? 0) },
        rollout: {
          strategy,
          maxSurge: f.maxSurge ?? "",
          maxUnavailable: f.maxUnavailable ?? "",
          minReadySeconds: f.minReadySeconds ?? 0,
          progressDeadlineSeconds: f.progressDeadlineSeconds ?? 0,
          revisionHistoryLimit: f.revisionHistoryLimit,
          paused: f.paused ?? false,
        },
      });
      if (!created) return;
      if (c.json) printJson(EnvironmentSchema, created);
      else printTable(["ENV", "REGIONS", "SENTINEL", "ID"], [envRow(created)]);
    }),
  );
  withConnection(env.command("list <project>").description("list the environments of a project"), { workspace: true }).action((project: string, f: ConnectionFlags) =>
    run(async () => {
      const c = new Ctrl(f);
      const res = await c.client(EnvironmentService).listEnvironments({ workspace: await c.workspace(), project });
      if (c.json) printJson(ListEnvironmentsResponseSchema, res);
      else printTable(["ENV", "REGIONS", "SENTINEL", "ID"], res.environments.map(envRow));
    }),
  );
  withConnection(env.command("get <project/env>").description("show an environment"), { workspace: true }).action((target: string, f: ConnectionFlags) =>
    run(async () => {
      const c = new Ctrl(f);
      const { environment } = await c.client(EnvironmentService).getEnvironment({ workspace: await c.workspace(), ...splitTarget(target) });
      if (environment) printEnvironment(c, environment);
    }),
  );
  interface EnvUpdateFlags extends Omit<EnvFlags, "paused"> {
    removeRegion: string[];
    /** false with --no-sentinel. */
    sentinel: boolean;
    /** --paused / --no-paused; undefined when neither. */
    paused?: boolean;
  }
  const envUpdate = env
    .command("update <project/env>")
    .description("change an environment; only what is given changes (scale, pause, resume: see also `krane scale`, `krane rollout pause|resume`)")
    .option("--region <region=replicas>", "set a region's replicas; a region the environment is not in yet is added (repeatable)", collect, [])
    .option("--remove-region <region>", "take the environment out of a region: its deployments and sentinel there are deleted (repeatable)", collect, [])
    .option("--sentinel-image <image>", "change the sentinel image, or add a sentinel with this image in every region")
    .option("--no-sentinel", "remove the sentinel from every region");
  withSettingsOptions(envUpdate, { surge: "", unavailable: "", deadline: "", history: "" })
    .option("--paused", "pause rollouts (like `krane rollout pause`)")
    .option("--no-paused", "resume rollouts (like `krane rollout resume`)");
  withConnection(envUpdate, { workspace: true }).action((target: string, f: EnvUpdateFlags) =>
    run(async () => {
      const c = new Ctrl(f);
      const regions = f.region.map((r) => {
        const { key, value } = parseKeyValue("--region", r);
        return { region: key, replicas: intArg("--region")(value) };
      });
      const sentinelGiven = [f.sentinelImage, f.sentinelReplicas, f.sentinelCpu, f.sentinelMemory].some((v) => v !== undefined);
      if (sentinelGiven && !f.sentinel) throw new Error("--no-sentinel cannot be combined with other --sentinel-* options");
      const rollout = {
        strategy: f.strategy === undefined ? undefined : parseStrategy(f.strategy),
        maxSurge: f.maxSurge,
        maxUnavailable: f.maxUnavailable,
        minReadySeconds: f.minReadySeconds,
        progressDeadlineSeconds: f.progressDeadlineSeconds,
        revisionHistoryLimit: f.revisionHistoryLimit,
        paused: f.paused,
      };
      const rolloutGiven = Object.values(rollout).some((v) => v !== undefined);
      if (!sentinelGiven && f.sentinel && !rolloutGiven && regions.length === 0 && f.removeRegion.length === 0) {
        throw new Error("nothing to change: give at least one option (krane env update --help)");
      }
      const { environment: updated } = await c.client(EnvironmentService).updateEnvironment({
        workspace: await c.workspace(),
        ...splitTarget(target),
        sentinel: sentinelGiven
          ? {
              image: f.sentinelImage,
              replicas: f.sentinelReplicas,
              cpuMillicores: f.sentinelCpu === undefined ? undefined : BigInt(f.sentinelCpu),
              memoryMib: f.sentinelMemory === undefined ? undefined : BigInt(f.sentinelMemory),
            }
          : undefined,
        removeSentinel: !f.sentinel,
        rollout: rolloutGiven ? rollout : undefined,
        regions,
        removeRegions: f.removeRegion,
      });
      if (updated) printEnvironment(c, updated);
    }),
  );

  // ---------------------------------------------------------------- regions and cluster tokens
  const region = program.command("region").description("regions and their clusters");
  withConnection(region.command("create <name>").description("register a region")).action((name: string, f: ConnectionFlags) =>
    run(async () => {
      const c = new Ctrl(f);
      const { region: r } = await c.client(RegionService).createRegion({ name });
      if (!r) return;
      if (c.json) printJson(RegionSchema, r);
      else printTable(["REGION", "CREATED"], [[r.name, when(r.createdAtUnixMs)]]);
    }),
  );
  withConnection(region.command("list").description("list regions")).action((f: ConnectionFlags) =>
    run(async () => {
      const c = new Ctrl(f);
      const res = await c.client(RegionService).listRegions({});
      if (c.json) printJson(ListRegionsResponseSchema, res);
      else printTable(["REGION", "CREATED"], res.regions.map((r) => [r.name, when(r.createdAtUnixMs)]));
    }),
  );
  withConnection(region.command("clusters [region]").description("list clusters and their last heartbeat")).action((name: string | undefined, f: ConnectionFlags) =>
    run(async () => {
      const c = new Ctrl(f);
      const res = await c.client(RegionService).listClusters({ region: name ?? "" });
      if (c.json) printJson(ListClustersResponseSchema, res);
      else
        printTable(
          ["REGION", "CLUSTER", "TOKEN", "LAST HEARTBEAT", "AGENT", "BUILD", "ID"],
          res.clusters.map((k) => [k.region, k.name, k.tokenRevoked ? "revoked" : "active", when(k.lastHeartbeatUnixMs), k.agentId || "-", k.build || "-", k.id]),
        );
    }),
  );
  const token = program.command("cluster-token").description("agent tokens");
  withConnection(
    token.command("create <region>").description("register a cluster in a region and print its agent token (shown once)").option("--cluster <name>", "cluster name", "default"),
  ).action((name: string, f: ConnectionFlags & { cluster: string }) =>
    run(async () => {
      const c = new Ctrl(f);
      const res = await c.client(RegionService).createClusterToken({ region: name, clusterName: f.cluster });
      if (c.json) printJson(CreateClusterTokenResponseSchema, res);
      else process.stdout.write(`${res.token}\n`);
    }),
  );
  withConnection(
    token
      .command("revoke <region>")
      .description("cut off a cluster's agent token (the cluster stays registered; `create` issues a new token)")
      .option("--cluster <name>", "cluster name", "default"),
  ).action((name: string, f: ConnectionFlags & { cluster: string }) =>
    run(async () => {
      const c = new Ctrl(f);
      const { cluster } = await c.client(RegionService).revokeClusterToken({ region: name, clusterName: f.cluster });
      if (!cluster) return;
      if (c.json) printJson(ClusterSchema, cluster);
      else process.stdout.write(`revoked the agent token of cluster ${cluster.name} in region ${cluster.region}\n`);
    }),
  );

  // ---------------------------------------------------------------- deploy and deployments
  interface DeployFlags extends ConnectionFlags {
    image: string;
    replicas?: number;
    cpu?: number;
    memory?: number;
    port?: number;
    env: string[];
    command: string[];
    arg: string[];
    buildId?: string;
    healthPath?: string;
  }
  withConnection(
    program
      .command("deploy <project/env>")
      .description("create a new deployment (revision) of an environment")
      .requiredOption("--image <image>", "container image")
      .option("--replicas <n>", "replicas per region (also becomes the environment's count)", intArg("--replicas"))
      .option("--cpu <millicores>", "CPU millicores (default 250)", intArg("--cpu"))
      .option("--memory <mib>", "memory MiB (default 256)", intArg("--memory"))
      .option("--port <port>", "port the app listens on (default 8080)", intArg("--port"))
      .option("--env <KEY=VALUE>", "environment variable (repeatable)", collect, [])
      .option("--command <arg>", "override the image's entrypoint (repeatable, one word each)", collect, [])
      .option("--arg <arg>", "argument (repeatable)", collect, [])
      .option("--build-id <id>", "build this image came from")
      .option("--health-path <path>", "HTTP health check path"),
    { workspace: true },
  ).action((target: string, f: DeployFlags) =>
    run(async () => {
      const c = new Ctrl(f);
      const req = create(CreateDeploymentRequestSchema, {
        workspace: await c.workspace(),
        ...splitTarget(target),
        image: f.image,
        command: f.command,
        args: f.arg,
        port: f.port ?? 0,
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
      const { deployment } = await c.client(DeploymentService).createDeployment(req);
      if (!deployment) return;
      if (c.json) printJson(DeploymentSchema, deployment);
      else printTable(["ID", "REVISION", "IMAGE", "REGIONS", "K8S NAME", "CREATED"], [deploymentRow(deployment)]);
    }),
  );
  const deps = program.command("deployments").description("deployments (revisions)");
  withConnection(deps.command("list [project[/env]]").description("list deployments, newest first"), { workspace: true }).action((target: string | undefined, f: ConnectionFlags) =>
    run(async () => {
      const c = new Ctrl(f);
      const [project, environment] = target === undefined ? ["", ""] : target.includes("/") ? [splitTarget(target).project, splitTarget(target).environment] : [target, ""];
      const res = await c.client(DeploymentService).listDeployments({ workspace: await c.workspace(), project, environment });
      if (c.json) printJson(ListDeploymentsResponseSchema, res);
      else printTable(["ID", "REVISION", "IMAGE", "REGIONS", "K8S NAME", "CREATED"], res.deployments.map(deploymentRow));
    }),
  );
  withConnection(deps.command("get <id>").description("show a deployment")).action((id: string, f: ConnectionFlags) =>
    run(async () => {
      const c = new Ctrl(f);
      const { deployment } = await c.client(DeploymentService).getDeployment({ deploymentId: id });
      if (!deployment) return;
      if (c.json) printJson(DeploymentSchema, deployment);
      else {
        printTable(["ID", "REVISION", "IMAGE", "REGIONS", "K8S NAME", "CREATED"], [deploymentRow(deployment)]);
        printTable(
          ["NAMESPACE", "PORT", "CPU", "MEMORY", "COMMAND", "ARGS", "ENV"],
          [[deployment.k8sNamespace, deployment.port, `${deployment.cpuMillicores}m`, `${deployment.memoryMib}Mi`, deployment.command.join(" ") || "-", deployment.args.join(" ") || "-", deployment.env.map((e) => e.name).join(" ") || "-"]],
        );
      }
    }),
  );
  withConnection(deps.command("delete <id>").description("delete a deployment from every region")).action((id: string, f: ConnectionFlags) =>
    run(async () => {
      const c = new Ctrl(f);
      await c.client(DeploymentService).deleteDeployment({ deploymentId: id });
      if (c.json) process.stdout.write(`${JSON.stringify({ deleted: id })}\n`);
      else process.stdout.write(`deleted ${id}\n`);
    }),
  );

  // ---------------------------------------------------------------- status
  withConnection(program.command("status <project/env>").description("deployments, instances per region, sentinels and clusters of an environment"), { workspace: true }).action(
    (target: string, f: ConnectionFlags) =>
      run(async () => {
        const c = new Ctrl(f);
        const res = await c.client(StatusService).getEnvironmentStatus({ workspace: await c.workspace(), ...splitTarget(target) });
        const { status: rollout } = await c.client(RolloutService).getRolloutStatus({ workspace: await c.workspace(), ...splitTarget(target) });
        if (c.json) {
          // The environment's status, plus its rollout per region under "rollout".
          const json = { ...(toJson(GetEnvironmentStatusResponseSchema, res, { alwaysEmitImplicit: true }) as object) };
          const withRollout = rollout ? { ...json, rollout: toJson(RolloutStatusSchema, rollout, { alwaysEmitImplicit: true }) } : json;
          process.stdout.write(`${JSON.stringify(withRollout, null, 2)}\n`);
          return;
        }
        process.stdout.write(`${renderEnvironmentStatus(res, Date.now(), rollout)}\n`);
      }),
  );
}

/** The sentinel size and rollout policy options `env create` and `env update` share. */
function withSettingsOptions(cmd: Command, defaults: { surge: string; unavailable: string; deadline: string; history: string }): Command {
  return cmd
    .option("--sentinel-replicas <n>", "sentinel replicas per region", intArg("--sentinel-replicas"))
    .option("--sentinel-cpu <millicores>", "sentinel CPU", intArg("--sentinel-cpu"))
    .option("--sentinel-memory <mib>", "sentinel memory", intArg("--sentinel-memory"))
    .option("--strategy <name>", "RollingUpdate or Recreate")
    .option("--max-surge <n|n%>", `rolling update max surge${defaults.surge}`)
    .option("--max-unavailable <n|n%>", `rolling update max unavailable${defaults.unavailable}`)
    .option("--min-ready-seconds <n>", "seconds a pod must be ready to count as available", intArg("--min-ready-seconds"))
    .option("--progress-deadline-seconds <n>", `rollout progress deadline${defaults.deadline}`, intArg("--progress-deadline-seconds"))
    .option("--revision-history-limit <n>", `old revisions kept${defaults.history}`, intArg("--revision-history-limit"));
}

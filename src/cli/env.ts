// `krane env create | list | get | update`: the environments of a project through ctrl's
// EnvironmentService — regions and replicas, the sentinel, and the rollout policy. `update`
// changes only what is given, in one transaction.
import type { Command } from "commander";
import type { Environment, RolloutStrategy } from "../gen/krane/ctrl/v1/api_pb.js";
import { registerEnvironmentDelete } from "./deletion.js";
import {
  collect,
  environmentRef,
  intArg,
  parseKeyValue,
  splitTarget,
  workspaceCommand,
  type ConnectionFlags,
  type UserContext,
} from "./command.js";
import { isProgressive, progressiveGiven, progressiveOf, type ProgressiveFlags } from "./progressive-options.js";
import { describePolicy, parseAutoscaleSpec, parseScaleToZeroSpec, policyFromWire } from "../contracts/autoscaling.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { AutoscaleUpdateSchema } from "../gen/krane/ctrl/v1/autoscale_pb.js";

type AutoscaleChange = Exclude<MessageInitShape<typeof AutoscaleUpdateSchema>, { $typeName: string }>;

/** The autoscaling part of `env update`: the change, "remove", or undefined when none was asked. */
function autoscaleFlags(f: EnvUpdateFlags): AutoscaleChange | "remove" | undefined {
  if (f.autoscale === false) {
    if (typeof f.scaleToZero === "string") throw new Error("--no-autoscale cannot be combined with --scale-to-zero");
    return "remove";
  }
  if (f.autoscale === undefined && f.scaleToZero === undefined) return undefined;
  const spec = f.autoscale === undefined ? {} : parseAutoscaleSpec("--autoscale", f.autoscale);
  const out: { -readonly [K in keyof AutoscaleChange]: AutoscaleChange[K] } = { ...spec };
  if (f.scaleToZero === false) out.removeScaleToZero = true;
  else if (f.scaleToZero !== undefined) {
    const z = parseScaleToZeroSpec("--scale-to-zero", f.scaleToZero);
    out.scaleToZero = z;
    // Scale-to-zero means a floor of 0 while idle: unless a min was given, ask for it.
    if (out.minReplicas === undefined) out.minReplicas = 0;
  } else if (f.autoscale !== undefined && spec.minReplicas === 0) {
    throw new Error("--autoscale: min=0 needs --scale-to-zero idle=<duration>");
  }
  return out;
}

interface EnvFlags extends ConnectionFlags, ProgressiveFlags {
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
  warmWindow?: number;
  paused?: boolean;
  /** false with --no-sentinel. */
  sentinel: boolean;
}

interface EnvUpdateFlags extends Omit<EnvFlags, "paused"> {
  removeRegion: string[];
  /** --paused / --no-paused; undefined when neither. */
  paused?: boolean;
  /** The spec of --autoscale; false with --no-autoscale. */
  autoscale?: string | false;
  /** The spec of --scale-to-zero; false with --no-scale-to-zero. */
  scaleToZero?: string | false;
  /** --autoscale-region: the autoscaling flags set that region's own policy. */
  autoscaleRegion?: string;
  /** --inherit-autoscale: the region given by --autoscale-region follows the environment's policy again. */
  inheritAutoscale?: boolean;
}

export function envRow(e: Environment): (string | number)[] {
  return [
    e.slug,
    e.regions.map((r) => `${r.region}=${r.replicas}`).join(" ") || "-",
    e.sentinel ? e.sentinel.image || "krane" : "-",
    e.id,
  ];
}

function parseStrategy(x: UserContext, v: string): RolloutStrategy {
  if (v === "RollingUpdate") return x.api.RolloutStrategy.ROLLING_UPDATE;
  if (v === "Recreate") return x.api.RolloutStrategy.RECREATE;
  // Progressive strategies run on top of the rolling policy (kept as it is).
  if (isProgressive(v)) return x.api.RolloutStrategy.UNSPECIFIED;
  throw new Error("--strategy: expected RollingUpdate, Recreate, canary or blue-green");
}

/** The progressive part of the options: the strategy, null to remove it, undefined to leave it. */
function progressiveFlags(f: ProgressiveFlags): ReturnType<typeof progressiveOf> | null | undefined {
  if (isProgressive(f.strategy)) return progressiveOf(f);
  if (progressiveGiven(f))
    throw new Error(
      "--steps, --analysis, --auto-promote, --scale-down-delay, --waves and --wave-gate need --strategy canary or blue-green",
    );
  return f.strategy === undefined ? undefined : null;
}

/** The environment, then its rollout policy. */
function printEnvironment(x: UserContext, environment: Environment): void {
  if (x.json) {
    x.printJson(x.api.EnvironmentSchema, environment);
    return;
  }
  x.printTable(["ENV", "REGIONS", "SENTINEL", "ID"], [envRow(environment)]);
  const a = environment.autoscale;
  const rows: string[][] = [];
  if (a) rows.push(["(environment)", describePolicy(policyFromWire(a))]);
  for (const ra of environment.regionAutoscale)
    rows.push([ra.region, ra.policy ? describePolicy(policyFromWire(ra.policy)) : "off"]);
  if (rows.length > 0) x.printTable(["AUTOSCALE", "POLICY"], rows);
  const r = environment.rollout;
  if (!r) return;
  const strategy = r.strategy === x.api.RolloutStrategy.RECREATE ? "Recreate" : "RollingUpdate";
  x.printTable(
    ["STRATEGY", "MAX SURGE", "MAX UNAVAILABLE", "MIN READY", "DEADLINE", "HISTORY", "WARM", "PAUSED"],
    [
      [
        strategy,
        r.maxSurge,
        r.maxUnavailable,
        `${r.minReadySeconds}s`,
        `${r.progressDeadlineSeconds}s`,
        r.revisionHistoryLimit ?? 10,
        `${r.warmWindowSeconds ?? 1800}s`,
        r.paused ? "yes" : "no",
      ],
    ],
  );
  const p = r.progressive;
  if (!p) return;
  const steps = p.canary
    ? p.canary.steps
        .map((s) =>
          s.step.case === "setWeight"
            ? `${s.step.value}%`
            : s.step.case === "pause"
              ? s.step.value.seconds
                ? `pause ${s.step.value.seconds}s`
                : "pause"
              : "analysis",
        )
        .join(" → ")
    : `blue-green (auto-promote ${p.blueGreen?.autoPromoteSeconds ? `${p.blueGreen.autoPromoteSeconds}s` : "off"}, scale-down delay ${p.blueGreen?.scaleDownDelaySeconds ?? 0}s)`;
  const waves = p.waves.map((w) => w.regions.join(",")).join(" ; ") || "-";
  x.printTable(["PROGRESSIVE", "WAVES"], [[steps, waves]]);
}

/** The sentinel size and rollout policy options `env create` and `env update` share. */
function withSettingsOptions(
  cmd: Command,
  defaults: { surge: string; unavailable: string; deadline: string; history: string; warm: string },
): Command {
  return cmd
    .option("--sentinel-replicas <n>", "sentinel replicas per region", intArg("--sentinel-replicas"))
    .option("--sentinel-cpu <millicores>", "sentinel CPU", intArg("--sentinel-cpu"))
    .option("--sentinel-memory <mib>", "sentinel memory", intArg("--sentinel-memory"))
    .option("--strategy <name>", "RollingUpdate, Recreate, canary or blue-green (progressive delivery: docs/using.md)")
    .option("--steps <list>", "canary steps: weights, pause, pause:<seconds>, analysis (e.g. 20,pause,50,analysis,100)")
    .option("--analysis <rules>", "analysis rules: success>=99,p99<=500,requests>=100,interval=10s,checks=3,failures=1")
    .option("--scale-down-stable", "canary: scale the stable revision down as the canary grows")
    .option(
      "--auto-promote <seconds>",
      "blue-green: switch this long after the new revision is available",
      intArg("--auto-promote"),
    )
    .option(
      "--scale-down-delay <seconds>",
      "blue-green: keep the previous revision running this long after the switch",
      intArg("--scale-down-delay"),
    )
    .option("--waves <list>", "region waves, in order: regions by ',', waves by ';' (e.g. \"eu;us,ap\")")
    .option("--wave-gate <seconds|analysis>", "between waves: available for N seconds, or analysis (--analysis rules)")
    .option("--max-surge <n|n%>", `rolling update max surge${defaults.surge}`)
    .option("--max-unavailable <n|n%>", `rolling update max unavailable${defaults.unavailable}`)
    .option(
      "--min-ready-seconds <n>",
      "seconds a pod must be ready to count as available",
      intArg("--min-ready-seconds"),
    )
    .option(
      "--progress-deadline-seconds <n>",
      `rollout progress deadline${defaults.deadline}`,
      intArg("--progress-deadline-seconds"),
    )
    .option("--revision-history-limit <n>", `old revisions kept${defaults.history}`, intArg("--revision-history-limit"))
    .option(
      "--warm-window <seconds>",
      `after a rolling update the previous revision keeps its pods this long, for an instant \`krane rollback\` (0: not at all)${defaults.warm}`,
      intArg("--warm-window"),
    );
}

export function registerEnvCommands(program: Command): void {
  const env = program.command("env").description("environments of a project");
  registerEnvironmentDelete(env);
  const envCreate = env
    .command("create <project/env>")
    .description("create an environment")
    .option("--region <region=replicas>", "a region and its replica count (repeatable)", collect, [])
    .option("--sentinel-image <image>", "run the sentinel with this image instead of krane's own (`krane sentinel`)")
    .option("--no-sentinel", "no routing proxy: the environment's instances are not routed by krane");
  withSettingsOptions(envCreate, {
    surge: " (default 25%)",
    unavailable: " (default 25%)",
    deadline: " (default 600)",
    history: " (default 10)",
    warm: " (default 1800)",
  });
  workspaceCommand(
    envCreate.option("--paused", "create the environment with rollouts paused"),
    async (x, target: string, f: EnvFlags) => {
      const { project, environment } = splitTarget(target);
      const regions = f.region.map((r) => {
        const { key, value } = parseKeyValue("--region", r.includes("=") ? r : `${r}=1`);
        return { region: key, replicas: intArg("--region")(value) };
      });
      const strategy = f.strategy === undefined ? x.api.RolloutStrategy.UNSPECIFIED : parseStrategy(x, f.strategy);
      const progressive = progressiveFlags(f) ?? undefined;
      if (
        !f.sentinel &&
        [f.sentinelImage, f.sentinelReplicas, f.sentinelCpu, f.sentinelMemory].some((v) => v !== undefined)
      ) {
        throw new Error("--no-sentinel cannot be combined with other --sentinel-* options");
      }
      const { environment: created } = await x.ctrl.client(x.api.EnvironmentService).createEnvironment({
        workspace: await x.ctrl.workspace(),
        project,
        slug: environment,
        regions,
        // Unless --no-sentinel: a sentinel, krane's own (an empty image) unless one is named;
        // sizes 0 are ctrl's defaults.
        sentinel: f.sentinel
          ? {
              image: f.sentinelImage ?? "",
              replicas: f.sentinelReplicas ?? 0,
              cpuMillicores: BigInt(f.sentinelCpu ?? 0),
              memoryMib: BigInt(f.sentinelMemory ?? 0),
            }
          : undefined,
        rollout: {
          strategy,
          maxSurge: f.maxSurge ?? "",
          maxUnavailable: f.maxUnavailable ?? "",
          minReadySeconds: f.minReadySeconds ?? 0,
          progressDeadlineSeconds: f.progressDeadlineSeconds ?? 0,
          revisionHistoryLimit: f.revisionHistoryLimit,
          warmWindowSeconds: f.warmWindow,
          paused: f.paused ?? false,
          progressive,
        },
      });
      if (!created) return;
      if (x.json) x.printJson(x.api.EnvironmentSchema, created);
      else x.printTable(["ENV", "REGIONS", "SENTINEL", "ID"], [envRow(created)]);
    },
  );
  workspaceCommand(
    env.command("list <project>").description("list the environments of a project"),
    async (x, project: string) => {
      const workspace = await x.ctrl.workspace();
      const envs = x.ctrl.client(x.api.EnvironmentService);
      const res = await x.ctrl.allPages("environments", (page) =>
        envs.listEnvironments({ workspace, project, ...page }),
      );
      if (x.json) x.printJson(x.api.ListEnvironmentsResponseSchema, res);
      else x.printTable(["ENV", "REGIONS", "SENTINEL", "ID"], res.environments.map(envRow));
    },
  );
  workspaceCommand(env.command("get <project/env>").description("show an environment"), async (x, target: string) => {
    const { environment } = await x.ctrl
      .client(x.api.EnvironmentService)
      .getEnvironment(await environmentRef(x, target));
    if (environment) printEnvironment(x, environment);
  });
  const envUpdate = env
    .command("update <project/env>")
    .description(
      "change an environment; only what is given changes (scale, pause, resume: see also `krane scale`, `krane rollout pause|resume`)",
    )
    .option(
      "--region <region=replicas>",
      "set a region's replicas; a region the environment is not in yet is added (repeatable)",
      collect,
      [],
    )
    .option(
      "--remove-region <region>",
      "take the environment out of a region: its deployments and sentinel there are deleted (repeatable)",
      collect,
      [],
    )
    .option(
      "--sentinel-image <image>",
      'change the sentinel image ("" for krane\'s own), or add a sentinel with this image in every region',
    )
    .option("--no-sentinel", "remove the sentinel from every region");
  withSettingsOptions(envUpdate, { surge: "", unavailable: "", deadline: "", history: "", warm: "" })
    .option("--paused", "pause rollouts (like `krane rollout pause`)")
    .option("--no-paused", "resume rollouts (like `krane rollout resume`)")
    .option(
      "--autoscale <spec>",
      "autoscale each region from its sentinels' load: min=1,max=20,concurrency=50[,cpu=80%][,up=0s][,down=5m][,step=4] (only what is given changes; a new policy's unset min is 1 and max: the region's count now, the largest region's for the environment's policy; cpu is a percentage of each instance's --cpu)",
    )
    .option("--no-autoscale", "stop autoscaling: each region keeps the count it was last scaled to")
    .option(
      "--scale-to-zero <spec>",
      "scale a region to 0 after idle=5m without requests; the next request wakes it (held=1000 requests at most, timeout=30s); min becomes 0, and a new policy's max is the region's count now (--autoscale max=N for another)",
    )
    .option("--no-scale-to-zero", "keep at least min replicas while idle")
    .option(
      "--autoscale-region <region>",
      "the autoscaling flags set this region's own policy (--no-autoscale: off there) instead of the environment's",
    )
    .option("--inherit-autoscale", "with --autoscale-region: the region follows the environment's policy again");
  workspaceCommand(envUpdate, async (x, target: string, f: EnvUpdateFlags) => {
    const regions = f.region.map((r) => {
      const { key, value } = parseKeyValue("--region", r);
      return { region: key, replicas: intArg("--region")(value) };
    });
    const sentinelGiven = [f.sentinelImage, f.sentinelReplicas, f.sentinelCpu, f.sentinelMemory].some(
      (v) => v !== undefined,
    );
    if (sentinelGiven && !f.sentinel)
      throw new Error("--no-sentinel cannot be combined with other --sentinel-* options");
    const progressive = progressiveFlags(f);
    const rollout = {
      strategy: f.strategy === undefined || isProgressive(f.strategy) ? undefined : parseStrategy(x, f.strategy),
      progressive: progressive ?? undefined,
      removeProgressive: progressive === null ? true : undefined,
      maxSurge: f.maxSurge,
      maxUnavailable: f.maxUnavailable,
      minReadySeconds: f.minReadySeconds,
      progressDeadlineSeconds: f.progressDeadlineSeconds,
      revisionHistoryLimit: f.revisionHistoryLimit,
      warmWindowSeconds: f.warmWindow,
      paused: f.paused,
    };
    const rolloutGiven = Object.values(rollout).some((v) => v !== undefined);
    const flags = autoscaleFlags(f);
    if (f.inheritAutoscale && (f.autoscaleRegion === undefined || flags !== undefined))
      throw new Error("--inherit-autoscale needs --autoscale-region and no other autoscaling flag");
    if (f.autoscaleRegion !== undefined && flags === undefined && !f.inheritAutoscale)
      throw new Error("--autoscale-region needs --autoscale, --scale-to-zero, --no-autoscale or --inherit-autoscale");
    const autoscale = f.autoscaleRegion === undefined ? flags : undefined;
    const regionAutoscale =
      f.autoscaleRegion === undefined
        ? []
        : [
            {
              region: f.autoscaleRegion,
              policy: flags === undefined || flags === "remove" ? undefined : flags,
              off: flags === "remove",
              inherit: f.inheritAutoscale === true,
            },
          ];
    if (
      !sentinelGiven &&
      f.sentinel &&
      !rolloutGiven &&
      autoscale === undefined &&
      regionAutoscale.length === 0 &&
      regions.length === 0 &&
      f.removeRegion.length === 0
    ) {
      throw new Error("nothing to change: give at least one option (krane env update --help)");
    }
    const { environment: updated } = await x.ctrl.client(x.api.EnvironmentService).updateEnvironment({
      ...(await environmentRef(x, target)),
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
      autoscale: autoscale === undefined || autoscale === "remove" ? undefined : autoscale,
      removeAutoscale: autoscale === "remove",
      regionAutoscale,
    });
    if (updated) printEnvironment(x, updated);
  });
}

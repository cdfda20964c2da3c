// Validation of public API requests: a proto request in, a defaulted domain input out, or an
// InvalidArgument naming the field. Pure: no I/O, so it is property-tested directly.
import type { AutoscaleSpec, ScaleToZeroSpec } from "../../contracts/autoscaling.js";
import type { AutoscaleUpdate } from "../../gen/krane/ctrl/v1/autoscale_pb.js";
import type {
  CreateApiTokenRequest,
  CreateDeploymentRequest,
  CreateEnvironmentRequest,
  CreateProjectRequest,
  CreateWorkspaceRequest,
  RolloutPolicy,
  RolloutPolicyUpdate,
  SentinelSettings,
  SentinelSettingsUpdate,
  UpdateEnvironmentRequest,
} from "../../gen/krane/ctrl/v1/api_pb.js";
import { RolloutStrategy } from "../../gen/krane/ctrl/v1/api_pb.js";
import { checkProgressive, progressiveOf } from "./progressive.js";
import type { HealthCheck } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { invalidArgument } from "../errors.js";
import { APP_PROTOCOLS, DEFAULT_APP_PROTOCOL, isAppProtocol, type AppProtocol } from "../../contracts/protocols.js";
import { registryHost } from "../../contracts/images.js";
import type {
  DeploymentAsk,
  EnvironmentRef,
  EnvironmentUpdate,
  NewDeployment,
  NewEnvironment,
  NewProject,
  NewWorkspace,
  RolloutPolicyInput,
  RolloutPolicyPatch,
  SentinelSettingsInput,
  SentinelSettingsPatch,
  StoredEnvVar,
  StoredHealthCheck,
  StrategyName,
} from "./types.js";
import * as r from "./rules.js";

export const DEFAULTS = {
  port: 8080,
  cpuMillicores: 250,
  memoryMib: 256,
  replicas: 1,
  maxSurge: "25%",
  maxUnavailable: "25%",
  progressDeadlineSeconds: 600,
  revisionHistoryLimit: 10,
  sentinelReplicas: 2,
  sentinelCpuMillicores: 250,
  sentinelMemoryMib: 256,
  /** The previous revision stays warm 30 minutes after a rolling update (issue 44). */
  warmWindowSeconds: 1800,
} as const;

/** The longest warm window: a day. */
export const WARM_WINDOW_MAX = 86_400;

export function workspaceRef(field: string, v: string): string {
  return r.ref(field, v, "ws");
}
export function projectRef(field: string, v: string): string {
  return r.ref(field, v, "prj");
}
export function environmentRef(field: string, v: string): string {
  return r.ref(field, v, "env");
}
export function deploymentId(field: string, v: string): string {
  return r.id(field, v, "dep");
}
export function regionName(field: string, v: string): string {
  return r.slug(field, v);
}

export function validateCreateWorkspace(req: CreateWorkspaceRequest): NewWorkspace {
  const slug = r.slug("slug", req.slug);
  const name = r.text("name", req.name, r.LIMITS.nameMax);
  return { slug, name: name === "" ? slug : name };
}

export function validateCreateProject(req: CreateProjectRequest): NewProject {
  const workspace = workspaceRef("workspace", req.workspace);
  const slug = r.slug("slug", req.slug);
  const name = r.text("name", req.name, r.LIMITS.nameMax);
  return { workspace, slug, name: name === "" ? slug : name };
}

export function validateEnvironmentRef(req: {
  workspace: string;
  project: string;
  environment: string;
}): EnvironmentRef {
  return {
    workspace: workspaceRef("workspace", req.workspace),
    project: projectRef("project", req.project),
    environment: environmentRef("environment", req.environment),
  };
}

/** A sentinel image: "" is krane's own sentinel (the image the agents are configured with). */
function sentinelImage(field: string, image: string): string {
  return image === "" ? "" : r.image(field, image);
}

/** The sentinel an environment gets (none when absent; an empty image is krane's own). */
function validateSentinel(s: SentinelSettings | undefined): SentinelSettingsInput | null {
  if (s === undefined) return null;
  return {
    image: sentinelImage("sentinel.image", s.image),
    replicas: s.replicas === 0 ? DEFAULTS.sentinelReplicas : r.intRange("sentinel.replicas", s.replicas, 0, 100),
    cpuMillicores:
      s.cpuMillicores === 0n
        ? DEFAULTS.sentinelCpuMillicores
        : r.intRange("sentinel.cpu_millicores", s.cpuMillicores, r.LIMITS.cpuMin, r.LIMITS.cpuMax),
    memoryMib:
      s.memoryMib === 0n
        ? DEFAULTS.sentinelMemoryMib
        : r.intRange("sentinel.memory_mib", s.memoryMib, r.LIMITS.memoryMin, r.LIMITS.memoryMax),
  };
}

function strategyName(field: string, v: RolloutStrategy): StrategyName {
  if (v === RolloutStrategy.ROLLING_UPDATE) return "RollingUpdate";
  if (v === RolloutStrategy.RECREATE) return "Recreate";
  throw invalidArgument(field, "must be ROLLING_UPDATE or RECREATE");
}

/** `regions`: the environment's (wave checks), null when not known yet. */
export function validateRollout(
  p: RolloutPolicy | undefined,
  regions: readonly string[] | null = null,
): RolloutPolicyInput {
  const strategy =
    p === undefined || p.strategy === RolloutStrategy.UNSPECIFIED
      ? "RollingUpdate"
      : strategyName("rollout.strategy", p.strategy);
  const maxSurge = r.intOrPercent("rollout.max_surge", p?.maxSurge || DEFAULTS.maxSurge);
  const maxUnavailable = r.intOrPercent("rollout.max_unavailable", p?.maxUnavailable || DEFAULTS.maxUnavailable);
  const minReadySeconds = r.intRange("rollout.min_ready_seconds", p?.minReadySeconds ?? 0, 0, 3600);
  const progressDeadlineSeconds =
    p === undefined || p.progressDeadlineSeconds === 0
      ? DEFAULTS.progressDeadlineSeconds
      : r.intRange("rollout.progress_deadline_seconds", p.progressDeadlineSeconds, 1, 86_400);
  const revisionHistoryLimit =
    p?.revisionHistoryLimit === undefined
      ? DEFAULTS.revisionHistoryLimit
      : r.intRange("rollout.revision_history_limit", p.revisionHistoryLimit, 0, 100);
  const progressive =
    p?.progressive === undefined ? null : progressiveOf(p.progressive, progressDeadlineSeconds, regions);
  const warmWindowSeconds =
    p?.warmWindowSeconds === undefined
      ? DEFAULTS.warmWindowSeconds
      : r.intRange("rollout.warm_window_seconds", p.warmWindowSeconds, 0, WARM_WINDOW_MAX);
  const policy = {
    strategy,
    maxSurge,
    maxUnavailable,
    minReadySeconds,
    progressDeadlineSeconds,
    revisionHistoryLimit,
    paused: p?.paused ?? false,
    progressive,
    warmWindowSeconds,
  };
  checkRolloutPolicy(policy, {});
  return policy;
}

/**
 * The rules that tie policy fields together. `given` says which fields the request set, so the
 * error names one of those (an update that only sets max_surge is told about max_surge).
 */
function checkRolloutPolicy(p: RolloutPolicyInput, given: RolloutPolicyPatch): void {
  if (p.strategy === "RollingUpdate" && r.isZeroIntOrPercent(p.maxSurge) && r.isZeroIntOrPercent(p.maxUnavailable)) {
    if (given.maxSurge !== undefined && given.maxUnavailable === undefined)
      throw invalidArgument("rollout.max_surge", "may not be 0 when rollout.max_unavailable is 0");
    if (given.strategy !== undefined && given.maxSurge === undefined && given.maxUnavailable === undefined) {
      throw invalidArgument(
        "rollout.strategy",
        "RollingUpdate needs rollout.max_surge or rollout.max_unavailable above 0",
      );
    }
    throw invalidArgument("rollout.max_unavailable", "may not be 0 when rollout.max_surge is 0");
  }
  if (p.progressDeadlineSeconds <= p.minReadySeconds) {
    if (given.minReadySeconds !== undefined && given.progressDeadlineSeconds === undefined) {
      throw invalidArgument(
        "rollout.min_ready_seconds",
        `must be less than rollout.progress_deadline_seconds (${p.progressDeadlineSeconds})`,
      );
    }
    throw invalidArgument("rollout.progress_deadline_seconds", "must be greater than rollout.min_ready_seconds");
  }
}

export function validateCreateEnvironment(req: CreateEnvironmentRequest): NewEnvironment {
  const workspace = workspaceRef("workspace", req.workspace);
  const project = projectRef("project", req.project);
  const slug = r.slug("slug", req.slug);
  r.list("regions", req.regions, r.LIMITS.regionsMax);
  const seen = new Set<string>();
  const regions = req.regions.map((rr, i) => {
    const region = regionName(`regions[${i}].region`, rr.region);
    if (seen.has(region)) throw invalidArgument(`regions[${i}].region`, `duplicates region "${region}"`);
    seen.add(region);
    return { region, replicas: r.intRange(`regions[${i}].replicas`, rr.replicas, 0, r.LIMITS.replicasMax) };
  });
  return {
    workspace,
    project,
    slug,
    regions,
    sentinel: validateSentinel(req.sentinel),
    rollout: validateRollout(
      req.rollout,
      regions.map((x) => x.region),
    ),
  };
}

function validateHealthCheck(h: HealthCheck | undefined): StoredHealthCheck | null {
  if (h === undefined) return null;
  const method = h.method === "" ? "GET" : h.method;
  if (method !== "GET" && method !== "POST") throw invalidArgument("health_check.method", "must be GET or POST");
  if (!h.path.startsWith("/")) throw invalidArgument("health_check.path", "must start with '/'");
  r.text("health_check.path", h.path, r.LIMITS.pathMax);
  if (/\s/.test(h.path)) throw invalidArgument("health_check.path", "must not contain spaces");
  return {
    method,
    path: h.path,
    intervalSeconds:
      h.intervalSeconds === 0 ? 10 : r.intRange("health_check.interval_seconds", h.intervalSeconds, 1, 300),
    timeoutSeconds: h.timeoutSeconds === 0 ? 1 : r.intRange("health_check.timeout_seconds", h.timeoutSeconds, 1, 60),
    failureThreshold:
      h.failureThreshold === 0 ? 3 : r.intRange("health_check.failure_threshold", h.failureThreshold, 1, 30),
    initialDelaySeconds: r.intRange("health_check.initial_delay_seconds", h.initialDelaySeconds, 0, 3600),
  };
}

/** Checks a CreateDeployment; what it leaves unset stays undefined (see deploymentFrom). */
export function validateCreateDeployment(req: CreateDeploymentRequest): DeploymentAsk {
  const ref = validateEnvironmentRef(req);
  const image = r.image("image", req.image);
  const command = r.list("command", req.command, r.LIMITS.listMax).map((a, i) => r.arg(`command[${i}]`, a));
  const args = r.list("args", req.args, r.LIMITS.listMax).map((a, i) => r.arg(`args[${i}]`, a));
  const port = req.port === 0 ? undefined : r.intRange("port", req.port, 1, 65_535);
  r.list("env", req.env, r.LIMITS.envMax);
  const names = new Set<string>();
  const env = req.env.map((e, i) => {
    const name = r.envName(`env[${i}].name`, e.name);
    if (names.has(name)) throw invalidArgument(`env[${i}].name`, `duplicates "${name}"`);
    names.add(name);
    if (e.value.length > r.LIMITS.envValueMax)
      throw invalidArgument(`env[${i}].value`, `must be at most ${r.LIMITS.envValueMax} characters`);
    if (e.value.includes("\u0000")) throw invalidArgument(`env[${i}].value`, "must not contain NUL");
    return { name, value: e.value };
  });
  envTotal("env", env);
  if (req.envUnset.length > 0 && !req.inherit)
    throw invalidArgument("env_unset", "applies only with inherit (without it no variable is carried over)");
  r.list("env_unset", req.envUnset, r.LIMITS.envMax);
  const envUnset = req.envUnset.map((n, i) => {
    const name = r.envName(`env_unset[${i}]`, n);
    if (names.has(name)) throw invalidArgument(`env_unset[${i}]`, `"${name}" is also set in env`);
    return name;
  });
  const cpuMillicores =
    req.cpuMillicores === 0n
      ? undefined
      : r.intRange("cpu_millicores", req.cpuMillicores, r.LIMITS.cpuMin, r.LIMITS.cpuMax);
  const memoryMib =
    req.memoryMib === 0n ? undefined : r.intRange("memory_mib", req.memoryMib, r.LIMITS.memoryMin, r.LIMITS.memoryMax);
  const buildId = r.text("build_id", req.buildId, r.LIMITS.shortTextMax);
  const replicas = req.replicas === undefined ? null : r.intRange("replicas", req.replicas, 0, r.LIMITS.replicasMax);
  return {
    ...ref,
    image,
    buildId,
    replicas,
    inherit: req.inherit,
    command: command.length === 0 ? undefined : [...command],
    args: args.length === 0 ? undefined : [...args],
    port,
    protocol: req.protocol === "" ? undefined : validateProtocol(req.protocol),
    cpuMillicores,
    memoryMib,
    healthCheck: validateHealthCheck(req.healthCheck) ?? undefined,
    env,
    envUnset,
    unpin: req.unpin,
  };
}

function envTotal(field: string, env: readonly StoredEnvVar[]): void {
  let total = 0;
  for (const e of env) total += e.name.length + e.value.length;
  if (total > r.LIMITS.envTotalMax)
    throw invalidArgument(field, `must total at most ${r.LIMITS.envTotalMax} characters`);
}

/** A revision's settings, as a new one gets them (deployments.revisionCopyOf reads them back). */
export type RevisionSpec = Omit<NewDeployment, "workspace" | "project" | "environment" | "replicas">;

/**
 * The new revision an ask makes: what it gives; what it leaves unset from `base` (the current
 * revision, with inherit) or the defaults. Carried variables keep their order, given ones
 * replace them by name or follow; the limits on variables apply to the result.
 */
export function deploymentFrom(ask: DeploymentAsk, base: RevisionSpec | null): NewDeployment {
  const from = ask.inherit ? base : null;
  let env = ask.env;
  if (from !== null) {
    const given = new Map(ask.env.map((e) => [e.name, e.value]));
    const drop = new Set(ask.envUnset);
    const carried = from.env
      .filter((e) => !drop.has(e.name))
      .map((e) => ({ name: e.name, value: given.get(e.name) ?? e.value }));
    const names = new Set(carried.map((e) => e.name));
    env = [...carried, ...ask.env.filter((e) => !names.has(e.name))];
    if (env.length > r.LIMITS.envMax)
      throw invalidArgument("env", `with the variables carried over, more than ${r.LIMITS.envMax}`);
    envTotal("env", env);
  }
  return {
    workspace: ask.workspace,
    project: ask.project,
    environment: ask.environment,
    image: ask.image,
    imageDigest: ask.imageDigest ?? null,
    buildId: ask.buildId,
    replicas: ask.replicas,
    command: ask.command ?? from?.command ?? [],
    args: ask.args ?? from?.args ?? [],
    port: ask.port ?? from?.port ?? DEFAULTS.port,
    protocol: ask.protocol ?? from?.protocol ?? DEFAULT_APP_PROTOCOL,
    env,
    cpuMillicores: ask.cpuMillicores ?? from?.cpuMillicores ?? DEFAULTS.cpuMillicores,
    memoryMib: ask.memoryMib ?? from?.memoryMib ?? DEFAULTS.memoryMib,
    healthCheck: ask.healthCheck ?? from?.healthCheck ?? null,
  };
}

/** What the app speaks on its port; empty is the default (HTTP/1.1). */
function validateProtocol(v: string): AppProtocol {
  if (v === "") return DEFAULT_APP_PROTOCOL;
  if (!isAppProtocol(v)) throw invalidArgument("protocol", `must be one of ${APP_PROTOCOLS.join(", ")}`);
  return v;
}

// ---------------------------------------------------------------- updates

export function validateSentinelPatch(s: SentinelSettingsUpdate): SentinelSettingsPatch {
  const out: SentinelSettingsPatch = {};
  if (s.image !== undefined) out.image = sentinelImage("sentinel.image", s.image);
  if (s.replicas !== undefined) out.replicas = r.intRange("sentinel.replicas", s.replicas, 0, 100);
  if (s.cpuMillicores !== undefined)
    out.cpuMillicores = r.intRange("sentinel.cpu_millicores", s.cpuMillicores, r.LIMITS.cpuMin, r.LIMITS.cpuMax);
  if (s.memoryMib !== undefined)
    out.memoryMib = r.intRange("sentinel.memory_mib", s.memoryMib, r.LIMITS.memoryMin, r.LIMITS.memoryMax);
  return out;
}

function validateRolloutPatch(p: RolloutPolicyUpdate | undefined): RolloutPolicyPatch {
  const out: RolloutPolicyPatch = {};
  if (p === undefined) return out;
  if (p.strategy !== undefined) out.strategy = strategyName("rollout.strategy", p.strategy);
  if (p.maxSurge !== undefined) out.maxSurge = r.intOrPercent("rollout.max_surge", p.maxSurge);
  if (p.maxUnavailable !== undefined) out.maxUnavailable = r.intOrPercent("rollout.max_unavailable", p.maxUnavailable);
  if (p.minReadySeconds !== undefined)
    out.minReadySeconds = r.intRange("rollout.min_ready_seconds", p.minReadySeconds, 0, 3600);
  if (p.progressDeadlineSeconds !== undefined)
    out.progressDeadlineSeconds = r.intRange("rollout.progress_deadline_seconds", p.progressDeadlineSeconds, 1, 86_400);
  if (p.revisionHistoryLimit !== undefined)
    out.revisionHistoryLimit = r.intRange("rollout.revision_history_limit", p.revisionHistoryLimit, 0, 100);
  if (p.paused !== undefined) out.paused = p.paused;
  if (p.warmWindowSeconds !== undefined)
    out.warmWindowSeconds = r.intRange("rollout.warm_window_seconds", p.warmWindowSeconds, 0, WARM_WINDOW_MAX);
  if (p.progressive !== undefined && p.removeProgressive)
    throw invalidArgument("rollout.remove_progressive", "cannot be combined with rollout.progressive");
  // Waves are checked against the environment's regions when the update is applied (mergeRolloutPolicy).
  if (p.progressive !== undefined)
    out.progressive = progressiveOf(
      p.progressive,
      out.progressDeadlineSeconds ?? DEFAULTS.progressDeadlineSeconds,
      null,
    );
  if (p.removeProgressive) out.progressive = null;
  return out;
}

/** Checks everything an UpdateEnvironment can be checked for without the stored environment. */
export function validateUpdateEnvironment(req: UpdateEnvironmentRequest): EnvironmentUpdate {
  const ref = validateEnvironmentRef(req);
  if (req.sentinel !== undefined && req.removeSentinel)
    throw invalidArgument("remove_sentinel", "cannot be combined with sentinel");
  const sentinel = req.sentinel === undefined ? null : validateSentinelPatch(req.sentinel);
  const rollout = validateRolloutPatch(req.rollout);
  r.list("regions", req.regions, r.LIMITS.regionsMax);
  r.list("remove_regions", req.removeRegions, r.LIMITS.regionsMax);
  const seen = new Set<string>();
  const regions = req.regions.map((rr, index) => {
    const region = regionName(`regions[${index}].region`, rr.region);
    if (seen.has(region)) throw invalidArgument(`regions[${index}].region`, `duplicates region "${region}"`);
    seen.add(region);
    return { index, region, replicas: r.intRange(`regions[${index}].replicas`, rr.replicas, 0, r.LIMITS.replicasMax) };
  });
  const removing = new Set<string>();
  const removeRegions = req.removeRegions.map((name, index) => {
    const region = regionName(`remove_regions[${index}]`, name);
    if (removing.has(region)) throw invalidArgument(`remove_regions[${index}]`, `duplicates region "${region}"`);
    if (seen.has(region)) throw invalidArgument(`remove_regions[${index}]`, `region "${region}" is also in regions`);
    removing.add(region);
    return { index, region };
  });
  if (req.autoscale !== undefined && req.removeAutoscale)
    throw invalidArgument("remove_autoscale", "cannot be combined with autoscale");
  const autoscale = req.removeAutoscale
    ? "remove"
    : req.autoscale === undefined
      ? null
      : autoscaleUpdateOf(req.autoscale);
  r.list("region_autoscale", req.regionAutoscale, r.LIMITS.regionsMax);
  const overridden = new Set<string>();
  const regionAutoscale = req.regionAutoscale.map((ra, index) => {
    const field = `region_autoscale[${index}]`;
    const region = regionName(`${field}.region`, ra.region);
    if (overridden.has(region)) throw invalidArgument(`${field}.region`, `duplicates region "${region}"`);
    if (removing.has(region)) throw invalidArgument(`${field}.region`, `region "${region}" is also in remove_regions`);
    overridden.add(region);
    const given = [ra.policy !== undefined, ra.off, ra.inherit].filter(Boolean).length;
    if (given !== 1) throw invalidArgument(field, "give exactly one of policy, off and inherit");
    const change =
      ra.policy !== undefined
        ? autoscaleUpdateOf(ra.policy, `${field}.policy`)
        : ra.off
          ? ("off" as const)
          : ("inherit" as const);
    return { index, region, change };
  });
  return {
    ...ref,
    sentinel,
    removeSentinel: req.removeSentinel,
    rollout,
    regions,
    removeRegions,
    autoscale,
    regionAutoscale,
  };
}

/**
 * The autoscaling change as given. Its values are checked against the merged policy
 * (policyProblem, src/contracts/autoscaling.ts), which names the same fields.
 */
function autoscaleUpdateOf(
  u: AutoscaleUpdate,
  field = "autoscale",
): { spec: AutoscaleSpec; zero: ScaleToZeroSpec | null | undefined } {
  if (u.scaleToZero !== undefined && u.removeScaleToZero)
    throw invalidArgument(`${field}.remove_scale_to_zero`, `cannot be combined with ${field}.scale_to_zero`);
  const spec: AutoscaleSpec = {};
  if (u.minReplicas !== undefined) spec.minReplicas = u.minReplicas;
  if (u.maxReplicas !== undefined) spec.maxReplicas = u.maxReplicas;
  if (u.concurrencyTarget !== undefined) spec.concurrencyTarget = u.concurrencyTarget;
  if (u.cpuTargetPercent !== undefined) spec.cpuTargetPercent = u.cpuTargetPercent;
  if (u.scaleUpWindowSeconds !== undefined) spec.scaleUpWindowSeconds = u.scaleUpWindowSeconds;
  if (u.scaleDownWindowSeconds !== undefined) spec.scaleDownWindowSeconds = u.scaleDownWindowSeconds;
  if (u.maxStep !== undefined) spec.maxStep = u.maxStep;
  let zero: ScaleToZeroSpec | null | undefined;
  if (u.removeScaleToZero) zero = null;
  else if (u.scaleToZero !== undefined) {
    zero = {};
    if (u.scaleToZero.idleSeconds !== undefined) zero.idleSeconds = u.scaleToZero.idleSeconds;
    if (u.scaleToZero.maxHeldRequests !== undefined) zero.maxHeldRequests = u.scaleToZero.maxHeldRequests;
    if (u.scaleToZero.heldTimeoutSeconds !== undefined) zero.heldTimeoutSeconds = u.scaleToZero.heldTimeoutSeconds;
  }
  return { spec, zero };
}

/** The sentinel settings after an update; null when the environment has (or keeps) none. */
export function mergeSentinel(
  current: SentinelSettingsInput | null,
  patch: SentinelSettingsPatch | null,
  remove: boolean,
): SentinelSettingsInput | null {
  if (remove) return null;
  if (patch === null) return current;
  if (current === null) {
    return {
      // No image named: krane's own sentinel.
      image: patch.image ?? "",
      replicas: patch.replicas ?? DEFAULTS.sentinelReplicas,
      cpuMillicores: patch.cpuMillicores ?? DEFAULTS.sentinelCpuMillicores,
      memoryMib: patch.memoryMib ?? DEFAULTS.sentinelMemoryMib,
    };
  }
  return { ...current, ...patch };
}

/** The rollout policy after an update, checked as a whole. */
export function mergeRolloutPolicy(
  current: RolloutPolicyInput,
  patch: RolloutPolicyPatch,
  regions: readonly string[] = [],
): RolloutPolicyInput {
  const merged = { ...current, ...patch };
  checkRolloutPolicy(merged, patch);
  if (merged.progressive !== null) {
    merged.progressive = checkProgressive(
      { ...merged.progressive, progressDeadlineSeconds: merged.progressDeadlineSeconds },
      regions,
    );
  }
  return merged;
}

// ---------------------------------------------------------------- API tokens

/** workspace: null when the request names none (the caller's own scope then). */
export function validateCreateApiToken(req: CreateApiTokenRequest): {
  name: string;
  workspace: string | null;
  serviceAccount: string | null;
} {
  return {
    name: r.slug("name", req.name),
    workspace: req.workspace === "" ? null : workspaceRef("workspace", req.workspace),
    serviceAccount: req.serviceAccount === "" ? null : serviceAccountRef("service_account", req.serviceAccount),
  };
}

/** A service account by name (a DNS label) or id (sa_…). */
export function serviceAccountRef(field: string, v: string): string {
  return r.ref(field, v, "sa");
}

export function apiTokenId(field: string, v: string): string {
  return r.id(field, v, "tok");
}

/** A registry host as images name it (canonical: lowercase, Docker Hub's aliases are docker.io). */
export function registryHostField(field: string, value: string): string {
  if (value === "") throw invalidArgument(field, "is required");
  const host = registryHost(value);
  if (host === undefined)
    throw invalidArgument(
      field,
      'must be a registry host with an optional port ("ghcr.io", "reg.internal:5000"), no scheme or path',
    );
  return host;
}

/** A registry credential: a user name fit for HTTP Basic, and a password or token. Never echoed. */
export function validateRegistryCredential(username: string, password: string): { username: string; password: string } {
  if (username === "") throw invalidArgument("username", "is required");
  if (username.length > 255) throw invalidArgument("username", "must be at most 255 characters");
  // eslint-disable-next-line no-control-regex
  if (/[:\u0000-\u001f\u007f]/.test(username))
    throw invalidArgument("username", 'must not contain ":" or control characters (HTTP Basic)');
  if (password === "") throw invalidArgument("password", "is required");
  if (password.length > 8192) throw invalidArgument("password", "must be at most 8192 characters");
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(password))
    throw invalidArgument("password", "must not contain control characters (a line break read from a file?)");
  return { username, password };
}

// krane.yaml's environments (EnvironmentFile, proto/krane/ctrl/v1/project_file.proto): checked by
// the same rules as the API calls they stand for (CreateDeployment's, UpdateEnvironment's,
// SetConfig's, SetEndpoint's, AddDomain's, PutJob's), with each refusal naming the field by its
// path in the file's environment (`deployment.port`, `config.LOG_LEVEL`, `jobs.cleanup.schedule`);
// and the canonical form both sides of a plan are compared in: every default filled in, as the
// stored rows give it back (../domain/environment-file.ts reads an environment into the same
// form through the same functions, so what was applied plans no change). Pure.
//
// `planTarget` lays a file's environment over the environment as it is: what the file leaves
// out of the deployment's image and a region's replicas stays as it is, named things the file
// does not name stay unless pruned, and the rest is the file's.
import { create } from "@bufbuild/protobuf";
import {
  DEFAULT_HELD_REQUESTS,
  DEFAULT_HELD_TIMEOUT_SECONDS,
  policyFromWire,
  policyProblem,
  type AutoscalePolicy,
} from "../../contracts/autoscaling.js";
import type { AppProtocol } from "../../contracts/protocols.js";
import {
  CreateDeploymentRequestSchema,
  RolloutPolicySchema,
  RolloutStrategy,
  SentinelSettingsUpdateSchema,
  type RolloutPolicy,
} from "../../gen/krane/ctrl/v1/api_pb.js";
import {
  AutoscalePolicySchema,
  ScaleToZeroSchema,
  type AutoscalePolicy as AutoscalePolicyMsg,
} from "../../gen/krane/ctrl/v1/autoscale_pb.js";
import { HealthCheckSchema } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { EndpointAuthSchema } from "../../gen/krane/ctrl/v1/exposure_pb.js";
import { JobSpecSchema, type JobSpec } from "../../gen/krane/ctrl/v1/job_pb.js";
import {
  DeploymentFileSchema,
  EndpointFileSchema,
  EnvironmentFileSchema,
  RegionFileSchema,
  SentinelFileSchema,
  type DeploymentFile,
  type EndpointFile,
  type EnvironmentFile,
  type RegionFile,
  type SentinelFile,
} from "../../gen/krane/ctrl/v1/project_file_pb.js";
import { formatPath, keySegment } from "../../project-file/paths.js";
import { DomainError, failedPrecondition, invalidArgument } from "../errors.js";
import {
  deploymentFrom,
  mergeSentinel,
  regionName,
  validateCreateDeployment,
  validateRollout,
  validateSentinelPatch,
  type RevisionSpec,
} from "./api.js";
import { domainName, endpointAuth, pathPrefix, visibility, type EndpointAuthSettings } from "./exposure.js";
import { validateJobSpec } from "./job.js";
import { progressiveMsg } from "./progressive.js";
import * as r from "./rules.js";
import { SETTINGS_LIMITS, validateConfigValues } from "./settings.js";
import type { RolloutPolicyInput, SentinelSettingsInput, StoredHealthCheck, StoredJobSpec } from "./types.js";

/** The slugs an environment's defaults are made of (an endpoint's default path prefix). */
export interface FileScope {
  project: string;
  environment: string;
}

/** A path in the environment's part of the file. */
const at = (...segments: (string | number)[]): string => formatPath(segments);

/**
 * Runs a validator written for an API request, naming its refusal by the file's path instead:
 * `prefix` before the request's field, `rename` for fields the file spells otherwise.
 */
function within<T>(prefix: string, fn: () => T, rename: (field: string) => string = (f) => f): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof DomainError && err.code === "invalid_argument" && err.field !== undefined) {
      const problem = err.message.slice(err.field.length + 2);
      const field = rename(err.field);
      throw invalidArgument(prefix === "" ? field : `${prefix}.${field}`, problem);
    }
    throw err;
  }
}

function sortedRecord<T>(entries: Iterable<[string, T]>): Record<string, T> {
  return Object.fromEntries([...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

// ---------------------------------------------------------------- canonical parts

export function sentinelFile(s: SentinelSettingsInput | null): SentinelFile | undefined {
  if (s === null) return undefined;
  return create(SentinelFileSchema, {
    image: s.image,
    replicas: s.replicas,
    cpuMillicores: BigInt(s.cpuMillicores),
    memoryMib: BigInt(s.memoryMib),
  });
}

export function sentinelInput(s: SentinelFile | undefined): SentinelSettingsInput | null {
  if (s === undefined) return null;
  return {
    image: s.image,
    replicas: s.replicas ?? 0,
    cpuMillicores: Number(s.cpuMillicores),
    memoryMib: Number(s.memoryMib),
  };
}

export function rolloutFile(p: RolloutPolicyInput): RolloutPolicy {
  return create(RolloutPolicySchema, {
    strategy: p.strategy === "Recreate" ? RolloutStrategy.RECREATE : RolloutStrategy.ROLLING_UPDATE,
    maxSurge: p.maxSurge,
    maxUnavailable: p.maxUnavailable,
    minReadySeconds: p.minReadySeconds,
    progressDeadlineSeconds: p.progressDeadlineSeconds,
    revisionHistoryLimit: p.revisionHistoryLimit,
    paused: p.paused,
    ...(p.progressive !== null ? { progressive: progressiveMsg(p.progressive) } : {}),
  });
}

export function autoscaleFile(p: AutoscalePolicy | null): AutoscalePolicyMsg | undefined {
  if (p === null) return undefined;
  return create(AutoscalePolicySchema, {
    minReplicas: p.minReplicas,
    maxReplicas: p.maxReplicas,
    ...(p.concurrencyTarget !== null ? { concurrencyTarget: p.concurrencyTarget } : {}),
    ...(p.cpuTargetPercent !== null ? { cpuTargetPercent: p.cpuTargetPercent } : {}),
    scaleUpWindowSeconds: p.scaleUpWindowSeconds,
    scaleDownWindowSeconds: p.scaleDownWindowSeconds,
    ...(p.maxStep !== null ? { maxStep: p.maxStep } : {}),
    ...(p.scaleToZero !== null ? { scaleToZero: create(ScaleToZeroSchema, p.scaleToZero) } : {}),
  });
}

/** The policy a message states; a scale-to-zero's held requests and timeout default when 0. */
export function autoscaleInput(m: AutoscalePolicyMsg | undefined): AutoscalePolicy | null {
  if (m === undefined) return null;
  const p = policyFromWire(m);
  const z = p.scaleToZero;
  if (z === null) return p;
  return {
    ...p,
    scaleToZero: {
      idleSeconds: z.idleSeconds,
      maxHeldRequests: z.maxHeldRequests === 0 ? DEFAULT_HELD_REQUESTS : z.maxHeldRequests,
      heldTimeoutSeconds: z.heldTimeoutSeconds === 0 ? DEFAULT_HELD_TIMEOUT_SECONDS : z.heldTimeoutSeconds,
    },
  };
}

export function deploymentFile(spec: RevisionSpec): DeploymentFile {
  return create(DeploymentFileSchema, {
    image: spec.image,
    command: spec.command,
    args: spec.args,
    port: spec.port,
    protocol: spec.protocol ?? "http1",
    env: Object.fromEntries(spec.env.map((e) => [e.name, e.value])),
    cpuMillicores: BigInt(spec.cpuMillicores),
    memoryMib: BigInt(spec.memoryMib),
    ...(spec.healthCheck !== null ? { healthCheck: create(HealthCheckSchema, spec.healthCheck) } : {}),
  });
}

/** The settings of the revision a (canonical) deployment part describes. */
export function revisionSpecOf(d: DeploymentFile): RevisionSpec {
  const h = d.healthCheck;
  const healthCheck: StoredHealthCheck | null =
    h === undefined
      ? null
      : {
          method: h.method,
          path: h.path,
          intervalSeconds: h.intervalSeconds,
          timeoutSeconds: h.timeoutSeconds,
          failureThreshold: h.failureThreshold,
          initialDelaySeconds: h.initialDelaySeconds,
        };
  return {
    image: d.image,
    command: [...d.command],
    args: [...d.args],
    port: d.port,
    protocol: d.protocol as AppProtocol,
    env: Object.entries(d.env).map(([name, value]) => ({ name, value })),
    cpuMillicores: Number(d.cpuMillicores),
    memoryMib: Number(d.memoryMib),
    healthCheck,
    buildId: "",
  };
}

export function endpointFile(prefix: string, auth: EndpointAuthSettings | null): EndpointFile {
  return create(EndpointFileSchema, {
    pathRouting: prefix !== "/",
    pathPrefix: prefix === "/" ? "" : prefix,
    ...(auth !== null ? { auth: create(EndpointAuthSchema, auth) } : {}),
  });
}

/** A job as the file holds it: its spec without the name (the key names it). */
export function jobFile(spec: StoredJobSpec): JobSpec {
  return create(JobSpecSchema, {
    schedule: spec.schedule,
    timeZone: spec.timeZone,
    image: spec.image,
    command: spec.command,
    args: spec.args,
    concurrencyPolicy: spec.concurrencyPolicy,
    deadlineSeconds: BigInt(spec.deadlineSeconds),
    successfulJobsHistoryLimit: spec.successfulJobsHistoryLimit,
    failedJobsHistoryLimit: spec.failedJobsHistoryLimit,
    suspend: spec.suspend,
    cpuMillicores: BigInt(spec.cpuMillicores),
    memoryMib: BigInt(spec.memoryMib),
  });
}

// ---------------------------------------------------------------- validation

/** An autoscaling policy as the file states it, checked whole (the fields named as the file spells them). */
function validateAutoscale(m: AutoscalePolicyMsg | undefined, field: string): AutoscalePolicy | null {
  const p = autoscaleInput(m);
  if (p === null) return null;
  const problem = policyProblem(p, r.LIMITS.replicasMax, field);
  if (problem)
    throw invalidArgument(
      problem.field.replace(/\.concurrency$/, ".concurrency_target").replace(/\.cpu$/, ".cpu_target_percent"),
      problem.problem,
    );
  return p;
}

/** An image that passes the image rule, standing in for one the file leaves to the environment. */
const KEEP_IMAGE = "keep";

function validateDeployment(d: DeploymentFile): DeploymentFile {
  const names = Object.keys(d.env);
  const req = create(CreateDeploymentRequestSchema, {
    workspace: "w",
    project: "p",
    environment: "e",
    image: d.image === "" ? KEEP_IMAGE : d.image,
    command: d.command,
    args: d.args,
    port: d.port,
    protocol: d.protocol,
    env: names.map((name) => ({ name, value: d.env[name] ?? "" })),
    cpuMillicores: d.cpuMillicores,
    memoryMib: d.memoryMib,
    ...(d.healthCheck !== undefined ? { healthCheck: d.healthCheck } : {}),
  });
  // `env` is a list in the request, a mapping in the file: env[2].name is env.<its name>.
  const rename = (f: string): string =>
    f.replace(/^env\[(\d+)\]\.(name|value)$/, (_, i: string) => `env.${keySegment(names[Number(i)] ?? "")}`);
  const spec = within("deployment", () => deploymentFrom(validateCreateDeployment(req), null), rename);
  return deploymentFile({ ...spec, image: d.image === "" ? "" : spec.image });
}

function validateSentinelFile(s: SentinelFile | undefined): SentinelSettingsInput | null {
  if (s === undefined) return null;
  const patch = validateSentinelPatch(
    create(SentinelSettingsUpdateSchema, {
      image: s.image,
      ...(s.replicas !== undefined ? { replicas: s.replicas } : {}),
      ...(s.cpuMillicores !== 0n ? { cpuMillicores: s.cpuMillicores } : {}),
      ...(s.memoryMib !== 0n ? { memoryMib: s.memoryMib } : {}),
    }),
  );
  return mergeSentinel(null, patch, false);
}

function validateRegions(regions: Record<string, RegionFile>): Record<string, RegionFile> {
  const entries = Object.entries(regions);
  if (entries.length > r.LIMITS.regionsMax)
    throw invalidArgument("regions", `must have at most ${r.LIMITS.regionsMax} regions`);
  return sortedRecord(
    entries.map(([name, rf]) => {
      const field = at("regions", name);
      regionName(field, name);
      if (rf.autoscale !== undefined && rf.autoscaleOff)
        throw invalidArgument(`${field}.autoscale_off`, "cannot be combined with autoscale");
      const replicas =
        rf.replicas === undefined ? undefined : r.intRange(`${field}.replicas`, rf.replicas, 0, r.LIMITS.replicasMax);
      const own = validateAutoscale(rf.autoscale, `${field}.autoscale`);
      return [
        name,
        create(RegionFileSchema, {
          ...(replicas !== undefined ? { replicas } : {}),
          ...(own !== null ? { autoscale: autoscaleFile(own) } : {}),
          autoscaleOff: rf.autoscaleOff,
        }),
      ];
    }),
  );
}

function validateEndpoints(endpoints: Record<string, EndpointFile>, scope: FileScope): Record<string, EndpointFile> {
  return sortedRecord(
    Object.entries(endpoints).map(([vis, e]) => {
      const field = at("endpoints", vis);
      visibility(field, vis);
      if (!e.pathRouting && e.pathPrefix !== "") throw r.requiredWith(`${field}.path_routing`, `${field}.path_prefix`);
      const prefix = !e.pathRouting
        ? "/"
        : e.pathPrefix === ""
          ? `/${scope.project}/${scope.environment}`
          : pathPrefix(`${field}.path_prefix`, e.pathPrefix);
      return [vis, endpointFile(prefix, endpointAuth(`${field}.auth`, e.auth))];
    }),
  );
}

function validateDomains(domains: readonly string[]): string[] {
  const seen = new Set<string>();
  return domains
    .map((h, i) => {
      const name = domainName(at("domains", i), h);
      if (seen.has(name)) throw invalidArgument(at("domains", i), `repeats "${name}"`);
      seen.add(name);
      return name;
    })
    .sort();
}

function validateConfig(config: Record<string, string>): Record<string, string> {
  const keys = Object.keys(config);
  if (keys.length === 0) return {};
  const values = within(
    "",
    () => validateConfigValues(keys.map((key) => ({ key, value: config[key] ?? "" }))),
    (f) =>
      f === "values"
        ? "config"
        : f.replace(/^values\[(\d+)\]\.(key|value)$/, (_, i: string) => `config.${keySegment(keys[Number(i)] ?? "")}`),
  );
  return sortedRecord(values.map((v) => [v.key, v.value]));
}

function validateSecrets(
  secrets: readonly string[],
  external: Record<string, string>,
  config: Record<string, string>,
): { secrets: string[]; external: Record<string, string> } {
  r.list("secrets", secrets, SETTINGS_LIMITS.keysMax);
  const names = new Set<string>();
  secrets.forEach((n, i) => {
    const field = at("secrets", i);
    r.envName(field, n);
    if (names.has(n)) throw invalidArgument(field, `repeats "${n}"`);
    if (n in config) throw invalidArgument(field, `"${n}" is also in config`);
    names.add(n);
  });
  const ext = Object.entries(external);
  if (ext.length > SETTINGS_LIMITS.keysMax)
    throw invalidArgument("external_secrets", `must have at most ${SETTINGS_LIMITS.keysMax} entries`);
  for (const [k, path] of ext) {
    const field = at("external_secrets", k);
    r.envName(field, k);
    r.text(field, path, SETTINGS_LIMITS.externalPathMax, true);
    if (names.has(k)) throw invalidArgument(field, `"${k}" is also in secrets`);
    if (k in config) throw invalidArgument(field, `"${k}" is also in config`);
  }
  return { secrets: [...names].sort(), external: sortedRecord(ext) };
}

function validateJobs(jobs: Record<string, JobSpec>): Record<string, JobSpec> {
  return sortedRecord(
    Object.entries(jobs).map(([name, j]) => {
      const field = at("jobs", name);
      if (j.name !== "" && j.name !== name)
        throw invalidArgument(`${field}.name`, `must be "${name}" (the key names the job) or left out`);
      const spec = within(
        field,
        () => validateJobSpec(create(JobSpecSchema, { ...j, name })),
        (f) => f.replace(/^spec\./, ""),
      );
      return [name, jobFile(spec)];
    }),
  );
}

/**
 * A file's environment, checked and in canonical form — except what it leaves to the
 * environment: a deployment without an image keeps `image` empty, a region without replicas
 * keeps them unset (planTarget takes both from the environment as it is).
 */
export function validateEnvironmentFile(f: EnvironmentFile, scope: FileScope): EnvironmentFile {
  const regions = validateRegions(f.regions);
  const config = validateConfig(f.config);
  const secrets = validateSecrets(f.secrets, f.externalSecrets, config);
  return create(EnvironmentFileSchema, {
    regions,
    ...(f.deployment !== undefined ? { deployment: validateDeployment(f.deployment) } : {}),
    ...(f.sentinel !== undefined ? { sentinel: sentinelFile(validateSentinelFile(f.sentinel)) } : {}),
    // Waves are checked against the regions by planTarget, which knows them all.
    rollout: rolloutFile(validateRollout(f.rollout, null)),
    ...(f.autoscale !== undefined ? { autoscale: autoscaleFile(validateAutoscale(f.autoscale, "autoscale")) } : {}),
    endpoints: validateEndpoints(f.endpoints, scope),
    domains: validateDomains(f.domains),
    config,
    secrets: secrets.secrets,
    externalSecrets: secrets.external,
    jobs: validateJobs(f.jobs),
  });
}

// ---------------------------------------------------------------- the target

export interface Target {
  /** The environment as applying leaves it (canonical). */
  file: EnvironmentFile;
  /** What is left as it is and why, in words. */
  notes: string[];
}

function union(a: Iterable<string>, b: Iterable<string>): string[] {
  return [...new Set([...a, ...b])].sort();
}

/**
 * The environment after applying `desired` (validateEnvironmentFile's) to `current` (null: it
 * does not exist yet), with `counts`, the replicas each region runs now (the canonical form
 * leaves them out where the autoscaler sets them). Refusals name the file's path.
 */
export function planTarget(
  current: EnvironmentFile | null,
  counts: ReadonlyMap<string, number>,
  desired: EnvironmentFile,
  prune: boolean,
  scope: FileScope,
): Target {
  const cur = current ?? create(EnvironmentFileSchema, {});
  const notes: string[] = [];
  const kept = (what: string, names: string[]): void => {
    if (!prune && names.length > 0)
      notes.push(
        `kept, not in the file (--prune removes ${names.length === 1 ? "it" : "them"}): ${what} ${names.join(", ")}`,
      );
  };
  const merged = <T>(c: Record<string, T>, d: Record<string, T>): Record<string, T> =>
    sortedRecord(Object.entries(prune ? d : { ...c, ...d }));

  // Regions: the file's, and (unless pruned) the others as they are.
  kept(
    "regions",
    Object.keys(cur.regions).filter((n) => !(n in desired.regions)),
  );
  const names = prune
    ? Object.keys(desired.regions).sort()
    : union(Object.keys(cur.regions), Object.keys(desired.regions));
  if (names.length > r.LIMITS.regionsMax)
    throw failedPrecondition(
      `regions: the environment would be in ${names.length} regions, more than ${r.LIMITS.regionsMax}`,
    );
  const regions: Record<string, RegionFile> = {};
  for (const name of names) {
    const d = desired.regions[name];
    const c = cur.regions[name];
    const base = d ?? c ?? create(RegionFileSchema, {});
    const autoscaled = !base.autoscaleOff && (base.autoscale ?? desired.autoscale) !== undefined;
    if (autoscaled && d?.replicas !== undefined)
      throw invalidArgument(
        at("regions", name, "replicas"),
        "the region autoscales, so the autoscaler sets its count: leave replicas out and set autoscale's min_replicas and max_replicas",
      );
    if (base.autoscale !== undefined && desired.sentinel === undefined)
      throw invalidArgument(
        at("regions", name, "autoscale"),
        "needs a sentinel, which measures the load autoscaling decides on (add `sentinel: {}`)",
      );
    regions[name] = create(RegionFileSchema, {
      ...(autoscaled ? {} : { replicas: d?.replicas ?? c?.replicas ?? counts.get(name) ?? 1 }),
      ...(base.autoscale !== undefined ? { autoscale: base.autoscale } : {}),
      autoscaleOff: base.autoscaleOff,
    });
  }
  if (desired.autoscale !== undefined && desired.sentinel === undefined)
    throw invalidArgument(
      "autoscale",
      "needs a sentinel, which measures the load autoscaling decides on (add `sentinel: {}`)",
    );

  // The revision: the file's, with the current image where it names none; else as it is.
  let deployment = desired.deployment ?? cur.deployment;
  if (desired.deployment !== undefined && desired.deployment.image === "") {
    if (cur.deployment === undefined)
      throw invalidArgument("deployment.image", "is required: the environment runs no revision yet");
    deployment = create(DeploymentFileSchema, { ...desired.deployment, image: cur.deployment.image });
  }

  // Waves name regions, which are known now.
  const rollout = rolloutFile(validateRollout(desired.rollout, names));

  const endpoints = merged(cur.endpoints, desired.endpoints);
  kept(
    "endpoints",
    Object.keys(cur.endpoints).filter((v) => !(v in desired.endpoints)),
  );
  const domains = prune ? desired.domains : union(cur.domains, desired.domains);
  kept(
    "domains",
    cur.domains.filter((h) => !desired.domains.includes(h)),
  );
  const config = merged(cur.config, desired.config);
  kept(
    "configuration keys",
    Object.keys(cur.config).filter((k) => !(k in desired.config)),
  );
  const external = merged(cur.externalSecrets, desired.externalSecrets);
  kept(
    "external secrets",
    Object.keys(cur.externalSecrets).filter((k) => !(k in desired.externalSecrets)),
  );
  // Secrets with values: those set stay set (unless pruned, or made external); none can be added here.
  const named = new Set(desired.secrets);
  const secrets = cur.secrets.filter((n) => (!prune || named.has(n)) && !(n in external));
  kept(
    "secrets",
    cur.secrets.filter((n) => !named.has(n) && !(n in desired.externalSecrets)),
  );
  desired.secrets.forEach((n, i) => {
    if (n in external)
      throw failedPrecondition(
        `${at("secrets", i)}: "${n}" is an external secret of this environment (name it under external_secrets, or remove it with --prune)`,
      );
    if (!secrets.includes(n))
      notes.push(
        `secret ${n} is named but has no value yet: set it with \`krane secret set ${scope.project}/${scope.environment} ${n}=…\``,
      );
  });
  for (const k of Object.keys(config)) {
    if (!secrets.includes(k) && !(k in external)) continue;
    if (k in desired.config)
      throw invalidArgument(
        at("config", k),
        `"${k}" is a secret of this environment (remove the secret, with --prune)`,
      );
    throw failedPrecondition(
      `${at(k in desired.externalSecrets ? "external_secrets" : "secrets", k)}: "${k}" is a config value of this environment (remove it, with --prune)`,
    );
  }
  const jobs = merged(cur.jobs, desired.jobs);
  kept(
    "jobs",
    Object.keys(cur.jobs).filter((j) => !(j in desired.jobs)),
  );

  return {
    file: create(EnvironmentFileSchema, {
      regions,
      ...(deployment !== undefined ? { deployment } : {}),
      ...(desired.sentinel !== undefined ? { sentinel: desired.sentinel } : {}),
      rollout,
      ...(desired.autoscale !== undefined ? { autoscale: desired.autoscale } : {}),
      endpoints,
      domains,
      config,
      secrets,
      externalSecrets: external,
      jobs,
    }),
    notes,
  };
}

// Validated, defaulted inputs of ctrl's write operations: produced by this folder's validators,
// taken by ../domain. Pure types; the bottom of ctrl's layers, next to ../errors.ts.
import type { AutoscalePolicy, AutoscaleSpec, ScaleToZeroSpec } from "../../contracts/autoscaling.js";
import type { AppProtocol } from "../../contracts/protocols.js";

/** A deployment's health check as validated and stored (JSON text in deployments.health_check). */
export interface StoredHealthCheck {
  method: string;
  path: string;
  intervalSeconds: number;
  timeoutSeconds: number;
  failureThreshold: number;
  initialDelaySeconds: number;
}

/** One environment variable as validated and stored (deployments.env is a JSON list of them). */
export interface StoredEnvVar {
  name: string;
  value: string;
}

export interface NewWorkspace {
  slug: string;
  name: string;
}

export interface NewProject {
  workspace: string;
  slug: string;
  name: string;
}

export interface SentinelSettingsInput {
  image: string;
  replicas: number;
  cpuMillicores: number;
  memoryMib: number;
}

export type StrategyName = "RollingUpdate" | "Recreate";

export interface RolloutPolicyInput {
  strategy: StrategyName;
  maxSurge: string;
  maxUnavailable: string;
  minReadySeconds: number;
  progressDeadlineSeconds: number;
  revisionHistoryLimit: number;
  paused: boolean;
  /** Progressive delivery (canary / blue-green, waves); null: the rolling engine. */
  progressive: ProgressiveSpec | null;
  /** How long the previous revision stays warm after a rolling update (0: not at all). */
  warmWindowSeconds: number;
}

export interface NewEnvironment {
  workspace: string;
  project: string;
  slug: string;
  regions: { region: string; replicas: number }[];
  sentinel: SentinelSettingsInput | null;
  rollout: RolloutPolicyInput;
  /** Absent or null: no autoscaling. */
  autoscale?: AutoscalePolicy | null;
}

export interface NewDeployment {
  workspace: string;
  project: string;
  environment: string;
  image: string;
  command: string[];
  args: string[];
  port: number;
  env: StoredEnvVar[];
  cpuMillicores: number;
  memoryMib: number;
  healthCheck: StoredHealthCheck | null;
  buildId: string;
  replicas: number | null;
  /** What the app speaks on its port (absent: HTTP/1.1). */
  protocol?: AppProtocol;
  /** The digest `image` was resolved to when recorded ("sha256:…"); absent or null: run as named. */
  imageDigest?: string | null;
}

/**
 * A CreateDeployment as asked: the settings it leaves unset are undefined (`env` empty). They
 * become the defaults, or with `inherit` the environment's current revision's (deploymentFrom in
 * ./api.ts).
 */
export interface DeploymentAsk extends EnvironmentRef {
  image: string;
  /** What ctrl resolved `image` to before recording (../images), null when it ran as named. */
  imageDigest?: string | null;
  buildId: string;
  replicas: number | null;
  inherit: boolean;
  command?: string[];
  args?: string[];
  port?: number;
  protocol?: AppProtocol;
  cpuMillicores?: number;
  memoryMib?: number;
  healthCheck?: StoredHealthCheck;
  /** Given variables; with inherit laid over the carried ones by name. */
  env: StoredEnvVar[];
  /** With inherit: carried variables to drop. */
  envUnset: string[];
  /** Lift the pin `krane rollback` left, in the same transaction (this revision rolls out). */
  unpin?: boolean;
}

export interface EnvironmentRef {
  workspace: string;
  project: string;
  environment: string;
}

/** Sentinel fields to change; absent ones keep their value. */
export interface SentinelSettingsPatch {
  image?: string;
  replicas?: number;
  cpuMillicores?: number;
  memoryMib?: number;
}

/** Rollout policy fields to change; absent ones keep their value. */
export type RolloutPolicyPatch = Partial<RolloutPolicyInput>;

/**
 * A validated UpdateEnvironment. `index` is the entry's position in the request, so that errors
 * found against the stored state still name the field (`regions[1].region`).
 */
export interface EnvironmentUpdate extends EnvironmentRef {
  /** null: the sentinel is left as it is. */
  sentinel: SentinelSettingsPatch | null;
  removeSentinel: boolean;
  rollout: RolloutPolicyPatch;
  regions: { index: number; region: string; replicas: number }[];
  removeRegions: { index: number; region: string }[];
  /**
   * The autoscaling change: a spec laid over the stored policy, a whole policy in its place
   * (krane.yaml), "remove", or null: unchanged.
   */
  autoscale: AutoscaleChange | "remove" | null;
  /** Regions' own policies: a change laid over the region's (else the environment's), off, or back to the environment's. */
  regionAutoscale: {
    index: number;
    region: string;
    change: AutoscaleChange | "off" | "inherit";
  }[];
}

export type AutoscaleChange =
  { spec: AutoscaleSpec; zero: ScaleToZeroSpec | null | undefined } | { replace: AutoscalePolicy };

/** A job's spec as validated and stored (jobs.spec, JSON). */
export interface StoredJobSpec {
  name: string;
  schedule: string;
  timeZone: string;
  image: string;
  command: string[];
  args: string[];
  concurrencyPolicy: "Allow" | "Forbid" | "Replace";
  deadlineSeconds: number;
  successfulJobsHistoryLimit: number;
  failedJobsHistoryLimit: number;
  suspend: boolean;
  cpuMillicores: number;
  memoryMib: number;
}
import type { ProgressiveSpec } from "../../rollout/progressive/index.js";

// Validated, defaulted inputs of the store's write operations (produced by ../validate).
import type { StoredEnvVar, StoredHealthCheck } from "./render.js";

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
}

export interface NewEnvironment {
  workspace: string;
  project: string;
  slug: string;
  regions: { region: string; replicas: number }[];
  sentinel: SentinelSettingsInput | null;
  rollout: RolloutPolicyInput;
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
}

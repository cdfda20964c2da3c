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

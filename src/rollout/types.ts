// The JSON shapes of one rollout pass: what ctrl feeds the engine and what it gets back.
// Times are RFC 3339 strings on the wire; counts are non-negative integers.

/** An absolute count or a percentage of the desired replicas, e.g. 2 or "25%". */
export type IntOrPercent = number | string;

export interface RollingUpdateParams {
  maxSurge: IntOrPercent;
  maxUnavailable: IntOrPercent;
}

export type Strategy = { type: "RollingUpdate"; rollingUpdate: RollingUpdateParams } | { type: "Recreate" };

export type ConditionStatus = "True" | "False" | "Unknown";

export interface Condition {
  type: string;
  status: ConditionStatus;
  reason: string;
  message: string;
  lastUpdateTime: string;
  lastTransitionTime: string;
}

export interface DeploymentStatus {
  replicas: number;
  updatedReplicas: number;
  readyReplicas: number;
  availableReplicas: number;
  unavailableReplicas: number;
}

export interface DeploymentInput {
  /** Used only in event and condition messages that name the deployment. */
  name: string;
  replicas: number;
  strategy: Strategy;
  minReadySeconds: number;
  /** null: no progress deadline (no Progressing condition is kept). */
  progressDeadlineSeconds: number | null;
  /** null: old revisions are never cleaned up. */
  revisionHistoryLimit: number | null;
  paused: boolean;
  /** Name of the revision the environment should run (Kubernetes' "new ReplicaSet"). */
  target: string;
  /** null, 0 (the previous revision) or a revision number. */
  rollbackTo: number | null;
  /** What the previous pass produced. */
  status: DeploymentStatus;
  conditions: Condition[];
}

export interface RevisionStatus {
  /** Pods that exist, are neither terminal nor terminating (see README.md for what ctrl counts). */
  replicas: number;
  readyReplicas: number;
  /** Ready for at least minReadySeconds. */
  availableReplicas: number;
  /** Pods being deleted (deletion timestamp set), which Recreate waits for; absent = 0. */
  terminatingReplicas?: number;
}

export interface RevisionInput {
  name: string;
  /** null: this region has no ReplicaSet for the revision yet. */
  revision: number | null;
  createdAt: string;
  replicas: number;
  /** The desired-replicas annotation written at the revision's last scale; null when unknown. */
  desiredReplicas: number | null;
  /** The max-replicas annotation written at the revision's last scale; null when unknown. */
  maxReplicas: number | null;
  status: RevisionStatus;
}

export interface RolloutInput {
  now: string;
  deployment: DeploymentInput;
  revisions: RevisionInput[];
}

export interface RevisionOutput {
  name: string;
  revision: number | null;
  replicas: number;
  desiredReplicas?: number;
  maxReplicas?: number;
}

export interface RolloutEvent {
  type: "Normal" | "Warning";
  reason: string;
  message: string;
}

export interface RolloutOutput {
  target: string;
  revisions: RevisionOutput[];
  /** Names of revisions removed by revision-history cleanup. */
  delete: string[];
  status: DeploymentStatus;
  conditions: Condition[];
  events: RolloutEvent[];
  /** Seconds until the next pass must run to check the progress deadline; 0 = soon (rate-limited). */
  requeueAfterSeconds: number | null;
}

// The engine's working state for one pass: the Deployment, its ReplicaSets (revisions) and the
// status being built. Mutated only inside planRollout, which copies everything from its input.
import type { ConditionStatus, IntOrPercent, RolloutEvent } from "./types.js";

export interface ReplicaSet {
  readonly name: string;
  /** Position in the input list, so the output keeps the caller's order. */
  readonly index: number;
  readonly createdAtMs: number;
  /** null while the ReplicaSet does not exist in this region. */
  revision: number | null;
  /** spec.replicas */
  replicas: number;
  /**
   * Revision and spec.replicas as listed at the start of the pass (as created, for the one the
   * pass creates). Kubernetes lists ReplicaSets once per sync and several of its decisions read
   * that list after the pass has already written new values (see src/rollout/README.md).
   */
  listed: { readonly revision: number | null; readonly replicas: number };
  desiredReplicas: number | null;
  maxReplicas: number | null;
  readonly status: { replicas: number; readyReplicas: number; availableReplicas: number; terminatingReplicas: number };
}

export interface WorkingCondition {
  type: string;
  status: ConditionStatus;
  reason: string;
  message: string;
  lastUpdateMs: number;
  lastTransitionMs: number;
}

export interface WorkingStatus {
  replicas: number;
  updatedReplicas: number;
  readyReplicas: number;
  availableReplicas: number;
  unavailableReplicas: number;
  conditions: WorkingCondition[];
}

export interface Deployment {
  readonly name: string;
  readonly replicas: number;
  readonly strategyType: "RollingUpdate" | "Recreate";
  readonly maxSurge: IntOrPercent;
  readonly maxUnavailable: IntOrPercent;
  readonly progressDeadlineSeconds: number | null;
  readonly revisionHistoryLimit: number | null;
  readonly paused: boolean;
  readonly rollbackTo: number | null;
  target: string;
}

export interface Pass {
  readonly now: number;
  readonly d: Deployment;
  /** Every revision, sorted by creation time (name breaks ties): Kubernetes' ReplicaSet list. */
  readonly byCreation: ReplicaSet[];
  /** d.status: what the previous pass stored, updated as this pass writes it. */
  status: WorkingStatus;
  readonly events: RolloutEvent[];
  readonly deleted: string[];
  requeueAfterSeconds: number | null;
}

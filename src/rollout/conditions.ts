// Deployment conditions (Available, Progressing) and their list operations, with Kubernetes'
// reasons and messages. A condition is replaced only when its status or reason changes; a replaced
// condition keeps its lastTransitionTime while the status stays the same.
import type { WorkingCondition } from "./model.js";
import type { ConditionStatus } from "./types.js";

export const AVAILABLE = "Available";
export const PROGRESSING = "Progressing";
export const REPLICA_FAILURE = "ReplicaFailure";

export const Reason = {
  minimumReplicasAvailable: "MinimumReplicasAvailable",
  minimumReplicasUnavailable: "MinimumReplicasUnavailable",
  newReplicaSetCreated: "NewReplicaSetCreated",
  foundNewReplicaSet: "FoundNewReplicaSet",
  replicaSetUpdated: "ReplicaSetUpdated",
  newReplicaSetAvailable: "NewReplicaSetAvailable",
  progressDeadlineExceeded: "ProgressDeadlineExceeded",
  deploymentPaused: "DeploymentPaused",
  deploymentResumed: "DeploymentResumed",
} as const;

/** Go's %q for the names we print (plain strings). */
export function quote(name: string): string {
  return JSON.stringify(name);
}

export function newCondition(
  type: string,
  status: ConditionStatus,
  reason: string,
  message: string,
  now: number,
): WorkingCondition {
  return { type, status, reason, message, lastUpdateMs: now, lastTransitionMs: now };
}

export function getCondition(list: readonly WorkingCondition[], type: string): WorkingCondition | undefined {
  return list.find((c) => c.type === type);
}

export function removeCondition(list: readonly WorkingCondition[], type: string): WorkingCondition[] {
  return list.filter((c) => c.type !== type);
}

/** Kubernetes' SetDeploymentCondition: a no-op for the same status and reason; else replace at the end. */
export function setCondition(list: readonly WorkingCondition[], condition: WorkingCondition): WorkingCondition[] {
  const current = getCondition(list, condition.type);
  if (current !== undefined && current.status === condition.status && current.reason === condition.reason) {
    return [...list];
  }
  const next = { ...condition };
  if (current !== undefined && current.status === condition.status) {
    next.lastTransitionMs = current.lastTransitionMs;
  }
  return [...removeCondition(list, condition.type), next];
}

export function conditionsEqual(a: readonly WorkingCondition[], b: readonly WorkingCondition[]): boolean {
  if (a.length !== b.length) return false;
  return a.every((x, i) => {
    const y = b[i];
    return (
      y !== undefined &&
      x.type === y.type &&
      x.status === y.status &&
      x.reason === y.reason &&
      x.message === y.message &&
      x.lastUpdateMs === y.lastUpdateMs &&
      x.lastTransitionMs === y.lastTransitionMs
    );
  });
}

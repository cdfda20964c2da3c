// Deployment status: computing it from the ReplicaSets, judging completion, progress and the
// progress deadline, and deciding when to look again (Kubernetes' sync.go / progress.go).
import {
  AVAILABLE,
  PROGRESSING,
  REPLICA_FAILURE,
  Reason,
  conditionsEqual,
  getCondition,
  newCondition,
  quote,
  removeCondition,
  setCondition,
} from "./conditions.js";
import { hasProgressDeadline, maxUnavailable } from "./fenceposts.js";
import type { Deployment, Pass, ReplicaSet, WorkingStatus } from "./model.js";
import { sumListed, sumStatus } from "./replicasets.js";

/**
 * Status counts from the ReplicaSets plus Available. unavailableReplicas compares the sizes as
 * listed at the start of the pass (not the ones it just wrote) with the available pods, as
 * Kubernetes does; the pass that follows any resize reports the new sizes.
 */
export function calculateStatus(
  pass: Pass,
  allRSs: readonly ReplicaSet[],
  newRS: ReplicaSet | undefined,
): WorkingStatus {
  const available = sumStatus(allRSs, "availableReplicas");
  const status: WorkingStatus = {
    replicas: sumStatus(allRSs, "replicas"),
    updatedReplicas: newRS?.status.replicas ?? 0,
    readyReplicas: sumStatus(allRSs, "readyReplicas"),
    availableReplicas: available,
    unavailableReplicas: Math.max(0, sumListed(allRSs) - available),
    conditions: pass.status.conditions.map((c) => ({ ...c })),
  };
  const d = pass.d;
  const availability =
    available >= d.replicas - maxUnavailable(d)
      ? newCondition(
          AVAILABLE,
          "True",
          Reason.minimumReplicasAvailable,
          "Deployment has minimum availability.",
          pass.now,
        )
      : newCondition(
          AVAILABLE,
          "False",
          Reason.minimumReplicasUnavailable,
          "Deployment does not have minimum availability.",
          pass.now,
        );
  status.conditions = setCondition(status.conditions, availability);
  return status;
}

export function statusEqual(a: WorkingStatus, b: WorkingStatus): boolean {
  return (
    a.replicas === b.replicas &&
    a.updatedReplicas === b.updatedReplicas &&
    a.readyReplicas === b.readyReplicas &&
    a.availableReplicas === b.availableReplicas &&
    a.unavailableReplicas === b.unavailableReplicas &&
    conditionsEqual(a.conditions, b.conditions)
  );
}

/** Every desired replica is updated, exists and is available. */
export function deploymentComplete(d: Deployment, status: WorkingStatus): boolean {
  return (
    status.updatedReplicas === d.replicas && status.replicas === d.replicas && status.availableReplicas === d.replicas
  );
}

/** More updated, fewer old, more ready or more available pods than the stored status. */
export function deploymentProgressing(old: WorkingStatus, next: WorkingStatus): boolean {
  return (
    next.updatedReplicas > old.updatedReplicas ||
    next.replicas - next.updatedReplicas < old.replicas - old.updatedReplicas ||
    next.readyReplicas > old.readyReplicas ||
    next.availableReplicas > old.availableReplicas
  );
}

export function deploymentTimedOut(pass: Pass, status: WorkingStatus): boolean {
  const d = pass.d;
  if (!hasProgressDeadline(d)) return false;
  const cond = getCondition(status.conditions, PROGRESSING);
  if (cond === undefined || cond.reason === Reason.newReplicaSetAvailable) return false;
  if (cond.reason === Reason.progressDeadlineExceeded) return true;
  return cond.lastUpdateMs + d.progressDeadlineSeconds * 1000 < pass.now;
}

function subject(pass: Pass, newRS: ReplicaSet | undefined): string {
  return newRS !== undefined ? `ReplicaSet ${quote(newRS.name)}` : `Deployment ${quote(pass.d.name)}`;
}

/** Status plus the Progressing condition, during a rollout (rolling or recreate). */
export function syncRolloutStatus(pass: Pass, allRSs: readonly ReplicaSet[], newRS: ReplicaSet | undefined): void {
  const d = pass.d;
  const next = calculateStatus(pass, allRSs, newRS);
  if (!hasProgressDeadline(d)) next.conditions = removeCondition(next.conditions, PROGRESSING);

  const current = getCondition(pass.status.conditions, PROGRESSING);
  // A finished rollout being resynced: nothing to estimate.
  const alreadyComplete = next.replicas === next.updatedReplicas && current?.reason === Reason.newReplicaSetAvailable;
  if (hasProgressDeadline(d) && !alreadyComplete) {
    if (deploymentComplete(d, next)) {
      const message = `${subject(pass, newRS)} has successfully progressed.`;
      next.conditions = setCondition(
        next.conditions,
        newCondition(PROGRESSING, "True", Reason.newReplicaSetAvailable, message, pass.now),
      );
    } else if (deploymentProgressing(pass.status, next)) {
      // Progress refreshes lastUpdateTime even though the reason stays the same.
      const message = `${subject(pass, newRS)} is progressing.`;
      const cond = newCondition(PROGRESSING, "True", Reason.replicaSetUpdated, message, pass.now);
      if (current !== undefined) {
        if (current.status === "True") cond.lastTransitionMs = current.lastTransitionMs;
        next.conditions = removeCondition(next.conditions, PROGRESSING);
      }
      next.conditions = setCondition(next.conditions, cond);
    } else if (deploymentTimedOut(pass, next)) {
      const message = `${subject(pass, newRS)} has timed out progressing.`;
      next.conditions = setCondition(
        next.conditions,
        newCondition(PROGRESSING, "False", Reason.progressDeadlineExceeded, message, pass.now),
      );
    }
  }
  // Revisions carry no ReplicaFailure condition in krane, so none is mirrored.
  next.conditions = removeCondition(next.conditions, REPLICA_FAILURE);

  if (statusEqual(pass.status, next)) {
    pass.requeueAfterSeconds = requeueStuckDeployment(pass, next);
    return;
  }
  pass.status = next;
}

/** Status only (scaling events and paused deployments): no progress estimation. */
export function syncDeploymentStatus(pass: Pass, allRSs: readonly ReplicaSet[], newRS: ReplicaSet | undefined): void {
  const next = calculateStatus(pass, allRSs, newRS);
  if (!statusEqual(pass.status, next)) pass.status = next;
}

/**
 * When nothing changed and the rollout is neither complete nor timed out, the next pass must run
 * when the deadline would pass (plus one second of slack); under a second left means now.
 */
export function requeueStuckDeployment(pass: Pass, next: WorkingStatus): number | null {
  const d = pass.d;
  const current = getCondition(pass.status.conditions, PROGRESSING);
  if (!hasProgressDeadline(d) || current === undefined) return null;
  if (deploymentComplete(d, next) || current.reason === Reason.progressDeadlineExceeded) return null;
  const afterMs = current.lastUpdateMs + d.progressDeadlineSeconds * 1000 - pass.now;
  if (afterMs < 1000) return 0;
  return (afterMs + 1000) / 1000;
}

/**
 * Pausing or resuming sets Progressing=Unknown so paused time never counts toward the deadline;
 * a ProgressDeadlineExceeded condition is never overwritten.
 */
export function checkPausedConditions(pass: Pass): void {
  const d = pass.d;
  if (!hasProgressDeadline(d)) return;
  const cond = getCondition(pass.status.conditions, PROGRESSING);
  if (cond?.reason === Reason.progressDeadlineExceeded) return;
  const pausedCondExists = cond?.reason === Reason.deploymentPaused;
  let next;
  if (d.paused && !pausedCondExists) {
    next = newCondition(PROGRESSING, "Unknown", Reason.deploymentPaused, "Deployment is paused", pass.now);
  } else if (!d.paused && pausedCondExists) {
    next = newCondition(PROGRESSING, "Unknown", Reason.deploymentResumed, "Deployment is resumed", pass.now);
  } else {
    return;
  }
  pass.status = { ...pass.status, conditions: setCondition(pass.status.conditions, next) };
}

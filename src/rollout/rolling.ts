// RollingUpdate: grow the new ReplicaSet within maxSurge, then shrink old ones while keeping
// replicas − maxUnavailable pods available, unhealthy pods first (Kubernetes' rolling.go).
import { maxUnavailable } from "./fenceposts.js";
import { cleanupDeployment } from "./history.js";
import type { Pass, ReplicaSet } from "./model.js";
import { newRSNewReplicas, syncRevision } from "./newrs.js";
import { byCreationTimestamp, filterActive, sumSpec, sumStatus } from "./replicasets.js";
import { scaleReplicaSetAndRecordEvent } from "./scaling.js";
import { deploymentComplete, syncRolloutStatus } from "./status.js";

export function rolloutRolling(pass: Pass): void {
  const { newRS, oldRSs } = syncRevision(pass, true);
  if (newRS === undefined) throw new Error("rolling update without a new ReplicaSet");
  const allRSs = [...oldRSs, newRS];

  // One step per pass: a pass that grows the new ReplicaSet does not also shrink old ones.
  if (reconcileNewReplicaSet(pass, allRSs, newRS)) return syncRolloutStatus(pass, allRSs, newRS);
  if (reconcileOldReplicaSets(pass, allRSs, filterActive(oldRSs), newRS)) {
    return syncRolloutStatus(pass, allRSs, newRS);
  }
  // Judged on the stored status, as Kubernetes does, before this pass recomputes it.
  if (deploymentComplete(pass.d, pass.status)) cleanupDeployment(pass, oldRSs);
  syncRolloutStatus(pass, allRSs, newRS);
}

export function reconcileNewReplicaSet(pass: Pass, allRSs: readonly ReplicaSet[], newRS: ReplicaSet): boolean {
  const d = pass.d;
  if (newRS.replicas === d.replicas) return false;
  if (newRS.replicas > d.replicas) return scaleReplicaSetAndRecordEvent(pass, newRS, d.replicas);
  return scaleReplicaSetAndRecordEvent(pass, newRS, newRSNewReplicas(d, allRSs, newRS.replicas));
}

/** Thrown where Kubernetes' scale-down helpers return an error (an RS reporting more available pods than its size). */
class InvalidScaleDown extends Error {}

export function reconcileOldReplicaSets(
  pass: Pass,
  allRSs: readonly ReplicaSet[],
  activeOldRSs: ReplicaSet[],
  newRS: ReplicaSet,
): boolean {
  const d = pass.d;
  if (sumSpec(activeOldRSs) === 0) return false;
  const minAvailable = d.replicas - maxUnavailable(d);
  const newRSUnavailable = newRS.replicas - newRS.status.availableReplicas;
  // Pods that may go without dropping below minAvailable, counting the new RS's unavailable
  // pods as already missing.
  const maxScaledDown = sumSpec(allRSs) - minAvailable - newRSUnavailable;
  if (maxScaledDown <= 0) return false;
  try {
    const cleaned = cleanupUnhealthyReplicas(pass, activeOldRSs, maxScaledDown);
    const scaledDown = scaleDownOldReplicaSetsForRollingUpdate(pass, [...activeOldRSs, newRS], activeOldRSs);
    return cleaned + scaledDown > 0;
  } catch (err) {
    // Kubernetes swallows these errors and reports "nothing scaled" (sizes already written stay).
    if (err instanceof InvalidScaleDown) return false;
    throw err;
  }
}

/** Remove old pods that are not available, oldest ReplicaSet first, within the budget. */
export function cleanupUnhealthyReplicas(pass: Pass, oldRSs: ReplicaSet[], maxCleanup: number): number {
  oldRSs.sort(byCreationTimestamp);
  let total = 0;
  for (const rs of oldRSs) {
    if (total >= maxCleanup) break;
    if (rs.replicas === 0 || rs.replicas === rs.status.availableReplicas) continue;
    const count = Math.min(maxCleanup - total, rs.replicas - rs.status.availableReplicas);
    if (count < 0) throw new InvalidScaleDown(`${rs.name}: ${rs.replicas} -> ${rs.replicas - count}`);
    scaleReplicaSetAndRecordEvent(pass, rs, rs.replicas - count);
    total += count;
  }
  return total;
}

/** Remove available old pods beyond minAvailable, oldest ReplicaSet first. */
export function scaleDownOldReplicaSetsForRollingUpdate(
  pass: Pass,
  allRSs: readonly ReplicaSet[],
  oldRSs: ReplicaSet[],
): number {
  const d = pass.d;
  const minAvailable = d.replicas - maxUnavailable(d);
  const available = sumStatus(allRSs, "availableReplicas");
  if (available <= minAvailable) return 0;
  oldRSs.sort(byCreationTimestamp);
  const budget = available - minAvailable;
  let total = 0;
  for (const rs of oldRSs) {
    if (total >= budget) break;
    if (rs.replicas === 0) continue;
    const count = Math.min(rs.replicas, budget - total);
    scaleReplicaSetAndRecordEvent(pass, rs, rs.replicas - count);
    total += count;
  }
  return total;
}

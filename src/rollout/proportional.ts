// Scaling events: when the desired replica count changes mid-rollout (or while paused), every
// active ReplicaSet grows or shrinks in proportion to its share (Kubernetes' sync.go `scale`).
// Arithmetic is exact where Kubernetes multiplies in int32 and can wrap around (see "Intended
// differences" in README.md); a size is always kept within 0 … 2^31−1.
import { MAX_INT32, isRollingUpdate, maxSurge } from "./fenceposts.js";
import type { Deployment, Pass, ReplicaSet } from "./model.js";
import { bySizeNewer, bySizeOlder, filterActive, findActiveOrLatest, sumSpec } from "./replicasets.js";
import { scaleReplicaSet, scaleReplicaSetAndRecordEvent } from "./scaling.js";

/** Go's math.Round: halves away from zero. */
function roundHalfAwayFromZero(x: number): number {
  return x < 0 ? -Math.round(-x) : Math.round(x);
}

/**
 * round(size × newMax / oldMax), as Kubernetes computes it in float64, but without its int32
 * product (which wraps past 2^31−1); above 2^53 a double product loses digits, so BigInt.
 */
function roundedShare(size: number, newMax: number, oldMax: number): number {
  const product = size * newMax;
  if (Number.isSafeInteger(product)) return roundHalfAwayFromZero(product / oldMax);
  const p = BigInt(size) * BigInt(newMax);
  const q = BigInt(oldMax);
  // All positive here: round half up = floor((2p + q) / 2q).
  return Number((2n * p + q) / (2n * q));
}

/**
 * How much this ReplicaSet's share changes: its size times the new max (replicas + surge) over the
 * max recorded at its last scale (max-replicas annotation, else the deployment's status.replicas).
 */
export function replicaSetFraction(rs: ReplicaSet, d: Deployment, statusReplicas: number): number {
  if (d.replicas === 0) return -rs.replicas;
  const deploymentMax = d.replicas + maxSurge(d);
  let before = rs.maxReplicas ?? 0;
  if (before === 0) {
    before = statusReplicas;
    if (before === 0) return 0;
  }
  return roundedShare(rs.replicas, deploymentMax, before) - rs.replicas;
}

/** The change for one ReplicaSet, bounded by what is still left to add (or remove). */
export function proportion(
  rs: ReplicaSet,
  d: Deployment,
  statusReplicas: number,
  toAdd: number,
  added: number,
): number {
  if (rs.replicas === 0 || toAdd === 0 || toAdd === added) return 0;
  const fraction = replicaSetFraction(rs, d, statusReplicas);
  const allowed = toAdd - added;
  return toAdd > 0 ? Math.min(fraction, allowed) : Math.max(fraction, allowed);
}

export function isSaturated(d: Deployment, rs: ReplicaSet | undefined): boolean {
  if (rs === undefined || rs.desiredReplicas === null) return false;
  return rs.replicas === d.replicas && rs.desiredReplicas === d.replicas && rs.status.availableReplicas === d.replicas;
}

export function scale(pass: Pass, newRS: ReplicaSet | undefined, oldRSs: ReplicaSet[]): void {
  const d = pass.d;
  // One active ReplicaSet (or none): it gets everything.
  const activeOrLatest = findActiveOrLatest(newRS, oldRSs);
  if (activeOrLatest !== undefined) {
    if (activeOrLatest.replicas !== d.replicas) scaleReplicaSetAndRecordEvent(pass, activeOrLatest, d.replicas);
    // Intended difference `scaling-event-settles` (README.md): Kubernetes returns here without
    // rewriting the only active revision's desired-replicas annotation, so the scaling event is
    // seen again at every pass and a rolling update under way never goes on (a scale mid-rollout
    // to exactly the only active revision's size: frequent once an autoscaler sets the count).
    // The annotations are rewritten (no size change, no event), and the next pass rolls on.
    else if (activeOrLatest.replicas > 0 && activeOrLatest.desiredReplicas !== d.replicas)
      scaleReplicaSet(pass, activeOrLatest, d.replicas);
    return;
  }

  // The new ReplicaSet already runs everything: the old ones go to 0.
  if (isSaturated(d, newRS)) {
    for (const old of filterActive(oldRSs)) scaleReplicaSetAndRecordEvent(pass, old, 0);
    return;
  }

  if (!isRollingUpdate(d)) return;

  const active = filterActive([...oldRSs, newRS]);
  const allowedSize = d.replicas > 0 ? d.replicas + maxSurge(d) : 0;
  const toAdd = allowedSize - sumSpec(active);
  // Largest first; on equal sizes newer ones grow first and older ones shrink first.
  if (toAdd > 0) active.sort(bySizeNewer);
  else if (toAdd < 0) active.sort(bySizeOlder);

  let added = 0;
  const sizes = new Map<ReplicaSet, number>();
  for (const rs of active) {
    if (toAdd !== 0) {
      const p = proportion(rs, d, pass.status.replicas, toAdd, added);
      sizes.set(rs, rs.replicas + p);
      added += p;
    } else {
      sizes.set(rs, rs.replicas);
    }
  }

  active.forEach((rs, i) => {
    let size = sizes.get(rs) ?? rs.replicas;
    // Rounding leftovers go to the first (largest) ReplicaSet, never below 0.
    if (i === 0 && toAdd !== 0) size = size + (toAdd - added);
    // Every ReplicaSet is written (annotations too), as Kubernetes' forced update does.
    scaleReplicaSet(pass, rs, Math.min(MAX_INT32, Math.max(0, size)));
  });
}

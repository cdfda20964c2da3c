// Queries over ReplicaSets: sums, filters, the orderings Kubernetes sorts by, and revision numbers.
import type { ReplicaSet } from "./model.js";

export function sumSpec(list: readonly ReplicaSet[]): number {
  let n = 0;
  for (const rs of list) n += rs.replicas;
  return n;
}

/** Σ spec.replicas as listed at the start of the pass. */
export function sumListed(list: readonly ReplicaSet[]): number {
  let n = 0;
  for (const rs of list) n += rs.listed.replicas;
  return n;
}

export function sumStatus(list: readonly ReplicaSet[], field: keyof ReplicaSet["status"]): number {
  let n = 0;
  for (const rs of list) n += rs.status[field];
  return n;
}

/** Active = spec.replicas > 0. */
export function filterActive(list: readonly (ReplicaSet | undefined)[]): ReplicaSet[] {
  const out: ReplicaSet[] = [];
  for (const rs of list) if (rs !== undefined && rs.replicas > 0) out.push(rs);
  return out;
}

/** Oldest first; equal timestamps ordered by name. */
export function byCreationTimestamp(a: ReplicaSet, b: ReplicaSet): number {
  if (a.createdAtMs !== b.createdAtMs) return a.createdAtMs - b.createdAtMs;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

/** Largest first; equal sizes oldest first (used when scaling down). */
export function bySizeOlder(a: ReplicaSet, b: ReplicaSet): number {
  if (a.replicas !== b.replicas) return b.replicas - a.replicas;
  return byCreationTimestamp(a, b);
}

/** Largest first; equal sizes newest first (used when scaling up). */
export function bySizeNewer(a: ReplicaSet, b: ReplicaSet): number {
  if (a.replicas !== b.replicas) return b.replicas - a.replicas;
  return byCreationTimestamp(b, a);
}

/** Lowest revision first; equal revisions by creation time. */
export function byRevision(a: ReplicaSet, b: ReplicaSet): number {
  const ra = a.revision ?? 0;
  const rb = b.revision ?? 0;
  if (ra !== rb) return ra - rb;
  return byCreationTimestamp(a, b);
}

export function maxRevision(list: readonly ReplicaSet[]): number {
  let max = 0;
  for (const rs of list) max = Math.max(max, rs.revision ?? 0);
  return max;
}

/** The second-highest revision: what "roll back to the previous revision" means. */
export function lastRevision(list: readonly ReplicaSet[]): number {
  let max = 0;
  let second = 0;
  for (const rs of list) {
    const v = rs.revision ?? 0;
    if (v >= max) {
      second = max;
      max = v;
    } else if (v > second) {
      second = v;
    }
  }
  return second;
}

/**
 * The ReplicaSet to give all replicas when at most one is active: the only active one, or the
 * newest when none is (the new one if it exists). undefined when several are active.
 * Sorts `oldRSs` newest first in place, as Kubernetes does.
 */
export function findActiveOrLatest(newRS: ReplicaSet | undefined, oldRSs: ReplicaSet[]): ReplicaSet | undefined {
  if (newRS === undefined && oldRSs.length === 0) return undefined;
  oldRSs.sort((a, b) => byCreationTimestamp(b, a));
  const active = filterActive([...oldRSs, newRS]);
  if (active.length === 0) return newRS ?? oldRSs[0];
  if (active.length === 1) return active[0];
  return undefined;
}

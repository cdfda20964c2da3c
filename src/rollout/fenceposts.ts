// maxSurge / maxUnavailable resolution (Kubernetes util.ResolveFenceposts and friends).
import type { Deployment } from "./model.js";
import type { IntOrPercent } from "./types.js";

/** A percentage of `total`, rounded up or down; a plain integer as is. */
export function scaledValue(value: IntOrPercent, total: number, roundUp: boolean): number {
  if (typeof value === "number") return value;
  const percent = Number.parseInt(value.slice(0, -1), 10);
  // Same operation order as Go's float64 arithmetic, so rounding edges agree.
  const exact = (percent * total) / 100;
  return roundUp ? Math.ceil(exact) : Math.floor(exact);
}

/** Surge rounds up, unavailable rounds down; if both come out 0, one pod may be unavailable. */
export function resolveFenceposts(
  maxSurge: IntOrPercent,
  maxUnavailable: IntOrPercent,
  desired: number,
): { surge: number; unavailable: number } {
  const surge = scaledValue(maxSurge, desired, true);
  let unavailable = scaledValue(maxUnavailable, desired, false);
  if (surge === 0 && unavailable === 0) unavailable = 1;
  return { surge, unavailable };
}

export function isRollingUpdate(d: Deployment): boolean {
  return d.strategyType === "RollingUpdate";
}

export function maxSurge(d: Deployment): number {
  if (!isRollingUpdate(d)) return 0;
  return resolveFenceposts(d.maxSurge, d.maxUnavailable, d.replicas).surge;
}

/** Never more than the desired replicas; 0 for Recreate and for a deployment scaled to 0. */
export function maxUnavailable(d: Deployment): number {
  if (!isRollingUpdate(d) || d.replicas === 0) return 0;
  const { unavailable } = resolveFenceposts(d.maxSurge, d.maxUnavailable, d.replicas);
  return Math.min(unavailable, d.replicas);
}

export function hasProgressDeadline(d: Deployment): d is Deployment & { progressDeadlineSeconds: number } {
  return d.progressDeadlineSeconds !== null && d.progressDeadlineSeconds !== MAX_INT32;
}

export function hasRevisionHistoryLimit(d: Deployment): d is Deployment & { revisionHistoryLimit: number } {
  return d.revisionHistoryLimit !== null && d.revisionHistoryLimit !== MAX_INT32;
}

export const MAX_INT32 = 2147483647;

// The order of an environment's ReplicaSet changes in one region. ctrl's rollout engine keeps
// the sum of an environment's replicas within replicas + maxSurge at every step, pass by pass;
// but an agent that was cut off (a partition, a restart) receives several passes at once, and
// applying them key by key in parallel could grow the new ReplicaSet before the old one shrinks,
// over the surge bound for a moment. So a scale-up waits until every sibling whose desired
// replicas are below its live ones has been scaled down — as the Deployment controller's own
// passes would have done — for at most a bounded time (a sibling refused for good must not
// hold the environment back).

/** How long a scale-up waits for its siblings' scale-downs at most. */
export const SCALE_UP_WAIT_MS = 5_000;
/** How soon a waiting scale-up looks again. */
export const SCALE_UP_RECHECK_MS = 100;

export interface Sibling {
  readonly key: string;
  /** Its ReplicaSet's replicas in the cluster. */
  readonly liveReplicas: number;
  /** What ctrl wants now; undefined when ctrl no longer wants it here (a delete is pending). */
  readonly desiredReplicas: number | undefined;
}

/**
 * Pure: the siblings a change of `key` to `desired` replicas (from `live`, undefined when its
 * ReplicaSet does not exist yet) must wait for; empty when it is not a scale-up or none shrinks.
 */
export function scaleDownsFirst(
  key: string,
  desired: number,
  live: number | undefined,
  siblings: readonly Sibling[],
): string[] {
  if (desired <= (live ?? 0)) return [];
  return siblings.filter((s) => s.key !== key && s.liveReplicas > (s.desiredReplicas ?? 0)).map((s) => s.key);
}

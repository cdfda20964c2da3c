// What a region's sentinels measured, as the autoscaler takes it: the status documents the agent
// already reads from every sentinel pod (GET /status on the ops port: read-only, over the cluster
// network; the sentinel gets no write rights for this) added up per revision. Pure.
import type { SentinelStatus } from "../contracts/routing.js";
import type { RevisionLoad } from "./sizing.js";

export interface RegionLoad {
  readonly loads: readonly RevisionLoad[];
  /** The newest request any pod saw (unix ms); null: none since they started. */
  readonly lastRequestMs: number | null;
}

/**
 * The region's load from its sentinel pods' documents; null when it cannot be judged: no pod
 * answered, or one runs a sentinel that does not measure in-flight requests (an environment's
 * own sentinel image). The autoscaler then keeps the count as it is rather than act on a guess.
 */
export function regionLoad(pods: Iterable<SentinelStatus>): RegionLoad | null {
  const byRevision = new Map<string, { inFlight: number; ready: number }>();
  let last: number | null = null;
  let any = false;
  for (const doc of pods) {
    any = true;
    if (doc.lastRequestAt === undefined) return null;
    if (doc.lastRequestAt !== null) {
      const t = Date.parse(doc.lastRequestAt);
      if (Number.isNaN(t)) return null;
      last = last === null ? t : Math.max(last, t);
    }
    for (const r of doc.revisions) {
      if (r.inFlight === undefined || !Number.isFinite(r.inFlight) || r.inFlight < 0) return null;
      const prev = byRevision.get(r.deploymentId) ?? { inFlight: 0, ready: 0 };
      // Every pod sees the same endpoints; the requests in flight are each pod's own.
      byRevision.set(r.deploymentId, { inFlight: prev.inFlight + r.inFlight, ready: Math.max(prev.ready, r.routable) });
    }
  }
  if (!any) return null;
  return {
    loads: [...byRevision].map(([deploymentId, v]) => ({
      deploymentId,
      inFlight: v.inFlight,
      ready: v.ready,
      cpuPercent: null,
    })),
    lastRequestMs: last,
  };
}

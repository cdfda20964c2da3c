// The one resize a region's agent makes by itself: a settled environment's target revision to the
// count the region's autoscaler decided. The rollout engine runs in ctrl, so without this a region
// could not scale while ctrl is down; with it, the agent writes only what the engine would write.
//
// Settled means, as ctrl last streamed it: a target revision (the rolling engine's; progressive
// strategies size revisions their own way and have none here), sized at the region's count, and
// every other revision at 0. For such a region the Kubernetes Deployment controller's rules (and
// the engine's, src/rollout: a scaling event gives everything to the only active revision, or to
// the new one when none is active; a rolling update or Recreate from 0 grows the new one to the
// count in one step) give the target exactly the new count and leave the others at 0, whatever
// the strategy, surge, unavailability or pause. test/unit/autoscale/local.test.ts checks that
// against planRollout itself on generated settled regions.
//
// Anything else (a rollout under way, a canary, a blue-green preview, a revision at a size other
// than 0 or the count) is left to ctrl: the agent reports its decision and the engine sizes the
// revisions.

/** A revision of the environment as ctrl last streamed it to the region. */
export interface StreamedRevision {
  readonly deploymentId: string;
  /** Its size in ctrl's desired state (ApplyDeployment.replicas). */
  readonly replicas: number;
}

/** What ctrl last streamed about the region's count (ApplySentinel.autoscale_region). */
export interface StreamedRegion {
  readonly replicas: number;
  /** The rolling engine's target ("" or null: none, or a progressive strategy). */
  readonly targetDeploymentId: string | null;
}

/** The revision the agent may resize by itself, or null when the region is not settled. */
export function settledTarget(revisions: readonly StreamedRevision[], region: StreamedRegion): string | null {
  const t = region.targetDeploymentId;
  if (t === null || t === "") return null;
  let found = false;
  for (const r of revisions) {
    if (r.deploymentId === t) {
      if (r.replicas !== region.replicas) return null;
      found = true;
    } else if (r.replicas !== 0) return null;
  }
  return found ? t : null;
}

/**
 * Each revision's size once the region's count is `replicas`, as the engine would set it; null
 * when the region is not settled (then only ctrl resizes).
 */
export function localSizes(
  revisions: readonly StreamedRevision[],
  region: StreamedRegion,
  replicas: number,
): Map<string, number> | null {
  const t = settledTarget(revisions, region);
  if (t === null) return null;
  return new Map(revisions.map((r) => [r.deploymentId, r.deploymentId === t ? replicas : 0]));
}

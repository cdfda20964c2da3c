// Revision-history cleanup: keep at most revisionHistoryLimit old revisions, deleting the lowest
// revisions first, and only those fully scaled down (no desired and no existing pods).
//
// Kubernetes judges "scaled down" on the sizes listed at the start of the pass, so a paused pass
// that scales a revision to 0 keeps it until the next pass. It would also delete one that the
// same pass has just scaled up from 0; krane never deletes a revision it has just given pods
// (an intended difference, see README.md).
import { hasRevisionHistoryLimit } from "./fenceposts.js";
import type { Pass, ReplicaSet } from "./model.js";
import { byRevision } from "./replicasets.js";

export function cleanupDeployment(pass: Pass, oldRSs: readonly ReplicaSet[]): void {
  const d = pass.d;
  if (!hasRevisionHistoryLimit(d)) return;
  const cleanable = oldRSs.filter((rs) => !pass.deleted.includes(rs.name));
  const diff = cleanable.length - d.revisionHistoryLimit;
  if (diff <= 0) return;
  cleanable.sort(byRevision);
  // A revision that still has pods is skipped but still uses up one of the `diff` slots.
  for (const rs of cleanable.slice(0, diff)) {
    if (rs.status.replicas !== 0 || rs.listed.replicas !== 0) continue;
    if (rs.replicas !== 0) continue;
    pass.deleted.push(rs.name);
  }
}

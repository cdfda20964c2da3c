// Revision-history cleanup: keep at most revisionHistoryLimit old revisions, deleting the lowest
// revisions first, and only those fully scaled down (no desired and no existing pods).
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
    if (rs.status.replicas !== 0 || rs.replicas !== 0) continue;
    pass.deleted.push(rs.name);
  }
}

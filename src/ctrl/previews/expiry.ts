// Previews whose TTL passed are deleted by ctrl itself, on its upkeep's work queue (a periodic
// task: ../server/server.ts): each one's deletion is audited with ctrl as the actor
// ("system/PreviewExpired"). Idempotent and safe on several ctrl replicas at once (a preview
// already being deleted is skipped; deleting twice is a no-op).
import { auditedWork } from "../audit/recorder.js";
import { environmentSubjectById } from "../audit/views.js";
import type { Store } from "../db/store.js";
import { deletePreviewIn } from "../domain/preview-lifecycle.js";
import { expiredPreviews } from "../domain/previews.js";

/** Deletes up to `limit` expired previews; returns how many it started deleting. */
export async function expirePreviews(store: Store, now: number, limit = 100): Promise<number> {
  let n = 0;
  for (const p of await expiredPreviews(store.db, now, limit)) {
    await auditedWork(
      {
        method: "system/PreviewExpired",
        requestId: "",
        clientIp: "",
        userAgent: "",
        idempotencyKey: "",
        actor: () => ({ kind: "system", id: "ctrl", name: "ctrl" }),
      },
      (db) =>
        p.environment_id === null
          ? Promise.resolve({ workspaceId: p.workspace_id, targets: [p.workspace_id, p.project_id, p.id], view: null })
          : environmentSubjectById(db, p.environment_id),
      () => store.write((tx) => deletePreviewIn(tx, p)),
    );
    n++;
  }
  return n;
}

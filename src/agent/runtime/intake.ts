// Stream intake: what a controller does with each action of its desired-state stream (the
// cursor's output): validate and store an apply or delete and queue its key; on a snapshot, send
// every status again; after a snapshot, delete what it no longer names.
import type { ControllerCore } from "./core.js";
import type { CursorAction } from "./cursor.js";

export function takeStreamAction<Msg, D, Del, R>(c: ControllerCore<Msg, D, Del, R>, a: CursorAction<D, Del>): void {
  const decl = c.decl;
  const rec = decl.reconciler;
  switch (a.type) {
    case "snapshot-started":
      // ctrl may have lost what it was told: every status is computed and sent again.
      c.link.forgetReports();
      c.statusClean.clear();
      return;
    case "apply": {
      const reason = rec.validate(a.desired);
      if (reason !== undefined) {
        // What was accepted before stays desired (and repaired); the new state is refused.
        c.reject(a.key, { desired: a.desired }, reason);
        return;
      }
      c.desired.apply(a.key, a.desired);
      c.queue.add(a.key, { resetBackoff: true });
      return;
    }
    case "delete": {
      const reason = rec.validateDelete(a.ref);
      if (reason !== undefined) {
        c.reject(a.key, { ref: a.ref }, reason);
        return;
      }
      c.desired.delete(a.key, a.ref);
      c.queue.add(a.key, { resetBackoff: true });
      return;
    }
    case "collect-garbage": {
      for (const obj of c.primary.values()) {
        const key = decl.primary.keyOf(obj);
        if (key === undefined || a.keep.has(key)) continue;
        c.desired.delete(key, decl.primary.refOf(obj));
        c.m.resyncRepairs.inc({ controller: decl.name, reason: "snapshot-gc" });
        c.queue.add(key, { resetBackoff: true });
      }
      // Keys this agent believed active that the snapshot no longer names (and that have no
      // object) are forgotten.
      for (const [key, e] of [...c.desired.entries()]) {
        if (e.type === "apply" && !a.keep.has(key) && !c.primaryOf(key)) c.desired.forget(key);
      }
      return;
    }
  }
}

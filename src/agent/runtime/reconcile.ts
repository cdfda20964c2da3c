// One reconcile of one key → Result: an active key's rendered (and derived) objects are applied
// when some differ from the caches, what it no longer renders is pruned, and its status is
// computed when an event may have changed it; a deleted key's objects are removed and ctrl told.
// A kind's requeue comes back as a result; a refusal the API server will repeat (400, 403, 422)
// makes the key terminal (reported as rejected, looked at again by the next resync); any other
// error retries with the key's backoff.
import { isPermanentKubeError } from "../../kube/client.js";
import { Result } from "../../retry/queue.js";
import type { ControllerCore } from "./core.js";

export async function reconcileKey<Msg, D, Del, R>(
  c: ControllerCore<Msg, D, Del, R>,
  key: string,
  signal: AbortSignal,
): Promise<Result> {
  const entry = c.desired.get(key);
  if (!entry) return Result.done; // unknown: the stream, a snapshot or a resync will tell
  const rec = c.decl.reconciler;
  const op = entry.type;
  const labels = { controller: c.name, op };
  const started = performance.now();
  try {
    if (entry.type === "apply") {
      if (entry.terminal === undefined) {
        const derived = rec.derive?.(key, entry.desired, c.ctx);
        const objects = derived && derived.length > 0 ? [...entry.rendered, ...derived] : entry.rendered;
        if (c.writes.driftOf(objects) === undefined) c.m.reconcileSkipped.inc({ controller: c.name });
        else {
          const wait = await rec.apply(entry.desired, objects, c.ctx, signal);
          if (wait) {
            c.m.reconciles.inc({ ...labels, result: "deferred" });
            return Result.requeueAfter(wait.requeueAfterMs);
          }
        }
        await c.writes.prune(key, objects, signal);
      }
      // Synchronous from here to the mark: an event that arrives later marks the key again.
      const s = rec.status && !c.statusClean.has(key) ? rec.status(key, entry.desired, c.ctx) : undefined;
      if (s) {
        c.statusClean.add(key);
        c.m.reportsComputed.inc({ controller: c.name });
        c.link.report(key, s.fingerprint, s.report);
      }
    } else {
      await rec.remove(key, entry.ref, c.ctx, signal);
      await c.writes.prune(key, [], signal);
      c.statusClean.delete(key);
      c.link.deleted(key, entry.ref);
      c.desired.forgetIf(key, entry);
    }
    c.m.reconciles.inc({ ...labels, result: "ok" });
    return Result.done;
  } catch (err) {
    if (signal.aborted) return Result.done;
    if (isPermanentKubeError(err)) {
      const reason = err instanceof Error ? err.message : String(err);
      c.m.reconciles.inc({ ...labels, result: "terminal" });
      if (entry.type === "apply") {
        entry.terminal = reason;
        c.reject(key, { desired: entry.desired }, reason);
      } else {
        c.reject(key, { ref: entry.ref }, reason);
      }
      return Result.terminal(reason);
    }
    c.m.reconciles.inc({ ...labels, result: "error" });
    return Result.retry(err);
  } finally {
    c.m.reconcileSeconds.observe(labels, (performance.now() - started) / 1000);
  }
}

// One reconcile of one key → Result, and the services a kind's reconcile calls. The kind's
// `reconcile(key)` decides what to write and in which order; the runtime gives it the key's
// desired state, brings objects to the caches' terms (`sync`: write when some differ, then prune
// what the key no longer renders), reports status when an event may have changed it, and ends a
// deleted key (`deleted`). A kind's requeue comes back as a result; a refusal the API server will
// repeat (400, 403, 422) makes the key terminal (reported as rejected, looked at again by the
// next resync); any other error retries with the key's backoff.
import { isPermanentKubeError } from "../../kube/client.js";
import type { KubeObject } from "../../kube/object.js";
import { Result } from "../../retry/queue.js";
import type { StatusReport, Want } from "./builder.js";
import type { ControllerCore } from "./core.js";

export async function reconcileKey<Msg, D, Del, R>(
  c: ControllerCore<Msg, D, Del, R>,
  key: string,
  signal: AbortSignal,
): Promise<Result> {
  const entry = c.desired.get(key);
  if (!entry) return Result.done; // unknown: the stream, a snapshot or a resync will tell
  const labels = { controller: c.name, op: entry.type };
  const started = performance.now();
  try {
    const result = await c.decl.reconciler.reconcile(key, entry, c.ctx, signal);
    if (result.type === "terminal") return refused(c, key, entry, result.reason, labels);
    const outcome = result.type === "requeue" ? "deferred" : result.type === "retry" ? "error" : "ok";
    c.m.reconciles.inc({ ...labels, result: outcome });
    return result;
  } catch (err) {
    if (signal.aborted) return Result.done;
    if (isPermanentKubeError(err))
      return refused(c, key, entry, err instanceof Error ? err.message : String(err), labels);
    c.m.reconciles.inc({ ...labels, result: "error" });
    return Result.retry(err);
  } finally {
    c.m.reconcileSeconds.observe(labels, (performance.now() - started) / 1000);
  }
}

/** A key the API server refused for good: not applied again until its desired state changes or a resync. */
function refused<Msg, D, Del, R>(
  c: ControllerCore<Msg, D, Del, R>,
  key: string,
  entry: Want<D, Del>,
  reason: string,
  labels: { controller: string; op: string },
): Result {
  c.m.reconciles.inc({ ...labels, result: "terminal" });
  if (entry.type === "apply") {
    entry.terminal = reason;
    c.reject(key, { desired: entry.desired }, reason);
  } else {
    c.reject(key, { ref: entry.ref }, reason);
  }
  return Result.terminal(reason);
}

/** KindContext.sync: see there. */
export async function syncKey<Msg, D, Del, R>(
  c: ControllerCore<Msg, D, Del, R>,
  key: string,
  objects: readonly KubeObject[],
  signal: AbortSignal,
  write: () => Promise<Result | void>,
): Promise<Result> {
  const entry = c.desired.get(key);
  if (entry?.type === "apply" && entry.terminal !== undefined) return Result.done;
  if (c.writes.driftOf(objects) === undefined) c.m.reconcileSkipped.inc({ controller: c.name });
  else {
    const r = await write();
    if (r && r.type !== "done") return r;
  }
  await c.writes.prune(key, objects, signal);
  return Result.done;
}

/** KindContext.report: see there. */
export function reportStatus<Msg, D, Del, R>(
  c: ControllerCore<Msg, D, Del, R>,
  key: string,
  status: () => StatusReport<R> | undefined,
): void {
  if (c.statusClean.has(key)) return;
  // Synchronous from here to the mark: an event that arrives later marks the key again.
  const s = status();
  if (!s) return;
  c.statusClean.add(key);
  c.m.reportsComputed.inc({ controller: c.name });
  c.link.report(key, s.fingerprint, s.report);
}

/** KindContext.deleted: see there. */
export async function deletedKey<Msg, D, Del, R>(
  c: ControllerCore<Msg, D, Del, R>,
  key: string,
  want: Want<D, Del> & { readonly type: "delete" },
  signal: AbortSignal,
): Promise<Result> {
  await c.writes.prune(key, [], signal);
  c.statusClean.delete(key);
  c.link.deleted(key, want.ref);
  c.desired.forgetIf(key, want);
  return Result.done;
}

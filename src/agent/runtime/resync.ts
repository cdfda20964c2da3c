// Resync: a periodic check of everything this controller knows against ctrl (batched point reads
// of every live primary object's key and every active desired key). Keys whose answer differs
// from what the caches hold are queued — drift, a deletion ctrl has and the agent missed, an
// orphan ctrl does not know — and nothing is written or recomputed when nothing drifted.
import { sleep } from "../../retry/backoff.js";
import type { ControllerCore } from "./core.js";
import type { DesiredEntry } from "./desired.js";

/** One resync pass (see the file's comment). */
export async function resyncPass<Msg, D, Del, R>(
  c: ControllerCore<Msg, D, Del, R>,
  signal: AbortSignal,
): Promise<void> {
  const decl = c.decl;
  const rec = decl.reconciler;
  const labels = { controller: decl.name };
  const keys = new Set<string>(c.desired.activeKeys());
  for (const obj of c.primary.values()) {
    const k = decl.primary.keyOf(obj);
    if (k !== undefined) keys.add(k);
  }
  const candidates = [...keys];
  const batchSize = c.opts.resyncBatchSize ?? 500;
  const tracker = c.desired.track();
  try {
    for (let i = 0; i < candidates.length && !signal.aborted; i += batchSize) {
      const batch = candidates.slice(i, i + batchSize);
      const answer = await c.link.readDesired(batch, signal);
      let n = 0;
      for (const entry of answer.states) {
        // Comparing thousands of objects is CPU work: let the stream, watches and queue run
        // in between so a resync never stalls change propagation.
        if (++n % 50 === 0) await new Promise<void>((r) => setImmediate(r));
        if (tracker.touched.has(entry.key)) continue;
        if (entry.type === "apply") {
          const prev = c.desired.get(entry.key);
          // What is stored was validated when it was accepted: only a changed state is checked.
          const same = prev?.type === "apply" && decl.protocol.equal(prev.desired, entry.desired);
          const reason = same ? undefined : rec.validate(entry.desired);
          if (reason !== undefined) {
            c.reject(entry.key, { desired: entry.desired }, reason);
            continue;
          }
          let e: DesiredEntry<D, Del>;
          if (same && prev?.type === "apply") {
            e = prev;
            // A terminal failure is looked at again once per resync (its cause may be gone).
            if (e.type === "apply" && e.terminal !== undefined) {
              e.terminal = undefined;
              c.queue.add(entry.key);
              continue;
            }
          } else {
            e = c.desired.apply(entry.key, entry.desired);
          }
          const drift = e.type === "apply" ? c.writes.driftOf(e.rendered) : undefined;
          if (drift !== undefined) {
            c.m.resyncRepairs.inc({ ...labels, reason: "drift" });
            c.env.log.info({ controller: decl.name, key: entry.key, field: drift }, "drift found; re-applying");
            c.queue.add(entry.key);
          } else if (prev !== e) {
            c.queue.add(entry.key);
          }
        } else {
          c.desired.delete(entry.key, entry.ref);
          if (c.primaryOf(entry.key)) {
            c.m.resyncRepairs.inc({ ...labels, reason: "deleted" });
            c.queue.add(entry.key);
          }
        }
      }
      for (const key of answer.notFound) {
        if (tracker.touched.has(key)) continue;
        const live = c.primaryOf(key);
        if (live) {
          c.m.resyncRepairs.inc({ ...labels, reason: "orphan" });
          c.env.log.info({ controller: decl.name, key }, "orphan found (ctrl does not know it); deleting");
          c.desired.delete(key, decl.primary.refOf(live));
          c.queue.add(key);
        } else {
          c.desired.forget(key);
        }
      }
    }
  } finally {
    tracker.stop();
  }
  if (rec.collectGarbage && !signal.aborted) {
    const active = new Set<string>(c.desired.activeKeys());
    for (const obj of c.primary.values()) {
      const k = decl.primary.keyOf(obj);
      if (k !== undefined && c.desired.get(k)?.type !== "delete") active.add(k);
    }
    await rec.collectGarbage(c.ctx, active, signal);
  }
}

/** Runs `pass` about every `resyncPeriodMs` (default one minute) until `signal` aborts. */
export async function resyncLoop<Msg, D, Del, R>(
  c: ControllerCore<Msg, D, Del, R>,
  signal: AbortSignal,
  pass: (signal: AbortSignal) => Promise<void>,
): Promise<void> {
  const period = c.opts.resyncPeriodMs ?? 60_000;
  const labels = { controller: c.name };
  while (!signal.aborted) {
    // ±10 % jitter keeps the agents of many clusters from resyncing in lockstep.
    await sleep(period * (0.9 + Math.random() * 0.2), signal);
    if (signal.aborted) break;
    try {
      await pass(signal);
      c.m.resyncs.inc({ ...labels, result: "ok" });
    } catch (err) {
      c.m.resyncs.inc({ ...labels, result: "error" });
      c.env.log.warn({ controller: c.name, err: err instanceof Error ? err.message : String(err) }, "resync failed");
    }
  }
}

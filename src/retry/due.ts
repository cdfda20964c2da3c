// Work that is due: claim what is due → queue its keys → reconcile each. The shape ctrl's
// background loops share (the rollout driver, custom domains' checks, previews' commit statuses,
// the audit log's webhook sink): a sweep every `sweepIntervalMs` asks `due` for the keys whose
// work has come (claiming them, where several ctrl replicas share the work, is `due`'s business)
// and adds them to a WorkQueue (./queue.ts), which runs `reconcile(key)` one key at a time with
// the key's own backoff. Sweeps never overlap (a slow one makes the next tick a no-op; a caller's sweep() waits for it and sweeps again); a failed
// sweep goes to `onSweepError` and the next tick tries again. Callers can also add keys directly
// (an API call, a report). A sweep runs in the DueWork's own async context, as the queue's runs do:
// ctrl's write hooks of the API call that asked for it (the audit log's, an idempotency key's)
// must not join the claims it writes. It is a Runnable (../base/lifecycle.ts): start schedules the sweeps,
// stop ends them and waits for the runs in flight.
import { AsyncResource } from "node:async_hooks";
import type { Runnable } from "../base/lifecycle.js";
import type { BackoffPolicy } from "./backoff.js";
import { WorkQueue, type Result } from "./queue.js";

export interface DueWorkOptions {
  /** Names the part (logs, a stuck stop). */
  readonly name: string;
  /** The keys whose work is due now, at most `limit` (claiming them where that is needed). */
  readonly due: (limit: number) => Promise<readonly string[]>;
  readonly reconcile: (key: string, signal: AbortSignal) => Promise<Result>;
  /** How often `due` is asked (ms); 0: never (keys come only from callers). */
  readonly sweepIntervalMs: number;
  /** Keys taken per sweep. */
  readonly sweepLimit: number;
  readonly concurrency: number;
  /** The per-key backoff of a failed reconcile. */
  readonly retry: BackoffPolicy;
  /** Sweep once as soon as started, not only after the first interval. */
  readonly sweepAtStart?: boolean;
  /** A sweep resolves once the runs it caused have ended (default: once they are queued). */
  readonly sweepWaitsForRuns?: boolean;
  /** Told of a sweep that failed (the next tick tries again). */
  readonly onSweepError: (err: unknown) => void;
  /** Told after every run (logs, metrics). */
  readonly onResult?: (key: string, result: Result, durationMs: number) => void;
}

export class DueWork implements Runnable {
  readonly name: string;
  readonly #o: DueWorkOptions;
  readonly #queue: WorkQueue;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again: Promise<void> | undefined;
  #stopped = false;
  /** The async context sweeps run in: the DueWork's own, never that of whoever asked for a sweep. */
  readonly #context = new AsyncResource("krane.DueWork");

  constructor(o: DueWorkOptions) {
    this.#o = o;
    this.name = o.name;
    this.#queue = new WorkQueue({
      concurrency: o.concurrency,
      retry: o.retry,
      reconcile: o.reconcile,
      ...(o.onResult ? { onResult: o.onResult } : {}),
    });
  }

  start(): void {
    if (this.#timer !== undefined || this.#stopped) return;
    if (this.#o.sweepIntervalMs > 0) {
      this.#timer = setInterval(() => this.#tick(), this.#o.sweepIntervalMs);
      this.#timer.unref();
    }
    if (this.#o.sweepAtStart) this.#tick();
  }

  /**
   * Queues the keys whose work is due now; resolves once a sweep that began after this call has
   * (a call while one runs waits for it, then sweeps once more for every such caller). Never rejects.
   */
  sweep(): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    if (this.#running === undefined) return this.#sweepOnce();
    this.#again ??= this.#running.then(() => {
      this.#again = undefined;
      return this.#sweepOnce();
    });
    return this.#again;
  }

  /** The timer's sweep: skipped while one runs, so slow sweeps never pile up. */
  #tick(): void {
    if (this.#running === undefined) void this.#sweepOnce();
  }

  #sweepOnce(): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    const run = this.#context.runInAsyncScope(async () => {
      try {
        const keys = await this.#o.due(this.#o.sweepLimit);
        if (this.#o.sweepWaitsForRuns) await Promise.all(keys.map((k) => this.#queue.addAndWait(k)));
        else for (const k of keys) this.#queue.add(k);
      } catch (err) {
        this.#o.onSweepError(err);
      } finally {
        this.#running = undefined;
      }
    });
    this.#running = run;
    return run;
  }

  /** Runs `key` as soon as a slot is free (once more after a run in progress). */
  add(key: string, opts?: { resetBackoff?: boolean }): void {
    this.#queue.add(key, opts);
  }

  /** add(key), resolving when the run it caused has ended (or the work stopped). */
  addAndWait(key: string, opts?: { resetBackoff?: boolean }): Promise<void> {
    return this.#queue.addAndWait(key, opts);
  }

  /** Resolves when no key is queued, running or waiting for a retry. */
  idle(): Promise<void> {
    return this.#queue.drained();
  }

  /** Ends the sweeps and the queue; waits for the runs in flight. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== undefined) clearInterval(this.#timer);
    await this.#queue.stop();
  }
}

/**
 * A part's upkeep as a DueWork: one key at a time, a sweep at start, sweeps that wait for their
 * runs, and every failure (of a sweep or a run) told to `failed`.
 */
export function upkeepWork(
  o: Pick<DueWorkOptions, "name" | "due" | "reconcile" | "sweepIntervalMs" | "sweepLimit" | "retry">,
  failed: (err: unknown) => void,
): DueWork {
  return new DueWork({
    ...o,
    concurrency: 1,
    sweepAtStart: true,
    sweepWaitsForRuns: true,
    onSweepError: failed,
    onResult: (_key, r) => {
      if (r.type === "retry") failed(r.error);
    },
  });
}

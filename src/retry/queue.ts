// A keys-only work queue with per-key retry, shaped like client-go's workqueue. The agent's
// controllers, ctrl's rollout driver, its domain checks and its periodic upkeep all run on it.
//
// - The queue holds keys, never items: reconcile(key) reads the latest state for the key when it
//   runs, so a burst of events for one key becomes one run (coalescing) and nothing stale is
//   ever applied.
// - One key runs at a time; a key added while it runs runs once more afterwards. Different keys
//   run in parallel, up to `concurrency`.
// - reconcile answers a Result: done; requeue after a delay (not a failure: "look again then");
//   retry (a failure: the key's own full-jitter exponential backoff, growing until a run
//   succeeds); terminal (will not succeed until its input changes: not retried). A thrown
//   error is classified by `classify` (default: retry).
// - add() runs the key as soon as a slot is free, cancelling a pending delay; addAfter() keeps
//   the earliest of several delays. A key's backoff survives add() (events must not reset a
//   failing key's backoff) unless the caller says its input changed (`resetBackoff`).
// - A reconcile runs in the queue's own async context (the one it was made in), never in the
//   context of whoever added the key: context-bound state of a caller (ctrl's write hooks of one
//   API call, ../ctrl/db/write-hook.ts) must not join work the queue does for any key.
// Memory is one small entry per key with work; idle keys cost nothing.
import { AsyncResource } from "node:async_hooks";
import { setMaxListeners } from "node:events";
import { Backoff, type BackoffPolicy, type RandomSource } from "./backoff.js";

export type Result =
  | { readonly type: "done" }
  | { readonly type: "requeue"; readonly afterMs: number }
  | { readonly type: "retry"; readonly error: unknown; readonly afterMs?: number }
  | { readonly type: "terminal"; readonly reason: string };

export const Result = {
  done: { type: "done" } as Result,
  requeueAfter: (afterMs: number): Result => ({ type: "requeue", afterMs: Math.max(0, afterMs) }),
  retry: (error: unknown, afterMs?: number): Result =>
    afterMs === undefined ? { type: "retry", error } : { type: "retry", error, afterMs },
  terminal: (reason: string): Result => ({ type: "terminal", reason }),
};

export interface WorkQueueOptions {
  readonly concurrency: number;
  readonly reconcile: (key: string, signal: AbortSignal) => Promise<Result>;
  /** The per-key backoff of `retry` results. */
  readonly retry: BackoffPolicy;
  readonly random?: RandomSource;
  /** Turns a thrown error into a result (default: retry with backoff). */
  readonly classify?: (err: unknown) => Result;
  /** Called after every run (metrics, logs). */
  readonly onResult?: (key: string, result: Result, durationMs: number) => void;
}

interface Entry {
  /** Waiting in the ready list. */
  queued: boolean;
  running: boolean;
  /** Added while running: run again afterwards. */
  dirty: boolean;
  timer: NodeJS.Timeout | undefined;
  timerAt: number;
  /** The pending timer is a retry (work not done), not a requeue. */
  retrying: boolean;
  backoff: Backoff | undefined;
  /** Resolved when the next run that starts ends. */
  waiters: Array<() => void>;
  /** Counted in `size` (queued, running or retrying) and in `retrying`, as last synced. */
  busy: boolean;
  retryCounted: boolean;
}

export class WorkQueue {
  readonly #o: WorkQueueOptions;
  readonly #entries = new Map<string, Entry>();
  readonly #ready: string[] = [];
  #readyHead = 0;
  #running = 0;
  /** Entries queued, running or retrying, and entries retrying (kept so `size` is O(1)). */
  #busy = 0;
  #retrying = 0;
  #stopped = false;
  readonly #abort = new AbortController();
  readonly #inFlight = new Set<Promise<void>>();
  #idleWaiters: Array<() => void> = [];
  /** The async context reconciles run in: the queue's, not the caller's of add(). */
  readonly #context = new AsyncResource("krane.WorkQueue");

  constructor(opts: WorkQueueOptions) {
    if (!(opts.concurrency >= 1)) throw new Error("concurrency must be >= 1");
    this.#o = opts;
    // Every running reconcile's requests listen on this one signal.
    setMaxListeners(0, this.#abort.signal);
  }

  /** Runs `key` as soon as a slot is free (once more after a run in progress). */
  add(key: string, opts: { resetBackoff?: boolean } = {}): void {
    if (this.#stopped) return;
    const e = this.#entry(key);
    if (opts.resetBackoff) e.backoff?.reset();
    this.#clearTimer(e);
    if (e.running) e.dirty = true;
    else if (!e.queued) this.#markReady(key, e);
    this.#pump();
  }

  /** Runs `key` after `ms`, unless it runs earlier anyway (the earliest of several wins). */
  addAfter(key: string, ms: number): void {
    this.#schedule(key, Date.now() + Math.max(0, ms), false);
  }

  /** add(key), resolving when the run it caused has ended (or the queue stopped). */
  addAndWait(key: string, opts: { resetBackoff?: boolean } = {}): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    const e = this.#entry(key);
    const p = new Promise<void>((resolve) => e.waiters.push(resolve));
    this.add(key, opts);
    return p;
  }

  /** True when `key` is queued, running or waiting for a retry. */
  has(key: string): boolean {
    const e = this.#entries.get(key);
    return e !== undefined && (e.queued || e.running || e.retrying);
  }

  /** Keys queued, running or waiting for a retry. */
  get size(): number {
    return this.#busy;
  }

  /** Keys waiting for a retry after a failure. */
  get retrying(): number {
    return this.#retrying;
  }

  /** Resolves when no key is queued, running or waiting for a retry (requeues do not count). */
  drained(): Promise<void> {
    if (this.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Stops taking work, cancels delays, aborts running reconciles and waits for them. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#abort.abort();
    for (const e of this.#entries.values()) this.#clearTimer(e);
    await Promise.allSettled([...this.#inFlight]);
    for (const e of this.#entries.values()) {
      for (const w of e.waiters.splice(0)) w();
      // Forgotten by the counters: a run still finishing must not count them down again.
      e.busy = e.queued = e.running = e.retrying = e.retryCounted = false;
    }
    this.#entries.clear();
    this.#busy = 0;
    this.#retrying = 0;
    this.#notifyIdle();
  }

  #entry(key: string): Entry {
    let e = this.#entries.get(key);
    if (!e) {
      e = {
        queued: false,
        running: false,
        dirty: false,
        timer: undefined,
        timerAt: 0,
        retrying: false,
        backoff: undefined,
        waiters: [],
        busy: false,
        retryCounted: false,
      };
      this.#entries.set(key, e);
    }
    return e;
  }

  #schedule(key: string, at: number, retrying: boolean): void {
    if (this.#stopped) return;
    const e = this.#entry(key);
    if (e.queued || e.dirty) return; // runs sooner anyway
    if (e.timer !== undefined && e.timerAt <= at) {
      e.retrying ||= retrying;
      this.#sync(e);
      return;
    }
    this.#clearTimer(e);
    e.timerAt = at;
    e.retrying = retrying;
    this.#sync(e);
    e.timer = setTimeout(
      () => {
        e.timer = undefined;
        e.retrying = false;
        if (e.running) e.dirty = true;
        else if (!e.queued) this.#markReady(key, e);
        this.#sync(e);
        this.#pump();
      },
      Math.max(0, at - Date.now()),
    );
    // A requeue alone must not keep the process alive; a retry is work still to do.
    if (!retrying) e.timer.unref();
  }

  #clearTimer(e: Entry): void {
    if (e.timer !== undefined) clearTimeout(e.timer);
    e.timer = undefined;
    e.retrying = false;
    this.#sync(e);
  }

  #markReady(key: string, e: Entry): void {
    e.queued = true;
    this.#ready.push(key);
    this.#sync(e);
  }

  /** Brings the counters behind `size` and `retrying` up to date with an entry's flags. */
  #sync(e: Entry): void {
    const busy = e.queued || e.running || e.retrying;
    if (busy !== e.busy) {
      this.#busy += busy ? 1 : -1;
      e.busy = busy;
    }
    if (e.retrying !== e.retryCounted) {
      this.#retrying += e.retrying ? 1 : -1;
      e.retryCounted = e.retrying;
    }
  }

  #pump(): void {
    while (!this.#stopped && this.#running < this.#o.concurrency && this.#readyHead < this.#ready.length) {
      const key = this.#ready[this.#readyHead++] as string;
      if (this.#readyHead > 1024 && this.#readyHead * 2 > this.#ready.length) {
        this.#ready.splice(0, this.#readyHead);
        this.#readyHead = 0;
      }
      const e = this.#entries.get(key);
      if (!e || !e.queued) continue;
      e.queued = false;
      e.running = true;
      this.#sync(e);
      this.#running++;
      const waiters = e.waiters.splice(0);
      const p = this.#context.runInAsyncScope(() => this.#run(key, e, waiters));
      this.#inFlight.add(p);
      void p.finally(() => this.#inFlight.delete(p));
    }
  }

  async #run(key: string, e: Entry, waiters: Array<() => void>): Promise<void> {
    const started = performance.now();
    let result: Result;
    try {
      result = await this.#o.reconcile(key, this.#abort.signal);
    } catch (err) {
      result = this.#o.classify?.(err) ?? Result.retry(err);
    }
    e.running = false;
    this.#sync(e);
    this.#running--;
    this.#o.onResult?.(key, result, performance.now() - started);
    if (!this.#stopped) {
      if (result.type === "retry") {
        e.backoff ??= new Backoff(this.#o.retry, this.#o.random);
        const delay = result.afterMs ?? e.backoff.next();
        if (!e.dirty) this.#schedule(key, Date.now() + delay, true);
      } else {
        e.backoff?.reset();
        if (result.type === "requeue" && !e.dirty) this.#schedule(key, Date.now() + result.afterMs, false);
      }
      if (e.dirty) {
        e.dirty = false;
        this.#markReady(key, e);
      }
    }
    for (const w of waiters) w();
    if (!e.queued && !e.running && e.timer === undefined && e.waiters.length === 0) this.#entries.delete(key);
    this.#pump();
    this.#notifyIdle();
  }

  #notifyIdle(): void {
    if (this.#idleWaiters.length === 0 || this.size !== 0) return;
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const w of waiters) w();
  }
}

// A per-key work queue (DESIGN §6.2–6.3).
//
// - One key's items are handled one at a time, in arrival order; an item that arrives while an
//   older one is waiting replaces it (latest wins: items are full desired states, so only the
//   newest matters).
// - Different keys run in parallel, up to `concurrency`.
// - A failing item is retried with that key's own jittered exponential backoff, without blocking
//   other keys or the producer; a newer item for the key cancels the wait and runs at once.
// Memory is bounded by the number of distinct keys (at most one waiting item per key).
import { setMaxListeners } from "node:events";
import { Backoff, type BackoffPolicy, type RandomSource } from "../../retry/backoff.js";

export type WorkResult = "success" | "error";

export interface WorkQueueOptions<T> {
  readonly concurrency: number;
  readonly handle: (key: string, item: T, signal: AbortSignal) => Promise<void>;
  readonly retry: BackoffPolicy;
  readonly random?: RandomSource;
  /** Called after every attempt (metrics, logs). */
  readonly onResult?: (key: string, result: WorkResult, durationMs: number, err?: unknown) => void;
  /** Overrides the backoff delay for a given error (e.g. a breaker's retry-after). */
  readonly retryAfter?: (err: unknown) => number | undefined;
}

interface Entry<T> {
  pending: T | undefined;
  hasPending: boolean;
  running: boolean;
  queued: boolean;
  timer: NodeJS.Timeout | undefined;
  backoff: Backoff;
}

export class KeyedWorkQueue<T> {
  readonly #opts: WorkQueueOptions<T>;
  readonly #entries = new Map<string, Entry<T>>();
  readonly #ready: string[] = [];
  #readyHead = 0;
  #running = 0;
  #stopped = false;
  readonly #abort = new AbortController();
  readonly #inFlight = new Set<Promise<void>>();
  #idleWaiters: Array<() => void> = [];

  constructor(opts: WorkQueueOptions<T>) {
    if (opts.concurrency < 1) throw new Error("concurrency must be >= 1");
    this.#opts = opts;
    // Every running handler's requests listen on this one signal.
    setMaxListeners(0, this.#abort.signal);
  }

  /** Queues `item` for `key`, replacing any item of that key that has not started yet. */
  add(key: string, item: T): void {
    if (this.#stopped) return;
    let e = this.#entries.get(key);
    if (!e) {
      e = {
        pending: undefined,
        hasPending: false,
        running: false,
        queued: false,
        timer: undefined,
        backoff: new Backoff(this.#opts.retry, this.#opts.random),
      };
      this.#entries.set(key, e);
    }
    e.pending = item;
    e.hasPending = true;
    e.backoff.reset();
    if (e.timer) {
      clearTimeout(e.timer);
      e.timer = undefined;
    }
    if (!e.running && !e.queued) this.#markReady(key, e);
    this.#pump();
  }

  /** True when `key` has an item waiting, running or waiting for a retry. */
  has(key: string): boolean {
    return this.#entries.has(key);
  }

  /** Keys with work (waiting, running or retrying). */
  get size(): number {
    return this.#entries.size;
  }

  /** Keys currently waiting for a retry after a failure. */
  get retrying(): number {
    let n = 0;
    for (const e of this.#entries.values()) if (e.timer) n++;
    return n;
  }

  /** Resolves when no key has work at all (including retries). */
  drained(): Promise<void> {
    if (this.#entries.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Stops taking work, cancels retries, aborts running handlers and waits for them. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#abort.abort();
    for (const e of this.#entries.values()) if (e.timer) clearTimeout(e.timer);
    await Promise.allSettled([...this.#inFlight]);
    this.#entries.clear();
    this.#notifyIdle();
  }

  #markReady(key: string, e: Entry<T>): void {
    e.queued = true;
    this.#ready.push(key);
  }

  #pump(): void {
    while (!this.#stopped && this.#running < this.#opts.concurrency && this.#readyHead < this.#ready.length) {
      const key = this.#ready[this.#readyHead++] as string;
      if (this.#readyHead > 1024 && this.#readyHead * 2 > this.#ready.length) {
        this.#ready.splice(0, this.#readyHead);
        this.#readyHead = 0;
      }
      const e = this.#entries.get(key);
      if (!e) continue;
      e.queued = false;
      if (!e.hasPending || e.running) continue;
      const item = e.pending as T;
      e.pending = undefined;
      e.hasPending = false;
      e.running = true;
      this.#running++;
      const p = this.#run(key, e, item);
      this.#inFlight.add(p);
      void p.finally(() => this.#inFlight.delete(p));
    }
  }

  async #run(key: string, e: Entry<T>, item: T): Promise<void> {
    const started = performance.now();
    try {
      await this.#opts.handle(key, item, this.#abort.signal);
      e.backoff.reset();
      this.#opts.onResult?.(key, "success", performance.now() - started);
    } catch (err) {
      this.#opts.onResult?.(key, "error", performance.now() - started, err);
      if (!e.hasPending && !this.#stopped) {
        // Retry the same item later, unless a newer one arrives first.
        e.pending = item;
        e.hasPending = true;
        const delay = this.#opts.retryAfter?.(err) ?? e.backoff.next();
        e.timer = setTimeout(() => {
          e.timer = undefined;
          if (!e.running && !e.queued && e.hasPending) this.#markReady(key, e);
          this.#pump();
        }, delay);
      }
    } finally {
      e.running = false;
      this.#running--;
      if (e.hasPending && !e.timer && !e.queued) this.#markReady(key, e);
      if (!e.hasPending && !e.timer && !e.queued) this.#entries.delete(key);
      this.#pump();
      this.#notifyIdle();
    }
  }

  #notifyIdle(): void {
    if (this.#entries.size !== 0) return;
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const w of waiters) w();
  }
}

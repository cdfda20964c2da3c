// Scale to zero at the sentinel: while the environment has no routable instance, a request is
// held instead of answered 503 at once, and released the moment the routing table gains an
// instance (the agent puts a pod into its revision's slice once the pod is Ready). The first
// request held while none was starts a cold start: the wake count grows, and every open wake
// long-poll (the agent's, on the ops port) is answered at once, so the scale-up starts without
// waiting for the next measurement round. The sentinel writes nothing anywhere for it.
//
// Bounded: at most `maxHeld` requests at a time (the environment's bound spread over its sentinel
// pods), each for at most `timeoutMs`. A request over the bound, or still held at its timeout, is
// answered 503 with Retry-After, never dropped silently. Runtime-neutral: the shells ask
// Trip.hold() and try again when it resolves.
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { HoldPolicy, SentinelWake } from "../contracts/routing.js";

/** Cold-start buckets in seconds (time from the first held request to the first release). */
export const COLD_START_BUCKETS = [0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 5, 10, 30] as const;

/** Seconds a client is told to wait before trying again after a held request was refused. */
export const RETRY_AFTER_SECONDS = 1;

export type HoldOutcome = "released" | "timeout" | "full" | "gone";

export interface HoldMetrics {
  readonly held: Gauge;
  readonly outcomes: Counter<"outcome">;
  readonly coldStart: Histogram;
}

export function createHoldMetrics(registry: Registry): HoldMetrics {
  const r = [registry];
  return {
    held: new Gauge({
      name: "krane_sentinel_held_requests",
      help: "Requests held now because the environment has no routable instance (scale to zero).",
      registers: r,
    }),
    outcomes: new Counter({
      name: "krane_sentinel_held_requests_total",
      help: 'Held requests by outcome: "released" to an instance, "timeout" and "full" (answered 503 with Retry-After), "gone" (the client left).',
      labelNames: ["outcome"],
      registers: r,
    }),
    coldStart: new Histogram({
      name: "krane_sentinel_cold_start_seconds",
      help: "Time from the first request held at zero instances to the first routable instance.",
      buckets: [...COLD_START_BUCKETS],
      registers: r,
    }),
  };
}

/** One held request: resolved true when an instance is routable, false at its timeout. */
export interface Held {
  readonly promise: Promise<boolean>;
  /** The client left: stop holding (counted as "gone"). */
  cancel(): void;
}

interface Waiter {
  resolve(routable: boolean): void;
  timer: ReturnType<typeof setTimeout>;
}

export class HeldRequests {
  #policy: HoldPolicy | undefined;
  readonly #waiters = new Set<Waiter>();
  readonly #metrics: HoldMetrics | undefined;
  #wakes = 0;
  /** performance.now() of the first request of the cold start under way; NaN when none. */
  #coldSince = Number.NaN;
  readonly #pollers = new Set<() => void>();
  /** Called when a cold start begins (the first request held). */
  onColdStart: (() => void) | undefined;

  constructor(metrics?: HoldMetrics) {
    this.#metrics = metrics;
  }

  /** The policy in force (undefined: no scale to zero, requests without an instance get 503 at once). */
  set policy(p: HoldPolicy | undefined) {
    this.#policy = p;
    // Scale to zero switched off: nothing waits for an instance that may never come.
    if (p === undefined) this.#settle(false, "timeout");
  }

  get policy(): HoldPolicy | undefined {
    return this.#policy;
  }

  get held(): number {
    return this.#waiters.size;
  }

  get wakes(): number {
    return this.#wakes;
  }

  /**
   * Holds a request: undefined when the environment does not scale to zero (answer 503 now),
   * "full" when the bound is reached (answer 503 with Retry-After now), else the hold.
   */
  hold(): Held | "full" | undefined {
    const p = this.#policy;
    if (p === undefined) return undefined;
    if (this.#waiters.size >= p.maxHeld) {
      this.#metrics?.outcomes.inc({ outcome: "full" });
      return "full";
    }
    const starts = this.#waiters.size === 0 && Number.isNaN(this.#coldSince);
    let waiter: Waiter | undefined;
    const promise = new Promise<boolean>((resolve) => {
      const w: Waiter = {
        resolve,
        timer: setTimeout(() => {
          if (!this.#waiters.delete(w)) return;
          this.#metrics?.outcomes.inc({ outcome: "timeout" });
          this.#metrics?.held.set(this.#waiters.size);
          if (this.#waiters.size === 0) this.#coldSince = Number.NaN;
          resolve(false);
        }, p.timeoutMs),
      };
      waiter = w;
      this.#waiters.add(w);
    });
    this.#metrics?.held.set(this.#waiters.size);
    if (starts) {
      // A cold start begins: the agent's long-polls are answered now.
      this.#coldSince = performance.now();
      this.#wakes++;
      for (const poll of [...this.#pollers]) poll();
      this.onColdStart?.();
    }
    const w = waiter as Waiter;
    return {
      promise,
      cancel: () => {
        if (!this.#waiters.delete(w)) return;
        clearTimeout(w.timer);
        this.#metrics?.outcomes.inc({ outcome: "gone" });
        this.#metrics?.held.set(this.#waiters.size);
        if (this.#waiters.size === 0) this.#coldSince = Number.NaN;
        w.resolve(false);
      },
    };
  }

  /** The table has a routable instance now: every held request goes on, the cold start ends. */
  routable(): void {
    if (!Number.isNaN(this.#coldSince)) {
      this.#metrics?.coldStart.observe((performance.now() - this.#coldSince) / 1000);
      this.#coldSince = Number.NaN;
    }
    this.#settle(true, "released");
  }

  #settle(routable: boolean, outcome: HoldOutcome): void {
    if (this.#waiters.size === 0) return;
    const all = [...this.#waiters];
    this.#waiters.clear();
    this.#metrics?.outcomes.inc({ outcome }, all.length);
    this.#metrics?.held.set(0);
    for (const w of all) {
      clearTimeout(w.timer);
      w.resolve(routable);
    }
  }

  /**
   * The wake long-poll: resolves with the state as soon as the wake count differs from `after`
   * (at once when it already does: a restarted sentinel counts from 0 again), else after
   * `maxWaitMs`, or when `signal` aborts.
   */
  waitForWake(after: number, maxWaitMs: number, signal?: AbortSignal): Promise<SentinelWake> {
    const now = (): SentinelWake => ({ wakes: this.#wakes, held: this.#waiters.size });
    if (this.#wakes !== after || signal?.aborted) return Promise.resolve(now());
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#pollers.delete(done);
        signal?.removeEventListener("abort", done);
        resolve(now());
      };
      const timer = setTimeout(done, maxWaitMs);
      this.#pollers.add(done);
      signal?.addEventListener("abort", done, { once: true });
    });
  }

  /** Stops: every held request is answered (503 with Retry-After), every long-poll now. */
  close(): void {
    this.#settle(false, "timeout");
    for (const poll of [...this.#pollers]) poll();
  }
}

// Status reports to ctrl with deduplication (DESIGN §3, §6.4).
//
// Each key has a fingerprint of the status last acknowledged by ctrl; a report whose
// fingerprint matches is not sent. Reports go through a per-key work queue (latest wins, so a
// burst of pod events becomes one call with the newest instance set), through the controller's
// circuit breaker, each with a deadline. A failed report is retried with backoff — while the
// breaker is open, after the breaker's own retry-after.
import { BreakerOpenError, type CircuitBreaker } from "./breaker.js";
import type { BackoffPolicy } from "../../retry/backoff.js";
import type { Logger } from "./log.js";
import { KeyedWorkQueue } from "./workqueue.js";

export interface ReporterOptions<R> {
  readonly name: string;
  readonly breaker: CircuitBreaker;
  readonly send: (request: R, opts: { timeoutMs: number; signal: AbortSignal }) => Promise<void>;
  readonly timeoutMs?: number;
  readonly concurrency?: number;
  readonly retry?: BackoffPolicy;
  readonly log: Logger;
  readonly onSent?: (result: "ok" | "error") => void;
  readonly onDeduplicated?: () => void;
}

interface PendingReport<R> {
  readonly fingerprint: string;
  readonly request: R;
}

export class Reporter<R> {
  readonly #o: ReporterOptions<R>;
  readonly #acked = new Map<string, string>();
  readonly #queue: KeyedWorkQueue<PendingReport<R>>;

  constructor(opts: ReporterOptions<R>) {
    this.#o = opts;
    this.#queue = new KeyedWorkQueue<PendingReport<R>>({
      concurrency: opts.concurrency ?? 8,
      retry: opts.retry ?? { baseMs: 500, capMs: 30_000, minMs: 100 },
      retryAfter: (err) => (err instanceof BreakerOpenError ? err.retryAfterMs + Math.floor(Math.random() * 250) : undefined),
      handle: (key, item, signal) => this.#send(key, item, signal),
      onResult: (key, result, _ms, err) => {
        if (result === "error" && !(err instanceof BreakerOpenError)) {
          opts.log.warn({ controller: opts.name, key, err: err instanceof Error ? err.message : String(err) }, "report failed");
        }
      },
    });
  }

  /** Reports `request` for `key` unless ctrl already has a status with this fingerprint. */
  submit(key: string, fingerprint: string, request: R): void {
    if (!this.#queue.has(key) && this.#acked.get(key) === fingerprint) {
      this.#o.onDeduplicated?.();
      return;
    }
    this.#queue.add(key, { fingerprint, request });
  }

  /** Forget what ctrl acknowledged (e.g. after a snapshot: ctrl may have lost state). */
  forgetAll(): void {
    this.#acked.clear();
  }

  /** Keys with a report waiting, in flight or retrying. */
  get pending(): number {
    return this.#queue.size;
  }

  drained(): Promise<void> {
    return this.#queue.drained();
  }

  stop(): Promise<void> {
    return this.#queue.stop();
  }

  async #send(key: string, item: PendingReport<R>, signal: AbortSignal): Promise<void> {
    if (this.#acked.get(key) === item.fingerprint) {
      this.#o.onDeduplicated?.();
      return;
    }
    const timeoutMs = this.#o.timeoutMs ?? 5_000;
    try {
      await this.#o.breaker.execute(() => this.#o.send(item.request, { timeoutMs, signal }));
    } catch (err) {
      if (!(err instanceof BreakerOpenError)) this.#o.onSent?.("error");
      throw err;
    }
    this.#o.onSent?.("ok");
    this.#acked.set(key, item.fingerprint);
  }
}

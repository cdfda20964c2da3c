// Status reports to ctrl (ClusterService's Report… methods), deduplicated, behind the
// controller's circuit breaker.
//
// Each key has a fingerprint of the status last acknowledged by ctrl; a report whose
// fingerprint matches is not sent. Reports wait in a keys-only WorkQueue (the newest report of a
// key replaces an unsent one, so a burst of pod events becomes one call with the newest instance
// set) and go through the controller's circuit breaker, each with a deadline. A failed report is
// retried with the key's backoff — while the breaker is open, after the breaker's retry-after —
// or at once when the kind's stream connects again (retryPending).
import { Result, WorkQueue } from "../../retry/queue.js";
import type { BackoffPolicy } from "../../retry/backoff.js";
import { BreakerOpenError, type CircuitBreaker } from "./breaker.js";
import type { Logger } from "../../base/log.js";

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
  readonly #pending = new Map<string, PendingReport<R>>();
  readonly #queue: WorkQueue;

  constructor(opts: ReporterOptions<R>) {
    this.#o = opts;
    this.#queue = new WorkQueue({
      concurrency: opts.concurrency ?? 8,
      retry: opts.retry ?? { baseMs: 500, capMs: 30_000, minMs: 100 },
      reconcile: (key, signal) => this.#send(key, signal),
      onResult: (key, result) => {
        if (result.type === "retry" && !(result.error instanceof BreakerOpenError)) {
          const err = result.error;
          opts.log.warn(
            { controller: opts.name, key, err: err instanceof Error ? err.message : String(err) },
            "report failed",
          );
        }
      },
    });
  }

  /** Reports `request` for `key` unless ctrl already has a status with this fingerprint. */
  submit(key: string, fingerprint: string, request: R): void {
    if (!this.#pending.has(key) && this.#acked.get(key) === fingerprint) {
      this.#o.onDeduplicated?.();
      return;
    }
    this.#pending.set(key, { fingerprint, request });
    this.#queue.add(key, { resetBackoff: true });
  }

  /** Sends every waiting report now, whatever backoff it built up (ctrl is reachable again). */
  retryPending(): void {
    for (const key of this.#pending.keys()) this.#queue.add(key, { resetBackoff: true });
  }

  /** Forget what ctrl acknowledged (e.g. after a snapshot: ctrl may have lost state). */
  forgetAll(): void {
    this.#acked.clear();
  }

  /** Keys with a report waiting, in flight or retrying. */
  get pending(): number {
    return this.#pending.size;
  }

  drained(): Promise<void> {
    return this.#queue.drained();
  }

  stop(): Promise<void> {
    return this.#queue.stop();
  }

  async #send(key: string, signal: AbortSignal): Promise<Result> {
    const item = this.#pending.get(key);
    if (!item) return Result.done;
    if (this.#acked.get(key) === item.fingerprint) {
      this.#pending.delete(key);
      this.#o.onDeduplicated?.();
      return Result.done;
    }
    const timeoutMs = this.#o.timeoutMs ?? 5_000;
    try {
      await this.#o.breaker.execute(() => this.#o.send(item.request, { timeoutMs, signal }));
    } catch (err) {
      if (err instanceof BreakerOpenError) return Result.retry(err, err.retryAfterMs + Math.floor(Math.random() * 250));
      this.#o.onSent?.("error");
      return Result.retry(err);
    }
    this.#o.onSent?.("ok");
    this.#acked.set(key, item.fingerprint);
    // A newer report submitted while this one was in flight stays pending (the queue runs the
    // key once more for it).
    if (this.#pending.get(key) === item) this.#pending.delete(key);
    return Result.done;
  }
}

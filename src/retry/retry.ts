// Retrying one operation (a database transaction, a reconnect): call it, and while it fails
// with an error the caller calls retryable, wait a full-jitter delay and call it again.
// Everything that retries a single call uses this; keyed work (agent controllers, the rollout
// driver) uses the WorkQueue in queue.ts, which takes the same BackoffPolicy.
import { Backoff, sleep, type BackoffPolicy, type RandomSource } from "./backoff.js";

export interface RetryOptions {
  readonly policy: BackoffPolicy;
  /** Whether a failure is worth another attempt (attempt is 1-based: the one that failed). */
  readonly retryable: (err: unknown, attempt: number) => boolean;
  /** Attempts in all, the first included (default: unlimited). */
  readonly maxAttempts?: number;
  /** Stops waiting and rethrows the last error when aborted. */
  readonly signal?: AbortSignal;
  readonly random?: RandomSource;
  /** Called before each wait (logs, metrics). */
  readonly onRetry?: (err: unknown, attempt: number, delayMs: number) => void;
}

export async function retry<T>(fn: (attempt: number) => Promise<T>, opts: RetryOptions): Promise<T> {
  const backoff = new Backoff(opts.policy, opts.random);
  const max = opts.maxAttempts ?? Number.POSITIVE_INFINITY;
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (err) {
      if (attempt >= max || opts.signal?.aborted || !opts.retryable(err, attempt)) throw err;
      const delay = backoff.next();
      opts.onRetry?.(err, attempt, delay);
      await sleep(delay, opts.signal);
      if (opts.signal?.aborted) throw err;
    }
  }
}

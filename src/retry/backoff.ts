// Backoff: "full jitter" exponential delays (a uniformly random delay between 0 and
// min(cap, base * 2^attempt)), with an optional floor. Pure apart from the injectable random
// source, so tests and property tests can pin it.

export interface BackoffPolicy {
  /** Upper bound of the first delay, in milliseconds. */
  readonly baseMs: number;
  /** No delay ever exceeds this. */
  readonly capMs: number;
  /** No delay is ever shorter than this (keeps a failing loop from spinning). Default 0. */
  readonly minMs?: number;
}

export type RandomSource = () => number;

/** The delay before retry number `attempt` (0-based). */
export function fullJitterDelay(attempt: number, policy: BackoffPolicy, random: RandomSource = Math.random): number {
  const exp = Math.min(Math.max(attempt, 0), 52);
  const ceiling = Math.min(policy.capMs, policy.baseMs * 2 ** exp);
  const r = Math.min(Math.max(random(), 0), 1);
  const min = Math.min(policy.minMs ?? 0, policy.capMs);
  return Math.max(min, Math.floor(r * ceiling));
}

/** A stateful attempt counter over fullJitterDelay; reset it after a success. */
export class Backoff {
  #attempt = 0;
  constructor(
    private readonly policy: BackoffPolicy,
    private readonly random: RandomSource = Math.random,
  ) {}

  get attempt(): number {
    return this.#attempt;
  }

  next(): number {
    const d = fullJitterDelay(this.#attempt, this.policy, this.random);
    this.#attempt++;
    return d;
  }

  reset(): void {
    this.#attempt = 0;
  }
}

/** Sleeps `ms`, resolving early (without throwing) when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

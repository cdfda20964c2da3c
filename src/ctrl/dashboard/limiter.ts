// The sign-in's rate limit: a token bucket per client address (a burst of `burst` attempts, then
// one every `everyMs`), and one for all addresses together, so guessing tokens by the dashboard's
// sign-in costs the guesser time (tokens are 256-bit random: this is about load and noise, and
// about a leaked prefix never being worth trying fast). Pure: time comes in as `now`.
// The address is the connection's: behind a proxy every client shares the proxy's, which then
// should limit on its own side.

export interface LimitPolicy {
  /** Attempts allowed at once. */
  readonly burst: number;
  /** One more attempt allowed every this many ms. */
  readonly everyMs: number;
}

/** Per address: 10 attempts, then one every 6 s (10 a minute). */
export const PER_ADDRESS: LimitPolicy = { burst: 10, everyMs: 6_000 };
/** Every address together: 100 attempts, then 20 a second. */
export const OVERALL: LimitPolicy = { burst: 100, everyMs: 50 };

interface Bucket {
  tokens: number;
  at: number;
}

/** Buckets kept at most; past this, full ones (addresses quiet long enough) are forgotten. */
const MAX_ADDRESSES = 10_000;

export class SignInLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly overall: Bucket;

  constructor(
    private readonly perAddress: LimitPolicy = PER_ADDRESS,
    private readonly all: LimitPolicy = OVERALL,
    now = 0,
  ) {
    this.overall = { tokens: all.burst, at: now };
  }

  private static refill(b: Bucket, p: LimitPolicy, now: number): void {
    b.tokens = Math.min(p.burst, b.tokens + Math.max(0, now - b.at) / p.everyMs);
    b.at = now;
  }

  /** Takes an attempt for `address`: 0 when allowed, else how many ms until one is. */
  take(address: string, now: number): number {
    let b = this.buckets.get(address);
    if (!b) {
      if (this.buckets.size >= MAX_ADDRESSES) this.forgetFull(now);
      b = { tokens: this.perAddress.burst, at: now };
      this.buckets.set(address, b);
    }
    SignInLimiter.refill(b, this.perAddress, now);
    SignInLimiter.refill(this.overall, this.all, now);
    if (b.tokens < 1) return Math.ceil((1 - b.tokens) * this.perAddress.everyMs);
    if (this.overall.tokens < 1) return Math.ceil((1 - this.overall.tokens) * this.all.everyMs);
    b.tokens -= 1;
    this.overall.tokens -= 1;
    return 0;
  }

  private forgetFull(now: number): void {
    for (const [a, b] of this.buckets) {
      SignInLimiter.refill(b, this.perAddress, now);
      if (b.tokens >= this.perAddress.burst) this.buckets.delete(a);
    }
    // Everyone still limited: forget the oldest rather than grow without bound.
    if (this.buckets.size >= MAX_ADDRESSES) {
      const oldest = this.buckets.keys().next().value;
      if (oldest !== undefined) this.buckets.delete(oldest);
    }
  }

  get size(): number {
    return this.buckets.size;
  }
}

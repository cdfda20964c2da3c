// How many refused calls without a valid credential are recorded one by one. Pure.
//
// A caller with no valid token can send refused calls as fast as the network allows; recording
// each one in its own transaction would let anyone on the network fill the database and take the
// write path's capacity from real changes. So each client address gets a bucket of `burst`
// records refilled at `perSecond`; past it, refusals from that address are counted, and the count
// is written with the next event of that address (or by the periodic flush) — "and N more refused
// calls from this address since …". All addresses together share one more bucket (`total`), so
// many addresses (an IPv6 range) cannot multiply the rate; past it, refusals are folded under the
// address "*". Nothing goes unaccounted; only the per-call detail of a flood is folded. Callers with a valid token are never folded: they are accountable, and the token can
// be revoked.
export interface LimiterOptions {
  /** Per address. */
  readonly perSecond: number;
  readonly burst: number;
  /** All addresses together. */
  readonly total: { readonly perSecond: number; readonly burst: number };
  /** Addresses tracked at most (the oldest quiet ones are dropped past it). */
  readonly maxAddresses?: number;
}

/** The bucket all addresses share, and the address its folded refusals are recorded under. */
export const ALL = "*";

interface Bucket {
  tokens: number;
  at: number;
  /** Refusals folded since `since`. */
  folded: number;
  since: number;
}

export interface Admission {
  /** Record this refusal as its own event. */
  readonly record: boolean;
  /** Refusals from this address folded before this one (to name in its event), with since when. */
  readonly folded: number;
  readonly since: number;
}

export class RefusalLimiter {
  readonly #buckets = new Map<string, Bucket>();
  readonly #max: number;

  constructor(private readonly o: LimiterOptions) {
    this.#max = o.maxAddresses ?? 10_000;
  }

  admit(address: string, now: number): Admission {
    // The total's folded count is recorded by the periodic flush only (under "*").
    const total = this.#take(ALL, now, this.o.total, false);
    if (!total.record) return total;
    const own = this.#take(address, now, this.o, true);
    // The total's token was spent on a refusal that is folded after all: give it back.
    if (!own.record) this.#refund(ALL);
    return own;
  }

  #take(address: string, now: number, rate: { perSecond: number; burst: number }, report: boolean): Admission {
    let b = this.#buckets.get(address);
    if (!b) {
      if (this.#buckets.size >= this.#max) this.#evict();
      b = { tokens: rate.burst, at: now, folded: 0, since: now };
      this.#buckets.set(address, b);
    }
    b.tokens = Math.min(rate.burst, b.tokens + ((now - b.at) / 1000) * rate.perSecond);
    b.at = now;
    if (b.tokens < 1) {
      if (b.folded === 0) b.since = now;
      b.folded++;
      return { record: false, folded: 0, since: now };
    }
    b.tokens -= 1;
    if (!report) return { record: true, folded: 0, since: now };
    const folded = b.folded;
    const since = b.since;
    b.folded = 0;
    return { record: true, folded, since };
  }

  #refund(address: string): void {
    const b = this.#buckets.get(address);
    if (b) b.tokens += 1;
  }

  /** The addresses with folded refusals, emptied (the periodic flush records them). */
  drain(): { address: string; folded: number; since: number }[] {
    const out: { address: string; folded: number; since: number }[] = [];
    for (const [address, b] of this.#buckets)
      if (b.folded > 0) {
        out.push({ address, folded: b.folded, since: b.since });
        b.folded = 0;
      }
    return out;
  }

  #evict(): void {
    // Drop full, quiet buckets first; never one holding an unrecorded count.
    for (const [k, b] of this.#buckets) {
      if (b.folded === 0 && k !== ALL) {
        this.#buckets.delete(k);
        if (this.#buckets.size < this.#max) return;
      }
    }
  }
}

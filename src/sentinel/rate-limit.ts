// Rate limits across an environment's sentinel replicas: pure, the clock and the exchange of
// counts with peers are the caller's.
//
// Windows are fixed and aligned to the epoch (window n covers [n·w, (n+1)·w)), so every replica
// agrees on them without talking. A replica counts what it admits per key; every sync period it
// tells its peers its counts and its demand (requests seen, admitted or not, since the last sync)
// and hears theirs. At each sync it rebalances: the budget left (the limit less every count it
// knows of) is split by demand, so a replica taking most of the traffic gets most of what is left,
// and until the next sync it admits at most its share. Alone (no peer heard in this window) it
// admits up to the limit exactly. Counts of a peer that went away stay summed until the window
// ends, so leaving returns nothing twice; what a replica admitted after its last report and before
// it vanished is the only budget counted nowhere.
//
// Why a split rather than a shared counter: a shared counter is a round trip per request (or a
// store to run in every region); this keeps the request path local and bounds the error by what
// the replicas admit within one sync period, which bench/sentinel/rate-limit.ts measures.

/** Counts a replica reports to its peers for one window. */
export interface LimitReport {
  readonly window: number;
  /** Per key: admitted in this window so far, and requests seen since the previous report. */
  readonly keys: ReadonlyMap<string, { readonly count: number; readonly demand: number }>;
}

export interface LimitDecision {
  readonly admitted: boolean;
  /** What the client may still send in this window, as this replica knows it. */
  readonly remaining: number;
  /** Whole seconds until the window ends (at least 1). */
  readonly resetSeconds: number;
}

interface KeyState {
  own: number;
  /** Requests seen since the last sync. */
  demand: number;
  /** own at the last rebalance, and the share granted then (undefined: alone, the whole limit). */
  ownAtSync: number;
  allowance: number | undefined;
  readonly peers: Map<string, { count: number; demand: number }>;
}

/** Requests over this many keys in one window share one overflow key (memory stays bounded). */
export const MAX_KEYS = 100_000;
export const OVERFLOW_KEY = "\u0000overflow";

/**
 * This replica's share of what is left: the budget split by demand (each replica's demand plus one,
 * so one that was idle still gets a little); the units floors leave over go one each to the
 * replicas of most demand (ties by id), so with the same view every replica computes shares that
 * add up to the budget exactly.
 */
export function shareOf(left: number, self: string, demands: ReadonlyMap<string, number>): number {
  if (left <= 0) return 0;
  const ids = [...demands.keys()].sort();
  const weight = (id: string): number => (demands.get(id) ?? 0) + 1;
  const total = ids.reduce((s, id) => s + weight(id), 0);
  const floors = new Map(ids.map((id) => [id, Math.floor((left * weight(id)) / total)]));
  let spare = left - [...floors.values()].reduce((s, n) => s + n, 0);
  const ranked = [...ids].sort((a, b) => weight(b) - weight(a) || (a < b ? -1 : 1));
  for (const id of ranked) {
    if (spare <= 0) break;
    floors.set(id, (floors.get(id) ?? 0) + 1);
    spare--;
  }
  return floors.get(self) ?? 0;
}

/** One policy's counters on one replica. */
export class RateLimiter {
  readonly limit: number;
  readonly windowMs: number;
  readonly #self: string;
  readonly #maxKeys: number;
  #window = -1;
  #keys = new Map<string, KeyState>();
  /** The peers live at the last rebalance: they and this replica share what is left. */
  #live: readonly string[] = [];

  constructor(limit: number, windowMs: number, self: string, maxKeys = MAX_KEYS) {
    this.limit = limit;
    this.windowMs = windowMs;
    this.#self = self;
    this.#maxKeys = maxKeys;
  }

  #roll(now: number): number {
    const w = Math.floor(now / this.windowMs);
    if (w !== this.#window) {
      this.#window = w;
      this.#keys = new Map();
    }
    return w;
  }

  #state(key: string): KeyState {
    let s = this.#keys.get(key);
    if (s) return s;
    const k = this.#keys.size >= this.#maxKeys ? OVERFLOW_KEY : key;
    s = this.#keys.get(k);
    if (s) return s;
    // A key first seen between syncs: an even split among the live replicas until the next one.
    const allowance =
      this.#live.length === 0
        ? undefined
        : shareOf(this.limit, this.#self, new Map([this.#self, ...this.#live].map((id) => [id, 0])));
    s = { own: 0, demand: 0, ownAtSync: 0, allowance, peers: new Map() };
    this.#keys.set(k, s);
    return s;
  }

  /** Counts one request of `key` at `now` (ms) and says whether it may pass. */
  take(key: string, now: number): LimitDecision {
    const w = this.#roll(now);
    const s = this.#state(key);
    s.demand++;
    let peers = 0;
    for (const p of s.peers.values()) peers += p.count;
    const left = this.limit - s.own - peers;
    const mine = s.allowance === undefined ? left : s.allowance - (s.own - s.ownAtSync);
    const resetSeconds = Math.max(1, Math.ceil(((w + 1) * this.windowMs - now) / 1000));
    if (left <= 0 || mine <= 0) return { admitted: false, remaining: 0, resetSeconds };
    s.own++;
    return { admitted: true, remaining: Math.max(0, left - 1), resetSeconds };
  }

  /** What to tell the peers now; the demand counted so far is then carried by the report. */
  report(now: number): LimitReport {
    const window = this.#roll(now);
    const keys = new Map<string, { count: number; demand: number }>();
    for (const [k, s] of this.#keys) keys.set(k, { count: s.own, demand: s.demand });
    return { window, keys };
  }

  /** A peer's report: kept while it is for this window (an older one is dropped). */
  receive(peer: string, r: LimitReport, now: number): void {
    if (peer === this.#self || r.window !== this.#roll(now)) return;
    for (const [k, v] of r.keys) {
      const s = this.#state(k);
      const prev = s.peers.get(peer);
      // Counts only grow within a window: a late, reordered report changes nothing.
      if (!prev || v.count >= prev.count) s.peers.set(peer, { count: v.count, demand: v.demand });
    }
  }

  /**
   * Splits what is left among this replica and its `live` peers, by their demand. A peer no longer
   * live gets no share, but what it admitted in this window stays counted.
   */
  rebalance(now: number, live: readonly string[]): void {
    this.#roll(now);
    this.#live = live.filter((id) => id !== this.#self);
    for (const s of this.#keys.values()) {
      s.ownAtSync = s.own;
      if (this.#live.length === 0) {
        s.allowance = undefined;
      } else {
        let counted = s.own;
        for (const p of s.peers.values()) counted += p.count;
        const demands = new Map<string, number>([[this.#self, s.demand]]);
        for (const id of this.#live) demands.set(id, s.peers.get(id)?.demand ?? 0);
        s.allowance = shareOf(this.limit - counted, this.#self, demands);
      }
      s.demand = 0;
    }
  }

  /** Keys counted in the current window (for /status and tests). */
  get size(): number {
    return this.#keys.size;
  }
}

/** `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers-11) and Retry-After. */
export function rateLimitHeaders(
  policy: string,
  limit: number,
  windowSeconds: number,
  d: LimitDecision,
): Record<string, string> {
  const out: Record<string, string> = {
    "ratelimit-policy": `"${policy}";q=${limit};w=${windowSeconds}`,
    ratelimit: `"${policy}";r=${d.remaining};t=${d.resetSeconds}`,
  };
  if (!d.admitted) out["retry-after"] = String(d.resetSeconds);
  return out;
}

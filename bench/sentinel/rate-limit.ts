// `npm run bench -- edge`: how far a rate limit holds across sentinel replicas
// (src/sentinel/rate-limit.ts), simulated on a virtual clock so a minute runs in a moment and the
// figures do not depend on the machine. One key, a limit per 60 s window, Poisson arrivals split
// unevenly across replicas; each replica reports its counts to its peers every sync period, the
// reports arriving after a cross-region delay (uniform 5–80 ms), and rebalances on its own phase.
// Scenarios: steady uneven load on 3 replicas; the same while a 4th joins (taking traffic only
// after its first exchange, as readiness would) and the busiest one crashes without a last report;
// load in bursts; and, for comparison, a static split (limit / 3 per replica, no exchange).
// Printed per scenario over 20 seeds: offered and admitted against the limit, the worst excess
// (admitted above the limit) and the worst shortfall (admitted below min(offered, limit)).
import { RateLimiter, type LimitReport } from "../../src/sentinel/rate-limit.js";

const WINDOW_MS = 60_000;
const TICK_MS = 1;
const SEEDS = Number(process.env.KRANE_BENCH_EDGE_SEEDS ?? 20);

function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Replica {
  readonly id: string;
  readonly limiter: RateLimiter;
  readonly phase: number;
  weight: number;
  alive: boolean;
  /** Serving traffic (after its first exchange). */
  ready: boolean;
  readonly heard: Map<string, number>;
  admitted: number;
}

interface Scenario {
  readonly name: string;
  readonly limit: number;
  /** Offered load as a multiple of the limit over the window. */
  readonly offered: number;
  readonly weights: readonly number[];
  readonly syncMs: number;
  /** At these times: a replica joins with this weight, or the busiest alive one crashes. */
  readonly events?: readonly { at: number; join?: number; crash?: true }[];
  /** Arrivals only in the first `burstMs` of every second. */
  readonly burstMs?: number;
  /** No exchange: each replica alone with limit / replicas. */
  readonly staticSplit?: boolean;
}

function run(s: Scenario, seed: number): { offered: number; admitted: number } {
  const rand = rng(seed);
  const replicas: Replica[] = [];
  const inbox: { at: number; to: string; from: string; report: LimitReport }[] = [];
  const add = (weight: number, ready: boolean): void => {
    const id = `r${replicas.length + 1}`;
    const limit = s.staticSplit ? Math.floor(s.limit / s.weights.length) : s.limit;
    replicas.push({
      id,
      limiter: new RateLimiter(limit, WINDOW_MS, id),
      phase: Math.floor(rand() * s.syncMs),
      weight,
      alive: true,
      ready,
      heard: new Map(),
      admitted: 0,
    });
  };
  for (const w of s.weights) add(w, true);
  const ratePerMs = (s.limit * s.offered) / WINDOW_MS / (s.burstMs ? s.burstMs / 1000 : 1);
  let offered = 0;
  const events = [...(s.events ?? [])];
  for (let t = 0; t < WINDOW_MS; t += TICK_MS) {
    while (events[0] && events[0].at <= t) {
      const e = events.shift();
      if (e?.join !== undefined) add(e.join, false);
      if (e?.crash) {
        const busiest = replicas.filter((r) => r.alive).sort((a, b) => b.weight - a.weight)[0];
        if (busiest) busiest.alive = false;
      }
    }
    for (let i = inbox.length - 1; i >= 0; i--) {
      const m = inbox[i];
      if (!m || m.at > t) continue;
      inbox.splice(i, 1);
      const to = replicas.find((r) => r.id === m.to && r.alive);
      if (!to) continue;
      to.limiter.receive(m.from, m.report, t);
      to.heard.set(m.from, t);
    }
    if (!s.staticSplit) {
      for (const r of replicas) {
        if (!r.alive || (t - r.phase) % s.syncMs !== 0) continue;
        const report = r.limiter.report(t);
        for (const p of replicas)
          if (p !== r && p.alive) inbox.push({ at: t + 5 + Math.floor(rand() * 75), to: p.id, from: r.id, report });
        const live = [...r.heard].filter(([, at]) => t - at <= 3 * s.syncMs).map(([id]) => id);
        r.limiter.rebalance(t, live);
        if (!r.ready && live.length > 0) r.ready = true;
      }
    }
    if (s.burstMs !== undefined && t % 1000 >= s.burstMs) continue;
    const serving = replicas.filter((r) => r.alive && r.ready);
    const total = serving.reduce((a, r) => a + r.weight, 0);
    for (const r of serving) {
      // Poisson arrivals at this replica's share of the rate (one draw per tick suffices below 1/ms).
      let n = 0;
      let p = Math.exp(-(ratePerMs * r.weight) / total);
      let u = rand();
      while (u > p && n < 50) {
        n++;
        u -= p;
        p *= (ratePerMs * r.weight) / total / n;
      }
      for (let i = 0; i < n; i++) {
        offered++;
        if (r.limiter.take("client", t).admitted) r.admitted++;
      }
    }
  }
  return { offered, admitted: replicas.reduce((a, r) => a + r.admitted, 0) };
}

const SCENARIOS: readonly Scenario[] = [
  { name: "3 replicas, load 60/30/10 %", limit: 6000, offered: 1.2, weights: [6, 3, 1], syncMs: 250 },
  {
    name: "… a 4th joins at 15 s, the busiest crashes at 35 s",
    limit: 6000,
    offered: 1.2,
    weights: [6, 3, 1],
    syncMs: 250,
    events: [
      { at: 15_000, join: 3 },
      { at: 35_000, crash: true },
    ],
  },
  {
    name: "… the same at a 10× higher limit",
    limit: 60_000,
    offered: 1.2,
    weights: [6, 3, 1],
    syncMs: 250,
    events: [
      { at: 15_000, join: 3 },
      { at: 35_000, crash: true },
    ],
  },
  {
    name: "… load in 100 ms bursts each second",
    limit: 6000,
    offered: 1.2,
    weights: [6, 3, 1],
    syncMs: 250,
    burstMs: 100,
    events: [
      { at: 15_000, join: 3 },
      { at: 35_000, crash: true },
    ],
  },
  { name: "3 replicas, load 60/30/10 % at half the limit", limit: 6000, offered: 0.5, weights: [6, 3, 1], syncMs: 250 },
  {
    name: "static split (limit / 3 each, no exchange)",
    limit: 6000,
    offered: 1.2,
    weights: [6, 3, 1],
    syncMs: 250,
    staticSplit: true,
  },
];

export function benchEdge(): Promise<void> {
  console.log(
    `rate limit across sentinel replicas: one key, 60 s window, sync every 250 ms, reports delayed 5–80 ms, ${SEEDS} seeds`,
  );
  for (const s of SCENARIOS) {
    let worstOver = 0;
    let worstUnder = 0;
    let offered = 0;
    let admitted = 0;
    for (let seed = 1; seed <= SEEDS; seed++) {
      const r = run(s, seed);
      offered += r.offered;
      admitted += r.admitted;
      worstOver = Math.max(worstOver, (r.admitted - s.limit) / s.limit);
      worstUnder = Math.max(worstUnder, (Math.min(r.offered, s.limit) - r.admitted) / s.limit);
    }
    const pct = (x: number): string => `${(x * 100).toFixed(2)} %`;
    console.log(
      `  ${s.name}: limit ${s.limit}, offered ${Math.round(offered / SEEDS)}, admitted ${Math.round(admitted / SEEDS)} (mean); ` +
        `worst excess ${pct(Math.max(0, worstOver))}, worst shortfall ${pct(Math.max(0, worstUnder))} of the limit`,
    );
  }
  return Promise.resolve();
}

if (import.meta.url === `file://${process.argv[1] ?? ""}`) await benchEdge();

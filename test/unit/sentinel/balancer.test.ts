// The sentinel's picking and ejection rules (src/sentinel/balancer.ts), as properties.
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  afterFailure,
  afterSuccess,
  Balancer,
  ejectionMs,
  HEALTHY,
  isEjected,
  pickByShare,
  powerOfTwo,
  revisionShares,
  type HealthPolicy,
} from "../../../src/sentinel/balancer.js";
import type { RoutingTable } from "../../../src/sentinel/table.js";

/** A deterministic PRNG (mulberry32), so statistical checks never flake. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * A low-discrepancy source: the Halton sequence in 3 dimensions (bases 2, 3, 5), one dimension
 * per draw of a pick (revision, then the two power-of-two candidates). It has the statistics of
 * a perfect random source without its noise, so a ±2-point check over 10,000 picks tests the
 * arithmetic and cannot flake.
 */
function equidistributed(seed: number): () => number {
  const bases = [2, 3, 5];
  let call = 0;
  const offset = Math.abs(seed) % 997;
  return () => {
    const base = bases[call % 3] ?? 2;
    let i = Math.floor(call / 3) + 1 + offset;
    call++;
    let f = 1;
    let r = 0;
    while (i > 0) {
      f /= base;
      r += f * (i % base);
      i = Math.floor(i / base);
    }
    return r;
  };
}

function table(mode: "instances" | "weighted", revs: { id: string; weight: number | null; n: number }[]): RoutingTable {
  return {
    version: 1,
    mode,
    revisions: revs.map((r) => ({
      deploymentId: r.id,
      weight: r.weight,
      endpoints: Array.from({ length: r.n }, (_, i) => {
        const address = `10.0.${revs.indexOf(r)}.${i + 1}`;
        return {
          key: `${address}:8080`,
          address,
          port: 8080,
          dialHost: address,
          protocol: "http1" as const,
          deploymentId: r.id,
          pod: `${r.id}-${i}`,
        };
      }),
    })),
  };
}

/** Weights 0–100 adding up to 100 over 1–5 revisions, each with 1–6 instances. */
const weightedRevisions = fc
  .array(fc.integer({ min: 0, max: 100 }), { minLength: 1, maxLength: 5 })
  .chain((raw) =>
    fc.tuple(
      fc.constant(raw),
      fc.array(fc.integer({ min: 1, max: 6 }), { minLength: raw.length, maxLength: raw.length }),
    ),
  )
  .map(([raw, counts]) => {
    const sum = raw.reduce((a, b) => a + b, 0);
    const weights = sum === 0 ? raw.map((_, i) => (i === 0 ? 100 : 0)) : raw.map((w) => Math.floor((w * 100) / sum));
    weights[0] = (weights[0] ?? 0) + 100 - weights.reduce((a, b) => a + b, 0);
    return weights.map((w, i) => ({ id: `dep${i}`, weight: w, n: counts[i] ?? 1 }));
  });

test("weighted: over 10,000 picks each revision's share is within ±2 points of its weight", () => {
  fc.assert(
    fc.property(weightedRevisions, fc.integer(), (revs, seed) => {
      const b = new Balancer({ random: equidistributed(seed) });
      b.setTable(table("weighted", revs));
      const seen = new Map<string, number>();
      for (let i = 0; i < 10_000; i++) {
        const inst = b.pick();
        assert.ok(inst);
        seen.set(inst.endpoint.deploymentId, (seen.get(inst.endpoint.deploymentId) ?? 0) + 1);
      }
      for (const r of revs) {
        const pct = ((seen.get(r.id) ?? 0) / 10_000) * 100;
        assert.ok(Math.abs(pct - r.weight) <= 2, `${r.id}: weight ${r.weight}, observed ${pct.toFixed(2)}`);
      }
    }),
  );
});

test("weighted: the same with a pseudo-random source (fixed seeds: the check is statistical)", () => {
  for (const seed of [1, 42, 4711]) {
    const revs = [
      { id: "stable", weight: 80, n: 3 },
      { id: "canary", weight: 20, n: 1 },
    ];
    const b = new Balancer({ random: prng(seed) });
    b.setTable(table("weighted", revs));
    let canary = 0;
    for (let i = 0; i < 10_000; i++) if (b.pick()?.endpoint.deploymentId === "canary") canary++;
    assert.ok(Math.abs(canary / 100 - 20) <= 2, `seed ${seed}: canary got ${canary / 100}%`);
  }
});

test("instances mode: every instance of every revision gets an equal share", () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 1, maxLength: 4 }),
      fc.integer(),
      (counts, seed) => {
        const b = new Balancer({ random: equidistributed(seed) });
        b.setTable(
          table(
            "instances",
            counts.map((n, i) => ({ id: `dep${i}`, weight: i === 0 ? 100 : 0, n })),
          ),
        );
        const total = counts.reduce((a, c) => a + c, 0);
        const perInstance = new Map<string, number>();
        const picks = 2_000 * total;
        for (let i = 0; i < picks; i++) {
          const inst = b.pick();
          assert.ok(inst);
          perInstance.set(inst.key, (perInstance.get(inst.key) ?? 0) + 1);
        }
        assert.equal(perInstance.size, total, "every instance was picked");
        for (const [key, n] of perInstance) {
          const pct = (n / picks) * 100;
          assert.ok(Math.abs(pct - 100 / total) <= 2, `${key}: ${pct.toFixed(2)}% of ${total} instances`);
        }
      },
    ),
    { numRuns: 40 },
  );
});

test("shares: revisions without an available instance get nothing, the rest renormalise, weight 0 gets nothing", () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.record({
          weight: fc.option(fc.integer({ min: 0, max: 100 }), { nil: null }),
          available: fc.integer({ min: 0, max: 5 }),
        }),
        {
          minLength: 1,
          maxLength: 6,
        },
      ),
      fc.constantFrom("instances" as const, "weighted" as const),
      (revs, mode) => {
        const shares = revisionShares(mode, revs);
        const anyAvailable = revs.some((r) => r.available > 0);
        const sum = shares.reduce((a, b) => a + b, 0);
        if (anyAvailable) assert.ok(Math.abs(sum - 1) < 1e-9, `shares add up to ${sum}`);
        else assert.equal(sum, 0);
        revs.forEach((r, i) => {
          if (r.available === 0) assert.equal(shares[i], 0, "no instance, no share");
        });
        const weightedSum = revs.reduce((a, r) => a + (r.available > 0 ? (r.weight ?? 0) : 0), 0);
        if (mode === "weighted" && weightedSum > 0) {
          revs.forEach((r, i) => {
            const expected = r.available > 0 ? (r.weight ?? 0) / weightedSum : 0;
            assert.ok(Math.abs((shares[i] ?? 0) - expected) < 1e-9);
          });
        } else if (anyAvailable) {
          const total = revs.reduce((a, r) => a + r.available, 0);
          revs.forEach((r, i) =>
            assert.ok(Math.abs((shares[i] ?? 0) - r.available / total) < 1e-9, "by instance count"),
          );
        }
      },
    ),
  );
});

test("weighted: a revision with weight but no instance hands its weight to the others in proportion", () => {
  const shares = revisionShares("weighted", [
    { weight: 50, available: 0 },
    { weight: 30, available: 2 },
    { weight: 20, available: 1 },
  ]);
  assert.deepEqual(
    shares.map((s) => Math.round(s * 100)),
    [0, 60, 40],
  );
  // Never to nothing: only weight-0 revisions have instances → by instance count.
  assert.deepEqual(
    revisionShares("weighted", [
      { weight: 100, available: 0 },
      { weight: 0, available: 3 },
    ]),
    [0, 1],
  );
});

test("pickByShare returns an index with a positive share, and covers every such index", () => {
  fc.assert(
    fc.property(
      fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 1, maxLength: 8 }),
      fc.double({ min: 0, max: 0.999999, noNaN: true }),
      (raw, r) => {
        const sum = raw.reduce((a, b) => a + b, 0);
        const shares = raw.map((x) => (sum > 0 ? x / sum : 0));
        const i = pickByShare(shares, r);
        if (sum === 0) assert.equal(i, -1);
        else assert.ok((shares[i] ?? 0) > 0, `picked ${i} with share ${shares[i]}`);
      },
    ),
  );
});

test("power of two choices: two distinct candidates, the less loaded wins", () => {
  fc.assert(
    fc.property(
      fc.array(fc.nat({ max: 50 }), { minLength: 2, maxLength: 20 }),
      fc.double({ min: 0, max: 0.9999, noNaN: true }),
      fc.double({ min: 0, max: 0.9999, noNaN: true }),
      (loads, r1, r2) => {
        const n = loads.length;
        const i = Math.min(n - 1, Math.floor(r1 * n));
        let j = Math.min(n - 2, Math.floor(r2 * (n - 1)));
        if (j >= i) j++;
        assert.notEqual(i, j);
        const k = powerOfTwo(n, (x) => loads[x] ?? 0, r1, r2);
        assert.ok(k === i || k === j);
        assert.equal(loads[k], Math.min(loads[i] ?? 0, loads[j] ?? 0));
      },
    ),
  );
  assert.equal(
    powerOfTwo(1, () => 5, 0.3, 0.7),
    0,
  );
  assert.equal(
    powerOfTwo(0, () => 0, 0.3, 0.7),
    -1,
  );
});

test("the most loaded instance is never picked while another exists", () => {
  const b = new Balancer({ random: prng(7) });
  b.setTable(table("instances", [{ id: "a", weight: null, n: 4 }]));
  const busy = b.revisions[0]?.instances[2];
  assert.ok(busy);
  busy.outstanding = 1000;
  for (let i = 0; i < 5_000; i++) assert.notEqual(b.pick()?.key, busy.key);
});

const healthPolicy = fc.record({
  failureThreshold: fc.integer({ min: 1, max: 5 }),
  ejectBaseMs: fc.integer({ min: 1, max: 5_000 }),
  ejectCapMs: fc.integer({ min: 1, max: 120_000 }),
});

test("ejection lasts base·2^(n-1), capped, and grows with every ejection in a row", () => {
  fc.assert(
    fc.property(healthPolicy, fc.integer({ min: 1, max: 40 }), (p: HealthPolicy, n) => {
      const d = ejectionMs(n, p);
      assert.ok(d <= p.ejectCapMs);
      assert.ok(d >= Math.min(p.ejectBaseMs, p.ejectCapMs));
      assert.ok(ejectionMs(n + 1, p) >= d, "never shrinks");
    }),
  );
});

test("failures eject after the threshold, not while ejected; a success heals; ejection ends by time", () => {
  fc.assert(
    fc.property(
      healthPolicy,
      fc.array(fc.constantFrom("fail", "ok", "wait"), { maxLength: 60 }),
      (p: HealthPolicy, events) => {
        let s = HEALTHY;
        let now = 1_000;
        let prevEjections = 0;
        for (const e of events) {
          if (e === "wait") {
            now += p.ejectBaseMs;
            continue;
          }
          if (e === "ok") {
            s = afterSuccess(s);
            assert.deepEqual(s, HEALTHY);
            prevEjections = 0;
            continue;
          }
          const wasEjected = isEjected(s, now);
          const next = afterFailure(s, now, p);
          if (wasEjected) assert.equal(next, s, "failures while ejected change nothing");
          else if (s.failures + 1 >= p.failureThreshold) {
            assert.ok(isEjected(next, now), "ejected at the threshold");
            assert.equal(next.ejections, prevEjections + 1);
            assert.equal(next.ejectedUntil, now + ejectionMs(next.ejections, p));
            prevEjections = next.ejections;
          } else assert.ok(!isEjected(next, now));
          s = next;
          if (isEjected(s, now)) assert.ok(!isEjected(s, s.ejectedUntil), "the ejection ends at ejectedUntil");
        }
      },
    ),
  );
});

test("ejected instances get no traffic until their ejection ends; all ejected → ignore ejection", () => {
  let now = 0;
  const b = new Balancer({
    random: prng(3),
    now: () => now,
    health: { failureThreshold: 1, ejectBaseMs: 1_000, ejectCapMs: 8_000 },
  });
  b.setTable(table("instances", [{ id: "a", weight: null, n: 3 }]));
  const [x, y, z] = b.revisions[0]?.instances ?? [];
  assert.ok(x && y && z);
  assert.equal(b.failure(x), true);
  for (let i = 0; i < 2_000; i++) assert.notEqual(b.pick()?.key, x.key);
  now = 999;
  assert.notEqual(b.pick()?.key, x.key);
  now = 1_000;
  const seen = new Set(Array.from({ length: 200 }, () => b.pick()?.key));
  assert.ok(seen.has(x.key), "back after 1 s");
  // The second ejection in a row lasts twice as long.
  assert.equal(b.failure(x), true);
  now = 2_999;
  for (let i = 0; i < 500; i++) assert.notEqual(b.pick()?.key, x.key);
  now = 3_000;
  // Everyone ejected: the balancer still answers (panic mode) rather than failing every request.
  b.failure(x);
  b.failure(y);
  b.failure(z);
  const panic = new Set(Array.from({ length: 200 }, () => b.pick()?.key));
  assert.equal(panic.size, 3);
});

test("excluded instances (a retry) are never picked; a weighted retry may land on another revision", () => {
  fc.assert(
    fc.property(weightedRevisions, fc.integer(), (revs, seed) => {
      const b = new Balancer({ random: prng(seed) });
      b.setTable(table("weighted", revs));
      const all = b.revisions.flatMap((r) => r.instances.map((i) => i.key));
      const excluded = new Set(all.filter((_, i) => i % 2 === 0));
      for (let i = 0; i < 200; i++) {
        const inst = b.pick(excluded);
        if (excluded.size === all.length) assert.equal(inst, undefined);
        else {
          assert.ok(inst);
          assert.ok(!excluded.has(inst.key));
        }
      }
    }),
  );
});

test("a new table keeps the health and load of instances that stay, and reports what left", () => {
  const b = new Balancer({ random: prng(1) });
  b.setTable(table("instances", [{ id: "a", weight: null, n: 3 }]));
  const kept = b.revisions[0]?.instances[0];
  assert.ok(kept);
  kept.outstanding = 7;
  b.failure(kept);
  const { added, removed } = b.setTable(
    table("instances", [
      { id: "a", weight: null, n: 1 },
      { id: "b", weight: null, n: 2 },
    ]),
  );
  assert.equal(b.instance(kept.key), kept);
  assert.equal(kept.outstanding, 7);
  assert.ok(b.isEjected(kept));
  assert.deepEqual(removed.map((i) => i.key).sort(), ["10.0.0.2:8080", "10.0.0.3:8080"]);
  assert.deepEqual(added.map((i) => i.key).sort(), ["10.0.1.1:8080", "10.0.1.2:8080"]);
  assert.equal(new Balancer().pick(), undefined, "an empty table picks nothing");
});

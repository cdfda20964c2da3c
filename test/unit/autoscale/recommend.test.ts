// The autoscaler's pure decision: per-revision needs, the rollout engine's sizes inverted,
// stabilisation windows, steps, bounds, scale to zero and waking.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { mergePolicy, type AutoscalePolicy } from "../../../src/contracts/autoscaling.js";
import { recommend, smallestCovering, type Recorded, type RecommendInput } from "../../../src/autoscale/recommend.js";
import { servingOf, type RevisionLoad, type Shape } from "../../../src/autoscale/sizing.js";
import { canaryReplicas } from "../../../src/rollout/progressive/engine.js";

const policy = (over: Partial<AutoscalePolicy> = {}): AutoscalePolicy => ({
  ...mergePolicy(null, { minReplicas: 1, maxReplicas: 20, concurrencyTarget: 10 }, undefined),
  ...over,
});

const load = (deploymentId: string, inFlight: number, ready = 1): RevisionLoad => ({
  deploymentId,
  inFlight,
  cpuPercent: null,
  ready,
});

function input(
  p: AutoscalePolicy,
  current: number,
  loads: RevisionLoad[],
  shape: Shape = { kind: "pool" },
  nowMs = 1_000_000,
): RecommendInput {
  return { policy: p, nowMs, current, serving: servingOf(shape, loads), held: 0, lastRequestMs: nowMs };
}

test("a load step up is followed at once with no scale-up window", () => {
  const r = recommend(input(policy({ scaleUpWindowSeconds: 0 }), 2, [load("d1", 95)]), []);
  assert.equal(r.replicas, 10);
  assert.match(r.reason, /95 in flight at 10 per instance/);
});

test("load gone: held by the scale-down window, then down to min, never below", () => {
  const p = policy({ scaleDownWindowSeconds: 300, minReplicas: 2 });
  let history: readonly Recorded[] = [];
  let current = 1;
  let t = 0;
  // Busy for a minute.
  for (; t <= 60_000; t += 15_000) {
    const r = recommend(input(p, current, [load("d1", 100)], { kind: "pool" }, t), history);
    history = r.history;
    current = r.replicas;
  }
  assert.equal(current, 10);
  // Quiet: still 10 until the window has passed since the last busy recommendation.
  for (; t < 60_000 + 300_000; t += 15_000) {
    const r = recommend(input(p, current, [load("d1", 0)], { kind: "pool" }, t), history);
    history = r.history;
    current = r.replicas;
    assert.equal(current, 10, `at ${t}`);
    assert.match(r.reason, /scale-down window/);
  }
  const r = recommend(input(p, current, [load("d1", 0)], { kind: "pool" }, t + 15_000), history);
  assert.equal(r.replicas, 2);
});

test("max step and max bound", () => {
  const r = recommend(input(policy({ maxStep: 3 }), 2, [load("d1", 1000)]), []);
  assert.equal(r.replicas, 5);
  assert.match(r.reason, /step of 3/);
  const capped = recommend(input(policy(), 2, [load("d1", 1000)]), []);
  assert.equal(capped.replicas, 20);
  assert.match(capped.reason, /capped at max 20/);
});

test("canary at 65 %: a hot canary raises the region only as far as the canary needs; an idle stable does not hide it", () => {
  const shape: Shape = { kind: "canary", stable: "s", canary: "c", weight: 65, scaleDownStable: false };
  // The canary alone has 130 in flight (needs 13): the region must be the smallest R with ceil(0.65 R) ≥ 13.
  const r = recommend(input(policy({ maxReplicas: 100 }), 4, [load("s", 0, 4), load("c", 130, 3)], shape), []);
  assert.equal(r.replicas, 19);
  assert.equal(canaryReplicas(19, 65), 13);
  assert.equal(canaryReplicas(18, 65), 12);
  assert.match(r.reason, /revision c needs 13/);
  // Averaged across both (130 over 7 instances), an HPA would have wanted 13 in all, leaving the canary at 9.
});

test("scale-down-stable canary: the stable is never taken below what its traffic share needs", () => {
  const shape: Shape = { kind: "canary", stable: "s", canary: "c", weight: 65, scaleDownStable: true };
  // Stable serves 35 % and has 80 in flight: needs 8, so the least R with ceil(0.35 R) ≥ 8 → 21.
  const r = recommend(
    input(policy({ maxReplicas: 100, scaleDownWindowSeconds: 0 }), 30, [load("s", 80, 10), load("c", 10, 20)], shape),
    [],
  );
  assert.equal(r.replicas, 21);
  assert.equal(Math.ceil((21 * 35) / 100), 8);
  assert.equal(Math.ceil((20 * 35) / 100), 7);
});

test("blue-green: the preview's instances carry no traffic and do not count", () => {
  const shape: Shape = { kind: "blue-green", active: "a" };
  const r = recommend(input(policy(), 3, [load("a", 30, 3), load("p", 500, 3)], shape), []);
  assert.equal(r.replicas, 3);
});

test("scale to zero after the idle window, not before; a held request wakes at once", () => {
  const p = policy({
    minReplicas: 0,
    scaleToZero: { idleSeconds: 300, maxHeldRequests: 1000, heldTimeoutSeconds: 30 },
  });
  const base = input(p, 1, [load("d1", 0)]);
  assert.equal(recommend({ ...base, lastRequestMs: base.nowMs - 299_000 }, []).replicas, 1);
  const asleep = recommend({ ...base, lastRequestMs: base.nowMs - 300_000 }, []);
  assert.equal(asleep.replicas, 0);
  assert.match(asleep.reason, /scaled to zero/);
  // Held request at zero: 1 now, even with a long scale-up window.
  const woke = recommend(
    { ...base, policy: { ...p, scaleUpWindowSeconds: 600 }, current: 0, held: 3, lastRequestMs: base.nowMs },
    asleep.history,
  );
  assert.equal(woke.replicas, 1);
  assert.match(woke.reason, /3 request\(s\) held at zero/);
  // Many held requests: as many as their concurrency needs.
  const many = recommend(
    { ...base, current: 0, held: 1000, serving: servingOf({ kind: "pool" }, [load("d1", 1000, 0)]) },
    [],
  );
  assert.equal(many.replicas, 20);
  // Held at the sentinel, not yet in flight anywhere: their number alone asks for instances.
  const heldOnly = recommend({ ...base, current: 0, held: 45, serving: [] }, []);
  assert.equal(heldOnly.replicas, 5, "45 held at 10 per instance");
  assert.equal(recommend({ ...base, current: 0, held: 5000, serving: [] }, []).replicas, 20, "within max");
});

test("smallestCovering finds the least region count for a need", () => {
  assert.equal(
    smallestCovering((r) => r, 5, 1, 10),
    5,
  );
  assert.equal(
    smallestCovering((r) => r, 0, 2, 10),
    2,
  );
  assert.equal(
    smallestCovering((r) => r, 50, 1, 10),
    10,
  );
  assert.equal(
    smallestCovering((r) => canaryReplicas(r, 65), 13, 1, 100),
    19,
  );
});

const shapes: fc.Arbitrary<Shape> = fc.oneof(
  fc.constant<Shape>({ kind: "pool" }),
  fc.record({
    kind: fc.constant("canary" as const),
    stable: fc.constant("s"),
    canary: fc.constant("c"),
    weight: fc.integer({ min: 1, max: 100 }),
    scaleDownStable: fc.boolean(),
  }),
);

test("property: within [min, max]; every revision gets its need unless max stops it; nothing larger than needed", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 10 }),
      fc.integer({ min: 0, max: 60 }),
      fc.integer({ min: 1, max: 50 }),
      fc.integer({ min: 0, max: 2000 }),
      fc.integer({ min: 0, max: 2000 }),
      fc.integer({ min: 0, max: 60 }),
      shapes,
      (min, extra, target, sIn, cIn, current, shape) => {
        const p = policy({
          minReplicas: min,
          maxReplicas: min + extra,
          concurrencyTarget: target,
          scaleDownWindowSeconds: 0,
        });
        const inp = input(p, current, [load("s", sIn, 1), load("c", cIn, 1)], shape);
        const r = recommend(inp, []);
        assert.ok(r.replicas >= p.minReplicas && r.replicas <= p.maxReplicas);
        for (const s of inp.serving) {
          const need = Math.ceil(s.inFlight / target);
          if (r.replicas < p.maxReplicas)
            assert.ok(s.sizeAt(r.replicas) >= need, `${s.deploymentId} short: ${r.reason}`);
        }
        // Minimal: one fewer would leave some revision short (or go below min).
        if (r.replicas > p.minReplicas && current !== 0)
          assert.ok(
            inp.serving.some((s) => s.sizeAt(r.replicas - 1) < Math.ceil(s.inFlight / target)),
            r.reason,
          );
      },
    ),
  );
});

test("property: with windows, the count never moves against the windows' evidence", () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 0, max: 400 }), { minLength: 1, maxLength: 60 }),
      fc.integer({ min: 0, max: 120 }),
      fc.integer({ min: 0, max: 300 }),
      fc.option(fc.integer({ min: 1, max: 5 })),
      (loads, up, down, step) => {
        const p = policy({ scaleUpWindowSeconds: up, scaleDownWindowSeconds: down, maxStep: step });
        let history: readonly Recorded[] = [];
        let current = 1;
        loads.forEach((l, i) => {
          const t = i * 15_000;
          const r = recommend(input(p, current, [load("d", l)], { kind: "pool" }, t), history);
          const raws = r.history.filter((h) => h.atMs > t - up * 1000 || h.atMs === t).map((h) => h.replicas);
          if (r.replicas > current) assert.ok(r.replicas <= Math.min(...raws), "up beyond the up window's minimum");
          const rawsDown = r.history.filter((h) => h.atMs > t - down * 1000 || h.atMs === t).map((h) => h.replicas);
          if (r.replicas < current)
            assert.ok(r.replicas >= Math.max(...rawsDown), "down below the down window's maximum");
          if (step !== null) assert.ok(Math.abs(r.replicas - current) <= step);
          assert.ok(r.replicas >= 1 && r.replicas <= 20);
          history = r.history;
          current = r.replicas;
        });
      },
    ),
  );
});

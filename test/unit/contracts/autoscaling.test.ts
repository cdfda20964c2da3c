// The autoscaling policy's validation (shared by ctrl and the agent) and the CLI's spelling of it.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import {
  type AutoscalePolicy,
  formatPolicy,
  mergePolicy,
  parseAutoscaleSpec,
  parseDurationSeconds,
  parseScaleToZeroSpec,
  parseStoredPolicy,
  policyProblem,
  PREVIEW_POLICY,
  regionPolicy,
} from "../../../src/contracts/autoscaling.js";

const LIMIT = 1000;

const ok: AutoscalePolicy = mergePolicy(null, { minReplicas: 1, maxReplicas: 20, concurrencyTarget: 50 }, undefined);

test("a plain policy is valid and keeps what was given", () => {
  assert.equal(policyProblem(ok, LIMIT), null);
  assert.equal(ok.minReplicas, 1);
  assert.equal(ok.maxReplicas, 20);
  assert.equal(ok.concurrencyTarget, 50);
  assert.equal(ok.cpuTargetPercent, null);
  assert.equal(ok.scaleDownWindowSeconds, 300);
});

test("bad policies are refused naming the field", () => {
  const cases: [Partial<AutoscalePolicy>, string][] = [
    [{ minReplicas: 5, maxReplicas: 2 }, "autoscale.min_replicas"],
    [{ maxReplicas: LIMIT + 1 }, "autoscale.max_replicas"],
    [{ concurrencyTarget: 0 }, "autoscale.concurrency"],
    [{ concurrencyTarget: null, cpuTargetPercent: null }, "autoscale.concurrency"],
    [{ cpuTargetPercent: 0 }, "autoscale.cpu"],
    [{ minReplicas: 1, scaleToZero: PREVIEW_POLICY.scaleToZero }, "autoscale.scale_to_zero"],
    [{ minReplicas: 0, scaleToZero: null }, "autoscale.min_replicas"],
    [{ maxStep: 0 }, "autoscale.max_step"],
    [{ scaleDownWindowSeconds: -1 }, "autoscale.scale_down_window_seconds"],
    [
      { minReplicas: 0, scaleToZero: { idleSeconds: 1, maxHeldRequests: 10, heldTimeoutSeconds: 5 } },
      "autoscale.scale_to_zero.idle_seconds",
    ],
    [
      { minReplicas: 0, scaleToZero: { idleSeconds: 300, maxHeldRequests: 0, heldTimeoutSeconds: 5 } },
      "autoscale.scale_to_zero.max_held_requests",
    ],
    [
      { minReplicas: 0, scaleToZero: { idleSeconds: 300, maxHeldRequests: 5, heldTimeoutSeconds: 0 } },
      "autoscale.scale_to_zero.held_timeout_seconds",
    ],
    [{ minReplicas: 1.5 }, "autoscale.min_replicas"],
  ];
  for (const [patch, field] of cases) {
    const p = policyProblem({ ...ok, ...patch }, LIMIT);
    assert.ok(p, `${JSON.stringify(patch)} should be refused`);
    assert.equal(p.field, field, JSON.stringify(patch));
  }
  // The environment's limit is the caller's: a smaller one refuses a max that 1000 allows.
  assert.equal(policyProblem({ ...ok, maxReplicas: 20 }, 10)?.field, "autoscale.max_replicas");
  assert.equal(
    policyProblem({ ...ok, minReplicas: 5, maxReplicas: 2 }, LIMIT, "regions[1].autoscale")?.field,
    "regions[1].autoscale.min_replicas",
  );
});

test("the preview policy is valid and scales to zero", () => {
  assert.equal(policyProblem(PREVIEW_POLICY, LIMIT), null);
  assert.equal(PREVIEW_POLICY.minReplicas, 0);
  assert.ok(PREVIEW_POLICY.scaleToZero);
});

test("durations: seconds, minutes, hours, combinations; junk is null", () => {
  assert.equal(parseDurationSeconds("45"), 45);
  assert.equal(parseDurationSeconds("30s"), 30);
  assert.equal(parseDurationSeconds("5m"), 300);
  assert.equal(parseDurationSeconds("1h30m"), 5400);
  for (const bad of ["", "5x", "m", "-1s", "1.5m", "5m1h"]) assert.equal(parseDurationSeconds(bad), null, bad);
});

test("--autoscale parses every key and names the key at fault", () => {
  assert.deepEqual(parseAutoscaleSpec("--autoscale", "min=1,max=20,concurrency=50,cpu=80%,up=15s,down=5m,step=4"), {
    minReplicas: 1,
    maxReplicas: 20,
    concurrencyTarget: 50,
    cpuTargetPercent: 80,
    scaleUpWindowSeconds: 15,
    scaleDownWindowSeconds: 300,
    maxStep: 4,
  });
  assert.throws(() => parseAutoscaleSpec("--autoscale", "min=1,maxx=3"), /--autoscale: unknown key "maxx"/);
  assert.throws(() => parseAutoscaleSpec("--autoscale", "min=-1"), /--autoscale: min must be a whole number/);
  assert.throws(() => parseAutoscaleSpec("--autoscale", "min=1,min=2"), /min given twice/);
  assert.throws(() => parseAutoscaleSpec("--autoscale", "down=soon"), /down must be a duration/);
  assert.deepEqual(parseScaleToZeroSpec("--scale-to-zero", "idle=5m,held=200,timeout=20s"), {
    idleSeconds: 300,
    maxHeldRequests: 200,
    heldTimeoutSeconds: 20,
  });
  // A bare number is seconds; too short an idle window is the policy's to refuse, not the parser's.
  assert.deepEqual(parseScaleToZeroSpec("--scale-to-zero", "idle=5"), { idleSeconds: 5 });
  assert.throws(() => parseScaleToZeroSpec("--scale-to-zero", "idle=soon"), /idle must be a duration/);
  assert.throws(() => parseScaleToZeroSpec("--scale-to-zero", "held=many"), /held must be a whole number/);
  assert.throws(() => parseScaleToZeroSpec("--scale-to-zero", "wait=5m"), /unknown key "wait"/);
});

test("merging: --scale-to-zero alone gives min 0; removing it keeps the rest", () => {
  const z = mergePolicy(null, {}, { idleSeconds: 300 });
  assert.equal(z.minReplicas, 0);
  assert.equal(z.scaleToZero?.maxHeldRequests, 1000);
  assert.equal(policyProblem(z, LIMIT), null);
  const back = mergePolicy(z, { minReplicas: 1 }, null);
  assert.equal(back.scaleToZero, null);
  assert.equal(back.minReplicas, 1);
  assert.equal(policyProblem(back, LIMIT), null);
  // min 1 kept while asking for scale-to-zero is refused, not silently changed.
  assert.equal(policyProblem(mergePolicy(ok, {}, { idleSeconds: 300 }), LIMIT)?.field, "autoscale.scale_to_zero");
});

test("a region's own policy wins, null there switches autoscaling off there", () => {
  const overrides = new Map<string, AutoscalePolicy | null>([
    ["eu", PREVIEW_POLICY],
    ["us", null],
  ]);
  assert.equal(regionPolicy(ok, overrides, "eu"), PREVIEW_POLICY);
  assert.equal(regionPolicy(ok, overrides, "us"), null);
  assert.equal(regionPolicy(ok, overrides, "ap"), ok);
});

const policies = fc.record({
  minReplicas: fc.integer({ min: 0, max: 50 }),
  maxReplicas: fc.integer({ min: 1, max: 50 }),
  concurrencyTarget: fc.option(fc.integer({ min: 1, max: 500 })),
  cpuTargetPercent: fc.option(fc.integer({ min: 1, max: 200 })),
  scaleUpWindowSeconds: fc.integer({ min: 0, max: 600 }),
  scaleDownWindowSeconds: fc.integer({ min: 0, max: 600 }),
  maxStep: fc.option(fc.integer({ min: 1, max: 50 })),
  scaleToZero: fc.option(
    fc.record({
      idleSeconds: fc.integer({ min: 30, max: 3600 }),
      maxHeldRequests: fc.integer({ min: 1, max: 5000 }),
      heldTimeoutSeconds: fc.integer({ min: 1, max: 600 }),
    }),
  ),
});

test("property: stored text round-trips every policy", () => {
  fc.assert(
    fc.property(policies, (p) => {
      assert.deepEqual(parseStoredPolicy(formatPolicy(p)), {
        ...p,
        scaleToZero: p.scaleToZero ? { ...p.scaleToZero } : null,
      });
    }),
  );
  assert.equal(parseStoredPolicy(null), null);
  assert.throws(() => parseStoredPolicy('{"minReplicas":"1"}'), /minReplicas/);
});

test("property: a policy is valid exactly when its bounds and targets agree", () => {
  fc.assert(
    fc.property(policies, (p) => {
      const valid =
        p.minReplicas <= p.maxReplicas &&
        (p.concurrencyTarget !== null || p.cpuTargetPercent !== null) &&
        (p.scaleToZero === null ? p.minReplicas >= 1 : p.minReplicas === 0);
      assert.equal(policyProblem(p, LIMIT) === null, valid, JSON.stringify(p));
    }),
  );
});

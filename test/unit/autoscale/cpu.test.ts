// CPU targets: each revision's use from the metrics API's pod figures, judged on its own pods and
// against what each instance is given; a revision whose CPU is not measured never lets the region
// go down on the other figures' word.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { cpuByRevision, cpuPercent } from "../../../src/autoscale/cpu.js";
import { recommend, type RecommendInput } from "../../../src/autoscale/recommend.js";
import { servingOf, type RevisionLoad, type Shape } from "../../../src/autoscale/sizing.js";
import { mergePolicy, type AutoscalePolicy } from "../../../src/contracts/autoscaling.js";
import { canaryReplicas } from "../../../src/rollout/progressive/engine.js";
import { LABEL_DEPLOYMENT_ID } from "../../../src/contracts/labels.js";

const podMetrics = (deploymentId: string | undefined, ...cpu: string[]): unknown => ({
  metadata: { name: "p", labels: deploymentId === undefined ? {} : { [LABEL_DEPLOYMENT_ID]: deploymentId } },
  containers: cpu.map((c, i) => ({ name: `c${i}`, usage: { cpu: c, memory: "10Mi" } })),
});

test("each revision's pods add up; unlabelled pods and figures that are not quantities are left out", () => {
  const by = cpuByRevision([
    podMetrics("d1", "250000000n"),
    podMetrics("d1", "150m"),
    podMetrics("d2", "1", "500000u"),
    podMetrics(undefined, "900m"),
    podMetrics("d3", "lots"),
    { metadata: { labels: { [LABEL_DEPLOYMENT_ID]: "d4" } } },
  ]);
  assert.deepEqual(Object.fromEntries(by), {
    d1: { millicores: 400, pods: 2 },
    d2: { millicores: 1500, pods: 1 },
  });
});

test("utilisation is the average use per pod over what each instance is given", () => {
  assert.equal(cpuPercent({ millicores: 400, pods: 2 }, 250), 80);
  assert.equal(cpuPercent(undefined, 250), null);
  assert.equal(cpuPercent({ millicores: 0, pods: 0 }, 250), null);
  assert.equal(cpuPercent({ millicores: 100, pods: 1 }, 0), null);
});

const policy = (over: Partial<AutoscalePolicy> = {}): AutoscalePolicy => ({
  ...mergePolicy(null, { minReplicas: 1, maxReplicas: 20, cpuTargetPercent: 50 }, undefined),
  concurrencyTarget: null,
  scaleUpWindowSeconds: 0,
  scaleDownWindowSeconds: 0,
  ...over,
});

const load = (deploymentId: string, cpu: number | null, ready: number, inFlight = 0): RevisionLoad => ({
  deploymentId,
  inFlight,
  cpuPercent: cpu,
  ready,
});

const input = (
  p: AutoscalePolicy,
  current: number,
  loads: RevisionLoad[],
  shape: Shape = { kind: "pool" },
): RecommendInput => ({
  policy: p,
  nowMs: 1_000_000,
  current,
  serving: servingOf(shape, loads),
  held: 0,
  lastRequestMs: 1_000_000,
});

test("a CPU target: 4 instances at 100 % with a target of 50 % need 8; at 10 % they need 1", () => {
  const up = recommend(input(policy(), 4, [load("d1", 100, 4)]), []);
  assert.equal(up.replicas, 8);
  assert.match(up.reason, /cpu 100% on 4 at a target of 50%/);
  assert.equal(recommend(input(policy(), 4, [load("d1", 10, 4)]), []).replicas, 1);
});

test("a canary's own CPU drives its share; an idle stable neither hides it nor is averaged with it", () => {
  const shape: Shape = { kind: "canary", stable: "s", canary: "c", weight: 65, scaleDownStable: false };
  // Canary at 2 instances running hot (150 %), stable at 10 idle (5 %): the canary needs 6 of its
  // own, and the smallest region whose 65 % share is 6 is 8 (not the max, not an average).
  const r = recommend(input(policy(), 10, [load("s", 5, 10), load("c", 150, 2)], shape), []);
  assert.match(r.reason, /revision c needs 6/);
  assert.equal(r.replicas, 8);
  assert.equal(canaryReplicas(r.replicas, 65), 6);
  assert.equal(canaryReplicas(r.replicas - 1, 65), 5, "and no smaller region would do");
});

test("not measured (no metrics API, or no figure yet): never down on the other figures' word, up still", () => {
  const both = policy({ concurrencyTarget: 10 });
  const down = recommend(input(both, 6, [load("d1", null, 6, 5)]), []);
  assert.equal(down.replicas, 6);
  assert.match(down.reason, /cpu of revision d1 not measured: not below 6/);
  const up = recommend(input(both, 2, [load("d1", null, 2, 100)]), []);
  assert.equal(up.replicas, 10, "the concurrency figure still scales up");
  // In a pool, one unmeasured revision makes the pool's CPU unknown (never an average of part of it).
  const pool = recommend(input(policy(), 6, [load("a", 10, 3), load("b", null, 3)]), []);
  assert.equal(pool.replicas, 6);
});

test("property: with every revision measured, the count covers each revision's own need (within max)", () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 1, max: 10 })), {
        minLength: 1,
        maxLength: 3,
      }),
      fc.integer({ min: 1, max: 20 }),
      (revs, current) => {
        const loads = revs.map(([cpu, ready], i) => load(`d${i}`, cpu, ready));
        const p = policy();
        const r = recommend(input(p, current, loads), []);
        const ready = loads.reduce((n, l) => n + l.ready, 0);
        const avg = loads.reduce((n, l) => n + (l.cpuPercent ?? 0) * l.ready, 0) / ready;
        const need = Math.ceil((ready * avg) / 50);
        assert.equal(r.replicas, Math.min(20, Math.max(1, need)));
      },
    ),
  );
});

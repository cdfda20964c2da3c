// The progressive engine (src/rollout/progressive): scripted canary, blue-green and wave runs,
// and properties over random strategies, observations and commands: weights add up to 100 and
// avoid revisions with no available replica, an abort is 100 % stable in the same decision,
// later waves never see the new revision before their gate, steps never go backwards.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  analysisRequest,
  canaryReplicas,
  decide,
  INITIAL_STATE,
  safeWeights,
  wavesOf,
  type AnalysisRules,
  type CanaryStep,
  type Command,
  type Decision,
  type ProgressiveSpec,
  type ProgressiveState,
  type RegionObservation,
  type Verdict,
} from "../../../../src/rollout/progressive/index.js";

const T0 = Date.parse("2026-01-01T00:00:00Z");
const RULES: AnalysisRules = {
  minSuccessRatePercent: 99,
  maxP99Ms: null,
  minRequests: 10,
  intervalSeconds: 10,
  checks: 2,
  failuresAllowed: 0,
};

function canary(steps: CanaryStep[], waves: ProgressiveSpec["waves"] = null): ProgressiveSpec {
  return { strategy: { type: "canary", steps, scaleDownStable: false }, waves, progressDeadlineSeconds: 600 };
}

/** Observations where every revision has `avail(id, region, target)` available. */
function observe(regions: string[], replicas: number, last: Decision | null, availableAll = true): RegionObservation[] {
  return regions.map((region) => {
    const d = last?.regions.find((r) => r.region === region);
    const revisions = new Map<string, { available: number; ready: number; current: number }>();
    for (const [id, n] of Object.entries(d?.replicas ?? {})) {
      const a = availableAll ? n : 0;
      revisions.set(id, { available: a, ready: a, current: n });
    }
    return { region, replicas, revisions };
  });
}

class Sim {
  state: ProgressiveState = INITIAL_STATE;
  last: Decision | null = null;
  now = T0;
  constructor(
    readonly spec: ProgressiveSpec,
    readonly regions: string[],
    readonly replicas = 10,
  ) {}
  step(
    newest: string | null,
    command: Command | null = null,
    verdict: Verdict | null = null,
    available = true,
  ): Decision {
    const d = decide({
      spec: this.spec,
      state: this.state,
      newest,
      regions: observe(this.regions, this.replicas, this.last, available),
      command,
      verdict,
      now: this.now,
    });
    this.state = d.state;
    this.last = d;
    return d;
  }
  /** Decides until nothing changes (pods become available at once). */
  settle(newest: string | null): Decision {
    let d = this.step(newest);
    for (let i = 0; i < 20; i++) {
      const before = JSON.stringify(this.state);
      d = this.step(newest);
      if (JSON.stringify(this.state) === before) break;
    }
    return d;
  }
  weight(region: string, id: string): number {
    return this.last?.regions.find((r) => r.region === region)?.weights.find((w) => w.deploymentId === id)?.weight ?? 0;
  }
}

describe("progressive engine: canary", () => {
  it("walks 20 → pause → 50 → 100 and completes on promote", () => {
    const sim = new Sim(
      canary([
        { type: "setWeight", weight: 20 },
        { type: "pause", seconds: null },
        { type: "setWeight", weight: 50 },
      ]),
      ["a"],
    );
    sim.settle("v1");
    assert.equal(sim.state.stable, "v1");
    assert.equal(sim.state.phase, "Healthy");
    assert.equal(sim.weight("a", "v1"), 100);
    sim.settle("v2");
    assert.equal(sim.state.canary, "v2");
    assert.equal(sim.state.phase, "Paused");
    assert.equal(sim.weight("a", "v2"), 20);
    assert.equal(sim.last?.regions[0]?.replicas.v2, 2, "canary sized to its share");
    assert.equal(sim.last?.regions[0]?.replicas.v1, 10, "stable stays at full size");
    sim.step("v2", "promote");
    sim.settle("v2");
    assert.equal(sim.state.canary, null);
    assert.equal(sim.state.stable, "v2");
    assert.equal(sim.state.phase, "Healthy");
    assert.equal(sim.weight("a", "v2"), 100);
    assert.equal(sim.last?.regions[0]?.replicas.v1 ?? 0, 0, "old stable scaled down at the end");
  });

  it("an abort returns 100 % to stable at once and scales the canary to 0; promote retries", () => {
    const sim = new Sim(
      canary([
        { type: "setWeight", weight: 30 },
        { type: "pause", seconds: null },
      ]),
      ["a", "b"],
    );
    sim.settle("v1");
    sim.settle("v2");
    assert.equal(sim.weight("b", "v2"), 30);
    const d = sim.step("v2", "abort");
    assert.equal(d.aborted, true);
    assert.equal(d.state.phase, "Degraded");
    assert.match(d.state.reason, /aborted/);
    for (const r of d.regions) {
      assert.deepEqual(r.weights.find((w) => w.deploymentId === "v1")?.weight, 100);
      assert.equal(r.replicas.v2, 0);
    }
    assert.ok(d.events.some((e) => e.reason === "RolloutAborted" && e.type === "Warning"));
    // It stays aborted…
    sim.settle("v2");
    assert.equal(sim.state.phase, "Degraded");
    // …until promote retries it from the first step.
    sim.step("v2", "promote");
    sim.settle("v2");
    assert.equal(sim.weight("a", "v2"), 30);
  });

  it("a failed analysis aborts with the measurement in the reason; passes advance", () => {
    const sim = new Sim(
      canary([
        { type: "setWeight", weight: 10 },
        { type: "analysis", rules: RULES },
        { type: "setWeight", weight: 60 },
        { type: "pause", seconds: null },
      ]),
      ["a"],
    );
    sim.settle("v1");
    sim.settle("v2");
    assert.equal(analysisRequest(sim.spec, sim.state, ["a"], sim.now), null, "not due before the interval");
    sim.now += 10_000;
    const req = analysisRequest(sim.spec, sim.state, ["a"], sim.now);
    assert.ok(req);
    assert.equal(req.canary, "v2");
    sim.step("v2", null, { result: "pass", reason: "ok", at: sim.now });
    assert.equal(sim.state.analysis.passed, 1);
    sim.now += 10_000;
    sim.step("v2", null, { result: "pass", reason: "ok", at: sim.now });
    sim.settle("v2");
    assert.equal(sim.weight("a", "v2"), 60);

    const bad = new Sim(sim.spec, ["a"]);
    bad.settle("v1");
    bad.settle("v2");
    bad.now += 10_000;
    const d = bad.step("v2", null, {
      result: "fail",
      reason: "success rate 89.7 % < 99 % over 1,214 requests",
      at: bad.now,
    });
    assert.equal(d.aborted, true);
    assert.match(d.state.reason, /success rate 89\.7 % < 99 % over 1,214 requests/);
    assert.equal(bad.weight("a", "v1"), 100);
  });

  it("a canary that never becomes available aborts at the progress deadline", () => {
    const sim = new Sim({ ...canary([{ type: "setWeight", weight: 50 }]), progressDeadlineSeconds: 30 }, ["a"]);
    sim.settle("v1");
    const d = sim.step("v2", null, null, true);
    assert.equal(d.state.phase, "Progressing");
    sim.now += 31_000;
    const after = decide({
      spec: sim.spec,
      state: sim.state,
      newest: "v2",
      regions: [{ region: "a", replicas: 10, revisions: new Map([["v1", { available: 10, ready: 10, current: 10 }]]) }],
      command: null,
      verdict: null,
      now: sim.now,
    });
    assert.equal(after.aborted, true);
    assert.match(after.state.reason, /not available after 30s/);
  });

  it("a newer deployment mid-rollout replaces the canary", () => {
    const sim = new Sim(
      canary([
        { type: "setWeight", weight: 20 },
        { type: "pause", seconds: null },
      ]),
      ["a"],
    );
    sim.settle("v1");
    sim.settle("v2");
    sim.settle("v3");
    assert.equal(sim.state.canary, "v3");
    assert.equal(sim.last?.regions[0]?.replicas.v2 ?? 0, 0);
    assert.equal(sim.weight("a", "v3"), 20);
  });
});

describe("progressive engine: blue-green", () => {
  const spec: ProgressiveSpec = {
    strategy: { type: "blueGreen", autoPromoteSeconds: null, scaleDownDelaySeconds: 300 },
    waves: null,
    progressDeadlineSeconds: 600,
  };
  it("previews at full size with 0 %, switches on promote, rolls back within the window without scaling up", () => {
    const sim = new Sim(spec, ["a"], 3);
    sim.settle("v1");
    sim.settle("v2");
    const r = sim.last?.regions[0];
    assert.equal(r?.replicas.v2, 3);
    assert.equal(r?.preview, "v2");
    assert.equal(sim.weight("a", "v2"), 0);
    assert.equal(sim.state.phase, "Paused");
    sim.step("v2", "promote");
    sim.settle("v2");
    assert.equal(sim.weight("a", "v2"), 100);
    assert.equal(sim.state.stable, "v2");
    assert.equal(sim.state.previous, "v1");
    assert.equal(sim.last?.regions[0]?.replicas.v1, 3, "previous kept during the window");
    sim.now += 60_000;
    const back = sim.step("v2", "abort");
    assert.equal(back.state.stable, "v1");
    assert.equal(sim.weight("a", "v1"), 100);
    assert.equal(back.regions[0]?.replicas.v1, 3, "no scale-up needed: it was kept");
    assert.equal(back.state.phase, "Degraded");
  });
  it("the newer revision deleted within the window: the kept one serves 100 % again at once, in every wave", () => {
    const waved: ProgressiveSpec = {
      ...spec,
      waves: { regions: [["a"], ["b"]], gate: { type: "available", seconds: 60 } },
    };
    const sim = new Sim(waved, ["a", "b"], 3);
    sim.settle("v1");
    sim.settle("v2");
    sim.step("v2", "promote");
    sim.now += 60_000;
    sim.settle("v2");
    sim.step("v2", "promote");
    sim.settle("v2");
    assert.equal(sim.state.stable, "v2");
    assert.equal(sim.state.previous, "v1");
    const back = sim.step("v1");
    assert.equal(back.state.stable, "v1");
    assert.equal(back.state.canary, null, "not rolled out again as a new revision");
    assert.equal(back.state.previous, null);
    for (const r of ["a", "b"]) {
      assert.equal(sim.weight(r, "v1"), 100, `${r} back on v1`);
      assert.equal(back.regions.find((x) => x.region === r)?.replicas.v1, 3, "kept: no pod created");
    }
    assert.deepEqual(
      back.events.map((e) => e.reason),
      ["RolledBack"],
    );
  });
  it("auto-promotes after N seconds and drops the previous revision after the window", () => {
    const sim = new Sim(
      { ...spec, strategy: { type: "blueGreen", autoPromoteSeconds: 30, scaleDownDelaySeconds: 60 } },
      ["a"],
      2,
    );
    sim.settle("v1");
    const d = sim.settle("v2");
    assert.equal(d.wakeAt, T0 + 30_000);
    sim.now += 30_000;
    sim.settle("v2");
    assert.equal(sim.state.stable, "v2");
    sim.now += 60_000;
    sim.settle("v2");
    assert.equal(sim.last?.regions[0]?.replicas.v1 ?? 0, 0);
  });
});

describe("progressive engine: waves", () => {
  it("a later wave sees nothing until the gate passes; an abort leaves it untouched", () => {
    const spec = canary([{ type: "setWeight", weight: 50 }], {
      regions: [["eu"], ["us"]],
      gate: { type: "available", seconds: 60 },
    });
    const sim = new Sim(spec, ["eu", "us"], 4);
    sim.settle("v1");
    sim.settle("v2");
    assert.equal(sim.state.gate, true, "eu done, waiting at the gate");
    assert.equal(sim.weight("eu", "v2"), 100);
    assert.equal(sim.last?.regions.find((r) => r.region === "us")?.replicas.v2 ?? 0, 0);
    assert.equal(sim.weight("us", "v1"), 100);
    sim.now += 60_000;
    sim.settle("v2");
    assert.equal(sim.state.stable, "v2");
    assert.equal(sim.weight("us", "v2"), 100);

    const failing = new Sim(spec, ["eu", "us"], 4);
    failing.settle("v1");
    failing.settle("v2");
    const d = failing.step("v2", "abort");
    assert.equal(d.regions.find((r) => r.region === "us")?.replicas.v2 ?? 0, 0);
    assert.equal(failing.weight("us", "v1"), 100);
    assert.equal(failing.weight("eu", "v1"), 100);
  });
  it("regions no wave names form a last wave", () => {
    assert.deepEqual(
      wavesOf(
        canary([{ type: "setWeight", weight: 1 }], { regions: [["b"]], gate: { type: "available", seconds: 0 } }),
        ["a", "b", "c"],
      ),
      [["b"], ["a", "c"]],
    );
  });
});

describe("progressive engine: sizing and weights", () => {
  it("canary replicas: rounded up, at least 1 with any weight, 0 without", () => {
    assert.equal(canaryReplicas(10, 20), 2);
    assert.equal(canaryReplicas(3, 20), 1);
    assert.equal(canaryReplicas(3, 50), 2);
    assert.equal(canaryReplicas(3, 0), 0);
    assert.equal(canaryReplicas(3, 100), 3);
    assert.equal(canaryReplicas(0, 50), 0);
  });
  it("safeWeights moves the share of a revision with nothing available", () => {
    assert.deepEqual(
      safeWeights(
        [
          { deploymentId: "s", weight: 80 },
          { deploymentId: "c", weight: 20 },
        ],
        (id) => (id === "s" ? 3 : 0),
      ),
      [
        { deploymentId: "s", weight: 100 },
        { deploymentId: "c", weight: 0 },
      ],
    );
    assert.deepEqual(
      safeWeights(
        [
          { deploymentId: "s", weight: 0 },
          { deploymentId: "c", weight: 100 },
        ],
        (id) => (id === "s" ? 3 : 0),
      ),
      [
        { deploymentId: "s", weight: 100 },
        { deploymentId: "c", weight: 0 },
      ],
    );
  });
});

// ---------------------------------------------------------------- properties

const ruleArb = fc.record({
  minSuccessRatePercent: fc.constantFrom(95, 99),
  maxP99Ms: fc.constantFrom(null, 500),
  minRequests: fc.integer({ min: 0, max: 100 }),
  intervalSeconds: fc.integer({ min: 1, max: 30 }),
  checks: fc.integer({ min: 1, max: 3 }),
  failuresAllowed: fc.integer({ min: 0, max: 2 }),
});
const stepArb = fc.oneof(
  fc.integer({ min: 0, max: 100 }).map((weight) => ({ type: "setWeight" as const, weight })),
  fc.option(fc.integer({ min: 1, max: 60 }), { nil: null }).map((seconds) => ({ type: "pause" as const, seconds })),
  ruleArb.map((rules) => ({ type: "analysis" as const, rules })),
);
const REGIONS = ["r1", "r2", "r3"];
const specArb: fc.Arbitrary<ProgressiveSpec> = fc.record({
  strategy: fc.oneof(
    fc.record({
      type: fc.constant("canary" as const),
      steps: fc.array(stepArb, { minLength: 1, maxLength: 6 }),
      scaleDownStable: fc.boolean(),
    }),
    fc.record({
      type: fc.constant("blueGreen" as const),
      autoPromoteSeconds: fc.option(fc.integer({ min: 1, max: 60 }), { nil: null }),
      scaleDownDelaySeconds: fc.integer({ min: 0, max: 120 }),
    }),
  ),
  waves: fc.option(
    fc.record({
      regions: fc.constantFrom([["r1"], ["r2", "r3"]], [["r2"], ["r1"], ["r3"]], [["r3"]]),
      gate: fc.oneof(
        fc.integer({ min: 0, max: 60 }).map((seconds) => ({ type: "available" as const, seconds })),
        ruleArb.map((rules) => ({ type: "analysis" as const, rules })),
      ),
    }),
    { nil: null },
  ),
  progressDeadlineSeconds: fc.integer({ min: 5, max: 120 }),
});
const actionArb = fc.record({
  advanceMs: fc.integer({ min: 0, max: 40_000 }),
  newest: fc.constantFrom("v1", "v1", "v2", "v2", "v2", "v3"),
  command: fc.constantFrom<Command | null>(null, null, null, "promote", "abort"),
  verdict: fc.constantFrom<Verdict["result"] | null>(null, "pass", "pass", "fail", "inconclusive"),
  // Per region and revision: available = min(desired, this), so pods lag or fail.
  availability: fc.array(fc.integer({ min: 0, max: 12 }), { minLength: 9, maxLength: 9 }),
  replicas: fc.integer({ min: 0, max: 10 }),
});

function observations(
  last: Decision | null,
  state: ProgressiveState,
  a: { availability: number[]; replicas: number },
): RegionObservation[] {
  return REGIONS.map((region, i) => {
    const d = last?.regions.find((r) => r.region === region);
    const revisions = new Map<string, { available: number; ready: number; current: number }>();
    const ids = new Set([...Object.keys(d?.replicas ?? {}), ...(state.stable ? [state.stable] : [])]);
    let k = 0;
    for (const id of ids) {
      const want = d?.replicas[id] ?? a.replicas;
      const n = Math.min(want, a.availability[(i * 3 + k++) % 9] ?? 0);
      revisions.set(id, { available: n, ready: n, current: want });
    }
    return { region, replicas: a.replicas, revisions };
  });
}

describe("progressive engine: properties", () => {
  it("weights add up to 100, avoid unavailable revisions, abort is 100 % stable, later waves untouched, steps only move forward", () => {
    fc.assert(
      fc.property(specArb, fc.array(actionArb, { minLength: 1, maxLength: 25 }), (spec, actions) => {
        let state = INITIAL_STATE;
        let last: Decision | null = null;
        let now = T0;
        for (const a of actions) {
          now += a.advanceMs;
          const regions = observations(last, state, a);
          const req = analysisRequest(spec, state, REGIONS, now);
          const verdict = req && a.verdict ? { result: a.verdict, reason: `measured ${a.verdict}`, at: now } : null;
          const before = state;
          const d = decide({ spec, state, newest: a.newest, regions, command: a.command, verdict, now });
          const waves = wavesOf(spec, REGIONS);
          for (const r of d.regions) {
            const o = regions.find((x) => x.region === r.region);
            const avail = (id: string): number => o?.revisions.get(id)?.available ?? 0;
            if (r.weights.length > 0)
              assert.equal(
                r.weights.reduce((s, w) => s + w.weight, 0),
                100,
                `weights of ${r.region} add up to 100`,
              );
            const anyAvailable = r.weights.some((w) => avail(w.deploymentId) > 0);
            if (anyAvailable)
              for (const w of r.weights)
                if (w.weight > 0)
                  assert.ok(
                    avail(w.deploymentId) > 0,
                    `${r.region}: ${w.deploymentId} gets ${w.weight} % with nothing available`,
                  );
            for (const n of Object.values(r.replicas)) assert.ok(Number.isInteger(n) && n >= 0 && n <= a.replicas);
            // Later waves: the new revision is neither sized nor routed.
            const canaryId = d.state.canary;
            if (canaryId !== null && !d.state.aborted) {
              const wi = waves.findIndex((w) => w.includes(r.region));
              if (wi > d.state.wave) {
                assert.equal(
                  r.replicas[canaryId] ?? 0,
                  0,
                  `${r.region} (wave ${wi}) has the new revision in wave ${d.state.wave}`,
                );
                assert.equal(r.weights.find((w) => w.deploymentId === canaryId)?.weight ?? 0, 0);
              }
            }
          }
          if (d.aborted && d.state.stable !== null && d.state.canary !== null) {
            for (const r of d.regions) {
              const o = regions.find((x) => x.region === r.region);
              const stableAvail = o?.revisions.get(d.state.stable)?.available ?? 0;
              if (stableAvail > 0)
                assert.equal(
                  r.weights.find((w) => w.deploymentId === d.state.stable)?.weight,
                  100,
                  "abort: 100 % stable",
                );
              assert.equal(r.replicas[d.state.canary] ?? 0, 0, "abort: canary scaled to 0");
            }
          }
          // Steps and waves only move forward while the same rollout goes on, unless aborted or retried.
          if (before.canary !== null && before.canary === d.state.canary && !before.aborted && !d.state.aborted) {
            assert.ok(
              d.state.wave > before.wave || (d.state.wave === before.wave && d.state.step >= before.step),
              "steps never go backwards",
            );
          }
          state = d.state;
          last = d;
        }
      }),
      { numRuns: 400 },
    );
  });
});

// The analysis judge and spec validation (src/rollout/progressive): verdicts name the failing
// measurement with its figures; p99 comes from the histogram buckets; a small sample is never a
// pass; every invalid spec names its field.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { LATENCY_BUCKETS_MS, type RevisionSample } from "../../../../src/contracts/analysis.js";
import {
  checkSpec,
  judge,
  p99Ms,
  SpecProblem,
  type AnalysisRules,
  type ProgressiveSpec,
} from "../../../../src/rollout/progressive/index.js";

function sample(requests: number, errors: number, bucket = 3): RevisionSample {
  const latencyBuckets = Array.from({ length: LATENCY_BUCKETS_MS.length + 1 }, (_, i) => (i === bucket ? requests : 0));
  return {
    deploymentId: "v2",
    requests,
    byClass: { "2xx": requests - errors, "3xx": 0, "4xx": 0, "5xx": errors },
    latencyBuckets,
    regions: ["a"],
    fromMs: 0,
    toMs: 1,
  };
}
const RULES: AnalysisRules = {
  minSuccessRatePercent: 99,
  maxP99Ms: 250,
  minRequests: 100,
  intervalSeconds: 10,
  checks: 1,
  failuresAllowed: 0,
};

describe("judge", () => {
  it("fails on the success rate, naming it with the figures", () => {
    const v = judge(RULES, sample(1214, 125), sample(5000, 1));
    assert.equal(v.result, "fail");
    assert.equal(v.reason, "success rate 89.7 % < 99 % over 1,214 requests (stable 100 %)");
  });
  it("fails on p99 from the histogram", () => {
    const v = judge(RULES, sample(1000, 0, 8)); // bucket 8 = ≤ 500 ms
    assert.equal(v.result, "fail");
    assert.match(v.reason, /^p99 ≤ 500 ms > 250 ms over 1,000 requests$/);
  });
  it("too few requests or no sample: inconclusive, never a pass", () => {
    assert.equal(judge(RULES, sample(99, 0)).result, "inconclusive");
    assert.equal(judge(RULES, undefined).result, "inconclusive");
    assert.equal(judge({ ...RULES, minRequests: 0 }, sample(0, 0)).result, "inconclusive");
  });
  it("passes within the rules", () => {
    const v = judge(RULES, sample(1000, 5, 6));
    assert.equal(v.result, "pass");
    assert.match(v.reason, /success rate 99\.5 %, p99 ≤ 100 ms over 1,000 requests/);
  });
  it("p99 is the upper bound of the bucket holding the 99th percentile", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 1000 }), {
          minLength: LATENCY_BUCKETS_MS.length + 1,
          maxLength: LATENCY_BUCKETS_MS.length + 1,
        }),
        (buckets) => {
          const total = buckets.reduce((a, b) => a + b, 0);
          const s = { ...sample(total, 0), latencyBuckets: buckets };
          const p = p99Ms(s);
          if (total === 0) return p === null;
          const idx =
            p === Infinity
              ? LATENCY_BUCKETS_MS.length
              : LATENCY_BUCKETS_MS.indexOf(p as (typeof LATENCY_BUCKETS_MS)[number]);
          const below = buckets.slice(0, idx).reduce((a, b) => a + b, 0);
          const upTo = below + (buckets[idx] ?? 0);
          return below < Math.ceil(total * 0.99) && upTo >= Math.ceil(total * 0.99);
        },
      ),
    );
  });
});

describe("checkSpec", () => {
  const base: ProgressiveSpec = {
    strategy: { type: "canary", steps: [{ type: "setWeight", weight: 20 }], scaleDownStable: false },
    waves: null,
    progressDeadlineSeconds: 600,
  };
  const problem = (spec: ProgressiveSpec, regions = ["a", "b"]): string => {
    try {
      checkSpec(spec, regions);
      return "";
    } catch (err) {
      assert.ok(err instanceof SpecProblem);
      return err.field;
    }
  };
  it("names the field of every problem", () => {
    assert.equal(problem(base), "");
    assert.equal(
      problem({
        ...base,
        strategy: { type: "canary", steps: [{ type: "setWeight", weight: 101 }], scaleDownStable: false },
      }),
      "rollout.progressive.canary.steps[0].set_weight",
    );
    assert.equal(
      problem({ ...base, strategy: { type: "canary", steps: [], scaleDownStable: false } }),
      "rollout.progressive.canary.steps",
    );
    assert.equal(
      problem({
        ...base,
        strategy: {
          type: "canary",
          steps: Array.from({ length: 51 }, () => ({ type: "setWeight" as const, weight: 1 })),
          scaleDownStable: false,
        },
      }),
      "rollout.progressive.canary.steps",
    );
    assert.equal(
      problem({
        ...base,
        strategy: {
          type: "canary",
          steps: [{ type: "analysis", rules: { ...RULES, intervalSeconds: 0 } }],
          scaleDownStable: false,
        },
      }),
      "rollout.progressive.canary.steps[0].analysis.interval_seconds",
    );
    assert.equal(
      problem({ ...base, waves: { regions: [["a"], ["x"]], gate: { type: "available", seconds: 10 } } }),
      "rollout.progressive.waves[1].regions[0]",
    );
    assert.equal(
      problem({ ...base, waves: { regions: [["a"], ["a"]], gate: { type: "available", seconds: 10 } } }),
      "rollout.progressive.waves[1].regions[0]",
    );
    assert.equal(
      problem({ ...base, strategy: { type: "blueGreen", autoPromoteSeconds: 0, scaleDownDelaySeconds: 10 } }),
      "rollout.progressive.blue_green.auto_promote_seconds",
    );
  });
});

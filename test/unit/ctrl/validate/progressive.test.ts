// The progressive strategy at the edges: the API message → the engine's spec (ctrl's validation
// names the API field; waves are checked against the environment's regions) and back, and the
// CLI's option parsing (--steps, --analysis, --waves) into the API message.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { ProgressiveStrategySchema, type ProgressiveStrategy } from "../../../../src/gen/krane/ctrl/v1/api_pb.js";
import { DomainError } from "../../../../src/ctrl/errors.js";
import { progressiveMsg, progressiveOf } from "../../../../src/ctrl/validate/progressive.js";
import { mergeRolloutPolicy, validateRollout } from "../../../../src/ctrl/validate/api.js";
import {
  parseAnalysisRules,
  parseSteps,
  progressiveOf as cliProgressive,
} from "../../../../src/cli/progressive-options.js";

function fieldOf(f: () => unknown): string {
  try {
    f();
    return "";
  } catch (err) {
    assert.ok(err instanceof DomainError, String(err));
    assert.equal(err.code, "invalid_argument");
    return err.message.split(":")[0] ?? "";
  }
}

const msg = (init: Parameters<typeof create<typeof ProgressiveStrategySchema>>[1]): ProgressiveStrategy =>
  create(ProgressiveStrategySchema, init);

describe("progressive strategy validation (API)", () => {
  it("converts a canary and round-trips through the message", () => {
    const m = msg({
      canary: {
        steps: [
          { step: { case: "setWeight", value: 20 } },
          { step: { case: "pause", value: { seconds: 0 } } },
          { step: { case: "analysis", value: { minSuccessRatePercent: 99, minRequests: 100 } } },
        ],
      },
      waves: [{ regions: ["eu"] }, { regions: ["us"] }],
      waveGate: { availableSeconds: 60 },
    });
    const spec = progressiveOf(m, 600, ["eu", "us"]);
    assert.deepEqual(spec.strategy.type === "canary" ? spec.strategy.steps[1] : null, { type: "pause", seconds: null });
    assert.deepEqual(spec.strategy.type === "canary" ? spec.strategy.steps[2] : null, {
      type: "analysis",
      rules: {
        minSuccessRatePercent: 99,
        maxP99Ms: null,
        minRequests: 100,
        intervalSeconds: 30,
        checks: 1,
        failuresAllowed: 0,
      },
    });
    assert.deepEqual(progressiveOf(progressiveMsg(spec), 600, ["eu", "us"]), spec);
  });
  it("names the field of every refusal", () => {
    assert.equal(
      fieldOf(() => progressiveOf(msg({}), 600, [])),
      "rollout.progressive",
    );
    assert.equal(
      fieldOf(() => progressiveOf(msg({ canary: { steps: [{ step: { case: "setWeight", value: 120 } }] } }), 600, [])),
      "rollout.progressive.canary.steps[0].set_weight",
    );
    assert.equal(
      fieldOf(() =>
        progressiveOf(
          msg({
            canary: { steps: [{ step: { case: "setWeight", value: 50 } }, { step: { case: "setWeight", value: 20 } }] },
          }),
          600,
          [],
        ),
      ),
      "rollout.progressive.canary.steps[1].set_weight",
    );
    assert.equal(
      fieldOf(() => progressiveOf(msg({ canary: { steps: [{}] } }), 600, [])),
      "rollout.progressive.canary.steps[0]",
    );
    assert.equal(
      fieldOf(() => progressiveOf(msg({ canary: { steps: [{ step: { case: "analysis", value: {} } }] } }), 600, [])),
      "rollout.progressive.canary.steps[0].analysis",
    );
    assert.equal(
      fieldOf(() =>
        progressiveOf(
          msg({
            canary: { steps: Array.from({ length: 51 }, () => ({ step: { case: "setWeight" as const, value: 5 } })) },
          }),
          600,
          [],
        ),
      ),
      "rollout.progressive.canary.steps",
    );
    assert.equal(
      fieldOf(() => progressiveOf(msg({ blueGreen: { scaleDownDelaySeconds: -1 } }), 600, [])),
      "rollout.progressive.blue_green.scale_down_delay_seconds",
    );
    assert.equal(
      fieldOf(() =>
        progressiveOf(msg({ blueGreen: {}, waves: [{ regions: ["eu"] }, { regions: ["mars"] }] }), 600, ["eu", "us"]),
      ),
      "rollout.progressive.waves[1].regions[0]",
    );
    assert.equal(
      fieldOf(() =>
        progressiveOf(msg({ blueGreen: {}, waves: [{ regions: ["eu"] }, { regions: ["eu"] }] }), 600, ["eu"]),
      ),
      "rollout.progressive.waves[1].regions[0]",
    );
    assert.equal(
      fieldOf(() => progressiveOf(msg({ blueGreen: {}, waveGate: { availableSeconds: 5 } }), 600, [])),
      "rollout.progressive.wave_gate",
    );
  });
  it("create checks waves against the request's regions; an update against the environment's", () => {
    const waves = msg({ blueGreen: {}, waves: [{ regions: ["us"] }] });
    assert.equal(
      fieldOf(() =>
        validateRollout(
          {
            $typeName: "krane.ctrl.v1.RolloutPolicy",
            strategy: 0,
            maxSurge: "",
            maxUnavailable: "",
            minReadySeconds: 0,
            progressDeadlineSeconds: 0,
            paused: false,
            progressive: waves,
          },
          ["eu"],
        ),
      ),
      "rollout.progressive.waves[0].regions[0]",
    );
    const current = validateRollout(undefined);
    const spec = progressiveOf(waves, 600, null);
    assert.equal(
      fieldOf(() => mergeRolloutPolicy(current, { progressive: spec }, ["eu"])),
      "rollout.progressive.waves[0].regions[0]",
    );
    assert.equal(
      mergeRolloutPolicy(current, { progressive: spec }, ["eu", "us"]).progressive?.waves?.regions[0]?.[0],
      "us",
    );
  });
});

describe("progressive options (CLI)", () => {
  it("parses steps and rules", () => {
    const rules = parseAnalysisRules(
      "--analysis",
      "success>=99.5,p99<=500ms,requests>=200,interval=30s,checks=3,failures=1",
    );
    assert.deepEqual(rules, {
      minSuccessRatePercent: 99.5,
      maxP99Ms: 500,
      minRequests: 200,
      intervalSeconds: 30,
      checks: 3,
      failuresAllowed: 1,
    });
    assert.deepEqual(
      parseSteps("20,pause,50%,pause:60s,analysis", rules).map((s) => s.step?.case),
      ["setWeight", "pause", "setWeight", "pause", "analysis"],
    );
    assert.throws(() => parseSteps("analysis", undefined), /--analysis/);
    assert.throws(() => parseSteps("twenty", undefined), /--steps: "twenty"/);
    assert.throws(() => parseAnalysisRules("--analysis", "latency<=5"), /unknown rule "latency"/);
  });
  it("builds waves and refuses options of the other strategy", () => {
    const p = cliProgressive({ strategy: "blue-green", scaleDownDelay: 600, waves: "eu;us,ap", waveGate: "120" });
    assert.deepEqual(p.waves, [{ regions: ["eu"] }, { regions: ["us", "ap"] }]);
    assert.deepEqual(p.waveGate, { availableSeconds: 120 });
    assert.throws(() => cliProgressive({ strategy: "canary", steps: "20", autoPromote: 5 }), /blue-green options/);
    assert.throws(() => cliProgressive({ strategy: "blue-green", steps: "20" }), /canary options/);
  });
});

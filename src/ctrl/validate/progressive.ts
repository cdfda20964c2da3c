// The progressive strategy on the wire (ProgressiveStrategy in api.proto) ↔ the engine's spec
// (src/rollout/progressive). Validation names the field as the API spells it; the checks
// against the environment's regions (waves) run where the regions are known (create, update).
import { create } from "@bufbuild/protobuf";
import {
  AnalysisRulesSchema,
  BlueGreenStrategySchema,
  CanaryStepSchema,
  CanaryStrategySchema,
  PauseStepSchema,
  ProgressiveStrategySchema,
  RegionWaveSchema,
  WaveGateSchema,
  type AnalysisRules as AnalysisRulesMsg,
  type ProgressiveStrategy,
} from "../../gen/krane/ctrl/v1/api_pb.js";
import {
  checkSpec,
  SpecProblem,
  type AnalysisRules,
  type CanaryStep,
  type ProgressiveSpec,
} from "../../rollout/progressive/index.js";
import { invalidArgument } from "../errors.js";

const FIELD = "rollout.progressive";

function rulesOf(m: AnalysisRulesMsg): AnalysisRules {
  return {
    minSuccessRatePercent: m.minSuccessRatePercent ?? null,
    maxP99Ms: m.maxP99Ms ?? null,
    minRequests: m.minRequests,
    intervalSeconds: m.intervalSeconds === 0 ? 30 : m.intervalSeconds,
    checks: m.checks === 0 ? 1 : m.checks,
    failuresAllowed: m.failuresAllowed,
  };
}

/** Runs a spec check, turning its problem into invalid_argument naming the field. */
export function checkProgressive(spec: ProgressiveSpec, regions: readonly string[]): ProgressiveSpec {
  try {
    return checkSpec(spec, regions, FIELD);
  } catch (err) {
    if (err instanceof SpecProblem) throw invalidArgument(err.field, err.problem);
    throw err;
  }
}

/**
 * The spec a ProgressiveStrategy message describes, checked (regions: the environment's, or null
 * to skip the wave checks that need them). `progressDeadlineSeconds` comes from the rollout policy.
 */
export function progressiveOf(
  m: ProgressiveStrategy,
  progressDeadlineSeconds: number,
  regions: readonly string[] | null,
): ProgressiveSpec {
  if ((m.canary === undefined) === (m.blueGreen === undefined))
    throw invalidArgument(FIELD, "needs exactly one of canary and blue_green");
  let strategy: ProgressiveSpec["strategy"];
  if (m.canary !== undefined) {
    if (m.canary.steps.length > 50)
      throw invalidArgument(`${FIELD}.canary.steps`, `at most 50 steps, got ${m.canary.steps.length}`);
    const steps = m.canary.steps.map((s, i): CanaryStep => {
      const st = s.step;
      if (st.case === "setWeight") return { type: "setWeight", weight: st.value };
      if (st.case === "pause") return { type: "pause", seconds: st.value.seconds === 0 ? null : st.value.seconds };
      if (st.case === "analysis") return { type: "analysis", rules: rulesOf(st.value) };
      throw invalidArgument(`${FIELD}.canary.steps[${i}]`, "needs set_weight, pause or analysis");
    });
    strategy = { type: "canary", steps, scaleDownStable: m.canary.scaleDownStable };
  } else {
    const bg = m.blueGreen;
    strategy = {
      type: "blueGreen",
      autoPromoteSeconds: bg?.autoPromoteSeconds ? bg.autoPromoteSeconds : null,
      scaleDownDelaySeconds: bg?.scaleDownDelaySeconds ?? 0,
    };
  }
  let waves: ProgressiveSpec["waves"] = null;
  if (m.waves.length > 0) {
    const g = m.waveGate;
    waves = {
      regions: m.waves.map((w) => [...w.regions]),
      gate:
        g?.analysis !== undefined
          ? { type: "analysis", rules: rulesOf(g.analysis) }
          : { type: "available", seconds: g?.availableSeconds ?? 0 },
    };
  } else if (m.waveGate !== undefined) {
    throw invalidArgument(`${FIELD}.wave_gate`, "needs waves");
  }
  const spec: ProgressiveSpec = { strategy, waves, progressDeadlineSeconds };
  // Without the regions, check everything but the wave membership (an empty list would refuse every wave).
  if (regions === null) return checkProgressive(spec.waves === null ? spec : { ...spec, waves: null }, []) && spec;
  return checkProgressive(spec, regions);
}

function rulesMsg(r: AnalysisRules): AnalysisRulesMsg {
  return create(AnalysisRulesSchema, {
    ...(r.minSuccessRatePercent !== null ? { minSuccessRatePercent: r.minSuccessRatePercent } : {}),
    ...(r.maxP99Ms !== null ? { maxP99Ms: r.maxP99Ms } : {}),
    minRequests: r.minRequests,
    intervalSeconds: r.intervalSeconds,
    checks: r.checks,
    failuresAllowed: r.failuresAllowed,
  });
}

export function progressiveMsg(spec: ProgressiveSpec): ProgressiveStrategy {
  const st = spec.strategy;
  return create(ProgressiveStrategySchema, {
    ...(st.type === "canary"
      ? {
          canary: create(CanaryStrategySchema, {
            scaleDownStable: st.scaleDownStable,
            steps: st.steps.map((s) =>
              create(CanaryStepSchema, {
                step:
                  s.type === "setWeight"
                    ? { case: "setWeight", value: s.weight }
                    : s.type === "pause"
                      ? { case: "pause", value: create(PauseStepSchema, { seconds: s.seconds ?? 0 }) }
                      : { case: "analysis", value: rulesMsg(s.rules) },
              }),
            ),
          }),
        }
      : {
          blueGreen: create(BlueGreenStrategySchema, {
            autoPromoteSeconds: st.autoPromoteSeconds ?? 0,
            scaleDownDelaySeconds: st.scaleDownDelaySeconds,
          }),
        }),
    waves: (spec.waves?.regions ?? []).map((regions) => create(RegionWaveSchema, { regions: [...regions] })),
    ...(spec.waves !== null
      ? {
          waveGate: create(
            WaveGateSchema,
            spec.waves.gate.type === "analysis"
              ? { analysis: rulesMsg(spec.waves.gate.rules) }
              : { availableSeconds: spec.waves.gate.seconds },
          ),
        }
      : {}),
  });
}

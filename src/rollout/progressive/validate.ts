// Validation of a progressive spec: every problem names its field as the API spells it
// (rollout.progressive.canary.steps[2].set_weight …). Pure; ctrl turns a problem into
// invalid_argument. Also parses the stored JSON back (a row written by this version).
import type { AnalysisRules, CanaryStep, ProgressiveSpec } from "./types.js";

export const PROGRESSIVE_LIMITS = {
  steps: 50,
  pauseSecondsMax: 7 * 86_400,
  intervalSecondsMax: 3_600,
  checksMax: 100,
  waves: 50,
  gateSecondsMax: 86_400,
  scaleDownDelaySecondsMax: 86_400,
  autoPromoteSecondsMax: 86_400,
  maxP99MsMax: 600_000,
  minRequestsMax: 1_000_000_000,
} as const;

export class SpecProblem extends Error {
  constructor(
    readonly field: string,
    readonly problem: string,
  ) {
    super(`${field}: ${problem}`);
  }
}

function int(field: string, v: number, min: number, max: number): number {
  if (!Number.isInteger(v) || v < min || v > max)
    throw new SpecProblem(field, `must be an integer from ${min} to ${max}, got ${v}`);
  return v;
}

export function checkRules(field: string, r: AnalysisRules): AnalysisRules {
  if (
    r.minSuccessRatePercent !== null &&
    (!Number.isFinite(r.minSuccessRatePercent) || r.minSuccessRatePercent < 0 || r.minSuccessRatePercent > 100)
  ) {
    throw new SpecProblem(`${field}.min_success_rate_percent`, `must be from 0 to 100, got ${r.minSuccessRatePercent}`);
  }
  if (r.maxP99Ms !== null) int(`${field}.max_p99_ms`, r.maxP99Ms, 1, PROGRESSIVE_LIMITS.maxP99MsMax);
  if (r.minSuccessRatePercent === null && r.maxP99Ms === null)
    throw new SpecProblem(field, "needs min_success_rate_percent or max_p99_ms");
  int(`${field}.min_requests`, r.minRequests, 0, PROGRESSIVE_LIMITS.minRequestsMax);
  int(`${field}.interval_seconds`, r.intervalSeconds, 1, PROGRESSIVE_LIMITS.intervalSecondsMax);
  int(`${field}.checks`, r.checks, 1, PROGRESSIVE_LIMITS.checksMax);
  int(`${field}.failures_allowed`, r.failuresAllowed, 0, PROGRESSIVE_LIMITS.checksMax);
  return r;
}

function checkStep(field: string, s: CanaryStep): void {
  if (s.type === "setWeight") int(`${field}.set_weight`, s.weight, 0, 100);
  else if (s.type === "pause") {
    if (s.seconds !== null) int(`${field}.pause.seconds`, s.seconds, 1, PROGRESSIVE_LIMITS.pauseSecondsMax);
  } else checkRules(`${field}.analysis`, s.rules);
}

/**
 * Checks a spec against the environment's regions (wave regions must be among them, each in at
 * most one wave). Throws SpecProblem naming the field.
 */
export function checkSpec(
  spec: ProgressiveSpec,
  regions: readonly string[],
  field = "rollout.progressive",
): ProgressiveSpec {
  const st = spec.strategy;
  if (st.type === "canary") {
    if (st.steps.length === 0) throw new SpecProblem(`${field}.canary.steps`, "needs at least one step");
    if (st.steps.length > PROGRESSIVE_LIMITS.steps)
      throw new SpecProblem(
        `${field}.canary.steps`,
        `at most ${PROGRESSIVE_LIMITS.steps} steps, got ${st.steps.length}`,
      );
    let last = 0;
    st.steps.forEach((s, i) => {
      checkStep(`${field}.canary.steps[${i}]`, s);
      if (s.type === "setWeight") {
        if (s.weight < last)
          throw new SpecProblem(
            `${field}.canary.steps[${i}].set_weight`,
            `must not go below the previous weight (${last})`,
          );
        last = s.weight;
      }
    });
  } else {
    if (st.autoPromoteSeconds !== null)
      int(
        `${field}.blue_green.auto_promote_seconds`,
        st.autoPromoteSeconds,
        1,
        PROGRESSIVE_LIMITS.autoPromoteSecondsMax,
      );
    int(
      `${field}.blue_green.scale_down_delay_seconds`,
      st.scaleDownDelaySeconds,
      0,
      PROGRESSIVE_LIMITS.scaleDownDelaySecondsMax,
    );
  }
  int(`${field}.progress_deadline_seconds`, spec.progressDeadlineSeconds, 1, 86_400);
  if (spec.waves !== null) {
    const w = spec.waves;
    if (w.regions.length === 0) throw new SpecProblem(`${field}.waves`, "needs at least one wave");
    if (w.regions.length > PROGRESSIVE_LIMITS.waves)
      throw new SpecProblem(`${field}.waves`, `at most ${PROGRESSIVE_LIMITS.waves} waves`);
    const known = new Set(regions);
    const seen = new Map<string, number>();
    w.regions.forEach((wave, i) => {
      if (wave.length === 0) throw new SpecProblem(`${field}.waves[${i}].regions`, "needs at least one region");
      wave.forEach((r, k) => {
        if (!known.has(r))
          throw new SpecProblem(
            `${field}.waves[${i}].regions[${k}]`,
            `"${r}" is not a region of the environment (${[...known].join(", ") || "none"})`,
          );
        const other = seen.get(r);
        if (other !== undefined)
          throw new SpecProblem(`${field}.waves[${i}].regions[${k}]`, `"${r}" is already in wave ${other}`);
        seen.set(r, i);
      });
    });
    if (w.gate.type === "available")
      int(`${field}.wave_gate.available_seconds`, w.gate.seconds, 0, PROGRESSIVE_LIMITS.gateSecondsMax);
    else checkRules(`${field}.wave_gate.analysis`, w.gate.rules);
  }
  return spec;
}

/** A stored spec (JSON written by formatSpec), or null. */
export function parseStoredSpec(text: string | null): ProgressiveSpec | null {
  if (text === null || text === "") return null;
  return JSON.parse(text) as ProgressiveSpec;
}

export function formatSpec(spec: ProgressiveSpec | null): string | null {
  return spec === null ? null : JSON.stringify(spec);
}

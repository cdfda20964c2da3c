// The progressive strategy options of `krane env create | update` (--strategy canary|blue-green,
// --steps, --analysis, --scale-down-stable, --auto-promote, --scale-down-delay, --waves,
// --wave-gate) → the API's ProgressiveStrategy. Pure: strings in, message init out; errors name
// the option. ctrl validates the result again (ranges, regions) and names the API field.
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { AnalysisRulesSchema, ProgressiveStrategySchema } from "../gen/krane/ctrl/v1/api_pb.js";

export interface ProgressiveFlags {
  strategy?: string;
  steps?: string;
  analysis?: string;
  scaleDownStable?: boolean;
  autoPromote?: number;
  scaleDownDelay?: number;
  waves?: string;
  waveGate?: string;
}

type Rules = MessageInitShape<typeof AnalysisRulesSchema>;
export type ProgressiveInit = MessageInitShape<typeof ProgressiveStrategySchema>;

function num(option: string, v: string): number {
  const n = Number(v.replace(/s$/, ""));
  if (v === "" || !Number.isFinite(n)) throw new Error(`${option}: "${v}" is not a number`);
  return n;
}

/** "success>=99,p99<=500,requests>=100,interval=10s,checks=3,failures=1" → AnalysisRules. */
export function parseAnalysisRules(option: string, text: string): Rules {
  const out: Rules = {};
  for (const part of text
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p !== "")) {
    const m = /^([a-z0-9]+)\s*(>=|<=|=)\s*(.+)$/.exec(part);
    if (!m)
      throw new Error(
        `${option}: "${part}" is not name=value (success>=99, p99<=500, requests>=100, interval=10s, checks=3, failures=1)`,
      );
    const [, name, , value = ""] = m;
    if (name === "success") out.minSuccessRatePercent = num(option, value.replace(/%$/, ""));
    else if (name === "p99") out.maxP99Ms = num(option, value.replace(/ms$/, ""));
    else if (name === "requests") out.minRequests = num(option, value);
    else if (name === "interval") out.intervalSeconds = num(option, value);
    else if (name === "checks") out.checks = num(option, value);
    else if (name === "failures") out.failuresAllowed = num(option, value);
    else throw new Error(`${option}: unknown rule "${name}" (success, p99, requests, interval, checks, failures)`);
  }
  return out;
}

/** "20,pause,50,pause:60s,analysis,100" → canary steps (analysis steps take --analysis). */
export function parseSteps(
  text: string,
  rules: Rules | undefined,
): NonNullable<NonNullable<ProgressiveInit["canary"]>["steps"]> {
  return text
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p !== "")
    .map((p) => {
      if (/^\d+%?$/.test(p)) return { step: { case: "setWeight" as const, value: Number(p.replace("%", "")) } };
      if (p === "pause") return { step: { case: "pause" as const, value: { seconds: 0 } } };
      const pause = /^pause:(\d+)s?$/.exec(p);
      if (pause) return { step: { case: "pause" as const, value: { seconds: Number(pause[1]) } } };
      if (p === "analysis") {
        if (rules === undefined) throw new Error("--steps: an analysis step needs --analysis <rules>");
        return { step: { case: "analysis" as const, value: rules } };
      }
      throw new Error(`--steps: "${p}" is not a weight (20), pause, pause:<seconds> or analysis`);
    });
}

/** Whether --strategy names a progressive strategy. */
export function isProgressive(strategy: string | undefined): boolean {
  return strategy === "canary" || strategy === "blue-green" || strategy === "blueGreen";
}

/** Whether any progressive option was given (they need --strategy canary|blue-green). */
export function progressiveGiven(f: ProgressiveFlags): boolean {
  return [f.steps, f.analysis, f.scaleDownStable, f.autoPromote, f.scaleDownDelay, f.waves, f.waveGate].some(
    (v) => v !== undefined,
  );
}

export function progressiveOf(f: ProgressiveFlags): ProgressiveInit {
  const rules = f.analysis === undefined ? undefined : parseAnalysisRules("--analysis", f.analysis);
  const out: ProgressiveInit = {};
  if (f.strategy === "canary") {
    if (f.autoPromote !== undefined || f.scaleDownDelay !== undefined)
      throw new Error("--auto-promote and --scale-down-delay are blue-green options");
    out.canary = { steps: parseSteps(f.steps ?? "", rules), scaleDownStable: f.scaleDownStable ?? false };
  } else {
    if (f.steps !== undefined || f.scaleDownStable !== undefined)
      throw new Error("--steps and --scale-down-stable are canary options");
    out.blueGreen = { autoPromoteSeconds: f.autoPromote ?? 0, scaleDownDelaySeconds: f.scaleDownDelay ?? 0 };
  }
  if (f.waves !== undefined) {
    out.waves = f.waves.split(";").map((w) => ({
      regions: w
        .split(",")
        .map((r) => r.trim())
        .filter((r) => r !== ""),
    }));
    const gate = f.waveGate ?? "0";
    out.waveGate = gate === "analysis" ? { analysis: rules ?? {} } : { availableSeconds: num("--wave-gate", gate) };
  } else if (f.waveGate !== undefined) throw new Error("--wave-gate needs --waves");
  return out;
}

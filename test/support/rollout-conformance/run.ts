// Runs generated cases through krane's engine and the real controller (one harness process for
// all of them) and tallies agreement per class: the body of the conformance test and bench.
import { parseRolloutInput, planRollout } from "../../../src/rollout/index.js";
import type { RolloutInput, RolloutOutput } from "../../../src/rollout/index.js";
import { CLASSES, type CaseClass, type ConformanceCase } from "./generator.js";
import {
  INTENDED,
  judge,
  type Difference,
  type IntendedDifference,
  type KraneResult,
  type Verdict,
} from "./compare.js";
import type { KubeResult, RolloutHarness } from "./harness.js";

/** The engine under test: `krane rollout plan` minus the I/O (validation, then one pass). */
export type Engine = (json: unknown) => RolloutOutput;

export const kraneEngine: Engine = (json) => planRollout(parseRolloutInput(json));

export function runKrane(input: RolloutInput, engine: Engine = kraneEngine): KraneResult {
  try {
    return { output: engine(JSON.parse(JSON.stringify(input))) };
  } catch (err) {
    if (err instanceof Error && err.name === "RolloutInputError") return { error: `refused: ${err.message}` };
    return { error: `crashed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}` };
  }
}

export interface CaseOutcome {
  case: ConformanceCase;
  krane: KraneResult;
  kube: KubeResult;
  verdict: Verdict;
}

export interface ClassTally {
  inputs: number;
  /** Agreed on everything compared. */
  agreed: number;
  /** Differed only in intended ways. */
  intended: number;
  /** Differed in some way nothing explains. */
  failed: number;
  /** Inputs per kind of difference (explained or not). */
  kinds: Map<string, number>;
}

export interface ConformanceReport {
  byClass: Map<CaseClass, ClassTally>;
  /** Inputs per intended difference that explained something. */
  byIntended: Map<string, number>;
  failures: CaseOutcome[];
  kraneMs: number;
  kubeMs: number;
}

function tally(): ClassTally {
  return { inputs: 0, agreed: 0, intended: 0, failed: 0, kinds: new Map() };
}

export async function runConformance(
  cases: readonly ConformanceCase[],
  harness: RolloutHarness,
  intended: readonly IntendedDifference[] = INTENDED,
  engine: Engine = kraneEngine,
): Promise<ConformanceReport> {
  const kubeStart = performance.now();
  const kube = await harness.runAll(cases.map((c) => c.input));
  const kubeMs = performance.now() - kubeStart;
  const kraneStart = performance.now();
  const krane = cases.map((c) => runKrane(c.input, engine));
  const kraneMs = performance.now() - kraneStart;

  const byClass = new Map<CaseClass, ClassTally>(CLASSES.map((c) => [c, tally()]));
  const byIntended = new Map<string, number>();
  const failures: CaseOutcome[] = [];
  cases.forEach((c, i) => {
    const k = krane[i] as KraneResult;
    const o = kube[i] as KubeResult;
    const verdict = judge(c.input, k, o, intended);
    const t = byClass.get(c.class) ?? tally();
    t.inputs++;
    if (verdict.diffs.length === 0) t.agreed++;
    else if (verdict.unexplained.length === 0) t.intended++;
    else t.failed++;
    for (const kind of new Set(verdict.diffs.map((d) => d.kind))) t.kinds.set(kind, (t.kinds.get(kind) ?? 0) + 1);
    for (const id of verdict.intended) byIntended.set(id, (byIntended.get(id) ?? 0) + 1);
    if (verdict.unexplained.length > 0) failures.push({ case: c, krane: k, kube: o, verdict });
  });
  return { byClass, byIntended, failures, kraneMs, kubeMs };
}

function pad(s: string | number, n: number): string {
  return String(s).padStart(n);
}

/** The report as a table: per class, inputs / agreed / intended / failed and the kinds of difference seen. */
export function formatReport(r: ConformanceReport): string {
  const lines = [
    `${"class".padEnd(14)}${pad("inputs", 8)}${pad("agreed", 8)}${pad("intended", 10)}${pad("failed", 8)}  differences (inputs)`,
  ];
  const total = tally();
  for (const [cls, t] of r.byClass) {
    if (t.inputs === 0) continue;
    total.inputs += t.inputs;
    total.agreed += t.agreed;
    total.intended += t.intended;
    total.failed += t.failed;
    const kinds = [...t.kinds]
      .sort((a, b) => b[1] - a[1])
      .map(([k, n]) => `${k} ${n}`)
      .join(", ");
    lines.push(
      `${cls.padEnd(14)}${pad(t.inputs, 8)}${pad(t.agreed, 8)}${pad(t.intended, 10)}${pad(t.failed, 8)}  ${kinds}`,
    );
  }
  lines.push(
    `${"all".padEnd(14)}${pad(total.inputs, 8)}${pad(total.agreed, 8)}${pad(total.intended, 10)}${pad(total.failed, 8)}`,
  );
  if (r.byIntended.size > 0) {
    lines.push("intended differences (inputs): " + [...r.byIntended].map(([id, n]) => `${id} ${n}`).join(", "));
  }
  return lines.join("\n");
}

/** One failure in full, to reproduce: the input (seed and index too), both results, the differences. */
export function describeFailure(f: CaseOutcome): string {
  const show = (d: Difference): string =>
    `  ${d.kind}${d.where !== undefined ? ` [${d.where}]` : ""}: krane ${JSON.stringify(d.krane)} / kubernetes ${JSON.stringify(d.kube)}`;
  return [
    `case ${f.case.index} of seed ${f.case.seed} (class ${f.case.class}):`,
    ...f.verdict.unexplained.map(show),
    `input: ${JSON.stringify(f.case.input)}`,
  ].join("\n");
}

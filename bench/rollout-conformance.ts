// The large differential run of the rollout engine against the real Deployment controller
// (test/integration/rollout-conformance.test.ts runs a fixed 500): thousands of generated passes
// through krane's engine and through the v1.36.3 controller's syncDeployment in one harness
// process, printing agreement per class (inputs that agree outright, that differ only as
// src/rollout/README.md lists, that fail), the intended differences met, the run time, and both
// sides' passes per second on the same inputs.
//   npm run bench -- rollout-conformance
//   KRANE_CONFORMANCE_CASES=20000 KRANE_CONFORMANCE_SEED=7 npx tsx bench/rollout-conformance.ts
import { pathToFileURL } from "node:url";
import { generateCases } from "../test/support/rollout-conformance/generator.js";
import { RolloutHarness } from "../test/support/rollout-conformance/harness.js";
import { describeFailure, formatReport, runConformance, runKrane } from "../test/support/rollout-conformance/run.js";

function envInt(name: string, dflt: number): number {
  const v = process.env[name];
  if (v === undefined || v === "") return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name}: want a positive integer, got ${JSON.stringify(v)}`);
  return n;
}

export async function benchRolloutConformance(): Promise<void> {
  const count = envInt("KRANE_CONFORMANCE_CASES", 10_000);
  const seed = envInt("KRANE_CONFORMANCE_SEED", 1);
  const t0 = performance.now();
  const harness = await RolloutHarness.start((line) => console.log(`  ${line}`));
  const startMs = performance.now() - t0;
  try {
    const t1 = performance.now();
    const cases = generateCases(seed, count);
    const genMs = performance.now() - t1;
    const t2 = performance.now();
    const report = await runConformance(cases, harness);
    const runMs = performance.now() - t2;
    console.log(
      `${count.toLocaleString("en-US")} generated passes (seed ${seed}), krane's engine vs Kubernetes v1.36.3 syncDeployment:`,
    );
    console.log(formatReport(report).replace(/^/gm, "  "));
    // The engine again, warm this time (the run above included its JIT warm-up).
    const t3 = performance.now();
    for (const c of cases) runKrane(c.input);
    const kraneWarmMs = performance.now() - t3;
    const rate = (ms: number): string =>
      `${Math.round((count * 1000) / ms)
        .toLocaleString("en-US")
        .padStart(9)} passes/s`;
    console.log(`  krane engine (validate + plan, warm)         ${rate(kraneWarmMs)}`);
    console.log(`  Kubernetes controller (fake clientset, pipe) ${rate(report.kubeMs)}`);
    console.log(
      `  run time ${(runMs / 1000).toFixed(1)} s (generate ${(genMs / 1000).toFixed(1)} s, harness start ${(startMs / 1000).toFixed(1)} s)`,
    );
    for (const f of report.failures.slice(0, 3)) console.log(describeFailure(f));
    if (report.failures.length > 0) process.exitCode = 1;
  } finally {
    await harness.close();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await benchRolloutConformance();
}

// Outage figures on the real processes, each next to its target: ctrl killed
// with SIGKILL and restarted 20 times with a `krane agent` connected (agent reconnected after ctrl
// is ready; a deploy made at ctrl's readiness reaching the cluster); PostgreSQL restarted under
// writes with one and with two ctrl replicas (ctrl ready again after PostgreSQL accepts
// connections; a change through one replica reaching the agent's stream on the other, which is
// the LISTEN path; nothing lost; no stream skips a version); the kube-apiserver frozen 30 s
// (the agent's metric shows it; the change made meanwhile lands after SIGCONT).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startCluster } from "../src/cluster/index.js";
import { startPostgres } from "../test/support/postgres.js";
import { apiServerFrozen, ctrlRestartsWithAgent } from "../test/support/faults/outage-scenarios.js";
import { postgresRestarts } from "../test/support/faults/db-scenarios.js";
import { ms, percentile } from "../test/support/faults/processes.js";

const CYCLES = Number(process.env.KRANE_BENCH_OUTAGE_CYCLES ?? 20);
const PG_CYCLES = Number(process.env.KRANE_BENCH_PG_CYCLES ?? 5);

function line(label: string, value: string, target: string): void {
  console.log(`outages: ${label.padEnd(62)} ${value.padEnd(40)} target ${target}`);
}

const p = (values: number[], q: number): string => ms(percentile(values, q));

export async function benchOutages(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "krane-bench-outages-"));
  const postgres = await startPostgres();
  const problems: string[] = [];
  try {
    for (const replicas of [1, 2]) {
      const r = await postgresRestarts(postgres, dir, { replicas, cycles: PG_CYCLES, downMs: 2000 });
      problems.push(...r.problems.map((x) => `${r.name}: ${x}`));
      line(
        `PostgreSQL restarted ×${PG_CYCLES}, ${replicas} ctrl: ready after PostgreSQL is`,
        `p50 ${p(r.readyMs, 50)}, p99 ${p(r.readyMs, 99)}`,
        "p99 ≤ 1 s",
      );
      line(
        `  change → agent stream${replicas > 1 ? " on the other replica" : ""} after PostgreSQL is`,
        `p50 ${p(r.crossMs, 50)}, p99 ${p(r.crossMs, 99)}`,
        "≤ 2 s",
      );
      line(
        `  acknowledged ${r.acknowledged}: lost / duplicated / stream skips`,
        `${r.lost} / ${r.duplicated} / ${r.problems.filter((x) => /skipped/.test(x)).length}`,
        "0 / 0 / 0",
      );
    }
  } finally {
    await postgres.stop();
  }
  const cluster = await startCluster({ name: "bench-outages", pods: { readyDelayMs: 300, readyJitterMs: 300 } });
  try {
    const c = await ctrlRestartsWithAgent(cluster, dir, { cycles: CYCLES });
    problems.push(...c.problems.map((x) => `${c.name}: ${x}`));
    line(
      `ctrl kill -9 ×${CYCLES}: agent reconnected after ctrl ready`,
      `p50 ${p(c.reconnectMs, 50)}, p99 ${p(c.reconnectMs, 99)}`,
      "p50 ≤ 0.5 s, p99 ≤ 2 s",
    );
    line(
      "  deploy made at ctrl's readiness → ReplicaSet in the cluster",
      `p50 ${p(c.deployMs, 50)}, p99 ${p(c.deployMs, 99)}`,
      "p99 ≤ 3 s",
    );

    const f = await apiServerFrozen(cluster, dir, { freezeMs: 30_000 });
    problems.push(...f.problems.map((x) => `${f.name}: ${x}`));
    line("API server frozen 30 s: krane_agent_kube_api_up = 0 after", ms(f.detectedMs ?? NaN), "≤ 10 s");
    line("  after SIGCONT: the change made meanwhile in the cluster", ms(f.convergedMs ?? NaN), "≤ 1 s");
    line("  after SIGCONT: krane_agent_kube_api_up = 1 after", ms(f.upAgainMs ?? NaN), "(probe every 5 s)");
  } finally {
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  for (const x of problems) console.log(`outages: problem: ${x}`);
}

if (import.meta.url === `file://${process.argv[1]}`) await benchOutages();

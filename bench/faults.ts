// Fault scenarios at bench size on a real local cluster and real processes: rollouts
// while the API server fails 20 % of the agent's requests, the agent cut off from ctrl for 30 s,
// the agent killed with SIGKILL mid-rollout, the agent leader killed 10 times (failover at the
// API server's Lease) and frozen past its lease (its writes audited from outside), ctrl killed
// with SIGKILL during write bursts on SQLite and PostgreSQL; and the fence test's escalation
// count. The scenarios are the ones the integration tests assert (test/support/faults/); here
// they run longer and print what a user would ask: passed, lost, time to converge after a fault.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startCluster } from "../src/cluster/index.js";
import { startPostgres } from "../test/support/postgres.js";
import {
  agentCtrlPartition,
  agentFailover,
  agentKilledDuringRollouts,
  rolloutUnderApiErrors,
  type ScenarioResult,
} from "../test/support/faults/scenarios.js";
import { ctrlKilledDuringWrites, type DbScenarioResult } from "../test/support/faults/db-scenarios.js";
import { ms, percentile } from "../test/support/faults/processes.js";

const KILLS = Number(process.env.KRANE_BENCH_FAILOVER_KILLS ?? 10);
/** KRANE_BENCH_FAULTS=failover,ctrl-kill … runs only those (api, partition, agent-kill, failover, ctrl-kill, fence). */
const ONLY = new Set((process.env.KRANE_BENCH_FAULTS ?? "").split(",").filter((x) => x !== ""));
const want = (name: string): boolean => ONLY.size === 0 || ONLY.has(name);

function line(label: string, value: string): void {
  console.log(`faults: ${label.padEnd(58)} ${value}`);
}

function spread(values: number[]): string {
  return `p50 ${ms(percentile(values, 50))}, p99 ${ms(percentile(values, 99))} (${values.length})`;
}

/** The fence test's own figures ("escalations refused N / tried M"), from running it. */
function fenceFigures(): string[] {
  const res = spawnSync(process.execPath, ["scripts/run-tests.mjs", "test/integration/fence.test.ts"], {
    encoding: "utf8",
    env: { ...process.env, KRANE_TEST_CONCURRENCY: "1" },
  });
  return [...(res.stdout ?? "").matchAll(/fence: (.*escalations refused \d+ \/ tried \d+)/g)].map((m) => m[1] ?? "");
}

export async function benchFaults(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "krane-bench-faults-"));
  const cluster = await startCluster({ name: "bench-faults", pods: { readyDelayMs: 300, readyJitterMs: 700 } });
  const postgres = await startPostgres();
  const scenarios: (ScenarioResult | DbScenarioResult)[] = [];
  const convergence: number[] = [];
  try {
    if (want("api")) {
      const api = await rolloutUnderApiErrors(cluster, {
        rate: 0.2,
        rollouts: 3,
        faultMs: 8000,
        seed: 2024,
        replicas: 6,
      });
      scenarios.push(api);
      convergence.push(...api.convergenceMs);
      line(
        api.name,
        `${api.passed ? "passed" : "FAILED"}; converged after the faults ${spread(api.convergenceMs)}; ${api.notes.faulted}/${api.notes.requests} requests faulted (${api.notes.kinds})`,
      );
    }

    if (want("partition")) {
      const part = await agentCtrlPartition(cluster, { partitionMs: 30_000, replicas: 3 });
      scenarios.push(part);
      convergence.push(...part.convergenceMs);
      line(
        part.name,
        `${part.passed ? "passed" : "FAILED"}; converged ${ms(percentile(part.convergenceMs, 50))} after it healed; ctrl showed ${part.behindDuring} changes behind during it, ${part.behindAfter} after`,
      );
    }

    if (want("agent-kill")) {
      const killed = await agentKilledDuringRollouts(cluster, { rollouts: 3, replicas: 6, everyMs: 1500 });
      scenarios.push(killed);
      convergence.push(...killed.convergenceMs);
      line(
        killed.name,
        `${killed.passed ? "passed" : "FAILED"}; ${killed.kills} kills; converged after the last kill ${spread(killed.convergenceMs)}`,
      );
    }

    if (want("failover")) {
      const ha = await agentFailover(cluster, { kills: KILLS });
      scenarios.push(ha);
      line(
        `agent failover over ${ha.failoverMs.length} SIGKILLs of the leader (lease 10 s; target ≤ 15 s)`,
        `${spread(ha.failoverMs)}; change applied by the new leader ${spread(ha.convergenceMs)}`,
      );
      line(
        "writes by a leader frozen past its lease, once woken (audit)",
        `${ha.zombieWrites} (the new leader's seen: ${ha.newLeaderWrites}) ${ha.passed ? "passed" : "FAILED"}`,
      );
    }

    if (want("ctrl-kill")) {
      for (const db of ["sqlite", "postgres"] as const) {
        const database = db === "sqlite" ? join(dir, "burst.db") : await postgres.newDatabase();
        const r = await ctrlKilledDuringWrites(database, dir, {
          writes: 200,
          everyMs: 400,
          concurrency: 4,
          maxKills: 20,
        });
        scenarios.push(r);
        line(
          r.name,
          `${r.passed ? "passed" : "FAILED"}; ${r.kills} kills; acknowledged ${r.acknowledged}, lost ${r.lost}, duplicated ${r.duplicated}; ready after restart ${spread(r.readyMs)}`,
        );
      }
    }

    const lost = scenarios.reduce((n, s) => n + ("lost" in s ? s.lost : 0), 0);
    line("scenarios passed / run", `${scenarios.filter((s) => s.passed).length} / ${scenarios.length}`);
    line("acknowledged changes lost (target 0)", String(lost));
    line("convergence after each cluster fault ended", spread(convergence));
    for (const s of scenarios) for (const p of s.problems) console.log(`faults:   ${s.name}: ${p}`);
  } finally {
    await postgres.stop();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  if (want("fence")) for (const f of fenceFigures()) line("fence", f);
}

if (import.meta.url === `file://${process.argv[1]}`) await benchFaults();

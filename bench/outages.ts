// Outage figures on the real processes, each next to its target: ctrl killed with SIGKILL 20
// times per database (SQLite, PostgreSQL) at every point of the link's life, down 0.1–30 s, with
// NO change after the restart (the agent ready — every kind connected, /readyz 200 — after ctrl
// is ready; then a change of every kind reaching the cluster), with the link's default timings;
// ctrl frozen 30 s (every kind reported down, back after SIGCONT); ctrl killed and restarted with
// a deploy made at ctrl's readiness (reaching the cluster); PostgreSQL restarted under
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
import {
  DEFAULT_TIMINGS,
  KILL_POINTS,
  LINK_KINDS,
  ctrlKills,
  silentLink,
  type KillPoint,
} from "../test/support/faults/link-scenarios.js";
import { ms, percentile } from "../test/support/faults/processes.js";
import { load } from "./support.js";

const CYCLES = Number(process.env.KRANE_BENCH_OUTAGE_CYCLES ?? 20);
const PG_CYCLES = Number(process.env.KRANE_BENCH_PG_CYCLES ?? 5);
/** Which parts run (comma-separated: kills, frozen, deploy, postgres, apiserver); default all. */
const ONLY = new Set((process.env.KRANE_BENCH_OUTAGES_ONLY ?? "kills,frozen,deploy,postgres,apiserver").split(","));

function line(label: string, value: string, target: string): void {
  console.log(`outages: ${label.padEnd(62)} ${value.padEnd(40)} target ${target.padEnd(24)} ${load()}`);
}

/** `n` kills: the points in turn, downtimes spread evenly on a log scale from 0.1 s to 30 s. */
export function killSchedule(n: number): { point: KillPoint; downMs: number }[] {
  return Array.from({ length: n }, (_, i) => ({
    point: KILL_POINTS[i % KILL_POINTS.length] as KillPoint,
    downMs: Math.round(100 * 300 ** (((i * 7) % n) / Math.max(1, n - 1))),
  }));
}

const p = (values: number[], q: number): string => ms(percentile(values, q));

export async function benchOutages(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "krane-bench-outages-"));
  const postgres = await startPostgres();
  const problems: string[] = [];
  let cluster: Awaited<ReturnType<typeof startCluster>> | undefined;
  try {
    if (ONLY.has("postgres")) {
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
    }
    cluster = await startCluster({ name: "bench-outages", pods: { readyDelayMs: 300, readyJitterMs: 300 } });
    if (ONLY.has("kills")) {
      const schedule = killSchedule(CYCLES);
      for (const db of ["SQLite", "PostgreSQL"] as const) {
        const database = db === "SQLite" ? join(dir, "kills.db") : await postgres.newDatabase();
        const r = await ctrlKills(cluster, dir, {
          name: `kills-${db.toLowerCase()}`,
          database,
          kills: schedule,
          timings: DEFAULT_TIMINGS,
        });
        problems.push(...r.problems.map((x) => `ctrl kills (${db}): ${x}`));
        const ready = r.kills.flatMap((k) => (k.readyMs === undefined ? [] : [k.readyMs]));
        line(
          `ctrl kill -9 ×${CYCLES} (${db}), no change after: agent ready after ctrl`,
          `p50 ${p(ready, 50)}, max ${p(ready, 100)} (${ready.length} of ${r.kills.length})`,
          "≤ 2 s",
        );
        const beat = r.kills.flatMap((k) => (k.heartbeatMs === undefined ? [] : [k.heartbeatMs]));
        const caughtUp = r.kills.flatMap((k) => (k.caughtUpMs === undefined ? [] : [k.caughtUpMs]));
        line(
          "  ctrl shows a heartbeat sent after it was ready (LAST SEEN)",
          `p50 ${p(beat, 50)}, max ${p(beat, 100)}`,
          "≤ 2 s",
        );
        line("  … and the agent 0 changes behind (BEHIND)", `p50 ${p(caughtUp, 50)}, max ${p(caughtUp, 100)}`, "≤ 2 s");
        for (const point of KILL_POINTS) {
          const at = r.kills
            .filter((k) => k.point === point && k.readyMs !== undefined)
            .map((k) => k.readyMs as number);
          line(`  killed ${point}`, `p50 ${p(at, 50)}, max ${p(at, 100)} (${at.length})`, "≤ 2 s");
        }
        line(
          "  then a change of every kind → the cluster",
          LINK_KINDS.map((k) => `${k} ${ms(r.changes?.[k] ?? NaN)}`).join(", "),
          "arrives",
        );
      }
    }
    if (ONLY.has("frozen")) {
      const f = await silentLink(cluster, dir, {
        name: "frozen",
        database: join(dir, "frozen.db"),
        fault: "sigstop",
        faultMs: 30_000,
        timings: DEFAULT_TIMINGS,
      });
      problems.push(...f.problems.map((x) => `ctrl frozen: ${x}`));
      const bound = 2 * DEFAULT_TIMINGS.keepaliveSeconds * 1000;
      line(
        "ctrl frozen 30 s (SIGSTOP): every kind reported down after",
        ms(f.downMs ?? NaN),
        `≤ ${ms(bound)} (2 keepalives)`,
      );
      line("  after SIGCONT: agent ready again after", ms(f.upMs ?? NaN), "≤ 2 s");
    }
    if (ONLY.has("deploy")) {
      const c = await ctrlRestartsWithAgent(cluster, dir, { cycles: CYCLES });
      problems.push(...c.problems.map((x) => `${c.name}: ${x}`));
      line(
        `ctrl kill -9 ×${CYCLES}, deploy at ctrl's readiness → ReplicaSet`,
        `p50 ${p(c.deployMs, 50)}, p99 ${p(c.deployMs, 99)}`,
        "p99 ≤ 3 s",
      );
    }
    if (ONLY.has("apiserver")) {
      const f = await apiServerFrozen(cluster, dir, { freezeMs: 30_000 });
      problems.push(...f.problems.map((x) => `${f.name}: ${x}`));
      line("API server frozen 30 s: krane_agent_kube_api_up = 0 after", ms(f.detectedMs ?? NaN), "≤ 10 s");
      line("  after SIGCONT: the change made meanwhile in the cluster", ms(f.convergedMs ?? NaN), "≤ 1 s");
      line("  after SIGCONT: krane_agent_kube_api_up = 1 after", ms(f.upAgainMs ?? NaN), "(probe every 5 s)");
    }
  } finally {
    await cluster?.stop();
    await postgres.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  for (const x of problems) console.log(`outages: problem: ${x}`);
}

if (import.meta.url === `file://${process.argv[1]}`) await benchOutages();

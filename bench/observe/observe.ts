// Observability store figures (`npm run bench -- observe`): the metrics history (metric_points)
// and the log history (log_lines) in ctrl's own database, a SQLite file here (the embedded store;
// the external engine of issue 46 does not exist yet, so it has no figure), through the functions
// ctrl itself calls, in this process (better-sqlite3 is synchronous, so this process's CPU time is
// the store's cost):
//  - ingest, metrics: E environments (1,000) × 3 instances, one revision each; every 10 s the
//    region's agent report (recordMeasurements: revisions and instances), every minute its usage
//    report (recordUsage), every minute a sweep of the rollup part (HistoryRollup: hours, prune);
//  - ingest, logs: 100 lines/s in all over the same instances, stored as the archive does
//    (per environment and agent push every 2 s: EnvironmentSecrets.learn, mask, storeLines);
//  - each over KRANE_BENCH_OBSERVE_MINUTES (60) simulated minutes on the store's clock, extrapolated
//    to a day: CPU seconds per day, and bytes per day of the table and its indexes (dbstat);
//  - query: a 7-day chart of one environment (GetMetricsHistory's read: historyPoints at the hour
//    step, historySeries) over 7 days of minutes and hours prepared with the store's writers; and
//    `krane logs --since 1d --grep` (StreamLogs' history: logTarget, readHistory, grepOf) over one
//    day of one environment's lines (KRANE_BENCH_OBSERVE_GREP_LINES, default its share of the
//    lines: 8,640 at 100 lines/s over 1,000 environments; a busy one has far more, and one keeps
//    at most 2,000,000), a text and a regex pattern, p50/p95 over KRANE_BENCH_OBSERVE_QUERIES (10) queries each.
// Every figure is printed with the load average (the machine is shared).
// KRANE_BENCH_OBSERVE_ENVS (1000), KRANE_BENCH_OBSERVE_LINES_PER_S (100) scale the ingest.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "kysely";
import { LATENCY_BUCKETS_MS } from "../../src/contracts/analysis.js";
import { Store } from "../../src/ctrl/db/store.js";
import { createRegion } from "../../src/ctrl/domain/clusters.js";
import { createDeployment } from "../../src/ctrl/domain/deployments.js";
import { createEnvironment } from "../../src/ctrl/domain/environments.js";
import { MEASUREMENT_RETENTION_MS, recordMeasurements } from "../../src/ctrl/domain/measurements.js";
import { createProject, createWorkspace } from "../../src/ctrl/domain/tenancy.js";
import { recordUsage } from "../../src/ctrl/domain/usage.js";
import { HistoryRollup } from "../../src/ctrl/history/rollup.js";
import { addInstanceMinutes, addMinutes, rollupHour } from "../../src/ctrl/history/store.js";
import { HOUR_MS, MINUTE_MS, emptySums, startOf, type Point } from "../../src/ctrl/history/sums.js";
import { grepOf } from "../../src/ctrl/logs/grep.js";
import { readHistory } from "../../src/ctrl/logs/history-read.js";
import { DAY_MS, storeLines, type StoredLine } from "../../src/ctrl/logs/history.js";
import { EnvironmentSecrets } from "../../src/ctrl/logs/secrets.js";
import { logTarget } from "../../src/ctrl/logs/target.js";
import { historyPoints, historySeries } from "../../src/ctrl/read/metric-history.js";
import { grepPattern, type LogQuery } from "../../src/ctrl/validate/logs.js";
import { MAX_SKEW_MS } from "../../src/ctrl/validate/measurements.js";
import { validateRollout } from "../../src/ctrl/validate/api.js";
import { load, pct } from "../support.js";

const num = (name: string, dflt: number): number => Number(process.env[`KRANE_BENCH_OBSERVE_${name}`] ?? dflt);
const ENVS = num("ENVS", 1000);
const INSTANCES = 3;
const LINES_PER_S = num("LINES_PER_S", 100);
const MINUTES = num("MINUTES", 60);
const QUERIES = num("QUERIES", 10);
/** One environment's share of a day's lines by default (8,640 at the load). */
const GREP_LINES = num("GREP_LINES", Math.round((LINES_PER_S * DAY_MS) / 1000 / ENVS));
const REGION = "bench";
const REF = { workspace: "bench", project: "app" };
/** The simulation starts at the current hour (the week of prepared points lies before it). */
const T0 = startOf(Date.now(), HOUR_MS);

interface Env {
  readonly environmentId: string;
  readonly deploymentId: string;
  readonly slug: string;
}

/** E environments in REGION (createEnvironment: rows, regions, sentinels), one revision each. */
async function seed(store: Store, n: number): Promise<Env[]> {
  await createRegion(store, REGION);
  await createWorkspace(store, { slug: REF.workspace, name: "bench" });
  await createProject(store, { workspace: REF.workspace, slug: REF.project, name: "app" });
  const envs: Env[] = [];
  for (let i = 0; i < n; i++) {
    const slug = `e${i}`;
    const { environment } = await createEnvironment(store, {
      ...REF,
      slug,
      regions: [{ region: REGION, replicas: INSTANCES }],
      sentinel: { image: "registry.example.com/sentinel:1", replicas: 1, cpuMillicores: 100, memoryMib: 64 },
      rollout: validateRollout(undefined),
    });
    const { deployment } = await createDeployment(store, {
      ...REF,
      environment: slug,
      image: "registry.example.com/app:1",
      command: ["node"],
      args: ["server.js"],
      port: 8080,
      env: [],
      cpuMillicores: 250,
      memoryMib: 256,
      healthCheck: null,
      buildId: "build-1",
      replicas: null,
    });
    envs.push({ environmentId: environment.id, deploymentId: deployment.id, slug });
  }
  return envs;
}

const podOf = (e: Env, j: number): string => `${e.slug}-pod-${j}`;

/** Bytes of a table and its indexes in the file (SQLite's dbstat). */
async function tableBytes(store: Store, table: string): Promise<number> {
  const { rows } = await sql<{ bytes: number | null }>`
    select sum(pgsize) as bytes from dbstat where name = ${table} or name in
      (select name from sqlite_master where tbl_name = ${table} and type = 'index')`.execute(store.db);
  return Number(rows[0]?.bytes ?? 0);
}

async function rowCount(store: Store, table: "metric_points" | "log_lines"): Promise<number> {
  const r = await store.db
    .selectFrom(table)
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .executeTakeFirst();
  return Number(r?.n ?? 0);
}

/** CPU seconds (user + system) this process spent in `fn`. */
async function cpuOf(fn: () => Promise<void>): Promise<number> {
  const before = process.cpuUsage();
  await fn();
  const d = process.cpuUsage(before);
  return (d.user + d.system) / 1e6;
}

const mib = (b: number): string => `${(b / 1_048_576).toFixed(1)} MiB`;
const perDay = (x: number): number => (x * (DAY_MS / MINUTE_MS)) / MINUTES;

/** A report's latency slots: `n` requests spread over the buckets up to 100 ms. */
function latency(n: number): number[] {
  const slots = new Array<number>(LATENCY_BUCKETS_MS.length + 1).fill(0);
  slots[4] = n - Math.floor(n / 2);
  slots[6] = Math.floor(n / 2);
  return slots;
}

/** The agents' reports of E environments for `MINUTES` minutes, then a rollup sweep each minute. */
async function ingestMetrics(store: Store, envs: readonly Env[], setNow: (ms: number) => void): Promise<number> {
  const rollup = new HistoryRollup({ store, lateMs: MEASUREMENT_RETENTION_MS + MAX_SKEW_MS });
  return cpuOf(async () => {
    for (let m = 0; m < MINUTES; m++) {
      const minute = T0 + m * MINUTE_MS;
      for (let w = 0; w < 6; w++) {
        const fromMs = minute + w * 10_000;
        setNow(fromMs + 10_000);
        const per = 30; // requests per instance and window
        await recordMeasurements(store, REGION, {
          fromMs,
          toMs: fromMs + 10_000,
          entries: envs.map((e) => ({
            environmentId: e.environmentId,
            deploymentId: e.deploymentId,
            classes: [per * INSTANCES - 1, 0, 0, 1] as const,
            latency: latency(per * INSTANCES),
          })),
          instances: envs.flatMap((e) =>
            Array.from({ length: INSTANCES }, (_, j) => ({
              environmentId: e.environmentId,
              deploymentId: e.deploymentId,
              instance: podOf(e, j),
              classes: [per, 0, 0, 0] as const,
              latency: latency(per),
            })),
          ),
        });
      }
      await recordUsage(store, REGION, {
        minutes: [
          {
            minuteMs: minute,
            instances: envs.flatMap((e) =>
              Array.from({ length: INSTANCES }, (_, j) => ({
                environmentId: e.environmentId,
                deploymentId: e.deploymentId,
                instance: podOf(e, j),
                cpuMillicoresSum: 4 * 120,
                memoryBytesSum: 4 * 200e6,
                readings: 4,
                restarts: 0,
              })),
            ),
          },
        ],
      });
      await rollup.sweep();
    }
  });
}

function logLine(i: number): string {
  const status = i % 50 === 0 ? 503 : 200;
  return `2026-01-01T00:00:00Z INFO GET /api/items/${i % 997} status=${status} duration_ms=${i % 90} request_id=${(i * 2654435761) % 4294967296}`;
}

/** LINES_PER_S over the instances for MINUTES minutes, stored per environment and 2-s push as the archive does. */
async function ingestLogs(store: Store, envs: readonly Env[], workspaceId: string): Promise<number> {
  const secrets = new Map(
    envs.map((e) => [e.environmentId, new EnvironmentSecrets(store.db, undefined, e.environmentId)]),
  );
  const perPush = LINES_PER_S * 2;
  let n = 0;
  return cpuOf(async () => {
    for (let t = T0; t < T0 + MINUTES * MINUTE_MS; t += 2_000) {
      const byEnv = new Map<Env, { ns: bigint; instance: string; text: string }[]>();
      for (let k = 0; k < perPush; k++, n++) {
        const e = envs[n % envs.length] as Env;
        const list = byEnv.get(e) ?? [];
        list.push({
          ns: BigInt(t + Math.floor((k * 2_000) / perPush)) * 1_000_000n + BigInt(k),
          instance: podOf(e, Math.floor(n / envs.length) % INSTANCES),
          text: logLine(n),
        });
        byEnv.set(e, list);
      }
      for (const [e, lines] of byEnv) {
        const s = secrets.get(e.environmentId) as EnvironmentSecrets;
        await s.learn([e.deploymentId]);
        await storeLines(
          store.db,
          lines.map((l): StoredLine => ({
            environmentId: e.environmentId,
            workspaceId,
            region: REGION,
            instance: l.instance,
            ns: l.ns,
            deploymentId: e.deploymentId,
            revision: s.revision(e.deploymentId),
            stream: "",
            line: s.mask(l.text),
          })),
        );
      }
    }
  });
}

/** p50 and p95 (ms) of QUERIES runs of `fn`. */
async function timed(fn: () => Promise<unknown>): Promise<string> {
  await fn(); // warm-up
  const ms: number[] = [];
  for (let i = 0; i < QUERIES; i++) {
    const t = performance.now();
    await fn();
    ms.push(performance.now() - t);
  }
  ms.sort((a, b) => a - b);
  return `p50 ${pct(ms, 50).toFixed(1)} ms, p95 ${pct(ms, 95).toFixed(1)} ms over ${QUERIES} queries`;
}

/** Seven days of minutes (revision and instances) of `e` before T0, and their hours rolled up. */
async function prepareWeek(store: Store, e: Env): Promise<void> {
  const from = T0 - 7 * DAY_MS;
  for (let h = from; h < T0; h += HOUR_MS) {
    const rev: Point[] = [];
    const inst: Point[] = [];
    for (let m = h; m < h + HOUR_MS; m += MINUTE_MS) {
      const sums = emptySums();
      sums.requests = 540;
      sums.errors = 6;
      sums.latency[4] = 540;
      const point: Point = {
        environmentId: e.environmentId,
        deploymentId: e.deploymentId,
        region: REGION,
        instance: "",
        atMs: m,
        sums,
      };
      rev.push(point);
      for (let j = 0; j < INSTANCES; j++)
        inst.push({ ...point, instance: podOf(e, j), sums: { ...sums, requests: 180, latency: [...sums.latency] } });
    }
    await addMinutes(store.db, rev);
    await addInstanceMinutes(store.db, inst);
    await rollupHour(store.db, h);
  }
}

/** One day of GREP_LINES lines of `e` before `nowMs`, over its instances. */
async function prepareDay(store: Store, e: Env, workspaceId: string, nowMs: number): Promise<void> {
  const step = DAY_MS / GREP_LINES;
  for (let i = 0; i < GREP_LINES; i += 5_000) {
    const batch: StoredLine[] = [];
    for (let k = i; k < Math.min(GREP_LINES, i + 5_000); k++)
      batch.push({
        environmentId: e.environmentId,
        workspaceId,
        region: REGION,
        instance: podOf(e, k % INSTANCES),
        ns: BigInt(Math.floor(nowMs - DAY_MS + k * step)) * 1_000_000n + BigInt(k % 1_000_000),
        deploymentId: e.deploymentId,
        revision: 1,
        stream: "",
        line: logLine(k),
      });
    await storeLines(store.db, batch);
  }
}

/** `krane logs --since 1d --grep <pattern>`'s history read of `e`: lines matched. */
async function grepDay(store: Store, e: Env, pattern: string, nowMs: number): Promise<number> {
  const p = grepPattern(pattern);
  if (typeof p === "string") throw new Error(p);
  const q: LogQuery = {
    ref: { ...REF, environment: e.slug },
    follow: false,
    since: nowMs - DAY_MS,
    revision: 0,
    previous: false,
    history: true,
    grep: p,
  };
  const target = await logTarget(store.db, q);
  const grep = grepOf(p);
  try {
    const h = await readHistory(
      store.db,
      target,
      q,
      grep,
      new EnvironmentSecrets(store.db, undefined, e.environmentId),
    );
    let n = 0;
    for await (const page of h.pages) n += page.length;
    return n;
  } finally {
    grep.close();
  }
}

export async function benchObserve(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "krane-bench-observe-"));
  let now = T0;
  console.log(
    `  embedded store (SQLite file); the external engine does not exist yet: no figure for it.\n` +
      `  ${ENVS} environments × ${INSTANCES} instances, 1-minute metrics, ${LINES_PER_S} log lines/s in all; ` +
      `${MINUTES} simulated minutes, extrapolated to a day`,
  );
  const store = await Store.open({ url: join(dir, "ctrl.db") }, { clock: () => now });
  try {
    const envs = await seed(store, ENVS);
    const e = envs[0] as Env;
    // Metrics.
    let before = await tableBytes(store, "metric_points");
    let cpu = await ingestMetrics(store, envs, (ms) => void (now = ms));
    let bytes = (await tableBytes(store, "metric_points")) - before;
    const rows = await rowCount(store, "metric_points");
    console.log(
      `  ingest metrics: ${perDay(cpu).toFixed(0)} CPU s/day (${cpu.toFixed(1)} s for ${MINUTES} min), ` +
        `metric_points ${mib(perDay(bytes))}/day (${rows} rows after ${MINUTES} min, hours rolled up; ${load()})`,
    );
    await prepareWeek(store, e);
    const chart = await timed(async () => {
      const since = startOf(now - 7 * DAY_MS, HOUR_MS);
      const points = await historyPoints(store.db, { environmentId: e.environmentId, fromMs: since }, HOUR_MS, now);
      return historySeries(points, since, now, HOUR_MS);
    });
    console.log(`  query: 7-day chart of one environment (hour step): ${chart} (goal p95 ≤ 100 ms; ${load()})`);
    // Logs.
    const ws = await store.db.selectFrom("workspaces").select("id").executeTakeFirstOrThrow();
    before = await tableBytes(store, "log_lines");
    cpu = await ingestLogs(store, envs, ws.id);
    bytes = (await tableBytes(store, "log_lines")) - before;
    console.log(
      `  ingest logs: ${perDay(cpu).toFixed(0)} CPU s/day (${cpu.toFixed(1)} s for ${MINUTES} min), ` +
        `log_lines ${mib(perDay(bytes))}/day (${load()})`,
    );
    await prepareDay(store, e, ws.id, now);
    for (const pattern of ["status=503", "/status=50[0-9]/"]) {
      let matched = 0;
      const r = await timed(async () => (matched = await grepDay(store, e, pattern, now)));
      console.log(
        `  query: krane logs --since 1d --grep ${pattern} over ${GREP_LINES} lines (${matched} matched): ${r} (goal p95 ≤ 1 s; ${load()})`,
      );
    }
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

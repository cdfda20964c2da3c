// The metrics history in ctrl's own database (table metric_points, migration 0036): the only
// writer of that table. Minutes come from the agents' measurement reports (folded in by
// ../domain/measurements.ts, in the transaction that stores the report, so a report sent twice
// counts once); hours are rolled up from minutes (./rollup.ts); both are pruned by age. Reads
// answer MetricsService.GetMetricsHistory and ctrl's /metrics.
import type { Kysely } from "kysely";
import type { Database } from "../db/schema.js";
import {
  HOUR_MS,
  HOUR_RETENTION_MS,
  LATENCY_COLUMNS,
  MAX_INSTANCE_SERIES_PER_ENVIRONMENT,
  MAX_SERIES_PER_ENVIRONMENT,
  MINUTE_MS,
  MINUTE_RETENTION_MS,
  admitSeries,
  busiest,
  columnsToSums,
  seriesId,
  startOf,
  sumsToColumns,
  type Point,
  type SumColumns,
} from "./sums.js";

type Db = Kysely<Database>;

const KEY = ["environment_id", "step_ms", "at_ms", "deployment_id", "region", "instance"] as const;
const SUM_COLUMNS = [
  "requests",
  "errors",
  "cpu_millicores_sum",
  "memory_bytes_sum",
  "usage_samples",
  "restarts",
  ...LATENCY_COLUMNS,
] as const satisfies readonly (keyof SumColumns)[];
const CHUNK = 200;

function row(p: Point, stepMs: number) {
  return {
    environment_id: p.environmentId,
    deployment_id: p.deploymentId,
    region: p.region,
    instance: p.instance,
    step_ms: stepMs,
    at_ms: p.atMs,
    ...sumsToColumns(p.sums),
  };
}

type SeriesRow = { environment_id: string; deployment_id: string; region: string; instance: string } & {
  readonly [K in keyof SumColumns]: number | string | bigint | null;
};

function toPoint(r: SeriesRow, atMs: number): Point {
  return {
    environmentId: r.environment_id,
    deploymentId: r.deployment_id,
    region: r.region,
    instance: r.instance,
    atMs,
    sums: columnsToSums(r),
  };
}

/**
 * The points a minute admits: per environment and minute, the series already stored and new ones
 * while fewer than `cap` of their class (revision series, instance "", or instance series) are.
 */
async function admitted(db: Db, points: readonly Point[], instances: boolean, cap: number): Promise<Point[]> {
  const byMinute = new Map<string, Point[]>();
  for (const p of points) {
    const k = `${p.environmentId}\n${p.atMs}`;
    const g = byMinute.get(k);
    if (g) g.push(p);
    else byMinute.set(k, [p]);
  }
  const kept: Point[] = [];
  for (const group of byMinute.values()) {
    const first = group[0];
    if (!first) continue;
    const existing = await db
      .selectFrom("metric_points")
      .select(["environment_id", "deployment_id", "region", "instance"])
      .where("environment_id", "=", first.environmentId)
      .where("step_ms", "=", MINUTE_MS)
      .where("at_ms", "=", first.atMs)
      .where("instance", instances ? "!=" : "=", "")
      .execute();
    const have = new Set(
      existing.map((r) =>
        seriesId({
          environmentId: r.environment_id,
          deploymentId: r.deployment_id,
          region: r.region,
          instance: r.instance,
        }),
      ),
    );
    const ok = admitSeries(have, group.map(seriesId), cap);
    kept.push(...group.filter((p) => ok.has(seriesId(p))));
  }
  return kept;
}

/**
 * Adds minute points (each at the start of its minute) to what is stored. An environment's
 * minute takes at most MAX_SERIES_PER_ENVIRONMENT series; returns how many points were dropped.
 */
export async function addMinutes(db: Db, points: readonly Point[]): Promise<number> {
  return add(db, points, false);
}

/**
 * Adds instance minutes of requests, errors and latency (what the sentinels counted per instance)
 * to what is stored: the same rows as the instance's CPU, memory and restarts (setUsageMinutes),
 * whose columns these points leave as they are. An environment's minute takes at most
 * MAX_INSTANCE_SERIES_PER_ENVIRONMENT instance series; returns how many points were dropped.
 */
export async function addInstanceMinutes(db: Db, points: readonly Point[]): Promise<number> {
  return add(db, points, true);
}

async function add(db: Db, points: readonly Point[], instances: boolean): Promise<number> {
  if (points.length === 0) return 0;
  const kept = await admitted(
    db,
    points,
    instances,
    instances ? MAX_INSTANCE_SERIES_PER_ENVIRONMENT : MAX_SERIES_PER_ENVIRONMENT,
  );
  for (let i = 0; i < kept.length; i += CHUNK) {
    await db
      .insertInto("metric_points")
      .values(kept.slice(i, i + CHUNK).map((p) => row(p, MINUTE_MS)))
      .onConflict((oc) =>
        oc
          .columns([...KEY])
          .doUpdateSet((eb) =>
            Object.fromEntries(
              SUM_COLUMNS.map((c) => [c, eb(eb.ref(`metric_points.${c}`), "+", eb.ref(`excluded.${c}`))]),
            ),
          ),
      )
      .execute();
  }
  return points.length - kept.length;
}

const USAGE_COLUMNS = ["cpu_millicores_sum", "memory_bytes_sum", "usage_samples", "restarts"] as const;

/**
 * Sets instance minutes (CPU, memory and restarts of one pod over one minute, as its agent read
 * them so far). Per instance and minute the figures with the most readings are kept (then the
 * most restarts): an agent sends a minute again as it fills, so the newest report holds the most,
 * and a retry or a late one changes nothing. An environment's minute takes at most
 * MAX_INSTANCE_SERIES_PER_ENVIRONMENT instance series. Returns the points stored or replaced.
 */
export async function setUsageMinutes(db: Db, points: readonly Point[]): Promise<number> {
  if (points.length === 0) return 0;
  const kept = await admitted(db, points, true, MAX_INSTANCE_SERIES_PER_ENVIRONMENT);
  let n = 0;
  for (let i = 0; i < kept.length; i += CHUNK) {
    const res = await db
      .insertInto("metric_points")
      .values(kept.slice(i, i + CHUNK).map((p) => row(p, MINUTE_MS)))
      .onConflict((oc) =>
        oc
          .columns([...KEY])
          .doUpdateSet((eb) => Object.fromEntries(USAGE_COLUMNS.map((c) => [c, eb.ref(`excluded.${c}`)])))
          .where((eb) =>
            eb.or([
              eb("excluded.usage_samples", ">", eb.ref("metric_points.usage_samples")),
              eb.and([
                eb("excluded.usage_samples", "=", eb.ref("metric_points.usage_samples")),
                eb("excluded.restarts", ">", eb.ref("metric_points.restarts")),
              ]),
            ]),
          ),
      )
      .executeTakeFirst();
    n += Number(res.numInsertedOrUpdatedRows ?? 0);
  }
  return n;
}

/**
 * Computes hour `hourMs` from its minutes again and stores it (replacing what a previous run
 * stored: the rollup is repeated while late reports may still add to the hour). Returns the rows written.
 */
export async function rollupHour(db: Db, hourMs: number): Promise<number> {
  const rows = await db
    .selectFrom("metric_points")
    .select((eb) => [
      "environment_id",
      "deployment_id",
      "region",
      "instance",
      ...SUM_COLUMNS.map((c) => eb.fn.sum<number | string>(c).as(c)),
    ])
    .where("step_ms", "=", MINUTE_MS)
    .where("at_ms", ">=", hourMs)
    .where("at_ms", "<", hourMs + HOUR_MS)
    .groupBy(["environment_id", "deployment_id", "region", "instance"])
    .execute();
  const all = rows.map((r) => toPoint(r, hourMs));
  const points = [
    ...busiest(
      all.filter((p) => p.instance === ""),
      MAX_SERIES_PER_ENVIRONMENT,
    ),
    // Instances by what they used and served.
    ...busiest(
      all.filter((p) => p.instance !== ""),
      MAX_INSTANCE_SERIES_PER_ENVIRONMENT,
      (s) => s.cpuMillicoresSum + s.memoryBytesSum / 1e6 + s.requests + s.restarts * 1e9,
    ),
  ];
  await db.transaction().execute(async (trx) => {
    await trx.deleteFrom("metric_points").where("step_ms", "=", HOUR_MS).where("at_ms", "=", hourMs).execute();
    for (let i = 0; i < points.length; i += CHUNK)
      await trx
        .insertInto("metric_points")
        .values(points.slice(i, i + CHUNK).map((p) => row(p, HOUR_MS)))
        .execute();
  });
  return points.length;
}

/** The hours a rollup should (re)compute now, oldest first, at most `limit`. */
export async function hoursToRoll(db: Db, nowMs: number, lateMs: number, limit: number): Promise<number[]> {
  const lastComplete = startOf(nowMs, HOUR_MS) - HOUR_MS;
  // Hours that late reports may still change are computed again at each sweep.
  const settled = startOf(nowMs - lateMs, HOUR_MS) - HOUR_MS;
  const newestHour = await db
    .selectFrom("metric_points")
    .select((eb) => eb.fn.max("at_ms").as("at"))
    .where("step_ms", "=", HOUR_MS)
    .executeTakeFirst();
  const after = newestHour?.at == null ? undefined : Math.min(Number(newestHour.at), settled);
  let q = db
    .selectFrom("metric_points")
    .select((eb) => eb.fn.min("at_ms").as("at"))
    .where("step_ms", "=", MINUTE_MS);
  if (after !== undefined) q = q.where("at_ms", ">=", after + HOUR_MS);
  const oldest = await q.executeTakeFirst();
  if (oldest?.at == null) return [];
  const out: number[] = [];
  for (let h = startOf(Number(oldest.at), HOUR_MS); h <= lastComplete && out.length < limit; h += HOUR_MS) out.push(h);
  return out;
}

/** Deletes minutes older than 7 days and hours older than 30; returns how many rows. */
export async function pruneHistory(db: Db, nowMs: number): Promise<number> {
  let n = 0;
  for (const [step, keep] of [
    [MINUTE_MS, MINUTE_RETENTION_MS],
    [HOUR_MS, HOUR_RETENTION_MS],
  ] as const) {
    const res = await db
      .deleteFrom("metric_points")
      .where("step_ms", "=", step)
      .where("at_ms", "<", nowMs - keep)
      .executeTakeFirst();
    n += Number(res.numDeletedRows);
  }
  return n;
}

/** Deletes an environment's history (the end of its deletion). */
export async function purgeMetricHistory(db: Db, environmentId: string): Promise<void> {
  await db.deleteFrom("metric_points").where("environment_id", "=", environmentId).execute();
}

export interface PointQuery {
  readonly environmentId: string;
  readonly stepMs: number;
  readonly fromMs: number;
  readonly deploymentId?: string;
  readonly region?: string;
  readonly instance?: string;
}

/** Stored points of one environment and step from `fromMs` on, oldest first. */
export async function readPoints(db: Db, q: PointQuery): Promise<Point[]> {
  let s = db
    .selectFrom("metric_points")
    .select(["deployment_id", "region", "instance", "at_ms", ...SUM_COLUMNS])
    .where("environment_id", "=", q.environmentId)
    .where("step_ms", "=", q.stepMs)
    .where("at_ms", ">=", q.fromMs);
  if (q.deploymentId !== undefined) s = s.where("deployment_id", "=", q.deploymentId);
  if (q.region !== undefined) s = s.where("region", "=", q.region);
  if (q.instance !== undefined) s = s.where("instance", "=", q.instance);
  const rows = await s.orderBy("at_ms").execute();
  return rows.map((r) => toPoint({ ...r, environment_id: q.environmentId }, Number(r.at_ms)));
}

/** Every revision-level point (instance "") of one minute, all environments (ctrl's /metrics). */
export async function minutePoints(db: Db, atMs: number): Promise<Point[]> {
  const rows = await db
    .selectFrom("metric_points")
    .select(["environment_id", "deployment_id", "region", "instance", "at_ms", ...SUM_COLUMNS])
    .where("step_ms", "=", MINUTE_MS)
    .where("at_ms", "=", atMs)
    .where("instance", "=", "")
    .execute();
  return rows.map((r) => toPoint(r, Number(r.at_ms)));
}

// The sentinels' measurements as charts read them: an environment's revisions in buckets of time
// (requests per second, error rate, p50 and p99), all regions added up. The bucketing and the
// percentiles are pure (bucketMetrics, quantileMs); the query reads the rows of the range once.
import type { Kysely } from "kysely";
import { latencyQuantileMs } from "../../contracts/analysis.js";
import type { Database, MeasurementsTable } from "../db/schema.js";

type Reader = Kysely<Database>;

/** What the charts read of a stored report. */
export type MeasurementRow = Pick<
  MeasurementsTable,
  "deployment_id" | "from_ms" | "to_ms" | "r2xx" | "r3xx" | "r4xx" | "r5xx" | "latency"
>;

export interface MetricsPointView {
  atMs: number;
  requests: number;
  requestsPerSecond: number;
  errorRatePercent: number;
  /** Upper bound of the bucket holding the percentile (ms); -1 past the last bound; null: no timings. */
  p50Ms: number | null;
  p99Ms: number | null;
}

/** `latencyQuantileMs` as the wire has it: -1 past the last bound (the wire has no Infinity). */
export function quantileMs(buckets: readonly number[], q: number): number | null {
  const ms = latencyQuantileMs(buckets, q);
  return ms === Infinity ? -1 : ms;
}

function parseLatency(text: string): number[] {
  try {
    const v: unknown = JSON.parse(text);
    return Array.isArray(v) ? v.map((x) => (typeof x === "number" && Number.isFinite(x) ? x : 0)) : [];
  } catch {
    return [];
  }
}

/**
 * Rows into buckets of `bucketMs` from `sinceMs`, per revision (a report counts in the bucket its
 * window ended in). Requests per second divide by the bucket's length, or, for the bucket still
 * filling, by the time from its start to the newest report in it.
 */
export function bucketMetrics(
  rows: readonly MeasurementRow[],
  sinceMs: number,
  bucketMs: number,
): Map<string, MetricsPointView[]> {
  interface Acc {
    requests: number;
    errors: number;
    latency: number[];
    lastTo: number;
  }
  const byDep = new Map<string, Map<number, Acc>>();
  let newest = 0;
  for (const r of rows) {
    const to = Number(r.to_ms);
    if (to < sinceMs) continue;
    newest = Math.max(newest, to);
    const at = sinceMs + Math.floor((to - sinceMs) / bucketMs) * bucketMs;
    let buckets = byDep.get(r.deployment_id);
    if (!buckets) byDep.set(r.deployment_id, (buckets = new Map()));
    let a = buckets.get(at);
    if (!a) buckets.set(at, (a = { requests: 0, errors: 0, latency: [], lastTo: 0 }));
    a.requests += Number(r.r2xx) + Number(r.r3xx) + Number(r.r4xx) + Number(r.r5xx);
    a.errors += Number(r.r5xx);
    parseLatency(r.latency).forEach((n, i) => (a.latency[i] = (a.latency[i] ?? 0) + n));
    a.lastTo = Math.max(a.lastTo, to);
  }
  const out = new Map<string, MetricsPointView[]>();
  for (const [dep, buckets] of byDep) {
    const points = [...buckets]
      .sort(([x], [y]) => x - y)
      .map(([at, a]) => {
        const filling = at + bucketMs > newest;
        const span = filling ? Math.max(1_000, a.lastTo - at) : bucketMs;
        return {
          atMs: at,
          requests: a.requests,
          requestsPerSecond: a.requests / (span / 1000),
          errorRatePercent: a.requests > 0 ? (100 * a.errors) / a.requests : 0,
          p50Ms: quantileMs(a.latency, 0.5),
          p99Ms: quantileMs(a.latency, 0.99),
        };
      });
    out.set(dep, points);
  }
  return out;
}

/** The measurement rows of an environment whose window ended at or after `sinceMs`. */
export async function measurementRows(db: Reader, environmentId: string, sinceMs: number): Promise<MeasurementRow[]> {
  return db
    .selectFrom("measurements")
    .select(["deployment_id", "from_ms", "to_ms", "r2xx", "r3xx", "r4xx", "r5xx", "latency"])
    .where("environment_id", "=", environmentId)
    .where("to_ms", ">=", sinceMs)
    .execute();
}

/** The end of the newest measurement window stored for the environment (0: none). */
export async function measuredThrough(db: Reader, environmentId: string): Promise<number> {
  const row = await db
    .selectFrom("measurements")
    .select((eb) => eb.fn.max("to_ms").as("to"))
    .where("environment_id", "=", environmentId)
    .executeTakeFirst();
  return Number(row?.to ?? 0);
}

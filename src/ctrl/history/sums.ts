// The metrics history's pure core: a series' figures over a minute or an hour (MetricSums) and
// what can be done with them. Everything is a sum — requests, errors, restarts, the latency
// histogram's non-cumulative bucket counts, CPU and memory summed over their readings — so that
// minutes add up into hours exactly and percentiles are computed from the merged histogram, never
// averaged. ./store.ts keeps them in ctrl's database; ./rollup.ts turns minutes into hours.
import { LATENCY_BUCKETS_MS, latencyQuantileMs } from "../../contracts/analysis.js";

export const MINUTE_MS = 60_000;
export const HOUR_MS = 3_600_000;
/** Minutes are kept 7 days, hours 30 days. */
export const MINUTE_RETENTION_MS = 7 * 24 * HOUR_MS;
export const HOUR_RETENTION_MS = 30 * 24 * HOUR_MS;
/**
 * At most this many series (revision × region × instance) per environment in one minute or one
 * hour: a series new to a full minute is not stored (counted as dropped), an hour keeps its
 * busiest. With it an environment holds at most 16 × (10,080 + 720) rows.
 */
export const MAX_SERIES_PER_ENVIRONMENT = 16;
/**
 * And at most this many instance series (CPU, memory and restarts per pod, ../domain/usage.ts),
 * counted apart so that a large environment's pods never push out its revisions' traffic: an
 * environment holds at most 32 × (10,080 + 720) such rows more.
 */
export const MAX_INSTANCE_SERIES_PER_ENVIRONMENT = 32;
/** Latency slots: one per LATENCY_BUCKETS_MS bound, then +Inf. */
export const SLOTS = LATENCY_BUCKETS_MS.length + 1;

export interface MetricSums {
  requests: number;
  /** 5xx answers, the sentinel's own included (an instance that refused, reset or timed out). */
  errors: number;
  /** Non-cumulative observations per latency slot (SLOTS). */
  latency: number[];
  cpuMillicoresSum: number;
  memoryBytesSum: number;
  /** Readings behind the CPU and memory sums (their mean is sum / samples). */
  usageSamples: number;
  restarts: number;
}

export function emptySums(): MetricSums {
  return {
    requests: 0,
    errors: 0,
    latency: new Array<number>(SLOTS).fill(0),
    cpuMillicoresSum: 0,
    memoryBytesSum: 0,
    usageSamples: 0,
    restarts: 0,
  };
}

/** Adds `x` into `acc` (histograms bucket by bucket); returns `acc`. */
export function addInto(acc: MetricSums, x: MetricSums): MetricSums {
  acc.requests += x.requests;
  acc.errors += x.errors;
  for (let i = 0; i < SLOTS; i++) acc.latency[i] = (acc.latency[i] ?? 0) + (x.latency[i] ?? 0);
  acc.cpuMillicoresSum += x.cpuMillicoresSum;
  acc.memoryBytesSum += x.memoryBytesSum;
  acc.usageSamples += x.usageSamples;
  acc.restarts += x.restarts;
  return acc;
}

export function mergeSums(list: Iterable<MetricSums>): MetricSums {
  const acc = emptySums();
  for (const x of list) addInto(acc, x);
  return acc;
}

/** The column names of the latency slots (l00 … l14). */
export const LATENCY_COLUMNS = [
  "l00",
  "l01",
  "l02",
  "l03",
  "l04",
  "l05",
  "l06",
  "l07",
  "l08",
  "l09",
  "l10",
  "l11",
  "l12",
  "l13",
  "l14",
] as const;
export type LatencyColumn = (typeof LATENCY_COLUMNS)[number];

/** The figures as columns of metric_points. */
export type SumColumns = {
  requests: number;
  errors: number;
  cpu_millicores_sum: number;
  memory_bytes_sum: number;
  usage_samples: number;
  restarts: number;
} & Record<LatencyColumn, number>;

export function sumsToColumns(s: MetricSums): SumColumns {
  const cols = {
    requests: s.requests,
    errors: s.errors,
    cpu_millicores_sum: s.cpuMillicoresSum,
    memory_bytes_sum: s.memoryBytesSum,
    usage_samples: s.usageSamples,
    restarts: s.restarts,
  } as SumColumns;
  LATENCY_COLUMNS.forEach((c, i) => (cols[c] = s.latency[i] ?? 0));
  return cols;
}

/** A row's columns back into sums (PostgreSQL hands bigints and sums over them as strings). */
export function columnsToSums(row: { readonly [K in keyof SumColumns]: number | string | bigint | null }): MetricSums {
  const n = (v: number | string | bigint | null): number => Number(v ?? 0);
  return {
    requests: n(row.requests),
    errors: n(row.errors),
    latency: LATENCY_COLUMNS.map((c) => n(row[c])),
    cpuMillicoresSum: n(row.cpu_millicores_sum),
    memoryBytesSum: n(row.memory_bytes_sum),
    usageSamples: n(row.usage_samples),
    restarts: n(row.restarts),
  };
}

export interface SeriesKey {
  readonly environmentId: string;
  readonly deploymentId: string;
  readonly region: string;
  /** "" for the revision as its sentinels count it. */
  readonly instance: string;
}

export interface Point extends SeriesKey {
  /** The start of the minute or hour. */
  readonly atMs: number;
  readonly sums: MetricSums;
}

export function seriesId(k: SeriesKey): string {
  return `${k.environmentId}\n${k.deploymentId}\n${k.region}\n${k.instance}`;
}

export function startOf(ms: number, stepMs: number): number {
  return Math.floor(ms / stepMs) * stepMs;
}

/** Points added up per series into steps of `stepMs` (minutes into hours), oldest first. */
export function rollup(points: readonly Point[], stepMs: number): Point[] {
  const out = new Map<string, { key: SeriesKey; atMs: number; sums: MetricSums }>();
  for (const p of points) {
    const atMs = startOf(p.atMs, stepMs);
    const id = `${seriesId(p)}\n${atMs}`;
    let acc = out.get(id);
    if (!acc) out.set(id, (acc = { key: p, atMs, sums: emptySums() }));
    addInto(acc.sums, p.sums);
  }
  return [...out.values()]
    .map((a) => ({
      environmentId: a.key.environmentId,
      deploymentId: a.key.deploymentId,
      region: a.key.region,
      instance: a.key.instance,
      atMs: a.atMs,
      sums: a.sums,
    }))
    .sort((a, b) => a.atMs - b.atMs);
}

/**
 * Which of `incoming` series may be stored in one environment's minute that already holds
 * `existing`: all that are there already, and new ones while fewer than `cap` are (in the order
 * given). The rest are dropped.
 */
export function admitSeries(existing: ReadonlySet<string>, incoming: readonly string[], cap: number): Set<string> {
  const admitted = new Set<string>();
  let size = existing.size;
  for (const id of incoming) {
    if (existing.has(id) || admitted.has(id)) {
      admitted.add(id);
      continue;
    }
    if (size >= cap) continue;
    admitted.add(id);
    size++;
  }
  return admitted;
}

/**
 * Each environment's busiest `cap` series of each step (an hour's rollup keeps these): by
 * requests, or by `weight`.
 */
export function busiest(
  points: readonly Point[],
  cap: number,
  weight: (s: MetricSums) => number = (s) => s.requests,
): Point[] {
  const groups = new Map<string, Point[]>();
  for (const p of points) {
    const k = `${p.environmentId}\n${p.atMs}`;
    const g = groups.get(k);
    if (g) g.push(p);
    else groups.set(k, [p]);
  }
  const out: Point[] = [];
  for (const g of groups.values())
    out.push(...(g.length <= cap ? g : [...g].sort((a, b) => weight(b.sums) - weight(a.sums)).slice(0, cap)));
  return out;
}

/** What a step's figures read as. */
export interface PointFigures {
  readonly requestsPerSecond: number;
  /** Percent of requests answered 5xx (0 without requests). */
  readonly errorRatePercent: number;
  /**
   * Upper bounds (ms) of the latency buckets holding p50, p95, p99: the true percentile lies in
   * that bucket (LATENCY_BUCKETS_MS). null without timings, Infinity past the last bound.
   */
  readonly p50Ms: number | null;
  readonly p95Ms: number | null;
  readonly p99Ms: number | null;
  /** Means over the step's readings; null without any. */
  readonly cpuMillicores: number | null;
  readonly memoryBytes: number | null;
  readonly restarts: number;
}

/** A step's figures; rates divide by `spanMs` (the step, or the part of it that has passed). */
export function figures(s: MetricSums, spanMs: number): PointFigures {
  return {
    requestsPerSecond: spanMs > 0 ? s.requests / (spanMs / 1000) : 0,
    errorRatePercent: s.requests > 0 ? (100 * s.errors) / s.requests : 0,
    p50Ms: latencyQuantileMs(s.latency, 0.5),
    p95Ms: latencyQuantileMs(s.latency, 0.95),
    p99Ms: latencyQuantileMs(s.latency, 0.99),
    cpuMillicores: s.usageSamples > 0 ? s.cpuMillicoresSum / s.usageSamples : null,
    memoryBytes: s.usageSamples > 0 ? s.memoryBytesSum / s.usageSamples : null,
    restarts: s.restarts,
  };
}

/** The step a query over `spanMs` reads: minutes up to 6 hours, hours beyond. */
export function stepFor(spanMs: number): number {
  return spanMs <= 6 * HOUR_MS ? MINUTE_MS : HOUR_MS;
}

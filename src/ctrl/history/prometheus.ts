// The metrics history on ctrl's /metrics: each revision's figures of the last complete minute,
// all regions added up. Label cardinality is bounded: the labels are environment_id and
// deployment_id only (no region, no instance), for at most MAX_EXPORTED_REVISIONS revisions,
// the busiest; the ones left out are counted in krane_revision_series_omitted.
import { Gauge, type Registry } from "prom-client";
import { MINUTE_MS, figures, rollup, startOf, type Point } from "./sums.js";

export const MAX_EXPORTED_REVISIONS = 1_000;
/** A scrape reads the database once, whatever number of gauges ask (within this long). */
const READ_REUSE_MS = 5_000;

export interface RevisionFigures {
  readonly environmentId: string;
  readonly deploymentId: string;
  readonly requestsPerSecond: number;
  readonly errorRatio: number;
  /** Seconds (upper bounds of the buckets holding them); absent without timings. */
  readonly quantiles: ReadonlyMap<string, number>;
}

/** One minute's points as per-revision figures, the busiest `cap` (pure). */
export function revisionFigures(points: readonly Point[], cap: number): { kept: RevisionFigures[]; omitted: number } {
  const perRevision = rollup(
    points.map((p) => ({ ...p, region: "", instance: "" })),
    MINUTE_MS,
  ).sort((a, b) => b.sums.requests - a.sums.requests);
  const kept = perRevision.slice(0, cap).map((p) => {
    const f = figures(p.sums, MINUTE_MS);
    const quantiles = new Map<string, number>();
    for (const [q, ms] of [
      ["0.5", f.p50Ms],
      ["0.95", f.p95Ms],
      ["0.99", f.p99Ms],
    ] as const)
      if (ms !== null) quantiles.set(q, ms / 1000);
    return {
      environmentId: p.environmentId,
      deploymentId: p.deploymentId,
      requestsPerSecond: f.requestsPerSecond,
      errorRatio: f.errorRatePercent / 100,
      quantiles,
    };
  });
  return { kept, omitted: Math.max(0, perRevision.length - cap) };
}

/**
 * Registers the gauges; `readMinute(atMs)` reads one minute's points. A read that fails leaves
 * the gauges empty for that scrape (the rest of /metrics is still served).
 */
export function registerHistoryMetrics(
  registry: Registry,
  readMinute: (atMs: number) => Promise<Point[]>,
  now: () => number,
  cap = MAX_EXPORTED_REVISIONS,
): void {
  let last: { at: number; figures: Promise<{ kept: RevisionFigures[]; omitted: number }> } | undefined;
  const load = (): Promise<{ kept: RevisionFigures[]; omitted: number }> => {
    const t = now();
    if (!last || t - last.at >= READ_REUSE_MS) {
      const minute = startOf(t, MINUTE_MS) - MINUTE_MS;
      last = {
        at: t,
        figures: readMinute(minute).then(
          (points) => revisionFigures(points, cap),
          () => ({ kept: [], omitted: 0 }),
        ),
      };
    }
    return last.figures;
  };
  const labelNames = ["environment_id", "deployment_id"] as const;
  new Gauge({
    name: "krane_revision_requests_per_second",
    help: "Requests per second a revision's sentinels answered in the last complete minute, all regions.",
    labelNames,
    registers: [registry],
    async collect() {
      this.reset();
      for (const f of (await load()).kept)
        this.set({ environment_id: f.environmentId, deployment_id: f.deploymentId }, f.requestsPerSecond);
    },
  });
  new Gauge({
    name: "krane_revision_error_ratio",
    help: "Share of a revision's requests answered 5xx in the last complete minute (0 to 1).",
    labelNames,
    registers: [registry],
    async collect() {
      this.reset();
      for (const f of (await load()).kept)
        this.set({ environment_id: f.environmentId, deployment_id: f.deploymentId }, f.errorRatio);
    },
  });
  new Gauge({
    name: "krane_revision_latency_seconds",
    help: "A revision's latency percentiles in the last complete minute: the upper bound of the sentinel's histogram bucket holding each.",
    labelNames: [...labelNames, "quantile"] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const f of (await load()).kept)
        for (const [quantile, s] of f.quantiles)
          this.set({ environment_id: f.environmentId, deployment_id: f.deploymentId, quantile }, s);
    },
  });
  new Gauge({
    name: "krane_revision_series_omitted",
    help: `Revisions with figures in the last complete minute left out of the gauges above (only the ${cap} busiest are exported).`,
    registers: [registry],
    async collect() {
      this.set((await load()).omitted);
    },
  });
}

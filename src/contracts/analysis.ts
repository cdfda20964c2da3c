// Rollout analysis: what the sentinels measure per revision, as ctrl hands it to whoever judges a
// canary or a region wave. The sentinels count requests by status class and time them
// (SENTINEL_METRICS in ./routing.ts); each region's agent collects those counters and reports the
// increments; ctrl adds the regions up. This file is the contract between the collecting side
// (agent, ClusterService, ctrl's store) and the judging side (the progressive rollout engine), so
// neither copies the other's shapes.

/**
 * Upper bounds of the latency histogram in milliseconds (the sentinel's buckets, which are in
 * seconds); a sample's `latencyBuckets` has one more slot, for +Inf.
 */
export const LATENCY_BUCKETS_MS = [1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000] as const;

/**
 * The upper bound (ms) of the latency bucket holding quantile `q` of non-cumulative `buckets`
 * (LATENCY_BUCKETS_MS, then +Inf): Infinity when it falls in the +Inf slot, null without
 * observations. An upper bound, where Prometheus' histogram_quantile would interpolate below it,
 * so a rule "p99 ≤ Y" is judged conservatively.
 */
export function latencyQuantileMs(buckets: readonly number[], q: number): number | null {
  const total = buckets.reduce((a, b) => a + b, 0);
  if (total <= 0) return null;
  const rank = Math.max(1, Math.ceil(total * q));
  let acc = 0;
  for (let i = 0; i < buckets.length; i++) {
    acc += buckets[i] ?? 0;
    if (acc >= rank) return LATENCY_BUCKETS_MS[i] ?? Infinity;
  }
  return Infinity;
}

/** Requests answered for one revision of one environment during a window, all regions added up. */
export interface RevisionSample {
  readonly deploymentId: string;
  /** Requests answered in the window (the sum of byClass). */
  readonly requests: number;
  /**
   * Requests by status class. "5xx" includes the sentinel's own error answers for this revision
   * (an upstream that refused, reset or timed out), so a crashing canary counts as failing.
   */
  readonly byClass: { readonly "2xx": number; readonly "3xx": number; readonly "4xx": number; readonly "5xx": number };
  /** Observations per latency bucket, NOT cumulative: LATENCY_BUCKETS_MS.length + 1 slots. */
  readonly latencyBuckets: readonly number[];
  /** The regions whose reports the sample contains. */
  readonly regions: readonly string[];
  /** The window the sample covers, unix ms (from: inclusive, to: the newest report added). */
  readonly fromMs: number;
  readonly toMs: number;
}

/** Where the judging side reads samples from (ctrl's store in production). */
export interface MeasurementSource {
  /**
   * Samples of the given revisions of one environment from `sinceMs` until now, added up over
   * `regions` (all regions when absent). A revision nobody reported on is absent from the map.
   */
  samples(
    environmentId: string,
    deploymentIds: readonly string[],
    sinceMs: number,
    regions?: readonly string[],
  ): Promise<Map<string, RevisionSample>>;
}

// The charts tab's series (pure): one line per revision of one measure, and one per instance of
// its CPU or memory; and the environment's alert rules as rows.
import type { AlertRule } from "../../../gen/krane/ctrl/v1/alerts_pb.js";
import type { MetricsSeries, RevisionMetrics } from "../../../gen/krane/ctrl/v1/live_pb.js";
import type { Tone } from "../../components/badge.js";
import type { Series } from "../../components/line-chart.js";

/** Past the last latency bucket (reported as -1): drawn at 30 s. */
const BEYOND_MS = 30_000;
/** Instances drawn at most (the busiest by the measure), so a legend stays readable. */
export const MAX_INSTANCE_LINES = 8;

/** Each revision's points of the measure `pick` reads; a bucket without it is left out. */
export function revisionSeries(
  revs: readonly RevisionMetrics[],
  pick: (p: RevisionMetrics["points"][number]) => number | undefined,
): Series[] {
  return revs.map((r) => ({
    name: `r${r.revision}`,
    points: r.points.flatMap((p) => {
      const v = pick(p);
      return v === undefined ? [] : [{ t: Number(p.atUnixMs), v: v < 0 ? BEYOND_MS : v }];
    }),
  }));
}

/**
 * Each instance's points of the measure `pick` reads (CPU or memory, from the metrics history),
 * named by its revision and region and the end of its pod's name; the busiest first, at most
 * MAX_INSTANCE_LINES. The revisions' own series (instance "") carry no such figure and are left out.
 */
export function instanceSeries(
  series: readonly MetricsSeries[],
  pick: (p: MetricsSeries["points"][number]) => number | undefined,
): Series[] {
  return series
    .filter((s) => s.instance !== "")
    .map((s) => ({
      name: `r${s.revision} ${s.region} …${s.instance.slice(-5)}`,
      points: s.points.flatMap((p) => {
        const v = pick(p);
        return v === undefined ? [] : [{ t: Number(p.atUnixMs), v }];
      }),
    }))
    .filter((s) => s.points.length > 0)
    .sort((a, b) => Math.max(...b.points.map((p) => p.v)) - Math.max(...a.points.map((p) => p.v)))
    .slice(0, MAX_INSTANCE_LINES);
}

/** An alert rule as the charts tab lists it. */
export interface AlertRow {
  readonly name: string;
  /** e.g. "error_rate > 2 for 5m", "restarts > 3 in 10m for 1m". */
  readonly condition: string;
  readonly state: string;
  readonly tone: Tone;
  /** The last minute's value, or "-". */
  readonly last: string;
  /** Since when it has been pending or firing (unix ms); 0 when inactive. */
  readonly sinceMs: number;
}

const ALERT_TONE: Record<string, Tone> = { firing: "bad", pending: "warn", inactive: "ok" };

export function alertRows(rules: readonly AlertRule[]): AlertRow[] {
  return rules.map((r) => ({
    name: r.name,
    condition: `${r.metric} ${r.op} ${r.threshold}${r.windowSeconds > 60 ? ` in ${Math.round(r.windowSeconds / 60)}m` : ""} for ${Math.round(r.forSeconds / 60)}m`,
    state: r.state,
    tone: ALERT_TONE[r.state] ?? "",
    last: r.lastValue === undefined ? "-" : String(Math.round(r.lastValue * 100) / 100),
    sinceMs: Number(r.sinceUnixMs),
  }));
}

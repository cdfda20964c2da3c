// MetricsService.GetMetricsHistory: an environment's metrics history as series of points. Minutes
// for short ranges, hours for long ones; the hours not rolled up yet (the last two, which late
// reports may still change) are rolled up here from their minutes, so the newest hour is never
// missing. The shaping into series is pure (historySeries).
import type { Kysely } from "kysely";
import type { Database } from "../db/schema.js";
import { readPoints, type PointQuery } from "../history/store.js";
import {
  HOUR_MS,
  MINUTE_MS,
  emptySums,
  figures,
  mergeSums,
  rollup,
  seriesId,
  startOf,
  type MetricSums,
  type Point,
  type PointFigures,
} from "../history/sums.js";

export interface HistoryPointView extends PointFigures {
  readonly atMs: number;
  readonly requests: number;
  readonly errors: number;
}

export interface HistorySeriesView {
  readonly deploymentId: string;
  readonly region: string;
  readonly instance: string;
  readonly points: HistoryPointView[];
  readonly total: HistoryPointView;
}

function view(atMs: number, s: MetricSums, spanMs: number): HistoryPointView {
  return { atMs, requests: s.requests, errors: s.errors, ...figures(s, spanMs) };
}

/**
 * Points into one series per (revision, region, instance), each with its total over the range
 * [sinceMs, untilMs). Rates divide by the step, or by what has passed of the newest step.
 */
export function historySeries(
  points: readonly Point[],
  sinceMs: number,
  untilMs: number,
  stepMs: number,
): HistorySeriesView[] {
  const bySeries = new Map<string, Point[]>();
  for (const p of points) {
    const id = seriesId(p);
    const list = bySeries.get(id);
    if (list) list.push(p);
    else bySeries.set(id, [p]);
  }
  return [...bySeries.values()].map((list) => {
    const first = list[0] ?? { deploymentId: "", region: "", instance: "" };
    const sorted = [...list].sort((a, b) => a.atMs - b.atMs);
    return {
      deploymentId: first.deploymentId,
      region: first.region,
      instance: first.instance,
      points: sorted.map((p) => view(p.atMs, p.sums, Math.max(1_000, Math.min(stepMs, untilMs - p.atMs)))),
      total: view(
        sinceMs,
        sorted.length ? mergeSums(sorted.map((p) => p.sums)) : emptySums(),
        Math.max(1_000, untilMs - sinceMs),
      ),
    };
  });
}

/** The points of a query, hours completed from minutes where they are not rolled up yet. */
export async function historyPoints(
  db: Kysely<Database>,
  q: Omit<PointQuery, "stepMs">,
  stepMs: number,
  nowMs: number,
): Promise<Point[]> {
  if (stepMs === MINUTE_MS) return readPoints(db, { ...q, stepMs });
  const recent = startOf(nowMs, HOUR_MS) - 2 * HOUR_MS;
  const hours = (await readPoints(db, { ...q, stepMs: HOUR_MS })).filter((p) => p.atMs < recent);
  const minutes = await readPoints(db, { ...q, fromMs: Math.max(q.fromMs, recent), stepMs: MINUTE_MS });
  return [...hours, ...rollup(minutes, HOUR_MS)];
}

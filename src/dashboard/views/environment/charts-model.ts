// The charts tab's series (pure): one line per revision of one measure.
import type { RevisionMetrics } from "../../../gen/krane/ctrl/v1/live_pb.js";
import type { Series } from "../../components/line-chart.js";

/** Past the last latency bucket (reported as -1): drawn at 30 s. */
const BEYOND_MS = 30_000;

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

// A rollout as it moves (pure): the page keeps, from each pushed view, how many instances of the
// rollout's target revision ("new", the Deployment's updated replicas) and of earlier ones
// ("old": the rest of its current replicas) each region has, and draws them as step lines. Only
// what was pushed while the page is open: the view carries no history.
import type { RolloutStatus } from "../../../gen/krane/ctrl/v1/rollout_pb.js";
import type { Series } from "../../components/line-chart.js";

export interface RegionCounts {
  readonly region: string;
  readonly updated: number;
  readonly old: number;
}

export interface RolloutSample {
  readonly atMs: number;
  readonly regions: readonly RegionCounts[];
}

/** How far back the chart draws, and how many samples the page keeps at most. */
export const MOVES_WINDOW_MS = 15 * 60_000;
export const MAX_SAMPLES = 500;

export function countsOf(rollout: RolloutStatus | undefined): RegionCounts[] {
  return (rollout?.regions ?? []).map((r) => ({
    region: r.region,
    updated: r.updatedReplicas,
    old: Math.max(0, r.currentReplicas - r.updatedReplicas),
  }));
}

/**
 * The samples after a view pushed at `atMs`: a new one only when a figure changed; none older than
 * the window but the last of those (a line starts at the window's edge with what held then).
 */
export function recordRollout(
  samples: readonly RolloutSample[],
  rollout: RolloutStatus | undefined,
  atMs: number,
): readonly RolloutSample[] {
  const regions = countsOf(rollout);
  const last = samples.at(-1);
  if (last && JSON.stringify(last.regions) === JSON.stringify(regions)) return samples;
  const kept = [...samples, { atMs, regions }];
  const firstInWindow = kept.findIndex((s) => s.atMs >= atMs - MOVES_WINDOW_MS);
  return kept.slice(Math.max(0, firstInWindow - 1, kept.length - MAX_SAMPLES));
}

/**
 * Two step lines per region ("eu-west new", "eu-west old") from `fromMs` to `nowMs`: each value
 * holds until the next sample, the last one until `nowMs` (a sample before `fromMs` starts at it).
 * A region missing from some samples is joined across them.
 */
export function movesSeries(samples: readonly RolloutSample[], fromMs: number, nowMs: number): Series[] {
  const regions = [...new Set(samples.flatMap((s) => s.regions.map((r) => r.region)))].sort();
  return regions.flatMap((region) =>
    (["new", "old"] as const).map((kind) => {
      const points: Series["points"] = [];
      samples.forEach((s, i) => {
        const c = s.regions.find((r) => r.region === region);
        if (!c) return;
        const v = kind === "new" ? c.updated : c.old;
        const until = samples[i + 1]?.atMs ?? nowMs;
        const at = Math.max(s.atMs, fromMs);
        points.push({ t: at, v }, { t: Math.max(at, until), v });
      });
      return { name: `${region} ${kind}`, points };
    }),
  );
}

// The events tab's timeline (pure): instance events as read from InstanceEventService, kept and
// merged in the page, and the rollout's events per region from the live view, newest first.
import type { InstanceEvent } from "../../../gen/krane/ctrl/v1/events_pb.js";
import type { RolloutStatus } from "../../../gen/krane/ctrl/v1/rollout_pb.js";

/** Instance events kept in the page (the newest). */
export const KEEP_EVENTS = 2_000;

export interface TimelineRow {
  key: string;
  at: number;
  source: string;
  region: string;
  what: string;
  detail: string;
  warning: boolean;
}

/** What makes an instance event the same event: a copy whose facts changed has the same identity. */
function identity(e: InstanceEvent): string {
  return `${e.deploymentId}/${e.region}/${e.instance}/${e.kind}/${e.reason}/${e.atUnixMs}`;
}

/** The events kept after `got` were read: a newer copy of an event replaces the older; the newest `keep`. */
export function mergeEvents(
  kept: readonly InstanceEvent[],
  got: readonly InstanceEvent[],
  keep = KEEP_EVENTS,
): InstanceEvent[] {
  const byId = new Map(kept.map((e) => [identity(e), e]));
  for (const e of got) byId.set(identity(e), e);
  return [...byId.values()].slice(-keep);
}

/** One timeline of instance and rollout events, newest first. */
export function timeline(events: readonly InstanceEvent[], rollout: RolloutStatus | undefined): TimelineRow[] {
  const out: TimelineRow[] = events.map((e) => ({
    key: `i/${identity(e)}`,
    at: Number(e.atUnixMs),
    source: `r${e.revision} ${e.instance}`,
    region: e.region,
    what: `${e.kind}: ${e.reason}${e.exitCode !== undefined ? ` (exit ${e.exitCode})` : ""}${e.restarts ? `, ${e.restarts} restarts` : ""}`,
    detail: e.message,
    warning: true,
  }));
  for (const r of rollout?.regions ?? [])
    r.events.forEach((e, i) =>
      out.push({
        key: `r/${r.region}/${i}/${e.atUnixMs}`,
        at: Number(e.atUnixMs),
        source: "rollout",
        region: r.region,
        what: e.reason,
        detail: e.message,
        warning: e.type === "Warning",
      }),
    );
  return out.sort((a, b) => b.at - a.at);
}

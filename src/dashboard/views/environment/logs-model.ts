// The logs tab's lines (pure): a StreamLogs entry as the page writes it, the text filter applied
// in the page, and the filter choices the live view offers (region, revision, instance: ctrl
// applies those).
import { LogMarkerKind, type LogEntry } from "../../../gen/krane/ctrl/v1/logs_pb.js";
import type { EnvironmentView } from "../../../gen/krane/ctrl/v1/live_pb.js";

/** Lines kept in the page (the newest), and drawn of those that match. */
export const KEEP_LINES = 5_000;
export const SHOW_LINES = 500;

export interface Line {
  /** The line's number in the page: its key. */
  n: number;
  /** UTC, to the millisecond. */
  time: string;
  source: string;
  text: string;
  /** A marker of ctrl's (an instance started, a gap), not the app's output. */
  marker: boolean;
}

/** The Unix ms of an entry (its time is in ns). */
export function entryMs(e: LogEntry): number {
  return Number(e.timeUnixNano / 1_000_000n);
}

export function logLine(e: LogEntry, n: number): Line {
  return {
    n,
    time: new Date(entryMs(e)).toISOString().slice(11, 23),
    source: e.instance ? `${e.region} r${e.revision} ${e.instance}` : e.region,
    text:
      e.entry.case === "line"
        ? e.entry.value
        : e.entry.case === "marker"
          ? `[${LogMarkerKind[e.entry.value.kind]?.toLowerCase() ?? "marker"}] ${e.entry.value.message}`
          : "",
    marker: e.entry.case === "marker",
  };
}

/** The newest `show` lines whose text or source holds `text` (any case). */
export function matchingLines(lines: readonly Line[], text: string, show = SHOW_LINES): readonly Line[] {
  const q = text.trim().toLowerCase();
  const m =
    q === "" ? lines : lines.filter((l) => l.text.toLowerCase().includes(q) || l.source.toLowerCase().includes(q));
  return m.slice(-show);
}

/** The choices of the region, revision and instance filters. */
export function logFilters(view: EnvironmentView): { regions: string[]; revisions: string[]; instances: string[] } {
  const deployments = view.status?.deployments ?? [];
  return {
    regions: view.status?.environment?.regions.map((r) => r.region) ?? [],
    revisions: deployments.map((d) => String(d.deployment?.revision ?? "")),
    instances: deployments.flatMap((d) => d.regions.flatMap((r) => r.instances.map((i) => i.k8sName))),
  };
}

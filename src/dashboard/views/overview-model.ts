// The overview's rows (pure): an environment's summary as a row, and the rows after a pushed
// WatchOverview message (the whole list on reset, else only what changed).
import type { Cluster } from "../../gen/krane/ctrl/v1/api_pb.js";
import type { EnvironmentSummary, WatchOverviewResponse } from "../../gen/krane/ctrl/v1/live_pb.js";
import type { Tone } from "../components/badge.js";

export interface EnvRow {
  id: string;
  workspace: string;
  project: string;
  environment: string;
  regions: string;
  replicas: number;
  running: number;
  state: string;
  revision: number;
  image: string;
  updated: number;
}

export function envRow(s: EnvironmentSummary): EnvRow {
  return {
    id: s.environmentId,
    workspace: s.workspace,
    project: s.project,
    environment: s.environment,
    regions: s.regions.map((r) => `${r.region}=${r.replicas}`).join(", "),
    replicas: s.regions.reduce((n, r) => n + r.replicas, 0),
    running: s.running,
    state: s.state,
    revision: Number(s.revision),
    image: s.image,
    updated: Number(s.updatedAtUnixMs),
  };
}

/** A message that changes nothing: the stream's keepalive. */
export function isKeepalive(m: WatchOverviewResponse): boolean {
  return !m.reset && m.environments.length === 0 && m.removedEnvironmentIds.length === 0 && !m.clustersChanged;
}

/**
 * The rows by environment id after `m`: a new map (never the old one changed, so the table sees
 * the change); a reset, or the first message, starts from none.
 */
export function applyOverview(
  rows: ReadonlyMap<string, EnvRow> | undefined,
  m: WatchOverviewResponse,
): Map<string, EnvRow> {
  const next = new Map(m.reset || !rows ? [] : rows);
  for (const s of m.environments) next.set(s.environmentId, envRow(s));
  for (const id of m.removedEnvironmentIds) next.delete(id);
  return next;
}

const STATE_TONE: Record<string, Tone> = { complete: "ok", failed: "bad", paused: "warn", progressing: "warn" };

/** An environment's state's tone; a state the page does not know is muted. */
export function envStateTone(state: string): Tone {
  return STATE_TONE[state] ?? "muted";
}

/** A cluster whose agent was last heard from over a minute ago. */
export function isStale(c: Cluster, now = Date.now()): boolean {
  return now - Number(c.lastHeartbeatUnixMs) > 60_000;
}

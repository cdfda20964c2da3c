// Builders for rollout-engine inputs, so each table row states only what matters to its rule.
import { parseRolloutInput, planRollout } from "../../../src/rollout/index.js";
import type { RolloutOutput } from "../../../src/rollout/index.js";

export const NOW = "2026-01-01T00:00:00Z";
export const NOW_MS = Date.parse(NOW);

/** An ISO time `seconds` after (negative: before) NOW. */
export function at(seconds: number): string {
  return new Date(NOW_MS + seconds * 1000).toISOString().replace(".000Z", "Z");
}

export interface RevOpts {
  /** [status.replicas, readyReplicas, availableReplicas]; default all equal to `replicas`. */
  status?: [number, number, number];
  desired?: number | null;
  max?: number | null;
  createdAt?: string;
}

export type Json = Record<string, unknown>;

/** A revision; created `revision` hours before NOW unless told (null revisions: just before NOW). */
export function rev(name: string, revision: number | null, replicas: number, opts: RevOpts = {}): Json {
  const [sr, ready, avail] = opts.status ?? [replicas, replicas, replicas];
  const createdAt = opts.createdAt ?? at(revision === null ? -1 : -100 * 3600 + revision * 3600);
  const out: Json = {
    name,
    revision,
    createdAt,
    replicas,
    status: { replicas: sr, readyReplicas: ready, availableReplicas: avail },
  };
  if (opts.desired !== undefined) out["desiredReplicas"] = opts.desired;
  if (opts.max !== undefined) out["maxReplicas"] = opts.max;
  return out;
}

export function rolling(maxSurge: number | string, maxUnavailable: number | string): Json {
  return { type: "RollingUpdate", rollingUpdate: { maxSurge, maxUnavailable } };
}

export const RECREATE: Json = { type: "Recreate" };

export function cond(
  type: string,
  status: string,
  reason: string,
  lastUpdate = NOW,
  lastTransition = lastUpdate,
  message = "",
): Json {
  return { type, status, reason, message, lastUpdateTime: lastUpdate, lastTransitionTime: lastTransition };
}

/** A deployment with 10 replicas, maxSurge 25%, maxUnavailable 0, deadline 600 s, history 10. */
export function deployment(target: string, over: Json = {}): Json {
  return {
    replicas: 10,
    strategy: rolling("25%", 0),
    minReadySeconds: 0,
    progressDeadlineSeconds: 600,
    revisionHistoryLimit: 10,
    paused: false,
    target,
    rollbackTo: null,
    status: { replicas: 0, updatedReplicas: 0, readyReplicas: 0, availableReplicas: 0 },
    conditions: [],
    ...over,
  };
}

export function input(dep: Json, revisions: Json[], now = NOW): Json {
  return { now, deployment: dep, revisions };
}

export function plan(raw: Json): RolloutOutput {
  return planRollout(parseRolloutInput(raw));
}

/** name → new size, for compact assertions. */
export function sizes(out: RolloutOutput): Record<string, number> {
  return Object.fromEntries(out.revisions.map((r) => [r.name, r.replicas]));
}

export function messages(out: RolloutOutput): string[] {
  return out.events.map((e) => e.message);
}

export function condition(out: RolloutOutput, type: string): RolloutOutput["conditions"][number] | undefined {
  return out.conditions.find((c) => c.type === type);
}

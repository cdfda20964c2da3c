// Validation of an agent's measurement report (ClusterService.ReportMeasurements, what rollout
// analysis judges): bounded sizes, ids of the right kind, non-negative counts, latency buckets
// of the right length, and a sane window. Pure; which environments and revisions the agent may report for is
// the domain's check (../domain/measurements.ts), against the database.
import { LATENCY_BUCKETS_MS } from "../../contracts/analysis.js";
import type { ReportMeasurementsRequest } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { invalidArgument } from "../errors.js";
import * as r from "./rules.js";

/** Entries per report (the agent sends at most this many). */
export const MAX_MEASUREMENTS = 2_000;
/** The longest window one report may cover. */
export const MAX_WINDOW_MS = 3_600_000;
/** How far ahead of ctrl's clock a window may end (clock skew between agent and ctrl). */
export const MAX_SKEW_MS = 60_000;
/** One count's ceiling (far above what a sentinel answers in an hour). */
const MAX_COUNT = 1e12;

export interface MeasurementEntry {
  readonly environmentId: string;
  readonly deploymentId: string;
  /** 2xx, 3xx, 4xx, 5xx. */
  readonly classes: readonly [number, number, number, number];
  /** LATENCY_BUCKETS_MS.length + 1 slots (zeros when the report had none). */
  readonly latency: readonly number[];
}

/** One instance's share of a revision's figures. */
export interface InstanceMeasurementEntry extends MeasurementEntry {
  /** The pod's name. */
  readonly instance: string;
}

export interface MeasurementReport {
  readonly fromMs: number;
  readonly toMs: number;
  readonly entries: readonly MeasurementEntry[];
  readonly instances: readonly InstanceMeasurementEntry[];
}

interface Counts {
  readonly environmentId: string;
  readonly deploymentId: string;
  readonly responses2xx: bigint;
  readonly responses3xx: bigint;
  readonly responses4xx: bigint;
  readonly responses5xx: bigint;
  readonly latencyBuckets: readonly bigint[];
}

/** One entry's ids and counts, fields named under `f`. */
function entry(f: string, m: Counts): MeasurementEntry {
  const slots = LATENCY_BUCKETS_MS.length + 1;
  const environmentId = r.id(`${f}.environment_id`, m.environmentId, "env");
  const deploymentId = r.id(`${f}.deployment_id`, m.deploymentId, "dep");
  if (m.latencyBuckets.length !== 0 && m.latencyBuckets.length !== slots) {
    throw invalidArgument(
      `${f}.latency_buckets`,
      `must have ${slots} entries (${LATENCY_BUCKETS_MS.length} bounds and +Inf) or none`,
    );
  }
  const latency =
    m.latencyBuckets.length === 0
      ? new Array<number>(slots).fill(0)
      : m.latencyBuckets.map((v, j) => count(`${f}.latency_buckets[${j}]`, v));
  return {
    environmentId,
    deploymentId,
    classes: [
      count(`${f}.responses_2xx`, m.responses2xx),
      count(`${f}.responses_3xx`, m.responses3xx),
      count(`${f}.responses_4xx`, m.responses4xx),
      count(`${f}.responses_5xx`, m.responses5xx),
    ],
    latency,
  };
}

function count(field: string, v: bigint): number {
  if (v < 0n || v > BigInt(MAX_COUNT)) throw invalidArgument(field, `must be between 0 and ${MAX_COUNT}`);
  return Number(v);
}

export function validateMeasurementReport(
  req: ReportMeasurementsRequest,
  nowMs: number,
  retentionMs: number,
): MeasurementReport {
  const fromMs = r.intRange("from_unix_ms", req.fromUnixMs, 1, Number.MAX_SAFE_INTEGER);
  const toMs = r.intRange("to_unix_ms", req.toUnixMs, 1, Number.MAX_SAFE_INTEGER);
  if (toMs <= fromMs) throw invalidArgument("to_unix_ms", "must be after from_unix_ms");
  if (toMs - fromMs > MAX_WINDOW_MS)
    throw invalidArgument("from_unix_ms", `must be at most ${MAX_WINDOW_MS / 1000} s before to_unix_ms`);
  if (toMs > nowMs + MAX_SKEW_MS) throw invalidArgument("to_unix_ms", "is in the future");
  if (toMs < nowMs - retentionMs)
    throw invalidArgument("to_unix_ms", `is older than the retention (${retentionMs / 1000} s)`);
  r.list("revisions", req.revisions, MAX_MEASUREMENTS);
  r.list("instances", req.instances, MAX_MEASUREMENTS);
  const seen = new Set<string>();
  const entries = req.revisions.map((m, i): MeasurementEntry => {
    const e = entry(`revisions[${i}]`, m);
    const key = `${e.environmentId}/${e.deploymentId}`;
    if (seen.has(key)) throw invalidArgument(`revisions[${i}].deployment_id`, "is repeated for this environment");
    seen.add(key);
    return e;
  });
  const instances = req.instances.map((m, i): InstanceMeasurementEntry => {
    const f = `instances[${i}]`;
    const e = entry(f, m);
    if (!r.POD_NAME.test(m.instance)) throw invalidArgument(`${f}.instance`, "must be a pod's name");
    const key = `${e.environmentId}/${e.deploymentId}/${m.instance}`;
    if (seen.has(key)) throw invalidArgument(`${f}.instance`, "is repeated for this revision");
    seen.add(key);
    return { ...e, instance: m.instance };
  });
  return { fromMs, toMs, entries, instances };
}

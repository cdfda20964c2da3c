// Validation of an agent's instance usage report (ClusterService.ReportUsage, the metrics
// history's CPU, memory and restarts per instance): bounded sizes, ids of the right kind, pod
// names, finite non-negative figures and whole minutes within what the history keeps. Pure;
// which environments and revisions the agent may report for is the domain's check
// (../domain/usage.ts), against the database.
import type { ReportUsageRequest } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { invalidArgument } from "../errors.js";
// How far ahead of ctrl's clock a report may be: the same clock skew as for measurements.
import { MAX_SKEW_MS } from "./measurements.js";
import * as r from "./rules.js";

export const MAX_USAGE_MINUTES = 10;
export const MAX_USAGE_INSTANCES = 2_000;
const MINUTE_MS = 60_000;
/** Readings per minute: an agent reads at most every 100 ms. */
const MAX_READINGS = 600;
/** Far above any pod: 1,000 cores and 1 PiB, times the readings. */
const MAX_CPU_SUM = 1e6 * MAX_READINGS;
const MAX_MEMORY_SUM = 2 ** 50 * MAX_READINGS;

export interface InstanceUsageEntry {
  readonly environmentId: string;
  readonly deploymentId: string;
  readonly instance: string;
  readonly cpuMillicoresSum: number;
  readonly memoryBytesSum: number;
  readonly readings: number;
  readonly restarts: number;
}

export interface UsageReport {
  readonly minutes: readonly { readonly minuteMs: number; readonly instances: readonly InstanceUsageEntry[] }[];
}

function figure(field: string, v: number, max: number): number {
  if (!Number.isFinite(v) || v < 0 || v > max) throw invalidArgument(field, `must be a number between 0 and ${max}`);
  return v;
}

export function validateUsageReport(req: ReportUsageRequest, nowMs: number, retentionMs: number): UsageReport {
  r.list("minutes", req.minutes, MAX_USAGE_MINUTES);
  const seenMinutes = new Set<number>();
  return {
    minutes: req.minutes.map((m, i) => {
      const f = `minutes[${i}]`;
      const minuteMs = r.intRange(`${f}.minute_unix_ms`, m.minuteUnixMs, 1, Number.MAX_SAFE_INTEGER);
      if (minuteMs % MINUTE_MS !== 0) throw invalidArgument(`${f}.minute_unix_ms`, "must be the start of a minute");
      if (minuteMs > nowMs + MAX_SKEW_MS) throw invalidArgument(`${f}.minute_unix_ms`, "is in the future");
      if (minuteMs < nowMs - retentionMs)
        throw invalidArgument(`${f}.minute_unix_ms`, `is older than the retention (${retentionMs / 1000} s)`);
      if (seenMinutes.has(minuteMs)) throw invalidArgument(`${f}.minute_unix_ms`, "is repeated");
      seenMinutes.add(minuteMs);
      r.list(`${f}.instances`, m.instances, MAX_USAGE_INSTANCES);
      const seen = new Set<string>();
      return {
        minuteMs,
        instances: m.instances.map((u, j): InstanceUsageEntry => {
          const g = `${f}.instances[${j}]`;
          const environmentId = r.id(`${g}.environment_id`, u.environmentId, "env");
          const deploymentId = r.id(`${g}.deployment_id`, u.deploymentId, "dep");
          if (!r.POD_NAME.test(u.instance)) throw invalidArgument(`${g}.instance`, "must be a pod's name");
          const key = `${environmentId}/${deploymentId}/${u.instance}`;
          if (seen.has(key)) throw invalidArgument(`${g}.instance`, "is repeated in this minute");
          seen.add(key);
          return {
            environmentId,
            deploymentId,
            instance: u.instance,
            cpuMillicoresSum: figure(`${g}.cpu_millicores_sum`, u.cpuMillicoresSum, MAX_CPU_SUM),
            memoryBytesSum: figure(`${g}.memory_bytes_sum`, u.memoryBytesSum, MAX_MEMORY_SUM),
            readings: r.intRange(`${g}.readings`, u.readings, 0, MAX_READINGS),
            restarts: r.intRange(`${g}.restarts`, u.restarts, 0, 1_000_000),
          };
        }),
      };
    }),
  };
}

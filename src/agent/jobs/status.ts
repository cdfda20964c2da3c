// A cron job's runs in this region, from the cached Jobs its CronJob made (newest first, at most
// RUNS_KEPT): started, finished, and whether each succeeded, failed or is still running. Pure.
import { create } from "@bufbuild/protobuf";
import { JobRunResult, JobRunSchema, type JobRun } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { KubeObject } from "../../kube/object.js";

export const RUNS_KEPT = 10;

interface JobStatus {
  startTime?: string;
  completionTime?: string;
  succeeded?: number;
  failed?: number;
  conditions?: { type?: string; status?: string; lastTransitionTime?: string }[];
}

function ms(t: string | undefined): number {
  const v = t === undefined ? NaN : Date.parse(t);
  return Number.isNaN(v) ? 0 : v;
}

export function runOf(job: KubeObject): JobRun {
  const s = (job.status ?? {}) as JobStatus;
  const cond = (type: string) => s.conditions?.find((c) => c.type === type && c.status === "True");
  const failed = cond("Failed");
  const complete = cond("Complete");
  const result = complete ? JobRunResult.SUCCEEDED : failed ? JobRunResult.FAILED : JobRunResult.RUNNING;
  const finished = complete
    ? ms(s.completionTime) || ms(complete.lastTransitionTime)
    : failed
      ? ms(failed.lastTransitionTime)
      : 0;
  return create(JobRunSchema, {
    k8sName: job.metadata.name ?? "",
    startedUnixMs: BigInt(ms(s.startTime) || ms(job.metadata.creationTimestamp)),
    finishedUnixMs: BigInt(finished),
    result,
  });
}

export function runsOf(jobs: readonly KubeObject[]): JobRun[] {
  return jobs
    .map(runOf)
    .sort((a, b) => Number(b.startedUnixMs - a.startedUnixMs) || b.k8sName.localeCompare(a.k8sName))
    .slice(0, RUNS_KEPT);
}

export function runsFingerprint(k8sName: string, lastSchedule: number, runs: readonly JobRun[]): string {
  return JSON.stringify([
    k8sName,
    lastSchedule,
    runs.map((r) => [r.k8sName, String(r.startedUnixMs), String(r.finishedUnixMs), r.result]),
  ]);
}

export function lastScheduleOf(cronJob: KubeObject | undefined): number {
  const s = (cronJob?.status ?? {}) as { lastScheduleTime?: string };
  return ms(s.lastScheduleTime);
}

// The job kind's descriptor: its stream and the rules of its agents'
// reports (an update is the last runs in a region), which ../domain/jobs.ts records. Its payloads
// are ../payloads/job.ts.
import {
  JobRunResult,
  JobStateSchema,
  type ReportJobStatusRequest_Update,
  ReportJobStatusRequestSchema,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { recordJobReport, type ReportedRun } from "../domain/jobs.js";
import { jobPayloads } from "../payloads/job.js";
import { k8sName } from "../validate/cluster.js";
import * as r from "../validate/rules.js";
import { streamedKind } from "./kind.js";

const RUN_RESULT: Record<number, ReportedRun["result"]> = {
  [JobRunResult.RUNNING]: "running",
  [JobRunResult.SUCCEEDED]: "succeeded",
  [JobRunResult.FAILED]: "failed",
  [JobRunResult.UNSPECIFIED]: "unknown",
};

/** The update's own fields: the last runs and the last schedule. */
function checkUpdate(u: ReportJobStatusRequest_Update) {
  r.list("update.runs", u.runs, 100);
  return {
    lastSchedule: r.intRange("update.last_schedule_unix_ms", u.lastScheduleUnixMs, 0, Number.MAX_SAFE_INTEGER),
    runs: u.runs.map((x, i) => ({
      k8sName: k8sName(`update.runs[${i}].k8s_name`, x.k8sName, true),
      startedAt: r.intRange(`update.runs[${i}].started_unix_ms`, x.startedUnixMs, 0, Number.MAX_SAFE_INTEGER),
      finishedAt: r.intRange(`update.runs[${i}].finished_unix_ms`, x.finishedUnixMs, 0, Number.MAX_SAFE_INTEGER),
      result: r.enumName(`update.runs[${i}].result`, x.result, RUN_RESULT, "run result"),
    })),
  };
}

// ---------------------------------------------------------------- descriptor

export const jobKind = streamedKind({
  name: jobPayloads.name,
  idPrefix: "job",
  wire: { state: JobStateSchema, apply: jobPayloads.apply, delete: jobPayloads.delete },
  report: {
    message: ReportJobStatusRequestSchema,
    key: "jobId",
    byK8sName: true,
    update: checkUpdate,
    record: recordJobReport,
  },
});

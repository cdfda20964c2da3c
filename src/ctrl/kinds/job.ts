// The job kind's descriptor: its stream, its ClusterService methods, and the validation of its
// agents' reports (the last runs per region, or a rejection), which ../domain/jobs.ts records.
// Its payloads are ../payloads/job.ts.
import { create } from "@bufbuild/protobuf";
import {
  GetDesiredJobStatesResponseSchema,
  JobRunResult,
  JobStateSchema,
  type ReportJobStatusRequest,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { recordJobReport, type JobReport, type ReportedRun } from "../domain/jobs.js";
import { invalidArgument } from "../errors.js";
import { jobPayloads } from "../payloads/job.js";
import { k8sName, rejectionReason, reportSubject } from "../validate/cluster.js";
import * as r from "../validate/rules.js";
import type { Kind } from "./kind.js";

function runResult(field: string, v: JobRunResult): ReportedRun["result"] {
  switch (v) {
    case JobRunResult.RUNNING:
      return "running";
    case JobRunResult.SUCCEEDED:
      return "succeeded";
    case JobRunResult.FAILED:
      return "failed";
    case JobRunResult.UNSPECIFIED:
      return "unknown";
    default:
      throw invalidArgument(field, "is not a known run result");
  }
}

export function validateJobReport(req: ReportJobStatusRequest): JobReport {
  const c = req.change;
  switch (c.case) {
    case "update": {
      const u = c.value;
      const subject = reportSubject("update", "job_id", "job", { id: u.jobId, k8sName: u.k8sName });
      r.list("update.runs", u.runs, 100);
      return {
        type: "update",
        ...subject,
        lastSchedule: r.intRange("update.last_schedule_unix_ms", u.lastScheduleUnixMs, 0, Number.MAX_SAFE_INTEGER),
        runs: u.runs.map((x, i) => ({
          k8sName: k8sName(`update.runs[${i}].k8s_name`, x.k8sName, true),
          startedAt: r.intRange(`update.runs[${i}].started_unix_ms`, x.startedUnixMs, 0, Number.MAX_SAFE_INTEGER),
          finishedAt: r.intRange(`update.runs[${i}].finished_unix_ms`, x.finishedUnixMs, 0, Number.MAX_SAFE_INTEGER),
          result: runResult(`update.runs[${i}].result`, x.result),
        })),
      };
    }
    case "delete":
      return {
        type: "delete",
        ...reportSubject("delete", "job_id", "job", { id: c.value.jobId, k8sName: c.value.k8sName }),
      };
    case "rejected": {
      const subject = reportSubject("rejected", "job_id", "job", { id: c.value.jobId, k8sName: c.value.k8sName });
      return { type: "rejected", ...subject, reason: rejectionReason("rejected.reason", c.value.reason) };
    }
    default:
      throw invalidArgument("change", "is required (update, delete or rejected)");
  }
}

// ---------------------------------------------------------------- descriptor

export const jobKind: Kind<typeof JobStateSchema, JobReport> = {
  name: jobPayloads.name,
  idPrefix: "job",
  wire: { state: JobStateSchema, apply: jobPayloads.apply, delete: jobPayloads.delete },
  recordReport: recordJobReport,
  subject: (report) => ({ id: report.id, k8sName: report.k8sName }),
  methods: (h) => ({
    watchJobs: (req, ctx) => h.watch(req, ctx),
    getDesiredJobState: (req, ctx) => h.getOne(req, "job_id", req.jobId, ctx),
    getDesiredJobStates: async (req, ctx) =>
      create(GetDesiredJobStatesResponseSchema, await h.getMany(req, "job_ids", req.jobIds, ctx)),
    reportJobStatus: async (req, ctx) => {
      await h.report(req, () => validateJobReport(req), ctx);
      return {};
    },
  }),
};

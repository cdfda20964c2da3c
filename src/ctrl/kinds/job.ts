// The job kind (issue 16): an environment's cron jobs, one CronJob per job and region, from the
// image, configuration and secrets of the revision that region runs (its rollout target) unless
// the job names an image. This file is the kind's ctrl side: rows → ApplyJob / DeleteJob (pure),
// the validation and recording of its agents' reports (the last runs per region), and its
// ClusterService methods.
import { create, toBinary } from "@bufbuild/protobuf";
import {
  ApplyJobSchema,
  DeleteJobSchema,
  GetDesiredJobStatesResponseSchema,
  JobRunResult,
  JobStateSchema,
  type ReportJobStatusRequest,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { DeploymentRow, EnvironmentRow, JobRow, WorkspaceRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { DomainError, invalidArgument, notFound } from "../errors.js";
import { k8sName, rejectionReason, reportSubject } from "../validate/cluster.js";
import * as r from "../validate/rules.js";
import type { Kind } from "./kind.js";
import type { StoredJobSpec } from "../validate/types.js";

export type { StoredJobSpec };
import { revisionSettingsMessages } from "./deployment.js";

export interface JobContext {
  workspace: WorkspaceRow;
  environment: EnvironmentRow;
  job: JobRow;
  /** The revision the region runs (its image, configuration and secrets); undefined before the first deployment. */
  revision: DeploymentRow | undefined;
}

export function jobSpecOf(job: JobRow): StoredJobSpec {
  return JSON.parse(job.spec) as StoredJobSpec;
}

export function encodeApplyJob(ctx: JobContext, region: string): Uint8Array {
  const { workspace, environment, job, revision } = ctx;
  const s = jobSpecOf(job);
  const settings = revision ? revisionSettingsMessages(revision) : {};
  return toBinary(
    ApplyJobSchema,
    create(ApplyJobSchema, {
      workspaceId: workspace.id,
      projectId: environment.project_id,
      environmentId: environment.id,
      jobId: job.id,
      k8sNamespace: workspace.k8s_namespace,
      k8sName: job.k8s_name,
      region,
      name: s.name,
      schedule: s.schedule,
      timeZone: s.timeZone,
      image: s.image !== "" ? s.image : (revision?.image ?? ""),
      command: s.command,
      args: s.args,
      concurrencyPolicy: s.concurrencyPolicy,
      deadlineSeconds: BigInt(s.deadlineSeconds),
      successfulJobsHistoryLimit: s.successfulJobsHistoryLimit,
      failedJobsHistoryLimit: s.failedJobsHistoryLimit,
      // Nothing to run before the first deployment when the job names no image.
      suspend: s.suspend || (s.image === "" && revision === undefined),
      cpuMillicores: BigInt(s.cpuMillicores),
      memoryMib: BigInt(s.memoryMib),
      deploymentId: revision?.id ?? "",
      ...settings,
    }),
  );
}

export function encodeDeleteJob(workspace: WorkspaceRow, job: JobRow): Uint8Array {
  return toBinary(
    DeleteJobSchema,
    create(DeleteJobSchema, { jobId: job.id, k8sNamespace: workspace.k8s_namespace, k8sName: job.k8s_name }),
  );
}

// ---------------------------------------------------------------- reports

export interface ReportedRun {
  k8sName: string;
  startedAt: number;
  finishedAt: number;
  result: "running" | "succeeded" | "failed" | "unknown";
}

export type JobReport =
  | { type: "update"; id: string; k8sName: string; runs: ReportedRun[]; lastSchedule: number }
  | { type: "delete"; id: string; k8sName: string }
  | { type: "rejected"; id: string; k8sName: string; reason: string };

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

export async function recordJobReport(store: Store, region: string, report: JobReport): Promise<void> {
  await store.write(async (tx) => {
    const q = tx.trx.selectFrom("jobs").select(["id", "environment_id"]);
    const job = await (
      report.id !== "" ? q.where("id", "=", report.id) : q.where("k8s_name", "=", report.k8sName)
    ).executeTakeFirst();
    if (!job) {
      if (report.type === "delete") return;
      throw notFound(`job "${report.id || report.k8sName}"`);
    }
    if (report.type === "delete") {
      await tx.trx.deleteFrom("job_status").where("job_id", "=", job.id).where("region", "=", region).execute();
      return;
    }
    const desired = await tx.trx
      .selectFrom("desired_objects")
      .select("region")
      .where("kind", "=", "job")
      .where("object_id", "=", job.id)
      .where("region", "=", region)
      .executeTakeFirst();
    if (!desired) throw new DomainError("permission_denied", `job ${job.id} is not desired in region ${region}`);
    const values =
      report.type === "update"
        ? {
            runs: JSON.stringify(report.runs),
            last_schedule: report.lastSchedule,
            rejected_reason: null,
            reported_at: tx.now,
          }
        : { rejected_reason: report.reason, reported_at: tx.now };
    await tx.trx
      .insertInto("job_status")
      .values({ job_id: job.id, region, runs: "[]", last_schedule: 0, ...values })
      .onConflict((oc) => oc.columns(["job_id", "region"]).doUpdateSet(values))
      .execute();
  });
}

// ---------------------------------------------------------------- descriptor

export const jobKind: Kind<typeof JobStateSchema, JobReport> = {
  name: "job",
  idPrefix: "job",
  wire: { state: JobStateSchema, apply: ApplyJobSchema, delete: DeleteJobSchema },
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

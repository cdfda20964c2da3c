// The job kind's payloads: an environment's cron job in one region, with the image,
// configuration and secrets of the revision that region runs (its rollout target) unless the job
// names an image. Rows → ApplyJob / DeleteJob, pure.
import { create, toBinary } from "@bufbuild/protobuf";
import { ApplyJobSchema, DeleteJobSchema } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { DeploymentRow, EnvironmentRow, JobRow, WorkspaceRow } from "../db/schema.js";
import type { StoredJobSpec } from "../validate/types.js";
import { imageAsRun } from "../../contracts/images.js";
import {
  pullSecretMessage,
  revisionSettingsMessages,
  workspaceQuotaMessage,
  type PullSecretRef,
} from "./deployment.js";
import type { Limits } from "../../contracts/quotas.js";
import type { KindPayloads } from "./kind.js";

export interface JobContext {
  workspace: WorkspaceRow;
  environment: EnvironmentRow;
  job: JobRow;
  /** The revision the region runs (its image, configuration and secrets); undefined before the first deployment. */
  revision: DeploymentRow | undefined;
  /** The workspace's pull Secret; undefined when it has no registry credential. */
  pullSecret?: PullSecretRef;
  /** The workspace's quota, which the agent backs in the namespace; undefined: none sent. */
  quota?: Limits;
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
      // The revision's image runs pinned, as its pods do (a job's own image runs as named).
      image: s.image !== "" ? s.image : revision ? imageAsRun(revision.image, revision.image_digest) : "",
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
      ...pullSecretMessage(ctx.pullSecret),
      ...(ctx.quota ? workspaceQuotaMessage(ctx.quota) : {}),
    }),
  );
}

export function encodeDeleteJob(workspace: WorkspaceRow, job: JobRow): Uint8Array {
  return toBinary(
    DeleteJobSchema,
    create(DeleteJobSchema, { jobId: job.id, k8sNamespace: workspace.k8s_namespace, k8sName: job.k8s_name }),
  );
}

export const jobPayloads: KindPayloads = {
  name: "job",
  apply: ApplyJobSchema,
  delete: DeleteJobSchema,
};

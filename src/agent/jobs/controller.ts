// The job controller kind: an environment's cron jobs on the shared runtime. Key = job id.
//   owns     CronJobs (one per job and region) in workspace namespaces
//   watches  Jobs (a run started or finished re-reports the job's runs)
// Apply: the workspace Namespace (created if missing: a job may come before any deployment), its
// quota's LimitRange and ResourceQuota (../deployments/quota.ts: rendered and watched, so a
// namespace with only cron jobs is held to its quota too), then the CronJob (server-side apply),
// each only when the cache shows it differs. Its runs read the
// configuration and Secret of the revision the region runs, which the deployment kind keeps.
// Status: the last runs (started, finished, succeeded/failed/running) and the last schedule.
// Delete: the CronJob; its Jobs and their pods follow by owner reference (background deletion).
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  ReportJobStatusRequestSchema,
  type ApplyJob,
  type DeleteJob,
  type JobState,
  type ReportJobStatusRequest,
  JobStateSchema,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { COMPONENT, LABEL_COMPONENT, LABEL_JOB_ID } from "../../contracts/labels.js";
import type { KubeObject } from "../../kube/object.js";
import { resourceOf, resources } from "../../kube/resources.js";
import { controller, labelIndex, type ControllerDeclaration, type KindContext } from "../runtime/builder.js";
import type { SecretStoreEnv } from "../deployments/secret-store.js";
import { oneKey, type KindEnv } from "../runtime/kind.js";
import { clusterProtocol } from "../runtime/kstate.js";
import { PullSecrets } from "../deployments/pull-secret.js";
import { renderQuotaObjects, rendersWorkspaceQuota } from "../deployments/quota.js";
import { WorkspaceNamespaces } from "../runtime/namespaces.js";
import { renderCronJob } from "./render.js";
import { lastScheduleOf, runsFingerprint, runsOf } from "./status.js";
import { validateApplyJob, validateDeleteJob } from "./validate.js";

export type JobDeclaration = ControllerDeclaration<JobState, ApplyJob, DeleteJob, ReportJobStatusRequest>;

/** The job id of a CronJob this kind owns, or undefined. */
export function cronJobKeyOf(obj: KubeObject): string | undefined {
  const labels = obj.metadata.labels;
  return labels?.[LABEL_COMPONENT] === COMPONENT.job ? labels[LABEL_JOB_ID] : undefined;
}

/** The job id of a run (a Job made by one of the CronJobs), or undefined. */
function runKeyOf(obj: KubeObject): string | undefined {
  return obj.metadata.labels?.[LABEL_JOB_ID];
}

export function jobsController({ region, ctrl, secretStore }: KindEnv & SecretStoreEnv): JobDeclaration {
  const report = (change: MessageInitShape<typeof ReportJobStatusRequestSchema>["change"]): ReportJobStatusRequest =>
    create(ReportJobStatusRequestSchema, { region, change });
  /** The job's last runs and schedule, from the caches. */
  const status = (key: string, ctx: KindContext<ApplyJob>) => {
    const cronJob = ctx.primaryOf(key);
    if (!cronJob) return undefined;
    const k8sName = cronJob.metadata.name ?? "";
    const runs = runsOf(ctx.informer(resources.jobs).byIndex(labelIndex(LABEL_JOB_ID), key));
    const lastSchedule = lastScheduleOf(cronJob);
    return {
      fingerprint: runsFingerprint(k8sName, lastSchedule, runs),
      report: report({
        case: "update",
        value: { jobId: key, k8sName, runs, lastScheduleUnixMs: BigInt(lastSchedule) },
      }),
    };
  };
  // The workspace's pull Secret, written before the CronJob that names it (../deployments/pull-secret.ts).
  const pullSecrets = new PullSecrets();
  const namespaces = new WorkspaceNamespaces();
  const builder = controller<JobState, ApplyJob, DeleteJob, ReportJobStatusRequest>("jobs")
    .protocol(
      clusterProtocol({ region, ctrl }, { state: JobStateSchema, report: ReportJobStatusRequestSchema, key: "jobId" }),
    )
    .owns(resources.cronJobs, {
      keyOf: cronJobKeyOf,
      refOf: (obj) => ({
        $typeName: "krane.ctrl.v1.DeleteJob",
        jobId: obj.metadata.labels?.[LABEL_JOB_ID] ?? "",
        k8sNamespace: obj.metadata.namespace ?? "",
        k8sName: obj.metadata.name ?? "",
      }),
      // The last schedule, and the runs' start, completion and result (./status.ts).
      readsStatus: true,
    })
    .watches(resources.jobs, {
      keysOf: (job) => oneKey(runKeyOf(job)),
      labelIndexes: [LABEL_JOB_ID],
      readsStatus: true,
    });
  return rendersWorkspaceQuota(builder, (j) => j.k8sNamespace)
    .reconciler({
      validate: (j) => validateApplyJob(j, region, secretStore !== undefined),
      validateDelete: validateDeleteJob,
      render: (j) => [...renderQuotaObjects(j.workspaceQuota, j.k8sNamespace), renderCronJob(j, region)],
      async reconcile(key, want, ctx, signal) {
        if (want.type === "delete") {
          await ctx.kube.delete(resources.cronJobs, want.ref.k8sNamespace, want.ref.k8sName, signal);
          return ctx.deleted(key, want, signal);
        }
        const j = want.desired;
        const result = await ctx.sync(key, want.rendered, signal, async () => {
          await namespaces.ensure(ctx.kube, j.k8sNamespace, j.workspaceId, signal);
          await pullSecrets.ensure(
            ctx.kube,
            {
              namespace: j.k8sNamespace,
              pullSecret: j.pullSecret,
              live: ctx.primaryOf(key),
              fetch: async (s) =>
                (
                  await ctrl.getSecretValues(
                    { region, owner: { case: "jobPullSecret", value: j.jobId } },
                    { signal: s, timeoutMs: 10_000 },
                  )
                ).values,
            },
            signal,
          );
          // The quota objects first (rendered first), then the CronJob.
          for (const obj of want.rendered) {
            if (ctx.isCurrent(obj)) continue;
            const r = resourceOf(obj);
            if (!r) throw new Error(`job ${j.jobId}: no resource type for ${obj.apiVersion}/${obj.kind}`);
            await ctx.apply(r, obj, signal);
          }
        });
        if (result.type === "done") ctx.report(key, () => status(key, ctx));
        return result;
      },
    })
    .build();
}

// Pure rendering of an environment's cron job (ApplyJob) as a CronJob with the user workloads'
// isolation: RuntimeClass gvisor on untrusted nodes, no ServiceAccount token, no service links,
// no privilege escalation, limits from the job's size; its pods carry the labels of the
// environment's deployment pods (component "deployment", environment, region), so the
// environment's CiliumNetworkPolicy — ingress only from its sentinels — selects them too. They
// get the revision's configuration and secrets (its ConfigMap and Secret, by name) and the
// KRANE_* variables a deployment's pods get.
import type { ApplyJob } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { KubeObject } from "../../kube/object.js";
import { NODE_CLASS, onNodeClass, RUNTIME_CLASS } from "../../contracts/cluster.js";
import { COMPONENT, LABEL_COMPONENT, LABEL_JOB_ID, ownerLabels } from "../../contracts/labels.js";
import { REQUEST_DIVISOR } from "../deployments/render.js";
import { settingsPodParts } from "../deployments/settings.js";
import { pullSecretAnnotation, pullSecretPodParts } from "../deployments/pull-secret.js";

export const JOB_CONTAINER = "job";

export function jobLabels(j: ApplyJob, region: string): Record<string, string> {
  return {
    ...ownerLabels(COMPONENT.job, region, j),
    [LABEL_JOB_ID]: j.jobId,
  };
}

/** Pods of a run: the environment's deployment-pod labels (its network policy) and the job id. */
export function jobPodLabels(j: ApplyJob, region: string): Record<string, string> {
  return { ...jobLabels(j, region), [LABEL_COMPONENT]: COMPONENT.deployment };
}

export function renderCronJob(j: ApplyJob, region: string): KubeObject {
  const half = (v: bigint): bigint => (v / REQUEST_DIVISOR > 0n ? v / REQUEST_DIVISOR : 1n);
  const settings = settingsPodParts(j);
  const env: Record<string, unknown>[] = [
    { name: "KRANE_WORKSPACE_ID", value: j.workspaceId },
    { name: "KRANE_PROJECT_ID", value: j.projectId },
    { name: "KRANE_ENVIRONMENT_ID", value: j.environmentId },
    { name: "KRANE_REGION", value: region },
    { name: "KRANE_JOB", value: j.name },
    { name: "KRANE_INSTANCE_ID", valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.name" } } },
  ];
  if (j.deploymentId !== "") env.push({ name: "KRANE_DEPLOYMENT_ID", value: j.deploymentId });
  for (const e of j.env) env.push({ name: e.name, value: e.value });
  const container: Record<string, unknown> = {
    name: JOB_CONTAINER,
    image: j.image,
    imagePullPolicy: "IfNotPresent",
    env,
    resources: {
      limits: { cpu: `${j.cpuMillicores}m`, memory: `${j.memoryMib}Mi` },
      requests: { cpu: `${half(j.cpuMillicores)}m`, memory: `${half(j.memoryMib)}Mi` },
    },
    securityContext: { allowPrivilegeEscalation: false },
  };
  if (j.command.length > 0) container.command = [...j.command];
  if (j.args.length > 0) container.args = [...j.args];
  if (settings.envFrom.length > 0) container.envFrom = settings.envFrom;
  if (settings.volumeMounts.length > 0) container.volumeMounts = settings.volumeMounts;
  const jobSpec: Record<string, unknown> = {
    // One try per schedule: a failed run shows as failed, the next schedule tries again.
    backoffLimit: 0,
    template: {
      metadata: { labels: jobPodLabels(j, region) },
      spec: {
        runtimeClassName: RUNTIME_CLASS,
        automountServiceAccountToken: false,
        enableServiceLinks: false,
        restartPolicy: "Never",
        ...onNodeClass(NODE_CLASS.untrusted),
        containers: [container],
        ...(settings.volumes.length > 0 ? { volumes: settings.volumes } : {}),
        ...pullSecretPodParts(j.pullSecret),
      },
    },
  };
  if (j.deadlineSeconds > 0n) jobSpec.activeDeadlineSeconds = Number(j.deadlineSeconds);
  const spec: Record<string, unknown> = {
    schedule: j.schedule,
    concurrencyPolicy: j.concurrencyPolicy || "Forbid",
    suspend: j.suspend,
    successfulJobsHistoryLimit: j.successfulJobsHistoryLimit,
    failedJobsHistoryLimit: j.failedJobsHistoryLimit,
    jobTemplate: { metadata: { labels: jobLabels(j, region) }, spec: jobSpec },
  };
  if (j.timeZone !== "") spec.timeZone = j.timeZone;
  return {
    apiVersion: "batch/v1",
    kind: "CronJob",
    metadata: {
      name: j.k8sName,
      namespace: j.k8sNamespace,
      labels: jobLabels(j, region),
      ...(j.pullSecret ? { annotations: pullSecretAnnotation(j.pullSecret) } : {}),
    },
    spec,
  };
}

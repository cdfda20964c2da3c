// Validation of an ApplyJob before anything is applied; a refused job is reported as rejected.
import type { ApplyJob, DeleteJob } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { isReservedNamespace } from "../../contracts/cluster.js";
import { isDnsLabel, labelValueProblem } from "../../contracts/labels.js";
import { validateSettings } from "../deployments/validate.js";
import { quotaProblem } from "../deployments/quota.js";

export function validateApplyJob(j: ApplyJob, agentRegion: string, externalStore: boolean): string | undefined {
  const badId = labelValueProblem([
    ["workspace_id", j.workspaceId],
    ["project_id", j.projectId],
    ["environment_id", j.environmentId],
    ["job_id", j.jobId],
  ]);
  if (badId !== undefined) return badId;
  const quota = quotaProblem(j.workspaceQuota);
  if (quota !== undefined) return quota;
  if (!isDnsLabel(j.k8sNamespace) || isReservedNamespace(j.k8sNamespace))
    return `k8s_namespace "${j.k8sNamespace}" is not usable`;
  if (!isDnsLabel(j.k8sName) || j.k8sName.length > 52)
    return `k8s_name "${j.k8sName}" is not a valid CronJob name (a DNS label of at most 52 characters)`;
  if (j.region !== "" && j.region !== agentRegion)
    return `region "${j.region}" does not match this agent's region "${agentRegion}"`;
  if (j.image === "") return "the job has no image: it names none and the environment has no deployment yet";
  if (/\s/.test(j.image)) return "image must not contain whitespace";
  if (j.schedule.trim() === "") return "schedule is required";
  if (!["Allow", "Forbid", "Replace", ""].includes(j.concurrencyPolicy))
    return `concurrency_policy "${j.concurrencyPolicy}" must be Allow, Forbid or Replace`;
  if (j.cpuMillicores <= 0n || j.memoryMib <= 0n) return "cpu_millicores and memory_mib must be > 0";
  if (j.successfulJobsHistoryLimit < 0 || j.failedJobsHistoryLimit < 0) return "history limits must be >= 0";
  return validateSettings(j, externalStore);
}

export function validateDeleteJob(d: DeleteJob): string | undefined {
  if (d.jobId === "") return "job_id is required";
  if (!isDnsLabel(d.k8sNamespace)) return `k8s_namespace "${d.k8sNamespace}" is not a valid DNS label`;
  if (!isDnsLabel(d.k8sName)) return `k8s_name "${d.k8sName}" is not a valid DNS label`;
  return undefined;
}

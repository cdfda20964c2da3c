// Checks an ApplySentinel / DeleteSentinel before the sentinel controller touches the cluster
// (names and labels valid as Kubernetes takes them; nothing half-applied). The first problem
// found is returned as a human-readable reason, which the runtime reports to ctrl as Rejected;
// the stream carries on with the next message.
import type { ApplySentinel, DeleteSentinel } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { isDnsLabel, isLabelValue, labelValueProblem } from "../../contracts/labels.js";
import { routingSliceName } from "../../contracts/routing.js";
import { workloadProblem } from "../deployments/validate.js";
import { edgePoliciesOf } from "./routing.js";
import { policyFromWire, policyProblem, REGION_REPLICAS_MAX } from "../../contracts/autoscaling.js";

/**
 * The sentinel's name becomes a Service name as well as a Deployment name, and Service names
 * are DNS-1035 labels: a DNS label that starts with a letter.
 */
export function isServiceName(v: string): boolean {
  return isDnsLabel(v) && /^[a-z]/.test(v);
}

export function validateApplySentinel(s: ApplySentinel, agentRegion: string): string | undefined {
  const ids: Array<[string, string]> = [
    ["workspace_id", s.workspaceId],
    ["project_id", s.projectId],
    ["environment_id", s.environmentId],
    ["sentinel_id", s.sentinelId],
  ];
  for (const [field, value] of [...ids, ["k8s_name", s.k8sName]] as const) {
    if (value.trim() === "") return `${field} is required`;
  }
  // An empty image means krane's own sentinel.
  // Ids end up as label values (selectors, network policies), so they must be valid ones.
  const badId = labelValueProblem(ids);
  if (badId !== undefined) return badId;
  if (!isServiceName(s.k8sName)) {
    return `k8s_name "${s.k8sName}" is not a valid DNS label starting with a letter`;
  }
  const workload = workloadProblem(s, agentRegion);
  if (workload !== undefined) return workload;
  const r = s.routing;
  if (r) {
    if (r.mode !== "" && r.mode !== "instances" && r.mode !== "weighted")
      return `routing.mode "${r.mode}" must be "instances" or "weighted"`;
    const seen = new Set<string>();
    let sum = 0;
    for (const [i, w] of r.revisions.entries()) {
      if (!isLabelValue(w.deploymentId) || w.deploymentId === "")
        return `routing.revisions[${i}].deployment_id "${w.deploymentId}" is not a valid Kubernetes label value`;
      if (seen.has(w.deploymentId)) return `routing.revisions[${i}].deployment_id "${w.deploymentId}" appears twice`;
      seen.add(w.deploymentId);
      if (w.weight > 100) return `routing.revisions[${i}].weight must be 0-100 (got ${w.weight})`;
      if (routingSliceName(s.k8sName, w.deploymentId, 0).length > 253)
        return `routing.revisions[${i}].deployment_id is too long`;
      sum += w.weight;
    }
    if (r.mode === "weighted" && sum !== 100) return `routing weights add up to ${sum}, not 100`;
    // Edge policies this agent cannot read are refused rather than served without.
    try {
      edgePoliciesOf(r.policiesJson);
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    }
  }
  // The autoscaler acts on this policy: one ctrl would have refused is refused here too.
  if (s.autoscale) {
    const problem = policyProblem(policyFromWire(s.autoscale), REGION_REPLICAS_MAX);
    if (problem) return `${problem.field}: ${problem.problem}`;
  }
  return undefined;
}

export function validateDeleteSentinel(d: DeleteSentinel): string | undefined {
  if (d.sentinelId.trim() === "") return "sentinel_id is required";
  // A name that could never have been applied cannot name anything to delete.
  if (!isServiceName(d.k8sName)) return `k8s_name "${d.k8sName}" is not a valid DNS label starting with a letter`;
  return undefined;
}

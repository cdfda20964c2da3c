// Validation of an ApplyRelease before anything is applied (a second check after ctrl's: the
// agent trusts ctrl's allow-list but not its own inputs): every object lands in the release's
// namespace, is named, has a kind, and its manifest is JSON of a Kubernetes object.
import type { ApplyRelease, DeleteRelease } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { isReservedNamespace } from "../../contracts/cluster.js";
import { isDnsLabel, labelValueProblem } from "../../contracts/labels.js";
import { quotaProblem } from "../deployments/quota.js";

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export function validateApplyRelease(r: ApplyRelease, agentRegion: string): string | undefined {
  const badId = labelValueProblem([
    ["workspace_id", r.workspaceId],
    ["project_id", r.projectId],
    ["environment_id", r.environmentId],
    ["release_id", r.releaseId],
  ]);
  if (badId !== undefined) return badId;
  const quota = quotaProblem(r.workspaceQuota);
  if (quota !== undefined) return quota;
  if (!isDnsLabel(r.k8sNamespace) || isReservedNamespace(r.k8sNamespace)) {
    return `k8s_namespace "${r.k8sNamespace}" is not a workspace namespace`;
  }
  if (r.region !== "" && r.region !== agentRegion)
    return `region "${r.region}" does not match this agent's region "${agentRegion}"`;
  if (r.version < 1n) return "version must be >= 1";
  const ids = new Set<string>();
  for (const [i, o] of r.objects.entries()) {
    if (o.id === "" || ids.has(o.id)) return `objects[${i}].id "${o.id}" is empty or repeated`;
    ids.add(o.id);
    if (!o.kind || o.kind.kind === "" || o.kind.version === "") return `objects[${i}] has no kind`;
    if (!DNS_SUBDOMAIN.test(o.name) || o.name.length > 253)
      return `objects[${i}].name "${o.name.slice(0, 80)}" is not a valid object name`;
    let parsed: unknown;
    try {
      parsed = JSON.parse(o.manifestJson);
    } catch {
      return `objects[${i}].manifest_json is not JSON`;
    }
    const meta = (parsed as { metadata?: { name?: unknown; namespace?: unknown } } | null)?.metadata;
    if (typeof parsed !== "object" || parsed === null || typeof meta !== "object" || meta === null)
      return `objects[${i}].manifest_json is not a Kubernetes object`;
    if (meta.name !== o.name) return `objects[${i}].manifest_json names another object`;
    if (meta.namespace !== undefined && meta.namespace !== r.k8sNamespace)
      return `objects[${i}] is in another namespace`;
  }
  return undefined;
}

export function validateDeleteRelease(d: DeleteRelease): string | undefined {
  if (d.releaseId === "") return "release_id is required";
  if (!isDnsLabel(d.k8sNamespace)) return `k8s_namespace "${d.k8sNamespace}" is not a valid DNS label`;
  return undefined;
}

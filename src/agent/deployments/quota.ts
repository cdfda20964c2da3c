// The Kubernetes backstop of a workspace's quota (issue 47): ctrl refuses a change that takes the
// workspace past its quota; this ResourceQuota in the workspace namespace makes the API server
// refuse pods past the same numbers (with room, below), so a bug in ctrl, or a pod written
// directly, cannot overrun them. The LimitRange beside it gives a pod that names no requests or
// limits (a release's, a cron job's) the size of a revision by default, since a namespace with a
// ResourceQuota on requests and limits refuses pods that name none.
//
// The quota rides every ApplyDeployment (workspace_quota): a workspace's pods run only where its
// deployments made the namespace, and ctrl re-renders the workspace's desired revisions when the
// quota changes (src/ctrl/domain/quota-settings.ts); the ReplicaSet carries what it was rendered
// with (an annotation: no pod changes), so a new quota is a change the kind applies. Both objects carry no region label: every
// region's agent on a cluster writes the same content into the shared namespace, with
// server-side apply under krane's field manager. Like the namespace, they are never deleted by
// an agent; a quota made unlimited drops its line from `hard`.
import type { WorkspaceQuota } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { COMPONENT, workspaceObjectLabels } from "../../contracts/labels.js";
import type { KubeClient } from "../../kube/client.js";
import type { KubeObject } from "../../kube/object.js";
import { resources } from "../../kube/resources.js";

export const QUOTA_OBJECT_NAME = "krane-workspace-quota";

/**
 * How much more than ctrl's limit the cluster admits. ctrl counts every environment at its
 * maximum, once. Beyond that, legitimately:
 *  - the warm previous revision: after a rolling update it keeps every pod it had (an
 *    environment's full size) for the warm window (30 minutes by default, up to a day), so an
 *    instant rollback is a traffic switch: as much again;
 *  - a rollout's surge: without a warm revision, replicas + maxSurge (25% by default, rounded up:
 *    one pod of a one-replica environment) fits in the warm share; with one, a new rollout lets
 *    the warm revision go, and its pods are counted until they terminate while the new revision
 *    comes up: half again lets that overlap proceed instead of waiting on the terminations.
 */
export const ROOM = { serving: 1, warm: 1, surge: 0.5 } as const;
export const ROOM_FACTOR = ROOM.serving + ROOM.warm + ROOM.surge;

/** A revision's default size (ctrl's defaults), what a container naming none gets. */
export const DEFAULT_LIMITS = { cpu: "250m", memory: "256Mi" } as const;
/** Half of it requested, as a revision's pods request (render.ts: REQUEST_DIVISOR). */
export const DEFAULT_REQUESTS = { cpu: "125m", memory: "128Mi" } as const;

/** On the ReplicaSet: the quota it was rendered with, so a new quota is a change the kind applies. */
export const ANNOTATION_WORKSPACE_QUOTA = "krane.dev/workspace-quota";

/** A limit with room (whole units, rounded up). */
export function withRoom(limit: bigint): bigint {
  // ROOM_FACTOR is 2.5: exact in integers as limit × 5 / 2, rounded up.
  const num = BigInt(ROOM_FACTOR * 2);
  return (limit * num + 1n) / 2n;
}

/** A problem with the payload's quota (a negative limit the API server would refuse), or undefined. */
export function quotaProblem(q: WorkspaceQuota | undefined): string | undefined {
  if (!q) return undefined;
  for (const [field, v] of [
    ["cpu_millicores", q.cpuMillicores],
    ["memory_mib", q.memoryMib],
    ["instances", q.instances],
  ] as const)
    if (v !== undefined && v < 0n) return `workspace_quota.${field} must be >= 0 (got ${v})`;
  return undefined;
}

function labels(): Record<string, string> {
  return workspaceObjectLabels(COMPONENT.quota);
}

function hardOf(q: WorkspaceQuota): Record<string, string> {
  const hard: Record<string, string> = {};
  if (q.cpuMillicores !== undefined) {
    const cpu = `${withRoom(q.cpuMillicores)}m`;
    hard["requests.cpu"] = cpu;
    hard["limits.cpu"] = cpu;
  }
  if (q.memoryMib !== undefined) {
    const memory = `${withRoom(q.memoryMib)}Mi`;
    hard["requests.memory"] = memory;
    hard["limits.memory"] = memory;
  }
  if (q.instances !== undefined) hard.pods = String(withRoom(q.instances));
  return hard;
}

/** The ReplicaSet's annotation: what its namespace's ResourceQuota holds ("" when unlimited; none without a quota). */
export function quotaAnnotation(q: WorkspaceQuota | undefined): Record<string, string> {
  if (!q) return {};
  const hard = hardOf(q);
  return {
    [ANNOTATION_WORKSPACE_QUOTA]: Object.keys(hard)
      .map((k) => `${k}=${hard[k]}`)
      .join(","),
  };
}

/** The ResourceQuota of the namespace: each limited quota with room; `hard` empty when none is. */
export function renderResourceQuota(q: WorkspaceQuota, namespace: string): KubeObject {
  return {
    apiVersion: "v1",
    kind: "ResourceQuota",
    metadata: { name: QUOTA_OBJECT_NAME, namespace, labels: labels() },
    spec: { hard: hardOf(q) },
  };
}

/** The LimitRange: a container naming no requests or limits gets a revision's default size. */
export function renderLimitRange(namespace: string): KubeObject {
  return {
    apiVersion: "v1",
    kind: "LimitRange",
    metadata: { name: QUOTA_OBJECT_NAME, namespace, labels: labels() },
    spec: {
      limits: [
        {
          type: "Container",
          default: { ...DEFAULT_LIMITS },
          defaultRequest: { ...DEFAULT_REQUESTS },
        },
      ],
    },
  };
}

/** The quota objects a kind wrote in this process (namespace → what it wrote). */
export class WorkspaceQuotas {
  readonly #written = new Map<string, string>();

  /**
   * Writes the namespace's LimitRange, then its ResourceQuota, when this process has not written
   * this quota there yet (the LimitRange first: a pod the quota admits must have its defaults).
   * No quota in the payload (an older ctrl): nothing is written.
   */
  async ensure(kube: KubeClient, namespace: string, q: WorkspaceQuota | undefined, signal: AbortSignal): Promise<void> {
    if (!q) return;
    const quota = renderResourceQuota(q, namespace);
    const seen = JSON.stringify(quota.spec);
    if (this.#written.get(namespace) === seen) return;
    await kube.apply(resources.limitRanges, renderLimitRange(namespace), { force: true, signal });
    await kube.apply(resources.resourceQuotas, quota, { force: true, signal });
    this.#written.set(namespace, seen);
  }
}

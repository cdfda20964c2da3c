// The Kubernetes backstop of a workspace's quota (issue 47): ctrl refuses a change that takes the
// workspace past its quota; this ResourceQuota in the workspace namespace makes the API server
// refuse pods past the same numbers (with room, below), so a bug in ctrl, or a pod written
// directly, cannot overrun them. The LimitRange beside it gives a pod that names no requests or
// limits (a release's, a cron job's) the size of a revision by default, since a namespace with a
// ResourceQuota on requests and limits refuses pods that name none.
//
// The quota rides every payload that puts pods in the namespace (ApplyDeployment, ApplyJob,
// ApplyRelease: workspace_quota), and ctrl re-renders them when the quota changes
// (src/ctrl/domain/quota-settings.ts). Each of those kinds renders both objects first among its
// own and watches them (`rendersWorkspaceQuota`), so a quota object deleted or edited by hand is
// drift the runtime repairs, like any rendered object. The ResourceQuota carries what it holds in
// an annotation, so a line dropped (a quota made unlimited) is a difference too; so does the
// ReplicaSet (no pod changes). Both objects carry no region label: every kind and every region's
// agent on a cluster writes the same content into the shared namespace, with server-side apply
// under krane's field manager. Like the namespace, they are never deleted by an agent.
import type { WorkspaceQuota } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import {
  COMPONENT,
  LABEL_COMPONENT,
  LABEL_MANAGED_BY,
  MANAGED_BY,
  workspaceObjectLabels,
} from "../../contracts/labels.js";
import type { KubeObject } from "../../kube/object.js";
import { resources } from "../../kube/resources.js";
import type { ControllerBuilder, KindContext } from "../runtime/builder.js";

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
    metadata: { name: QUOTA_OBJECT_NAME, namespace, labels: labels(), annotations: quotaAnnotation(q) },
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

/** The namespace's quota objects, the LimitRange first (a pod the quota admits must have its defaults); none without a quota (an older ctrl). */
export function renderQuotaObjects(q: WorkspaceQuota | undefined, namespace: string): KubeObject[] {
  return q ? [renderLimitRange(namespace), renderResourceQuota(q, namespace)] : [];
}

/** The shared caches' selector of the quota objects (they carry no region label). */
export const QUOTA_SELECTOR = `${LABEL_MANAGED_BY}=${MANAGED_BY},${LABEL_COMPONENT}=${COMPONENT.quota}`;

/**
 * Declares the quota objects rendered by a kind whose desired states name a namespace: an event
 * of either (a deletion, an edit) concerns every key of that namespace, whose sync repairs it.
 */
export function rendersWorkspaceQuota<Msg, D, Del, R>(
  b: ControllerBuilder<Msg, D, Del, R>,
  namespaceOf: (d: D) => string,
): ControllerBuilder<Msg, D, Del, R> {
  const keysOf = function* (obj: KubeObject, ctx: KindContext<D>): Iterable<string> {
    for (const k of ctx.activeKeys()) {
      const d = ctx.desiredOf(k);
      if (d !== undefined && namespaceOf(d) === obj.metadata.namespace) yield k;
    }
  };
  return b
    .renders(resources.limitRanges, { selector: QUOTA_SELECTOR, keysOf })
    .renders(resources.resourceQuotas, { selector: QUOTA_SELECTOR, keysOf });
}

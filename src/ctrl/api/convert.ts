// Database rows → public API messages.
import { parseStoredPolicy } from "../../contracts/autoscaling.js";
import type { ProgressiveSpec } from "../../rollout/progressive/index.js";
import { autoscaleMsg } from "../payloads/sentinel.js";
import { progressiveMsg } from "../validate/progressive.js";
import { create } from "@bufbuild/protobuf";
import {
  RegionAutoscaleSchema,
  ApiTokenSchema,
  ClusterSchema,
  DeploymentSchema,
  EnvironmentSchema,
  ProjectSchema,
  RegionReplicasSchema,
  RolloutPolicySchema,
  RolloutStrategy,
  SentinelSettingsSchema,
  StreamLagSchema,
  WorkspaceSchema,
  type ApiToken,
  type Cluster,
  type Deployment,
  type Environment,
  type Project,
  type Workspace,
} from "../../gen/krane/ctrl/v1/api_pb.js";
import {
  EnvVarSchema,
  Health,
  InstanceSchema,
  InstanceStatus,
  type Instance,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import {
  parseJsonList,
  type ClusterRow,
  type EnvironmentRow,
  type InstanceRow,
  type ProjectRow,
  type WorkspaceRow,
} from "../db/schema.js";
import { clusterTokenRevoked } from "../domain/clusters.js";
import type { ApiTokenRow } from "../domain/tokens.js";
import { revisionWorkload, type DeploymentContext } from "../payloads/deployment.js";
import type { StreamLag } from "../read/clusters.js";
import type { StoredEnvVar } from "../validate/types.js";

export function workspaceMsg(w: WorkspaceRow): Workspace {
  return create(WorkspaceSchema, {
    id: w.id,
    slug: w.slug,
    name: w.name,
    k8sNamespace: w.k8s_namespace,
    createdAtUnixMs: BigInt(w.created_at),
  });
}

export function projectMsg(p: ProjectRow): Project {
  return create(ProjectSchema, {
    id: p.id,
    workspaceId: p.workspace_id,
    slug: p.slug,
    name: p.name,
    createdAtUnixMs: BigInt(p.created_at),
  });
}

/** `regions[].autoscale`: a region's own policy as stored (JSON or "off"); absent or null: the environment's. */
export function environmentMsg(
  e: EnvironmentRow,
  regions: { region: string; replicas: number; autoscale?: string | null }[],
): Environment {
  const autoscale = parseStoredPolicy(e.autoscale);
  return create(EnvironmentSchema, {
    id: e.id,
    workspaceId: e.workspace_id,
    projectId: e.project_id,
    slug: e.slug,
    regions: regions.map((r) => create(RegionReplicasSchema, { region: r.region, replicas: r.replicas })),
    ...(autoscale === null ? {} : { autoscale: autoscaleMsg(autoscale) }),
    regionAutoscale: regions.flatMap((r) => {
      if (r.autoscale === undefined || r.autoscale === null) return [];
      const own = r.autoscale === "off" ? null : parseStoredPolicy(r.autoscale);
      return [
        create(RegionAutoscaleSchema, { region: r.region, ...(own === null ? {} : { policy: autoscaleMsg(own) }) }),
      ];
    }),
    sentinel:
      e.sentinel_image === null
        ? undefined
        : create(SentinelSettingsSchema, {
            image: e.sentinel_image,
            replicas: e.sentinel_replicas,
            cpuMillicores: BigInt(e.sentinel_cpu_millicores),
            memoryMib: BigInt(e.sentinel_memory_mib),
          }),
    rollout: create(RolloutPolicySchema, {
      strategy: e.strategy === "Recreate" ? RolloutStrategy.RECREATE : RolloutStrategy.ROLLING_UPDATE,
      maxSurge: e.max_surge,
      maxUnavailable: e.max_unavailable,
      minReadySeconds: e.min_ready_seconds,
      progressDeadlineSeconds: e.progress_deadline_seconds,
      revisionHistoryLimit: e.revision_history_limit,
      warmWindowSeconds: e.warm_window_seconds,
      paused: e.paused === 1,
      ...(e.progressive !== null ? { progressive: progressiveMsg(JSON.parse(e.progressive) as ProgressiveSpec) } : {}),
    }),
    createdAtUnixMs: BigInt(e.created_at),
    updatedAtUnixMs: BigInt(e.updated_at),
  });
}

export function deploymentMsg(ctx: DeploymentContext, regions: { region: string; replicas: number }[]): Deployment {
  const d = ctx.deployment;
  return create(DeploymentSchema, {
    id: d.id,
    workspaceId: d.workspace_id,
    projectId: d.project_id,
    environmentId: d.environment_id,
    k8sNamespace: ctx.workspace.k8s_namespace,
    ...revisionWorkload(d),
    imageDigest: d.image_digest ?? "",
    regions: regions.map((r) => create(RegionReplicasSchema, r)),
    createdAtUnixMs: BigInt(d.created_at),
    config: parseJsonList<StoredEnvVar>(d.config ?? "[]").map((e) => create(EnvVarSchema, e)),
    secretKeys: [
      ...parseJsonList<string>(d.secret_keys ?? "[]"),
      ...parseJsonList<{ key: string }>(d.external_secrets ?? "[]").map((e) => e.key),
    ].sort(),
  });
}

/** `lag`: how far each of the cluster's streams is behind (absent: not computed for this answer). */
export function clusterMsg(c: ClusterRow, lag?: readonly StreamLag[]): Cluster {
  return create(ClusterSchema, {
    changesBehind: BigInt((lag ?? []).reduce((n, l) => n + l.behind, 0)),
    streams: (lag ?? []).map((l) =>
      create(StreamLagSchema, {
        kind: l.kind,
        headVersion: BigInt(l.head),
        agentVersion: BigInt(l.agent),
        behind: BigInt(l.behind),
      }),
    ),
    id: c.id,
    region: c.region,
    name: c.name,
    createdAtUnixMs: BigInt(c.created_at),
    lastHeartbeatUnixMs: BigInt(c.last_heartbeat_at ?? 0),
    agentId: c.agent_id,
    build: c.build,
    deploymentsVersion: BigInt(c.deployments_version),
    sentinelsVersion: BigInt(c.sentinels_version),
    tokenRevoked: clusterTokenRevoked(c),
  });
}

/** `currentTokenId`: the token the call was made with. */
export function apiTokenMsg(t: ApiTokenRow, currentTokenId?: string): ApiToken {
  return create(ApiTokenSchema, {
    id: t.id,
    name: t.name,
    createdAtUnixMs: BigInt(t.created_at),
    lastUsedAtUnixMs: BigInt(t.last_used_at ?? 0),
    current: t.id === currentTokenId,
    workspaceId: t.workspace?.id ?? "",
    workspace: t.workspace?.slug ?? "",
    member: t.owner?.member?.email ?? "",
    serviceAccount: t.owner?.serviceAccount?.name ?? "",
    role: t.owner?.role ?? "",
  });
}

const STATUS: Record<string, InstanceStatus> = {
  pending: InstanceStatus.PENDING,
  running: InstanceStatus.RUNNING,
  failed: InstanceStatus.FAILED,
  terminating: InstanceStatus.TERMINATING,
};

export function instanceMsg(i: InstanceRow): Instance {
  return create(InstanceSchema, {
    k8sName: i.k8s_name,
    address: i.address,
    status: STATUS[i.status] ?? InstanceStatus.UNSPECIFIED,
    cpuMillicores: BigInt(i.cpu_millicores),
    memoryMib: BigInt(i.memory_mib),
    nodeName: i.node_name,
    zone: i.zone,
    readySinceUnixMs: BigInt(i.ready_since),
  });
}

const HEALTH: Record<string, Health> = { healthy: Health.HEALTHY, unhealthy: Health.UNHEALTHY, paused: Health.PAUSED };

export function healthEnum(h: string): Health {
  return HEALTH[h] ?? Health.UNSPECIFIED;
}

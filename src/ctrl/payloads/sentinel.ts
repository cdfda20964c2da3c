// The sentinel kind's payloads: an environment's routing proxy in one region, rendered from the
// environment's sentinel settings, its routing (environments.routing_regions and
// routing_version), its edge auth section (environments.edge_auth), its edge policies
// (environments.edge_policies) with their API keys (environments.edge_api_keys) and the
// autoscaling policy of its region (environments.autoscale, or the region's own). Pure.
import { create, toBinary } from "@bufbuild/protobuf";
import {
  ApplySentinelSchema,
  DeleteSentinelSchema,
  EdgeAuthSchema,
  type ApplySentinel,
  type EdgeAuth,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { parseStoredPolicy, type AutoscalePolicy } from "../../contracts/autoscaling.js";
import type { EdgeAuthPolicy, RoutingMode } from "../../contracts/routing.js";
import {
  AutoscalePolicySchema,
  ScaleToZeroSchema,
  type AutoscalePolicy as AutoscalePolicyMsg,
} from "../../gen/krane/ctrl/v1/autoscale_pb.js";
import type { EnvironmentRow, SentinelRow } from "../db/schema.js";
import { edgeAuthRuleMsg } from "./gateway.js";
import type { KindPayloads } from "./kind.js";

/**
 * An environment's routing in one region: the weight of each revision, and the blue-green preview
 * revision. Stored per region in environments.routing_regions (with environments.routing_version,
 * the one place routing lives; ../domain/environments.ts writes both); a region without an entry
 * routes like a Kubernetes Service: every running instance of every revision an equal share.
 */
export interface RegionRouting {
  readonly weights: readonly { readonly deploymentId: string; readonly weight: number }[];
  readonly preview: string | null;
}

function weightList(weights: unknown): { deploymentId: string; weight: number }[] {
  return Array.isArray(weights)
    ? weights.flatMap((w: unknown) =>
        typeof w === "object" &&
        w !== null &&
        typeof (w as { deploymentId?: unknown }).deploymentId === "string" &&
        typeof (w as { weight?: unknown }).weight === "number"
          ? [{ deploymentId: (w as { deploymentId: string }).deploymentId, weight: (w as { weight: number }).weight }]
          : [],
      )
    : [];
}

/** An environment's routing by region (empty: every region routes by instances). */
export function regionRoutingOf(environment: Pick<EnvironmentRow, "routing_regions">): Map<string, RegionRouting> {
  const out = new Map<string, RegionRouting>();
  if (environment.routing_regions === null) return out;
  const v: unknown = JSON.parse(environment.routing_regions);
  if (typeof v !== "object" || v === null) return out;
  for (const [region, r] of Object.entries(v as Record<string, unknown>)) {
    if (typeof r !== "object" || r === null) continue;
    const preview = (r as { preview?: unknown }).preview;
    out.set(region, {
      weights: weightList((r as { weights?: unknown }).weights),
      preview: typeof preview === "string" && preview !== "" ? preview : null,
    });
  }
  return out;
}

/** The stored form of an environment's routing. */
export function formatRegionRouting(routing: ReadonlyMap<string, RegionRouting>): string {
  return JSON.stringify(Object.fromEntries(routing));
}

/** Whether two routings send the same traffic the same way. */
export function sameRegionRouting(
  a: ReadonlyMap<string, RegionRouting>,
  b: ReadonlyMap<string, RegionRouting>,
): boolean {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) {
    const w = b.get(k);
    if (w === undefined || w.preview !== v.preview || JSON.stringify(w.weights) !== JSON.stringify(v.weights))
      return false;
  }
  return true;
}

/**
 * The routing policy a sentinel of the environment in `region` serves: the region's weights
 * when it has any, else every instance an equal share.
 */
export function routingPolicyOf(
  environment: EnvironmentRow,
  region: string,
): {
  version: bigint;
  mode: RoutingMode;
  revisions: { deploymentId: string; weight: number }[];
  previewDeploymentId: string;
} {
  const r = regionRoutingOf(environment).get(region);
  if (r !== undefined && r.weights.length > 0) {
    return {
      version: BigInt(environment.routing_version),
      mode: "weighted",
      revisions: [...r.weights],
      previewDeploymentId: r.preview ?? "",
    };
  }
  return { version: BigInt(environment.routing_version), mode: "instances", revisions: [], previewDeploymentId: "" };
}

/** The policy as streamed (the region's own where it has one, else the environment's). */
export function autoscaleMsg(p: AutoscalePolicy): AutoscalePolicyMsg {
  return create(AutoscalePolicySchema, {
    minReplicas: p.minReplicas,
    maxReplicas: p.maxReplicas,
    concurrencyTarget: p.concurrencyTarget ?? undefined,
    cpuTargetPercent: p.cpuTargetPercent ?? undefined,
    scaleUpWindowSeconds: p.scaleUpWindowSeconds,
    scaleDownWindowSeconds: p.scaleDownWindowSeconds,
    maxStep: p.maxStep ?? undefined,
    scaleToZero: p.scaleToZero === null ? undefined : create(ScaleToZeroSchema, p.scaleToZero),
  });
}

/** What a sentinel's payload says about its region's count (only with a policy in force there). */
export interface RegionCount {
  /** environment_regions.replicas. */
  readonly replicas: number;
  /** autoscale_status.decided_at of the region (0: no decision recorded). */
  readonly decidedAtMs: number;
  /** The rolling engine's target in the region (rollouts.target_deployment_id); null: none. */
  readonly targetDeploymentId: string | null;
}

/** Whether the environment's canary scales its stable revision down to its share. */
function scaleDownStable(environment: Pick<EnvironmentRow, "progressive">): boolean {
  if (environment.progressive === null) return false;
  const v = JSON.parse(environment.progressive) as { strategy?: { type?: unknown; scaleDownStable?: unknown } };
  return v.strategy?.type === "canary" && v.strategy.scaleDownStable === true;
}

/**
 * `regionAutoscale`: the region's own policy (null: off there), or undefined when it follows the
 * environment's. `count`: the region's count, streamed with a policy so the agent decides from it.
 */
export function renderApplySentinel(
  environment: EnvironmentRow,
  s: SentinelRow,
  regionAutoscale?: AutoscalePolicy | null,
  count?: RegionCount,
): ApplySentinel {
  const autoscale = regionAutoscale === undefined ? parseStoredPolicy(environment.autoscale) : regionAutoscale;
  return create(ApplySentinelSchema, {
    ...(autoscale === null ? {} : { autoscale: autoscaleMsg(autoscale) }),
    ...(autoscale === null || count === undefined
      ? {}
      : {
          autoscaleRegion: {
            replicas: count.replicas,
            decidedAtUnixMs: BigInt(count.decidedAtMs),
            scaleDownStable: scaleDownStable(environment),
            // Progressive strategies size revisions their own way: only ctrl resizes them.
            targetDeploymentId: environment.progressive === null ? (count.targetDeploymentId ?? "") : "",
          },
        }),
    routing: {
      ...routingPolicyOf(environment, s.region),
      // The edge policies (environments.edge_policies, kept by ../domain/edge-policies.ts).
      policiesJson: environment.edge_policies ?? "",
      // The API keys the policies check (environments.edge_api_keys, kept by ../domain/api-keys.ts).
      apiKeysJson: environment.edge_api_keys ?? "",
      // The edge auth section (environments.edge_auth, kept by ../domain/exposure.ts).
      ...(environment.edge_auth !== null
        ? { auth: edgeAuthMsg(JSON.parse(environment.edge_auth) as EdgeAuthPolicy) }
        : {}),
    },
    workspaceId: s.workspace_id,
    projectId: s.project_id,
    environmentId: s.environment_id,
    sentinelId: s.id,
    k8sName: s.k8s_name,
    image: environment.sentinel_image ?? "",
    replicas: environment.sentinel_replicas,
    cpuMillicores: BigInt(environment.sentinel_cpu_millicores),
    memoryMib: BigInt(environment.sentinel_memory_mib),
    region: s.region,
  });
}

function edgeAuthMsg(a: EdgeAuthPolicy): EdgeAuth {
  return create(EdgeAuthSchema, { rules: a.rules.map(edgeAuthRuleMsg), unmatchedHosts: a.unmatchedHosts });
}

export function encodeApplySentinel(
  environment: EnvironmentRow,
  s: SentinelRow,
  regionAutoscale?: AutoscalePolicy | null,
  count?: RegionCount,
): Uint8Array {
  return toBinary(ApplySentinelSchema, renderApplySentinel(environment, s, regionAutoscale, count));
}

export function encodeDeleteSentinel(s: SentinelRow): Uint8Array {
  return toBinary(DeleteSentinelSchema, create(DeleteSentinelSchema, { k8sName: s.k8s_name, sentinelId: s.id }));
}

export const sentinelPayloads: KindPayloads = {
  name: "sentinel",
  apply: ApplySentinelSchema,
  delete: DeleteSentinelSchema,
};

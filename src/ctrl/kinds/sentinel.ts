// The sentinel kind: an environment's routing proxy, one per region the environment is in, sized
// by the environment's sentinel settings. This file is the kind's whole ctrl side: how its rows
// become the ApplySentinel / DeleteSentinel messages agents get, how its agents' reports
// (health and available replicas, rejections) are validated and recorded, and its
// ClusterService methods.
import { create, toBinary } from "@bufbuild/protobuf";
import {
  ApplySentinelSchema,
  DeleteSentinelSchema,
  EdgeAuthSchema,
  GetDesiredSentinelStatesResponseSchema,
  Health,
  SentinelStateSchema,
  type ApplySentinel,
  type EdgeAuth,
  type ReportSentinelStatusRequest,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { EdgeAuthPolicy } from "../../contracts/routing.js";
import type { EnvironmentRow, SentinelRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { DomainError, invalidArgument, notFound } from "../errors.js";
import { rejectionReason, reportSubject } from "../validate/cluster.js";
import * as r from "../validate/rules.js";
import { edgeAuthRuleMsg } from "./gateway.js";
import type { Kind } from "./kind.js";

// ---------------------------------------------------------------- payload encoding

/** A region's routing override (migration 0011, environments.routing_regions), written by progressive rollouts. */
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

/** The per-region overrides of an environment (empty without any). */
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

/**
 * The routing policy a sentinel of the environment in `region` serves: the region's override
 * (migration 0011) when a progressive rollout wrote one, else the environment's (migration 0007).
 */
export function routingPolicyOf(
  environment: EnvironmentRow,
  region?: string,
): {
  version: bigint;
  mode: string;
  revisions: { deploymentId: string; weight: number }[];
  previewDeploymentId: string;
} {
  const override = region === undefined ? undefined : regionRoutingOf(environment).get(region);
  if (override !== undefined && override.weights.length > 0) {
    return {
      version: BigInt(environment.routing_version),
      mode: "weighted",
      revisions: [...override.weights],
      previewDeploymentId: override.preview ?? "",
    };
  }
  return {
    version: BigInt(environment.routing_version),
    mode: environment.routing_mode,
    revisions: weightList(JSON.parse(environment.routing_weights)),
    previewDeploymentId: "",
  };
}

export function renderApplySentinel(environment: EnvironmentRow, s: SentinelRow): ApplySentinel {
  return create(ApplySentinelSchema, {
    routing: {
      ...routingPolicyOf(environment, s.region),
      // The edge auth section (migration 0008: environments.edge_auth, kept by ../domain/exposure.ts).
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

export function encodeApplySentinel(environment: EnvironmentRow, s: SentinelRow): Uint8Array {
  return toBinary(ApplySentinelSchema, renderApplySentinel(environment, s));
}

export function encodeDeleteSentinel(s: SentinelRow): Uint8Array {
  return toBinary(DeleteSentinelSchema, create(DeleteSentinelSchema, { k8sName: s.k8s_name, sentinelId: s.id }));
}

// ---------------------------------------------------------------- reports

export type HealthName = "unknown" | "healthy" | "unhealthy" | "paused";

/** `id` may be empty: the agent then names the sentinel by its `k8sName`. */
export type SentinelReport =
  | {
      type: "update";
      id: string;
      k8sName: string;
      availableReplicas: number;
      health: HealthName;
      address: string;
      routingVersion: number;
    }
  | { type: "delete"; id: string; k8sName: string }
  | { type: "rejected"; id: string; k8sName: string; reason: string };

function health(field: string, h: Health): HealthName {
  switch (h) {
    case Health.HEALTHY:
      return "healthy";
    case Health.UNHEALTHY:
      return "unhealthy";
    case Health.PAUSED:
      return "paused";
    case Health.UNSPECIFIED:
      return "unknown";
    default:
      throw invalidArgument(field, "is not a known health");
  }
}

export function validateSentinelReport(req: ReportSentinelStatusRequest): SentinelReport {
  const c = req.change;
  switch (c.case) {
    case "update": {
      const subject = reportSubject("update", "sentinel_id", "snt", {
        id: c.value.sentinelId,
        k8sName: c.value.k8sName,
      });
      return {
        type: "update",
        ...subject,
        availableReplicas: r.intRange("update.available_replicas", c.value.availableReplicas, 0, 100_000),
        health: health("update.health", c.value.health),
        address: r.text("update.address", c.value.address, 300),
        routingVersion: r.intRange("update.routing_version", c.value.routingVersion, 0, Number.MAX_SAFE_INTEGER),
      };
    }
    case "delete":
      return {
        type: "delete",
        ...reportSubject("delete", "sentinel_id", "snt", { id: c.value.sentinelId, k8sName: c.value.k8sName }),
      };
    case "rejected": {
      const subject = reportSubject("rejected", "sentinel_id", "snt", {
        id: c.value.sentinelId,
        k8sName: c.value.k8sName,
      });
      return { type: "rejected", ...subject, reason: rejectionReason("rejected.reason", c.value.reason) };
    }
    default:
      throw invalidArgument("change", "is required (update, delete or rejected)");
  }
}

export async function recordSentinelReport(store: Store, region: string, report: SentinelReport): Promise<void> {
  await store.write(async (tx) => {
    const q = tx.trx.selectFrom("sentinels").selectAll();
    const s = await (
      report.id !== "" ? q.where("id", "=", report.id) : q.where("k8s_name", "=", report.k8sName)
    ).executeTakeFirst();
    if (!s) {
      if (report.type === "delete") return;
      throw notFound(`sentinel "${report.id || report.k8sName}"`);
    }
    if (s.region !== region) throw new DomainError("permission_denied", `sentinel ${s.id} belongs to another region`);
    const patch =
      report.type === "update"
        ? {
            health: report.health,
            available_replicas: report.availableReplicas,
            rejected_reason: null,
            reported_at: tx.now,
            address: report.address === "" ? null : report.address,
            served_routing_version: report.routingVersion === 0 ? null : report.routingVersion,
          }
        : report.type === "delete"
          ? { health: "unknown", available_replicas: 0, reported_at: tx.now }
          : { rejected_reason: report.reason, reported_at: tx.now };
    await tx.trx.updateTable("sentinels").set(patch).where("id", "=", s.id).execute();
  });
}

// ---------------------------------------------------------------- descriptor

export const sentinelKind: Kind<typeof SentinelStateSchema, SentinelReport> = {
  name: "sentinel",
  idPrefix: "snt",
  wire: { state: SentinelStateSchema, apply: ApplySentinelSchema, delete: DeleteSentinelSchema },
  recordReport: recordSentinelReport,
  subject: (report) => ({ id: report.id, k8sName: report.k8sName }),
  methods: (h) => ({
    watchSentinels: (req, ctx) => h.watch(req, ctx),
    getDesiredSentinelState: (req, ctx) => h.getOne(req, "sentinel_id", req.sentinelId, ctx),
    getDesiredSentinelStates: async (req, ctx) =>
      create(GetDesiredSentinelStatesResponseSchema, await h.getMany(req, "sentinel_ids", req.sentinelIds, ctx)),
    reportSentinelStatus: async (req, ctx) => {
      await h.report(req, () => validateSentinelReport(req), ctx);
      return {};
    },
  }),
};

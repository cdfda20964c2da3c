// The sentinel kind's descriptor: its stream, its ClusterService methods, and the validation of
// its agents' reports (health, available replicas, address and the routing version served, or a
// rejection), which ../domain/sentinels.ts records. Its payloads are ../payloads/sentinel.ts.
import { create } from "@bufbuild/protobuf";
import {
  GetDesiredSentinelStatesResponseSchema,
  Health,
  SentinelStateSchema,
  type ReportSentinelStatusRequest,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { recordSentinelReport, type HealthName, type SentinelReport } from "../domain/sentinels.js";
import { invalidArgument } from "../errors.js";
import { sentinelPayloads } from "../payloads/sentinel.js";
import { rejectionReason, reportSubject } from "../validate/cluster.js";
import * as r from "../validate/rules.js";
import type { Kind } from "./kind.js";

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

// ---------------------------------------------------------------- descriptor

export const sentinelKind: Kind<typeof SentinelStateSchema, SentinelReport> = {
  name: sentinelPayloads.name,
  idPrefix: "snt",
  wire: { state: SentinelStateSchema, apply: sentinelPayloads.apply, delete: sentinelPayloads.delete },
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

// The sentinel kind's descriptor: its stream and the rules of its
// agents' reports (an update is the health, available replicas, address and the routing version
// served), which ../domain/sentinels.ts records. Its payloads are ../payloads/sentinel.ts.
import {
  Health,
  SentinelStateSchema,
  type ReportSentinelStatusRequest_Update,
  ReportSentinelStatusRequestSchema,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { recordSentinelReport, type HealthName } from "../domain/sentinels.js";
import { sentinelPayloads } from "../payloads/sentinel.js";
import * as r from "../validate/rules.js";
import { streamedKind } from "./kind.js";

const HEALTH: Record<number, HealthName> = {
  [Health.HEALTHY]: "healthy",
  [Health.UNHEALTHY]: "unhealthy",
  [Health.PAUSED]: "paused",
  [Health.UNSPECIFIED]: "unknown",
};

// ---------------------------------------------------------------- descriptor

export const sentinelKind = streamedKind({
  name: sentinelPayloads.name,
  idPrefix: "snt",
  wire: { state: SentinelStateSchema, apply: sentinelPayloads.apply, delete: sentinelPayloads.delete },
  report: {
    message: ReportSentinelStatusRequestSchema,
    key: "sentinelId",
    byK8sName: true,
    update: (u: ReportSentinelStatusRequest_Update) => ({
      availableReplicas: r.intRange("update.available_replicas", u.availableReplicas, 0, 100_000),
      health: r.enumName("update.health", u.health, HEALTH, "health"),
      address: r.text("update.address", u.address, 300),
      routingVersion: r.intRange("update.routing_version", u.routingVersion, 0, Number.MAX_SAFE_INTEGER),
    }),
    record: recordSentinelReport,
  },
});

// The gateway kind's descriptor: its stream, its ClusterService methods, and the validation of
// its agents' reports (each route's Gateway conditions and certificates, or a rejection), which
// ../domain/exposure.ts records. Its payloads are ../payloads/gateway.ts.
import { create } from "@bufbuild/protobuf";
import {
  GatewayStateSchema,
  GetDesiredGatewayStatesResponseSchema,
  type GatewayRouteStatus,
  type ReportGatewayStatusRequest,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import {
  recordGatewayReport,
  type GatewayReport,
  type StoredCondition,
  type StoredRouteStatus,
} from "../domain/exposure.js";
import { invalidArgument } from "../errors.js";
import { gatewayPayloads } from "../payloads/gateway.js";
import { k8sName, rejectionReason } from "../validate/cluster.js";
import * as r from "../validate/rules.js";
import type { Kind } from "./kind.js";

const CONDITION_STATUS = ["", "True", "False", "Unknown"];

function condition(field: string, c: { status: string; reason: string; message: string } | undefined): StoredCondition {
  if (!c) return { status: "", reason: "", message: "" };
  if (!CONDITION_STATUS.includes(c.status))
    throw invalidArgument(`${field}.status`, 'must be "True", "False", "Unknown" or empty');
  return {
    status: c.status,
    reason: r.text(`${field}.reason`, c.reason, r.LIMITS.shortTextMax),
    message: r.text(`${field}.message`, c.message.replace(/[\r\n\t]/g, " "), r.LIMITS.reasonMax),
  };
}

function routeStatus(field: string, s: GatewayRouteStatus): StoredRouteStatus {
  r.list(`${field}.certificates`, s.certificates, r.LIMITS.listMax);
  return {
    name: r.text(`${field}.name`, s.name, 63, true),
    visibility: r.text(`${field}.visibility`, s.visibility, 32),
    gateway: r.text(`${field}.gateway`, s.gateway, 253),
    accepted: condition(`${field}.accepted`, s.accepted),
    resolvedRefs: condition(`${field}.resolved_refs`, s.resolvedRefs),
    certificates: s.certificates.map((c, i) => ({
      hostname: r.text(`${field}.certificates[${i}].hostname`, c.hostname, 253, true),
      secretName: k8sName(`${field}.certificates[${i}].secret_name`, c.secretName, false),
      ready: condition(`${field}.certificates[${i}].ready`, c.ready),
      listener: c.listener === undefined ? null : condition(`${field}.certificates[${i}].listener`, c.listener),
    })),
    problem: r.text(`${field}.problem`, s.problem.replace(/[\r\n\t]/g, " "), r.LIMITS.reasonMax),
  };
}

export function validateGatewayReport(req: ReportGatewayStatusRequest): GatewayReport {
  const c = req.change;
  switch (c.case) {
    case "update": {
      const id = r.id("update.gateway_id", c.value.gatewayId, "env");
      r.list("update.routes", c.value.routes, r.LIMITS.listMax);
      return { type: "update", id, routes: c.value.routes.map((s, i) => routeStatus(`update.routes[${i}]`, s)) };
    }
    case "delete":
      return { type: "delete", id: r.id("delete.gateway_id", c.value.gatewayId, "env") };
    case "rejected":
      return {
        type: "rejected",
        id: r.id("rejected.gateway_id", c.value.gatewayId, "env"),
        reason: rejectionReason("rejected.reason", c.value.reason),
      };
    default:
      throw invalidArgument("change", "is required (update, delete or rejected)");
  }
}

// ---------------------------------------------------------------- descriptor

export const gatewayKind: Kind<typeof GatewayStateSchema, GatewayReport> = {
  name: gatewayPayloads.name,
  idPrefix: "env",
  wire: { state: GatewayStateSchema, apply: gatewayPayloads.apply, delete: gatewayPayloads.delete },
  recordReport: recordGatewayReport,
  subject: (report) => ({ id: report.id, k8sName: "" }),
  methods: (h) => ({
    watchGateways: (req, ctx) => h.watch(req, ctx),
    getDesiredGatewayState: (req, ctx) => h.getOne(req, "gateway_id", req.gatewayId, ctx),
    getDesiredGatewayStates: async (req, ctx) =>
      create(GetDesiredGatewayStatesResponseSchema, await h.getMany(req, "gateway_ids", req.gatewayIds, ctx)),
    reportGatewayStatus: async (req, ctx) => {
      await h.report(req, () => validateGatewayReport(req), ctx);
      return {};
    },
  }),
};

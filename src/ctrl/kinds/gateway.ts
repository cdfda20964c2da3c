// The gateway kind's descriptor: its stream and the rules of its
// agents' reports (an update is each route's Gateway conditions and certificates), which
// ../domain/exposure.ts records. Its payloads are ../payloads/gateway.ts.
import {
  GatewayStateSchema,
  type GatewayRouteStatus,
  type ReportGatewayStatusRequest_Update,
  ReportGatewayStatusRequestSchema,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { recordGatewayReport, type StoredCondition, type StoredRouteStatus } from "../domain/exposure.js";
import { invalidArgument } from "../errors.js";
import { gatewayPayloads } from "../payloads/gateway.js";
import { k8sName } from "../validate/cluster.js";
import * as r from "../validate/rules.js";
import { streamedKind } from "./kind.js";

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

// ---------------------------------------------------------------- descriptor

/** The update's own fields: each route's status. */
function checkUpdate(u: ReportGatewayStatusRequest_Update) {
  r.list("update.routes", u.routes, r.LIMITS.listMax);
  return { routes: u.routes.map((s, i) => routeStatus(`update.routes[${i}]`, s)) };
}

export const gatewayKind = streamedKind({
  name: gatewayPayloads.name,
  idPrefix: "env",
  wire: { state: GatewayStateSchema, apply: gatewayPayloads.apply, delete: gatewayPayloads.delete },
  report: {
    message: ReportGatewayStatusRequestSchema,
    key: "gatewayId",
    byK8sName: false,
    update: checkUpdate,
    record: recordGatewayReport,
  },
});

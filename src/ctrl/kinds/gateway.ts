// The gateway kind: an environment's exposure in one region (its endpoints and verified custom
// domains as HTTPRoutes on the cluster's Gateways, cert-manager Certificates, JWT policies).
// One object per (environment, region); its id is the environment id, so every desired object of
// the kind is found by environment, and its Delete message needs nothing but stored ids. This file
// is the kind's whole ctrl side: rows → the routes and the ApplyGateway / DeleteGateway messages
// agents get (pure), the agents' reports (each route's Gateway conditions and certificates)
// validated and recorded, and its ClusterService methods.
import { createHash } from "node:crypto";
import { create, toBinary } from "@bufbuild/protobuf";
import {
  ApplyGatewaySchema,
  DeleteGatewaySchema,
  EdgeAuthRuleSchema,
  GatewayStateSchema,
  GetDesiredGatewayStatesResponseSchema,
  type ApplyGateway,
  type EdgeAuthRule,
  type GatewayRoute,
  type GatewayRouteStatus,
  type ReportGatewayStatusRequest,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { EdgeAuthPolicy, EdgeAuthRuleSpec } from "../../contracts/routing.js";
import type { DomainRow, EndpointRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { DomainError, invalidArgument } from "../errors.js";
import { k8sName, rejectionReason } from "../validate/cluster.js";
import type { EndpointAuthSettings } from "../validate/exposure.js";
import * as r from "../validate/rules.js";
import type { Kind } from "./kind.js";

// ---------------------------------------------------------------- rows → routes (pure)

/** The route name of a custom domain (stable, short, a DNS label). */
export function domainRouteName(hostname: string): string {
  return `domain-${createHash("sha256").update(hostname).digest("hex").slice(0, 10)}`;
}

function trimPart(s: string, max: number): string {
  return s.slice(0, max).replace(/-+$/, "");
}

/** The base name of an environment's gateway objects: readable, unique per environment. */
export function gatewayK8sName(projectSlug: string, envSlug: string, environmentId: string): string {
  const h = createHash("sha256").update(environmentId).digest("hex").slice(0, 6);
  return `gw-${trimPart(projectSlug, 20)}-${trimPart(envSlug, 20)}-${h}`;
}

/** A domain is routed while verified (a lost record keeps it routed through its grace period). */
export function routedDomains(domains: readonly DomainRow[]): DomainRow[] {
  return domains.filter((d) => d.state === "verified").sort((a, b) => a.hostname.localeCompare(b.hostname));
}

export function parseEndpointAuth(text: string | null): EndpointAuthSettings | null {
  return text === null ? null : (JSON.parse(text) as EndpointAuthSettings);
}

function authRuleSpec(hosts: string[], auth: EndpointAuthSettings | null): EdgeAuthRuleSpec {
  if (!auth) return { hosts, jwt: null, operations: [], defaultAction: "allow" };
  return {
    hosts,
    jwt: { jwksUrl: auth.jwksUrl, issuer: auth.issuer, audiences: auth.audiences },
    operations: auth.operations.map((o) => ({ method: o.method, path: o.path, scopes: o.scopes })),
    defaultAction: auth.defaultAction,
  };
}

/** One route of an environment's exposure, before it becomes a message. */
export interface ExposureRoute {
  readonly name: string;
  readonly visibility: "public" | "organization";
  readonly hostnames: string[];
  readonly pathPrefix: string;
  readonly certificate: boolean;
  readonly auth: EdgeAuthRuleSpec;
}

/**
 * The routes of an environment: one per endpoint (its visibility's Gateway), and one per routed
 * custom domain on the public Gateway, which takes the public endpoint's authentication. Sorted
 * by name, so the same rows always give the same routes. Custom domains always get a certificate.
 */
export function exposureRoutes(endpoints: readonly EndpointRow[], domains: readonly DomainRow[]): ExposureRoute[] {
  const out: ExposureRoute[] = [];
  let publicAuth: EndpointAuthSettings | null = null;
  for (const e of endpoints) {
    const auth = parseEndpointAuth(e.auth);
    if (e.visibility === "public") publicAuth = auth;
    out.push({
      name: e.visibility,
      visibility: e.visibility === "organization" ? "organization" : "public",
      hostnames: [e.hostname],
      pathPrefix: e.path_prefix,
      // Generated hostnames are normally covered by the Gateway's wildcard certificate; an agent
      // may still ask for one per hostname (its --endpoint-certificates).
      certificate: false,
      auth: authRuleSpec([e.hostname], auth),
    });
  }
  for (const d of routedDomains(domains)) {
    out.push({
      name: domainRouteName(d.hostname),
      visibility: "public",
      hostnames: [d.hostname],
      pathPrefix: "/",
      certificate: true,
      auth: authRuleSpec([d.hostname], publicAuth),
    });
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}

/**
 * The sentinel's edge auth section: a rule per address, or null when no address asks for a
 * token. A request for a host no rule names is refused once any rule needs a token, so nobody
 * reaches a protected environment by sending another Host.
 */
export function edgeAuthPolicy(routes: readonly ExposureRoute[]): EdgeAuthPolicy | null {
  if (!routes.some((r) => r.auth.jwt !== null)) return null;
  // Two endpoints may share a host only on different Gateways (never here: hosts are unique).
  return { rules: routes.map((r) => r.auth), unmatchedHosts: "deny" };
}

export function edgeAuthRuleMsg(a: EdgeAuthRuleSpec): EdgeAuthRule {
  return create(EdgeAuthRuleSchema, {
    hosts: [...a.hosts],
    jwt: a.jwt ? { jwksUrl: a.jwt.jwksUrl, issuer: a.jwt.issuer, audiences: [...a.jwt.audiences] } : undefined,
    operations: a.operations.map((o) => ({ method: o.method, path: o.path, scopes: [...o.scopes] })),
    defaultAction: a.defaultAction,
  });
}

// ---------------------------------------------------------------- payload encoding

export interface GatewayContext {
  workspaceId: string;
  projectId: string;
  environmentId: string;
  namespace: string;
  k8sName: string;
}

export function renderApplyGateway(g: GatewayContext, region: string, routes: readonly ExposureRoute[]): ApplyGateway {
  return create(ApplyGatewaySchema, {
    workspaceId: g.workspaceId,
    projectId: g.projectId,
    environmentId: g.environmentId,
    gatewayId: g.environmentId,
    region,
    k8sNamespace: g.namespace,
    k8sName: g.k8sName,
    routes: routes.map(
      (x): GatewayRoute =>
        ({
          $typeName: "krane.ctrl.v1.GatewayRoute",
          name: x.name,
          visibility: x.visibility,
          hostnames: [...x.hostnames],
          pathPrefix: x.pathPrefix,
          certificate: x.certificate,
          auth: edgeAuthRuleMsg(x.auth),
        }) satisfies GatewayRoute,
    ),
  });
}

export function encodeApplyGateway(g: GatewayContext, region: string, routes: readonly ExposureRoute[]): Uint8Array {
  return toBinary(ApplyGatewaySchema, renderApplyGateway(g, region, routes));
}

/** Built from the ids alone: the agent deletes by the gateway-id label. */
export function encodeDeleteGateway(environmentId: string, namespace: string): Uint8Array {
  return toBinary(
    DeleteGatewaySchema,
    create(DeleteGatewaySchema, { gatewayId: environmentId, k8sNamespace: namespace }),
  );
}

// ---------------------------------------------------------------- reports

/** A reported route as stored (gateway_reports.routes) and shown in status. */
export interface StoredRouteStatus {
  name: string;
  visibility: string;
  gateway: string;
  accepted: StoredCondition;
  resolvedRefs: StoredCondition;
  certificates: { hostname: string; secretName: string; ready: StoredCondition }[];
  problem: string;
}

export interface StoredCondition {
  status: string;
  reason: string;
  message: string;
}

export type GatewayReport =
  | { type: "update"; id: string; routes: StoredRouteStatus[] }
  | { type: "delete"; id: string }
  | { type: "rejected"; id: string; reason: string };

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

export async function recordGatewayReport(store: Store, region: string, report: GatewayReport): Promise<void> {
  await store.write(async (tx) => {
    const env = await tx.trx.selectFrom("environments").select(["id"]).where("id", "=", report.id).executeTakeFirst();
    if (!env) return; // the environment is gone (its reports went with it)
    const known = await tx.trx
      .selectFrom("environment_regions")
      .select("region")
      .where("environment_id", "=", report.id)
      .where("region", "=", region)
      .executeTakeFirst();
    const desired = await tx.trx
      .selectFrom("desired_objects")
      .select("object_id")
      .where("kind", "=", gatewayKind.name)
      .where("region", "=", region)
      .where("object_id", "=", report.id)
      .executeTakeFirst();
    if (!known && !desired && report.type !== "delete")
      throw new DomainError("permission_denied", `environment ${report.id} is not in region ${region}`);
    if (report.type === "delete") {
      await tx.trx
        .deleteFrom("gateway_reports")
        .where("environment_id", "=", report.id)
        .where("region", "=", region)
        .execute();
      return;
    }
    const prev = await tx.trx
      .selectFrom("gateway_reports")
      .selectAll()
      .where("environment_id", "=", report.id)
      .where("region", "=", region)
      .executeTakeFirst();
    const row = {
      environment_id: report.id,
      region,
      routes: report.type === "update" ? JSON.stringify(report.routes) : (prev?.routes ?? "[]"),
      rejected_reason: report.type === "rejected" ? report.reason : null,
      reported_at: tx.now,
    };
    if (prev) {
      await tx.trx
        .updateTable("gateway_reports")
        .set(row)
        .where("environment_id", "=", report.id)
        .where("region", "=", region)
        .execute();
    } else {
      await tx.trx.insertInto("gateway_reports").values(row).execute();
    }
  });
}

// ---------------------------------------------------------------- descriptor

export const gatewayKind: Kind<typeof GatewayStateSchema, GatewayReport> = {
  name: "gateway",
  idPrefix: "env",
  wire: { state: GatewayStateSchema, apply: ApplyGatewaySchema, delete: DeleteGatewaySchema },
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

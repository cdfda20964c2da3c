// The gateway kind's payloads: an environment's exposure in one region (its endpoints and
// verified custom domains as routes on the cluster's Gateways, with certificates and JWT
// policies). One object per (environment, region) whose id is the environment id, so every
// desired object of the kind is found by environment and its Delete needs nothing but stored
// ids. Rows → routes → ApplyGateway / DeleteGateway, pure; the same routes give the sentinels'
// edge auth section.
import { createHash } from "node:crypto";
import { create, toBinary } from "@bufbuild/protobuf";
import {
  ApplyGatewaySchema,
  DeleteGatewaySchema,
  EdgeAuthRuleSchema,
  type ApplyGateway,
  type EdgeAuthRule,
  type GatewayRoute,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { EdgeAuthPolicy, EdgeAuthRuleSpec } from "../../contracts/routing.js";
import type { DomainRow, EndpointRow } from "../db/schema.js";
import type { EndpointAuthSettings } from "../validate/exposure.js";
import type { KindPayloads } from "./kind.js";

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

export const gatewayPayloads: KindPayloads = {
  name: "gateway",
  apply: ApplyGatewaySchema,
  delete: DeleteGatewaySchema,
};

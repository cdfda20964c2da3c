// Pure rendering of an environment's exposure in this region (ApplyGateway → objects):
//  - one HTTPRoute per route, in the workspace namespace, attached to the Gateway of its
//    visibility (agent settings), with its hostnames, a PathPrefix match (never a regular
//    expression: ordering between routes is then the Gateway API's own precedence, longest
//    prefix first, not an implementation's regex sort), a URLRewrite ReplacePrefixMatch "/" when
//    routed under a prefix, and one backendRef: the environment's sentinel Service on 8040 in
//    namespace `sentinel` (gRPC calls, matched by content-type in a rule of their own, on its h2c
//    port 8042, so the Gateway speaks HTTP/2 to the sentinel for them);
//  - the ReferenceGrant in `sentinel` that lets exactly those HTTPRoutes of the workspace
//    namespace refer to exactly that Service (Gateway API refuses cross-namespace backendRefs
//    without one);
//  - a cert-manager Certificate per hostname that needs one (custom domains; endpoints' own too
//    when the agent says so), from the configured issuer, and the ReferenceGrant that lets the
//    Gateways' namespaces use their Secrets;
//  - with HTTPS configured, the environment's own Gateway in the workspace namespace: one HTTPS
//    listener per public hostname with a Certificate, terminating TLS with its Secret (same
//    namespace: no grant needed), and the public HTTPRoutes attached to it as well;
//  - no authorization object of the Gateway implementation: every route leads to the sentinel,
//    which enforces the endpoint's JWT policy (src/sentinel/auth.ts; README.md, "One edge
//    policy", says why Envoy Gateway's SecurityPolicy cannot decide as it does).
// Every object carries the gateway id (ownership: what the key stops rendering is pruned) and
// every field is given with the value the API server would default it to, so a live object
// matches its rendering and a resync writes nothing.
import { createHash } from "node:crypto";
import type { ApplyGateway, GatewayRoute } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { SENTINEL_H2C_SERVICE_PORT, SENTINEL_NAMESPACE, SENTINEL_PORT } from "../../contracts/cluster.js";
import { COMPONENT, LABEL_GATEWAY_ID, ownerLabels } from "../../contracts/labels.js";
import type { KubeObject } from "../../kube/object.js";
import type { GatewayRef, GatewaySettings } from "./settings.js";

export const GATEWAY_API = "gateway.networking.k8s.io";
/**
 * The content-types gRPC clients send (grpc-go, grpc-java, grpc-js and connect send the first),
 * matched exactly (core Gateway API support, no regular expression).
 */
export const GRPC_CONTENT_TYPES = ["application/grpc", "application/grpc+proto"] as const;

export function gatewayLabels(g: ApplyGateway, region: string): Record<string, string> {
  return {
    ...ownerLabels(COMPONENT.gateway, region, g),
    [LABEL_GATEWAY_ID]: g.gatewayId,
  };
}

export function routeName(g: ApplyGateway, route: GatewayRoute): string {
  return `${g.k8sName}-${route.name}`;
}

export function gatewayOf(settings: GatewaySettings, visibility: string): GatewayRef | undefined {
  return visibility === "organization" ? settings.organization : settings.public;
}

/** A route is served under a prefix (rewritten away) unless its prefix is "/" or empty. */
function prefixOf(route: GatewayRoute): string | undefined {
  return route.pathPrefix === "" || route.pathPrefix === "/" ? undefined : route.pathPrefix;
}

/** Gateway API's limit on the listeners of one Gateway. */
export const MAX_LISTENERS = 64;

export function httpsGatewayName(g: ApplyGateway): string {
  return `${g.k8sName}-https`;
}

/**
 * The hostnames served over HTTPS on the environment's Gateway: those of public routes that get
 * a Certificate, sorted, at most MAX_LISTENERS (the rest keep their Certificate but no listener).
 */
export function httpsHostnames(g: ApplyGateway, settings: GatewaySettings): string[] {
  if (!settings.https || !settings.certificateIssuer) return [];
  const out = new Set<string>();
  for (const r of g.routes)
    if (r.visibility === "public" && (r.certificate || settings.endpointCertificates))
      for (const h of r.hostnames) out.add(h);
  return [...out].sort().slice(0, MAX_LISTENERS);
}

export function listenerName(hostname: string): string {
  return `https-${hostHash(hostname)}`;
}

/**
 * The environment's Gateway: an HTTPS listener per hostname, each terminating TLS with that
 * hostname's Certificate Secret (so SNI picks the certificate), admitting routes of its own
 * namespace only. Absent when nothing is served over HTTPS.
 */
export function renderHttpsGateway(g: ApplyGateway, region: string, settings: GatewaySettings): KubeObject | undefined {
  const hosts = httpsHostnames(g, settings);
  if (!settings.https || hosts.length === 0) return undefined;
  const { className, port } = settings.https;
  return {
    apiVersion: `${GATEWAY_API}/v1`,
    kind: "Gateway",
    metadata: { name: httpsGatewayName(g), namespace: g.k8sNamespace, labels: gatewayLabels(g, region) },
    spec: {
      gatewayClassName: className,
      listeners: hosts.map((hostname) => ({
        name: listenerName(hostname),
        hostname,
        port,
        protocol: "HTTPS",
        tls: {
          mode: "Terminate",
          certificateRefs: [{ group: "", kind: "Secret", name: certificateSecretName(g, hostname) }],
        },
        allowedRoutes: { namespaces: { from: "Same" } },
      })),
    },
  };
}

export function renderHttpRoute(
  g: ApplyGateway,
  route: GatewayRoute,
  region: string,
  gateway: GatewayRef,
  sentinelService: string,
  httpsGateway?: string,
): KubeObject {
  const prefix = prefixOf(route);
  const parentRef: Record<string, unknown> = {
    group: GATEWAY_API,
    kind: "Gateway",
    namespace: gateway.namespace,
    name: gateway.name,
  };
  if (gateway.sectionName !== "") parentRef.sectionName = gateway.sectionName;
  const rule: Record<string, unknown> = {
    matches: [{ path: { type: "PathPrefix", value: prefix ?? "/" } }],
    backendRefs: [
      {
        group: "",
        kind: "Service",
        namespace: SENTINEL_NAMESPACE,
        name: sentinelService,
        port: SENTINEL_PORT,
        weight: 1,
      },
    ],
  };
  if (prefix !== undefined) {
    rule.filters = [
      { type: "URLRewrite", urlRewrite: { path: { type: "ReplacePrefixMatch", replacePrefixMatch: "/" } } },
    ];
  }
  // gRPC calls (the same path, plus a content-type match, which wins over the plain rule by the
  // Gateway API's precedence) go to the sentinel Service's h2c port: the Gateway speaks HTTP/2 to
  // the sentinel for them, HTTP/1.1 for everything else. One rule per content-type: a rule that
  // rewrites a prefix may have only one match (the Gateway API's validation).
  const grpcRules = GRPC_CONTENT_TYPES.map((value): Record<string, unknown> => ({
    ...rule,
    matches: [
      {
        path: { type: "PathPrefix", value: prefix ?? "/" },
        headers: [{ type: "Exact", name: "content-type", value }],
      },
    ],
    backendRefs: [{ ...(rule.backendRefs as Record<string, unknown>[])[0], port: SENTINEL_H2C_SERVICE_PORT }],
  }));
  return {
    apiVersion: `${GATEWAY_API}/v1`,
    kind: "HTTPRoute",
    metadata: { name: routeName(g, route), namespace: g.k8sNamespace, labels: gatewayLabels(g, region) },
    spec: {
      parentRefs: [
        parentRef,
        ...(httpsGateway === undefined
          ? []
          : [{ group: GATEWAY_API, kind: "Gateway", namespace: g.k8sNamespace, name: httpsGateway }]),
      ],
      hostnames: [...route.hostnames].sort(),
      rules: [rule, ...grpcRules],
    },
  };
}

/** Lets the gateway's HTTPRoutes (workspace namespace) use the sentinel Service. */
export function renderSentinelGrant(g: ApplyGateway, region: string, sentinelService: string): KubeObject {
  return {
    apiVersion: `${GATEWAY_API}/v1beta1`,
    kind: "ReferenceGrant",
    metadata: { name: `${g.k8sName}-to-sentinel`, namespace: SENTINEL_NAMESPACE, labels: gatewayLabels(g, region) },
    spec: {
      from: [{ group: GATEWAY_API, kind: "HTTPRoute", namespace: g.k8sNamespace }],
      to: [{ group: "", kind: "Service", name: sentinelService }],
    },
  };
}

function hostHash(hostname: string): string {
  return createHash("sha256").update(hostname).digest("hex").slice(0, 10);
}

export function certificateName(g: ApplyGateway, hostname: string): string {
  return `${g.k8sName}-${hostHash(hostname)}`;
}

export function certificateSecretName(g: ApplyGateway, hostname: string): string {
  return `${certificateName(g, hostname)}-tls`;
}

/** The hostnames that get a Certificate in this cluster, sorted and unique. */
export function certificateHostnames(g: ApplyGateway, settings: GatewaySettings): string[] {
  if (!settings.certificateIssuer) return [];
  const out = new Set<string>();
  for (const r of g.routes) if (r.certificate || settings.endpointCertificates) for (const h of r.hostnames) out.add(h);
  return [...out].sort();
}

export function renderCertificate(
  g: ApplyGateway,
  hostname: string,
  region: string,
  settings: GatewaySettings,
): KubeObject {
  const issuer = settings.certificateIssuer ?? { kind: "ClusterIssuer", name: "" };
  return {
    apiVersion: "cert-manager.io/v1",
    kind: "Certificate",
    metadata: { name: certificateName(g, hostname), namespace: g.k8sNamespace, labels: gatewayLabels(g, region) },
    spec: {
      secretName: certificateSecretName(g, hostname),
      dnsNames: [hostname],
      issuerRef: { group: "cert-manager.io", kind: issuer.kind, name: issuer.name },
    },
  };
}

/** Lets the configured Gateways' namespaces refer to the certificates' Secrets. */
export function renderSecretGrant(
  g: ApplyGateway,
  region: string,
  settings: GatewaySettings,
  secrets: readonly string[],
): KubeObject | undefined {
  const namespaces = [
    ...new Set(
      [settings.public?.namespace, settings.organization?.namespace].filter(
        (n): n is string => n !== undefined && n !== g.k8sNamespace,
      ),
    ),
  ].sort();
  if (namespaces.length === 0 || secrets.length === 0) return undefined;
  return {
    apiVersion: `${GATEWAY_API}/v1beta1`,
    kind: "ReferenceGrant",
    metadata: { name: `${g.k8sName}-certificates`, namespace: g.k8sNamespace, labels: gatewayLabels(g, region) },
    spec: {
      from: namespaces.map((namespace) => ({ group: GATEWAY_API, kind: "Gateway", namespace })),
      to: secrets.map((name) => ({ group: "", kind: "Secret", name })),
    },
  };
}

/** Everything the desired state renders without the caches (Certificates, their grant, the HTTPS Gateway). */
export function renderStatic(g: ApplyGateway, region: string, settings: GatewaySettings): KubeObject[] {
  const out: KubeObject[] = [];
  const https = renderHttpsGateway(g, region, settings);
  if (https) out.push(https);
  const hosts = certificateHostnames(g, settings);
  for (const h of hosts) out.push(renderCertificate(g, h, region, settings));
  const grant = renderSecretGrant(
    g,
    region,
    settings,
    hosts.map((h) => certificateSecretName(g, h)),
  );
  if (grant) out.push(grant);
  return out;
}

/** Why a route cannot be rendered here, or undefined. */
export function routeProblem(
  route: GatewayRoute,
  settings: GatewaySettings,
  sentinelService: string | undefined,
): string | undefined {
  if (!gatewayOf(settings, route.visibility))
    return `no ${route.visibility} Gateway is configured for this region's agent (--${route.visibility}-gateway)`;
  if (sentinelService === undefined) return "the environment has no sentinel Service in this region";
  return undefined;
}

/** The HTTPRoutes (and the sentinel grant) of the routes that can be served. */
export function renderRoutes(
  g: ApplyGateway,
  region: string,
  settings: GatewaySettings,
  sentinelService: string | undefined,
): KubeObject[] {
  if (sentinelService === undefined) return [];
  const out: KubeObject[] = [];
  const https = new Set(httpsHostnames(g, settings));
  for (const r of g.routes) {
    const gw = gatewayOf(settings, r.visibility);
    const served = r.visibility === "public" && r.hostnames.some((h) => https.has(h));
    if (gw) out.push(renderHttpRoute(g, r, region, gw, sentinelService, served ? httpsGatewayName(g) : undefined));
  }
  if (out.length > 0) out.push(renderSentinelGrant(g, region, sentinelService));
  return out;
}

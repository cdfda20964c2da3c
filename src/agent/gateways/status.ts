// What the gateway controller reports about an environment's exposure (pure, unit-tested): per
// route, the Gateway it is attached to, the route's Accepted and ResolvedRefs conditions as that
// Gateway's controller wrote them in status.parents (a condition observed for an older
// generation of the route counts as not reported yet), each Certificate's Ready condition, the
// HTTPS listener serving its hostname on the environment's Gateway (with --https-gateway-class),
// and why a route is not served when the agent knows (no Gateway configured, no sentinel Service).
// A Gateway that refuses a route is reported once, as a status: nothing is retried for it.
import { create } from "@bufbuild/protobuf";
import {
  GatewayConditionSchema,
  GatewayRouteStatusSchema,
  type ApplyGateway,
  type GatewayCondition,
  type GatewayRouteStatus,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { isRecord, type KubeObject } from "../../kube/object.js";
import type { GatewaySettings } from "./settings.js";
import {
  certificateHostnames,
  certificateName,
  certificateSecretName,
  gatewayOf,
  httpsGatewayName,
  httpsHostnames,
  listenerName,
  MAX_LISTENERS,
  routeName,
  routeProblem,
} from "./render.js";

type Json = Record<string, unknown>;

function conditionsOf(o: unknown): Json[] {
  return isRecord(o) && Array.isArray(o.conditions) ? (o.conditions.filter(isRecord) as Json[]) : [];
}

function str(v: unknown): string {
  return typeof v === "string" ? v : "";
}

function condition(conds: readonly Json[], type: string, generation: number | undefined): GatewayCondition {
  const c = conds.find((x) => x.type === type);
  if (!c) return create(GatewayConditionSchema, {});
  const observed = typeof c.observedGeneration === "number" ? c.observedGeneration : undefined;
  if (generation !== undefined && observed !== undefined && observed < generation) {
    return create(GatewayConditionSchema, {
      status: "Unknown",
      reason: "Pending",
      message: `observed generation ${observed} of ${generation}`,
    });
  }
  return create(GatewayConditionSchema, {
    status: str(c.status),
    reason: str(c.reason),
    message: str(c.message).slice(0, 1024),
  });
}

/** The status.parents entry of a route for one Gateway. */
function parentStatus(route: KubeObject, namespace: string, name: string): Json | undefined {
  const parents =
    isRecord(route.status) && Array.isArray(route.status.parents) ? route.status.parents.filter(isRecord) : [];
  return parents.find((p) => {
    const ref = isRecord(p.parentRef) ? p.parentRef : {};
    const ns = str(ref.namespace) || route.metadata.namespace;
    return str(ref.name) === name && ns === namespace && (ref.kind === undefined || ref.kind === "Gateway");
  }) as Json | undefined;
}

export interface GatewayLookups {
  route(namespace: string, name: string): KubeObject | undefined;
  certificate(namespace: string, name: string): KubeObject | undefined;
  /** The environment's own HTTPS Gateway (only asked with --https-gateway-class). */
  gateway(namespace: string, name: string): KubeObject | undefined;
}

/**
 * The HTTPS listener of `hostname` on the environment's Gateway as its controller reports it:
 * the first of Accepted and ResolvedRefs that is False (why it cannot serve: a missing
 * certificate Secret, a conflict), else Programmed. A condition of an older generation of the
 * Gateway is pending; a hostname past the listener limit has no listener.
 */
export function listenerCondition(
  gateway: KubeObject | undefined,
  hostname: string,
  listed: boolean,
): GatewayCondition {
  if (!listed)
    return create(GatewayConditionSchema, {
      status: "False",
      reason: "NoListener",
      message: `only an environment's first ${MAX_LISTENERS} hostnames (sorted) get an HTTPS listener`,
    });
  const listeners =
    gateway && isRecord(gateway.status) && Array.isArray(gateway.status.listeners)
      ? gateway.status.listeners.filter(isRecord)
      : [];
  const listener = listeners.find((l) => l.name === listenerName(hostname));
  const conds = conditionsOf(listener);
  const generation = gateway?.metadata.generation;
  for (const type of ["Accepted", "ResolvedRefs"]) {
    const c = condition(conds, type, generation);
    if (c.status === "False") return c;
  }
  return condition(conds, "Programmed", generation);
}

export function observeGateway(
  g: ApplyGateway,
  settings: GatewaySettings,
  sentinelService: string | undefined,
  look: GatewayLookups,
): GatewayRouteStatus[] {
  const certHosts = new Set(certificateHostnames(g, settings));
  const listed = new Set(httpsHostnames(g, settings));
  const httpsGateway = settings.https ? look.gateway(g.k8sNamespace, httpsGatewayName(g)) : undefined;
  return g.routes.map((r) => {
    const gw = gatewayOf(settings, r.visibility);
    const problem = routeProblem(r, settings, sentinelService) ?? "";
    const live = problem === "" ? look.route(g.k8sNamespace, routeName(g, r)) : undefined;
    const parent = live && gw ? parentStatus(live, gw.namespace, gw.name) : undefined;
    const conds = parent ? conditionsOf(parent) : [];
    const generation = live?.metadata.generation;
    const certificates = r.hostnames
      .filter((h) => certHosts.has(h))
      .sort()
      .map((h) => {
        const cert = look.certificate(g.k8sNamespace, certificateName(g, h));
        return {
          hostname: h,
          secretName: certificateSecretName(g, h),
          ready: condition(conditionsOf(cert?.status), "Ready", cert?.metadata.generation),
          // Only public routes are served on the environment's Gateway.
          listener:
            settings.https && r.visibility === "public" ? listenerCondition(httpsGateway, h, listed.has(h)) : undefined,
        };
      });
    return create(GatewayRouteStatusSchema, {
      name: r.name,
      visibility: r.visibility,
      gateway: gw ? `${gw.namespace}/${gw.name}` : "",
      accepted: condition(conds, "Accepted", generation),
      resolvedRefs: condition(conds, "ResolvedRefs", generation),
      certificates,
      problem,
    });
  });
}

/** Identical observations have identical fingerprints (unchanged status is not re-sent). */
export function gatewayFingerprint(routes: readonly GatewayRouteStatus[]): string {
  const c = (x: GatewayCondition | undefined): string => `${x?.status ?? ""}/${x?.reason ?? ""}/${x?.message ?? ""}`;
  return routes
    .map((r) =>
      [
        r.name,
        r.gateway,
        c(r.accepted),
        c(r.resolvedRefs),
        r.problem,
        ...r.certificates.map((k) => `${k.hostname}=${c(k.ready)}${k.listener ? `+${c(k.listener)}` : ""}`),
      ].join("|"),
    )
    .join("\n");
}

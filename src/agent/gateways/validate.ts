// Checks an ApplyGateway before anything is applied: invalid desired state is refused with a
// reason and reported to ctrl as Rejected, never half-applied. Pure.
import type { ApplyGateway, DeleteGateway } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { AUTH_METHODS, PATH_TEMPLATE_RE, SCOPE_RE, jwksUrlProblem } from "../../contracts/routing.js";
import { isReservedNamespace } from "../../contracts/cluster.js";
import { isDnsLabel, isLabelValue } from "../../contracts/labels.js";

const HOSTNAME = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)+$/;
const PREFIX = /^\/[A-Za-z0-9._~-]+(\/[A-Za-z0-9._~-]+)*$/;

export function validateApplyGateway(g: ApplyGateway, region: string): string | undefined {
  if (g.region !== region) return `gateway for region ${g.region} sent to region ${region}`;
  for (const [f, v] of [
    ["workspace_id", g.workspaceId],
    ["project_id", g.projectId],
    ["environment_id", g.environmentId],
    ["gateway_id", g.gatewayId],
  ] as const) {
    if (v === "" || !isLabelValue(v)) return `${f} must be a non-empty label value`;
  }
  if (!isDnsLabel(g.k8sNamespace)) return "k8s_namespace must be a DNS label";
  if (isReservedNamespace(g.k8sNamespace)) return `k8s_namespace "${g.k8sNamespace}" is reserved`;
  if (!isDnsLabel(g.k8sName) || g.k8sName.length > 40) return "k8s_name must be a DNS label of at most 40 characters";
  if (g.routes.length === 0) return "routes: at least one is required";
  if (g.routes.length > 64) return "routes: at most 64";
  const names = new Set<string>();
  const hosts = new Set<string>();
  for (const [i, r] of g.routes.entries()) {
    const f = `routes[${i}]`;
    if (!isDnsLabel(r.name) || r.name.length > 20) return `${f}.name must be a DNS label of at most 20 characters`;
    if (names.has(r.name)) return `${f}.name ${r.name} is repeated`;
    names.add(r.name);
    if (r.visibility !== "public" && r.visibility !== "organization")
      return `${f}.visibility must be "public" or "organization"`;
    if (r.hostnames.length === 0 || r.hostnames.length > 16) return `${f}.hostnames: 1 to 16`;
    for (const h of r.hostnames) {
      if (!HOSTNAME.test(h)) return `${f}.hostnames: ${h.slice(0, 253)} is not a lowercase RFC 1123 hostname`;
      const key = `${r.visibility}/${h}/${r.pathPrefix}`;
      if (hosts.has(key)) return `${f}.hostnames: ${h} is routed twice`;
      hosts.add(key);
    }
    if (
      r.pathPrefix !== "" &&
      r.pathPrefix !== "/" &&
      (!PREFIX.test(r.pathPrefix) || r.pathPrefix.split("/").some((x) => x === "." || x === ".."))
    )
      return `${f}.path_prefix ${r.pathPrefix.slice(0, 256)} is not a path prefix`;
    const a = r.auth;
    if (a) {
      if (a.defaultAction !== "allow" && a.defaultAction !== "deny")
        return `${f}.auth.default_action must be "allow" or "deny"`;
      if (a.jwt) {
        const p = jwksUrlProblem(a.jwt.jwksUrl);
        if (p) return `${f}.auth.jwt.jwks_url ${p}`;
      } else if (a.operations.length > 0) return `${f}.auth.operations need jwt`;
      for (const [k, op] of a.operations.entries()) {
        if (!(AUTH_METHODS as readonly string[]).includes(op.method))
          return `${f}.auth.operations[${k}].method ${op.method} is not allowed`;
        if (!PATH_TEMPLATE_RE.test(op.path)) return `${f}.auth.operations[${k}].path is not a path template`;
        if (op.scopes.some((s) => !SCOPE_RE.test(s))) return `${f}.auth.operations[${k}].scopes hold an invalid scope`;
      }
    }
  }
  return undefined;
}

export function validateDeleteGateway(d: DeleteGateway): string | undefined {
  if (d.gatewayId === "" || !isLabelValue(d.gatewayId)) return "gateway_id must be a non-empty label value";
  if (d.k8sNamespace !== "" && !isDnsLabel(d.k8sNamespace)) return "k8s_namespace must be a DNS label";
  return undefined;
}

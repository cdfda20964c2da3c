// Pure rendering of an environment's routing table in this region (src/contracts/routing.ts):
//  - the policy ConfigMap, from the sentinel's desired state (mode, weight per revision,
//    ctrl's routing version);
//  - one EndpointSlice per revision (more past 1,000 endpoints), from the agent's pod cache:
//    the revision's pods that are RUNNING (Running and ContainersReady) with an IP and not
//    terminating. A pod that starts terminating leaves its slice at once, before its container
//    stops serving, so the sentinel stops sending it new requests first. While none of a revision's
//    pods is RUNNING, those whose containers run but are not ready yet are listed with
//    `ready: false`, and the slice names their readiness probe's path (READINESS_PATH_ANNOTATION):
//    a sentinel holding requests at zero instances probes them itself (src/sentinel/warm.ts).
// Both are owned by the sentinel (LABEL_SENTINEL_ID), so the runtime prunes slices of revisions
// that no longer have pods here.
import type { ApplySentinel, EdgeAuth } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { InstanceStatus } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { parseApiKeys, type CarriedApiKey } from "../../contracts/api-keys.js";
import { SENTINEL_NAMESPACE } from "../../contracts/cluster.js";
import { appProtocolFrom, appProtocolOf, LABEL_APP_PROTOCOL } from "../../contracts/protocols.js";
import { LABEL_DEPLOYMENT_ID, LABEL_SENTINEL_ID, ownerLabels } from "../../contracts/labels.js";
import {
  ENDPOINTSLICE_MANAGED_BY,
  ENDPOINTSLICE_HEADLESS_LABEL,
  ENDPOINTSLICE_MANAGED_BY_LABEL,
  ENDPOINTS_PER_SLICE,
  POLICY_KEY,
  READINESS_PATH_ANNOTATION,
  READINESS_PATH_RE,
  ROUTING_COMPONENT,
  ROUTING_PORT_NAME,
  formatRoutingPolicy,
  routingPolicyName,
  routingSliceName,
  type EdgeAuthPolicy,
  type HoldPolicy,
  type RoutingPolicy,
} from "../../contracts/routing.js";
import { parseEdgePolicies, type EdgePolicy } from "../../contracts/edge-policy.js";
import type { KubeObject } from "../../kube/object.js";
import { isRecord } from "../../kube/object.js";
import { instanceStatusOf } from "../deployments/status.js";

function routingLabels(s: ApplySentinel, region: string): Record<string, string> {
  return {
    ...ownerLabels(ROUTING_COMPONENT, region, s),
    [LABEL_SENTINEL_ID]: s.sentinelId,
  };
}

/** The edge auth section of the policy (absent when nothing asks for a token). */
export function edgeAuthOf(a: EdgeAuth | undefined): EdgeAuthPolicy | undefined {
  if (!a || a.rules.length === 0) return undefined;
  return {
    rules: a.rules.map((r) => ({
      hosts: [...r.hosts],
      jwt: r.jwt ? { jwksUrl: r.jwt.jwksUrl, issuer: r.jwt.issuer, audiences: [...r.jwt.audiences] } : null,
      operations: r.operations.map((o) => ({ method: o.method, path: o.path, scopes: [...o.scopes] })),
      defaultAction: r.defaultAction === "deny" ? "deny" : "allow",
    })),
    unmatchedHosts: a.unmatchedHosts === "allow" ? "allow" : "deny",
  };
}

/**
 * What each sentinel pod holds while the environment is at zero: the environment's bound spread
 * over its sentinel pods (rounded up, so the region holds at most one request per pod more).
 */
export function holdPolicyOf(s: ApplySentinel): HoldPolicy | undefined {
  const z = s.autoscale?.scaleToZero;
  if (z === undefined) return undefined;
  return {
    maxHeld: Math.max(1, Math.ceil(z.maxHeldRequests / Math.max(1, s.replicas))),
    timeoutMs: z.heldTimeoutSeconds * 1000,
  };
}

/**
 * The edge policies of the desired state (none when empty). A list this agent cannot read (a
 * newer ctrl's kind) throws, so the apply fails and is reported rather than the sentinels serving
 * without the policies.
 */
export function edgePoliciesOf(json: string | undefined): EdgePolicy[] | undefined {
  if (json === undefined || json === "") return undefined;
  const list = parseEdgePolicies("routing.policies", JSON.parse(json) as unknown);
  return list.length > 0 ? list : undefined;
}

/** The API keys of the desired state (none when empty); like the policies, a bad list throws. */
export function apiKeysOf(json: string | undefined): CarriedApiKey[] | undefined {
  if (json === undefined || json === "") return undefined;
  const list = parseApiKeys("routing.apiKeys", JSON.parse(json) as unknown);
  return list.length > 0 ? list : undefined;
}

/** The policy a sentinel's desired state asks for (no policy: by instance count). */
export function routingPolicyOf(s: ApplySentinel): RoutingPolicy {
  const r = s.routing;
  const auth = edgeAuthOf(r?.auth);
  const hold = holdPolicyOf(s);
  const policies = edgePoliciesOf(r?.policiesJson);
  const apiKeys = apiKeysOf(r?.apiKeysJson);
  return {
    version: r ? Number(r.version) : 0,
    environmentId: s.environmentId,
    mode: r?.mode === "weighted" ? "weighted" : "instances",
    revisions: (r?.revisions ?? []).map((w) => ({ deploymentId: w.deploymentId, weight: w.weight })),
    ...(auth ? { auth } : {}),
    ...(r !== undefined && r.previewDeploymentId !== "" ? { preview: r.previewDeploymentId } : {}),
    ...(hold ? { hold } : {}),
    ...(policies ? { policies } : {}),
    ...(apiKeys ? { apiKeys } : {}),
  };
}

export function renderRoutingPolicy(s: ApplySentinel, region: string): KubeObject {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: routingPolicyName(s.k8sName), namespace: SENTINEL_NAMESPACE, labels: routingLabels(s, region) },
    data: { [POLICY_KEY]: formatRoutingPolicy(routingPolicyOf(s)) },
  };
}

interface Endpoint {
  readonly ip: string;
  readonly port: number;
  /** The port's appProtocol (undefined: HTTP/1.1). */
  readonly appProtocol: string | undefined;
  readonly pod: string;
  readonly namespace: string;
  readonly node: string;
  /** Listed ready (else its containers run and it is not ready yet). */
  readonly ready: boolean;
  /** The path its HTTP readiness probe GETs on the routing port, when it has one. */
  readonly readinessPath: string | undefined;
}

function str(v: unknown): string {
  return typeof v === "string" ? v : "";
}

/** Every container of the pod has started and runs (not waiting, not terminated). */
function containersRunning(status: Record<string, unknown>): boolean {
  const list = Array.isArray(status.containerStatuses) ? status.containerStatuses : [];
  return list.length > 0 && list.every((cs) => isRecord(cs) && isRecord(cs.state) && isRecord(cs.state.running));
}

/** The path of an HTTP readiness probe on the routing port (by number or by its name). */
function readinessPathOf(c: Record<string, unknown>, port: number, portName: string): string | undefined {
  const probe = isRecord(c.readinessProbe) ? c.readinessProbe : undefined;
  const get = probe && isRecord(probe.httpGet) ? probe.httpGet : undefined;
  if (!get || (get.scheme !== undefined && get.scheme !== "HTTP")) return undefined;
  if (get.port !== port && !(portName !== "" && get.port === portName)) return undefined;
  const path = get.path === undefined ? "/" : str(get.path);
  return READINESS_PATH_RE.test(path) ? path : undefined;
}

/**
 * The endpoint of a pod: routable (RUNNING), or not ready yet (its containers run); undefined
 * with no IP, terminating, or not started.
 */
export function endpointOf(pod: KubeObject): Endpoint | undefined {
  if (pod.metadata.deletionTimestamp) return undefined;
  const status = isRecord(pod.status) ? pod.status : {};
  const ip = str(status.podIP);
  if (ip === "" || str(status.phase) !== "Running") return undefined;
  const ready = instanceStatusOf(pod) === InstanceStatus.RUNNING;
  if (!ready && !containersRunning(status)) return undefined;
  const spec = isRecord(pod.spec) ? pod.spec : {};
  const c = Array.isArray(spec.containers) && isRecord(spec.containers[0]) ? spec.containers[0] : {};
  const ports = Array.isArray(c.ports) ? c.ports : [];
  const first = isRecord(ports[0]) ? ports[0] : {};
  const port = typeof first.containerPort === "number" ? first.containerPort : 0;
  if (port === 0) return undefined;
  const appProtocol = appProtocolOf(appProtocolFrom(pod.metadata.labels?.[LABEL_APP_PROTOCOL] ?? ""));
  return {
    ip,
    port,
    appProtocol,
    pod: pod.metadata.name ?? "",
    namespace: pod.metadata.namespace ?? "",
    node: str(spec.nodeName),
    ready,
    readinessPath: readinessPathOf(c, port, str(first.name)),
  };
}

/** What of a pod its revision's slices show: a change re-renders them. */
export function podRoutingKey(pod: KubeObject | undefined): string {
  const e = pod === undefined ? undefined : endpointOf(pod);
  return e === undefined ? "" : `${e.ip}:${e.port}:${e.ready ? "ready" : "not-ready"}:${e.readinessPath ?? ""}`;
}

/**
 * The EndpointSlices of one revision from its pods (sorted by pod name, so the same pods always
 * render the same slices); none when the revision has no pod here.
 */
export function renderRevisionSlices(
  s: ApplySentinel,
  region: string,
  deploymentId: string,
  pods: readonly KubeObject[],
  zoneOf: (node: string) => string,
): KubeObject[] {
  if (pods.length === 0) return [];
  const all = pods.map(endpointOf).filter((e): e is Endpoint => e !== undefined);
  // Instances not ready yet are listed only while none of the revision is: only then can a
  // sentinel need them (requests held at zero), and a revision that serves writes no more than before.
  const endpoints = (all.some((e) => e.ready) ? all.filter((e) => e.ready) : all).sort((a, b) =>
    a.pod < b.pod ? -1 : a.pod > b.pod ? 1 : 0,
  );
  // The port of the revision (every pod of a revision has the same); 0 while none is routable.
  const port = endpoints[0]?.port;
  const appProtocol = endpoints[0]?.appProtocol;
  // Named only while an instance is not ready yet: then the sentinel may probe it.
  const readinessPath = endpoints.find((e) => !e.ready && e.readinessPath !== undefined)?.readinessPath;
  const chunks = Math.max(1, Math.ceil(endpoints.length / ENDPOINTS_PER_SLICE));
  const out: KubeObject[] = [];
  for (let c = 0; c < chunks; c++) {
    const part = endpoints.slice(c * ENDPOINTS_PER_SLICE, (c + 1) * ENDPOINTS_PER_SLICE);
    const slice: KubeObject = {
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: {
        name: routingSliceName(s.k8sName, deploymentId, c),
        namespace: SENTINEL_NAMESPACE,
        labels: {
          ...routingLabels(s, region),
          [LABEL_DEPLOYMENT_ID]: deploymentId,
          [ENDPOINTSLICE_MANAGED_BY_LABEL]: ENDPOINTSLICE_MANAGED_BY,
          [ENDPOINTSLICE_HEADLESS_LABEL]: "",
        },
      },
      addressType: "IPv4",
    };
    if (readinessPath !== undefined) slice.metadata.annotations = { [READINESS_PATH_ANNOTATION]: readinessPath };
    if (port !== undefined)
      slice.ports = [
        { name: ROUTING_PORT_NAME, port, protocol: "TCP", ...(appProtocol !== undefined ? { appProtocol } : {}) },
      ];
    // null, not []: no endpoint left must remove the list (drift.ts).
    slice.endpoints = null;
    if (part.length > 0) {
      slice.endpoints = part.map((e) => {
        const ep: Record<string, unknown> = {
          addresses: [e.ip],
          conditions: { ready: e.ready, serving: e.ready, terminating: false },
          targetRef: { kind: "Pod", namespace: e.namespace, name: e.pod },
        };
        if (e.node !== "") {
          ep.nodeName = e.node;
          const zone = zoneOf(e.node);
          if (zone !== "") ep.zone = zone;
        }
        return ep;
      });
    }
    out.push(slice);
  }
  return out;
}

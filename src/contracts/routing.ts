// The routing table: what the agent keeps in namespace `sentinel` for each environment, and what
// the environment's sentinels read. It lives in the cluster, so the data plane
// keeps routing with its last table while ctrl or the agent is down.
//
//  - Addresses: one EndpointSlice per (environment, revision), written by the agent from its own
//    pod cache (pod Ready → routable never waits for ctrl). It lists the revision's RUNNING pods
//    only; a pod that starts terminating leaves the slice before it stops serving.
//  - Policy: one ConfigMap per sentinel (environment and region), rendered from ctrl's sentinel
//    desired state: the routing mode and the weight per revision, with ctrl's routing version.
//
// The sentinel selects both by LABEL_ENVIRONMENT_ID and LABEL_REGION and never reads anything
// else. This file is the whole contract: names, labels and the policy document's shape.
//
// What the sentinel reads from a slice (everything else is ignored):
//  - LABEL_DEPLOYMENT_ID: the revision. A revision may have several slices (an EndpointSlice
//    holds at most 1,000 endpoints); the sentinel merges them.
//  - addressType IPv4 or IPv6; the port named ROUTING_PORT_NAME (else the only port). A slice
//    without endpoints may have no port.
//  - each endpoint's first address; `conditions.ready: false` is not routed (unset = ready, as
//    in Kubernetes). Terminating pods are left out of the slice, not marked.
// The API server refuses loopback addresses in EndpointSlices, which is why the local cluster
// gives pods addresses outside 127.0.0.0/8 (src/cluster/pod-network.ts).
import {
  COMPONENT,
  LABEL_COMPONENT,
  LABEL_ENVIRONMENT_ID,
  LABEL_MANAGED_BY,
  LABEL_REGION,
  MANAGED_BY,
} from "./labels.js";
import { edgePolicyJson, parseEdgePolicies, PolicyFieldError, type EdgePolicy } from "./edge-policy.js";
import { parseApiKeys, type CarriedApiKey } from "./api-keys.js";

/** LABEL_COMPONENT of routing-table objects (EndpointSlices and policy ConfigMaps). */
export const ROUTING_COMPONENT = COMPONENT.routing;
/** Marks the slices as ours so Kubernetes' EndpointSlice controllers leave them alone. */
export const ENDPOINTSLICE_MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by";
export const ENDPOINTSLICE_MANAGED_BY = "agent.krane.dev";
/** The key of the policy document in the policy ConfigMap. */
export const POLICY_KEY = "policy.json";
/**
 * On a revision's routing EndpointSlices: the path its instances' HTTP readiness probe GETs on the
 * routing port. Endpoints with `ready: false` (not terminating) are the revision's starting
 * instances; while requests are held at zero instances, the sentinel probes them on this path
 * itself and routes to the first that answers (src/sentinel/warm.ts). Absent: never probed.
 */
export const READINESS_PATH_ANNOTATION = "krane.dev/readiness-path";
/** A readiness path the sentinel accepts: absolute, printable ASCII, no spaces. */
export const READINESS_PATH_RE = /^\/[\x21-\x7E]{0,1023}$/;
/** The sentinel's HTTP/1.1 ops port: /healthz, /readyz, /metrics, /status. */
export const SENTINEL_OPS_PORT = 8041;
/**
 * The sentinel's port for its replicas' rate-limit exchange (src/sentinel/peers.ts): signed
 * messages only, never the public port. Named SENTINEL_PEER_PORT_NAME on the sentinel's Service,
 * whose EndpointSlices list the replicas.
 */
export const SENTINEL_PEER_PORT = 8043;
export const SENTINEL_PEER_PORT_NAME = "peers";

/** Endpoints per EndpointSlice (the API's limit is 1,000); larger revisions get several slices. */
export const ENDPOINTS_PER_SLICE = 1000;

/** The policy ConfigMap of a sentinel (named after its Deployment). */
export function routingPolicyName(sentinelName: string): string {
  return `${sentinelName}-routes`;
}

/** The `chunk`-th EndpointSlice of one revision served by a sentinel. */
export function routingSliceName(sentinelName: string, deploymentId: string, chunk: number): string {
  return `${sentinelName}-${deploymentId.toLowerCase().replace(/[^a-z0-9-]/g, "-")}-${chunk}`;
}

/** The label selector a sentinel of one environment in one region watches with. */
export function routingSelector(environmentId: string, region: string): string {
  return `${LABEL_MANAGED_BY}=${MANAGED_BY},${LABEL_COMPONENT}=${ROUTING_COMPONENT},${LABEL_ENVIRONMENT_ID}=${environmentId},${LABEL_REGION}=${region}`;
}

/**
 * How traffic is split between revisions.
 *  - "instances": like a Kubernetes Service: every RUNNING instance of every revision gets an
 *    equal share (the default, and what a rolling update needs).
 *  - "weighted": each revision gets `weight` percent; the weights of revisions with no routable
 *    instance go to the others in proportion (never to nothing).
 */
export type RoutingMode = "instances" | "weighted";

export interface RevisionWeight {
  readonly deploymentId: string;
  /** 0–100; the weights of a weighted policy add up to 100. */
  readonly weight: number;
}

export interface RoutingPolicy {
  /** ctrl's routing version of this environment: grows with every change of the policy. */
  readonly version: number;
  readonly environmentId: string;
  readonly mode: RoutingMode;
  readonly revisions: readonly RevisionWeight[];
  /** API authentication at the edge (absent: none). */
  readonly auth?: EdgeAuthPolicy;
  /**
   * Blue-green preview (absent: none): requests carrying PREVIEW_HEADER: PREVIEW_HEADER_VALUE go
   * to this revision only, whatever the weights. Sentinels that predate the field ignore it.
   */
  readonly preview?: string;
  /**
   * Scale to zero (absent: none): while the environment has no routable instance, a request is
   * held (at most `maxHeld` at a time on each sentinel pod, each up to `timeoutMs`) instead of
   * answered 503 at once, and the agent is told at once through SENTINEL_WAKE_PATH.
   */
  readonly hold?: HoldPolicy;
  /**
   * The environment's edge policies, in order (absent: none; ./edge-policy.ts). Carried with the
   * routing version, so the sentinels of a version all enforce the same list.
   */
  readonly policies?: readonly EdgePolicy[];
  /** The environment's API keys, hashed (absent: none; ./api-keys.ts), for "apikey" policies. */
  readonly apiKeys?: readonly CarriedApiKey[];
}

export interface HoldPolicy {
  /** Requests one sentinel pod holds at most (the environment's bound spread over its pods). */
  readonly maxHeld: number;
  /** A held request with no instance after this long is answered 503 with Retry-After. */
  readonly timeoutMs: number;
}

/** The header (lowercase) and value that reach a blue-green preview revision through the sentinel. */
export const PREVIEW_HEADER = "x-krane-preview";
export const PREVIEW_HEADER_VALUE = "1";

// ---------------------------------------------------------------- the auth section
// API authentication at the edge, enforced by the sentinel (src/sentinel/auth.ts). One rule per
// exposed address of the environment (its endpoints and custom domains), chosen by the request's
// Host (port ignored, case-insensitive). A rule with `jwt` validates bearer tokens against the
// JWKS; its operations (method + path template) say which scopes a request needs, and
// `defaultAction` what a request matching no operation gets.

export type AuthAction = "allow" | "deny";

export interface AuthOperationSpec {
  /** "GET", "POST", … or "*". */
  readonly method: string;
  /** A path template: literal segments and `{name}` segments (one segment each). */
  readonly path: string;
  readonly scopes: readonly string[];
}

export interface JwtSpec {
  readonly jwksUrl: string;
  /** "" when any issuer is accepted. */
  readonly issuer: string;
  readonly audiences: readonly string[];
}

export interface EdgeAuthRuleSpec {
  /** Lowercase hostnames. */
  readonly hosts: readonly string[];
  readonly jwt: JwtSpec | null;
  readonly operations: readonly AuthOperationSpec[];
  readonly defaultAction: AuthAction;
}

export interface EdgeAuthPolicy {
  readonly rules: readonly EdgeAuthRuleSpec[];
  /** What a request whose Host no rule names gets. */
  readonly unmatchedHosts: AuthAction;
}

export const AUTH_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "*"] as const;
/** A scope token (RFC 6749 §3.3: printable ASCII except space, '"' and '\\'). */
export const SCOPE_RE = /^[\x21\x23-\x5B\x5D-\x7E]{1,128}$/;
/** A path template: "/", or "/"-separated segments, each literal (RFC 3986 pchar) or {name}. */
export const PATH_TEMPLATE_RE = /^\/$|^(\/([A-Za-z0-9._~!$&'()*+,;=:@%-]+|\{[A-Za-z_][A-Za-z0-9_]*\}))+\/?$/;

/** Whether a JWKS URL is acceptable: https, or http on a loopback host (nothing to sniff there). */
export function jwksUrlProblem(url: string): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return "must be an absolute URL";
  }
  if (u.username !== "" || u.password !== "") return "must not carry credentials";
  if (u.hash !== "") return "must not have a fragment";
  if (u.protocol === "https:") return undefined;
  const host = u.hostname.replace(/^\[|\]$/g, "");
  if (u.protocol === "http:" && (host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host)))
    return undefined;
  return "must be https:// (http:// only on a loopback host)";
}

function fail(path: string, problem: string): never {
  throw new Error(`routing policy: ${path} ${problem}`);
}

function strings(path: string, v: unknown, check: (s: string) => boolean, what: string): string[] {
  if (!Array.isArray(v)) fail(path, "must be a list");
  return v.map((x: unknown, i) => {
    if (typeof x !== "string" || !check(x)) fail(`${path}[${i}]`, `must be ${what}`);
    return x;
  });
}

function action(path: string, v: unknown): AuthAction {
  if (v !== "allow" && v !== "deny") fail(path, 'must be "allow" or "deny"');
  return v;
}

/** Parses and checks the auth section; throws an Error naming the bad field. */
export function parseEdgeAuth(v: unknown): EdgeAuthPolicy {
  if (typeof v !== "object" || v === null || Array.isArray(v)) fail("auth", "is not an object");
  const o = v as Record<string, unknown>;
  if (!Array.isArray(o.rules)) fail("auth.rules", "must be a list");
  const seen = new Set<string>();
  const rules = o.rules.map((r: unknown, i): EdgeAuthRuleSpec => {
    const p = `auth.rules[${i}]`;
    if (typeof r !== "object" || r === null) fail(p, "is not an object");
    const rr = r as Record<string, unknown>;
    const hosts = strings(
      `${p}.hosts`,
      rr.hosts,
      (h) => /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(h) && h.length <= 253,
      "a lowercase hostname",
    );
    for (const h of hosts) {
      if (seen.has(h)) fail(`${p}.hosts`, `repeats ${h}`);
      seen.add(h);
    }
    let jwt: JwtSpec | null = null;
    if (rr.jwt !== null && rr.jwt !== undefined) {
      if (typeof rr.jwt !== "object" || Array.isArray(rr.jwt)) fail(`${p}.jwt`, "is not an object");
      const j = rr.jwt as Record<string, unknown>;
      if (typeof j.jwksUrl !== "string") fail(`${p}.jwt.jwksUrl`, "is required");
      const problem = jwksUrlProblem(j.jwksUrl);
      if (problem) fail(`${p}.jwt.jwksUrl`, problem);
      if (typeof j.issuer !== "string") fail(`${p}.jwt.issuer`, "must be a string");
      jwt = {
        jwksUrl: j.jwksUrl,
        issuer: j.issuer,
        audiences: strings(`${p}.jwt.audiences`, j.audiences, (a) => a !== "" && a.length <= 512, "a non-empty string"),
      };
    }
    if (!Array.isArray(rr.operations)) fail(`${p}.operations`, "must be a list");
    const operations = rr.operations.map((op: unknown, k): AuthOperationSpec => {
      const q = `${p}.operations[${k}]`;
      if (typeof op !== "object" || op === null) fail(q, "is not an object");
      const oo = op as Record<string, unknown>;
      if (typeof oo.method !== "string" || !(AUTH_METHODS as readonly string[]).includes(oo.method))
        fail(`${q}.method`, `must be one of ${AUTH_METHODS.join(", ")}`);
      if (typeof oo.path !== "string" || !PATH_TEMPLATE_RE.test(oo.path))
        fail(`${q}.path`, "must be a path template such as /books/{id}");
      return {
        method: oo.method,
        path: oo.path,
        scopes: strings(`${q}.scopes`, oo.scopes, (s) => SCOPE_RE.test(s), "a scope token"),
      };
    });
    if (operations.length > 0 && jwt === null) fail(`${p}.operations`, "need jwt");
    return { hosts, jwt, operations, defaultAction: action(`${p}.defaultAction`, rr.defaultAction) };
  });
  return { rules, unmatchedHosts: action("auth.unmatchedHosts", o.unmatchedHosts) };
}

/** The policy a sentinel routes by until its policy ConfigMap has been read. */
export function defaultRoutingPolicy(environmentId: string): RoutingPolicy {
  return { version: 0, environmentId, mode: "instances", revisions: [] };
}

/** Parses and checks a policy document; throws an Error naming the bad field. */
export function parseRoutingPolicy(text: string): RoutingPolicy {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (err) {
    throw new Error(`routing policy: not JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new Error("routing policy: not an object");
  const o = v as Record<string, unknown>;
  const version = o.version;
  if (typeof version !== "number" || !Number.isSafeInteger(version) || version < 0)
    throw new Error("routing policy: version must be a non-negative integer");
  if (typeof o.environmentId !== "string" || o.environmentId === "")
    throw new Error("routing policy: environmentId is required");
  if (o.mode !== "instances" && o.mode !== "weighted")
    throw new Error('routing policy: mode must be "instances" or "weighted"');
  if (!Array.isArray(o.revisions)) throw new Error("routing policy: revisions must be a list");
  const revisions: RevisionWeight[] = [];
  const seen = new Set<string>();
  o.revisions.forEach((r: unknown, i) => {
    if (typeof r !== "object" || r === null) throw new Error(`routing policy: revisions[${i}] is not an object`);
    const { deploymentId, weight } = r as Record<string, unknown>;
    if (typeof deploymentId !== "string" || deploymentId === "")
      throw new Error(`routing policy: revisions[${i}].deploymentId is required`);
    if (seen.has(deploymentId)) throw new Error(`routing policy: revisions[${i}].deploymentId is repeated`);
    seen.add(deploymentId);
    if (typeof weight !== "number" || !Number.isInteger(weight) || weight < 0 || weight > 100) {
      throw new Error(`routing policy: revisions[${i}].weight must be an integer 0–100`);
    }
    revisions.push({ deploymentId, weight });
  });
  if (o.mode === "weighted") {
    const sum = revisions.reduce((s, r) => s + r.weight, 0);
    if (sum !== 100) throw new Error(`routing policy: weights add up to ${sum}, not 100`);
  }
  const auth = o.auth === undefined || o.auth === null ? undefined : parseEdgeAuth(o.auth);
  if (o.preview !== undefined && o.preview !== null && (typeof o.preview !== "string" || o.preview === ""))
    throw new Error("routing policy: preview must be a deployment id");
  const preview = typeof o.preview === "string" ? o.preview : undefined;
  let hold: HoldPolicy | undefined;
  if (o.hold !== undefined && o.hold !== null) {
    if (typeof o.hold !== "object" || Array.isArray(o.hold)) throw new Error("routing policy: hold is not an object");
    const { maxHeld, timeoutMs } = o.hold as Record<string, unknown>;
    if (typeof maxHeld !== "number" || !Number.isInteger(maxHeld) || maxHeld < 1 || maxHeld > 100_000)
      throw new Error("routing policy: hold.maxHeld must be an integer 1–100000");
    if (typeof timeoutMs !== "number" || !Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 600_000)
      throw new Error("routing policy: hold.timeoutMs must be an integer 1–600000");
    hold = { maxHeld, timeoutMs };
  }
  let policies: EdgePolicy[] | undefined;
  let apiKeys: CarriedApiKey[] | undefined;
  if (o.policies !== undefined && o.policies !== null) {
    try {
      policies = parseEdgePolicies("policies", o.policies);
      if (o.apiKeys !== undefined && o.apiKeys !== null) apiKeys = parseApiKeys("apiKeys", o.apiKeys);
    } catch (err) {
      if (err instanceof PolicyFieldError) throw new Error(`routing policy: ${err.message}`);
      throw err;
    }
  }
  return {
    version,
    environmentId: o.environmentId,
    mode: o.mode,
    revisions,
    ...(auth ? { auth } : {}),
    ...(preview !== undefined ? { preview } : {}),
    ...(hold ? { hold } : {}),
    ...(policies && policies.length > 0 ? { policies } : {}),
    ...(apiKeys && apiKeys.length > 0 ? { apiKeys } : {}),
  };
}

export function formatRoutingPolicy(p: RoutingPolicy): string {
  return JSON.stringify({
    version: p.version,
    environmentId: p.environmentId,
    mode: p.mode,
    revisions: p.revisions,
    ...(p.auth ? { auth: p.auth } : {}),
    ...(p.preview !== undefined ? { preview: p.preview } : {}),
    ...(p.hold ? { hold: p.hold } : {}),
    ...(p.policies && p.policies.length > 0 ? { policies: p.policies.map(edgePolicyJson) } : {}),
    ...(p.apiKeys && p.apiKeys.length > 0 ? { apiKeys: p.apiKeys } : {}),
  });
}

/** The revision label of requests the sentinel answered itself (no revision served them). */
export const NO_REVISION = "none";

/** The sentinel's Prometheus metric names the agent reads back for rollout analysis. */
export const SENTINEL_METRICS = {
  requests: "krane_sentinel_requests_total",
  duration: "krane_sentinel_request_duration_seconds",
  upstreamConnectErrors: "krane_sentinel_upstream_connect_errors_total",
  ejections: "krane_sentinel_ejections_total",
  routingVersion: "krane_sentinel_routing_version",
  /** The same as requests and duration, per instance (labels revision, instance): what served it. */
  instanceRequests: "krane_sentinel_instance_requests_total",
  instanceDuration: "krane_sentinel_instance_request_duration_seconds",
} as const;

/**
 * The key of an instance's request figures (revision, tab, pod name: neither holds a tab), as the
 * sentinel keeps them and the agent reads them back.
 */
export function instanceSeriesKey(revision: string, pod: string): string {
  return `${revision}\t${pod}`;
}

/** One revision as a sentinel routes it (part of SentinelStatus). */
export interface SentinelRevisionStatus {
  readonly deploymentId: string;
  /** The policy's weight (weighted mode), or null when the policy does not name the revision. */
  readonly weight: number | null;
  /** Percent of new requests this revision gets now (0–100, after renormalisation). */
  readonly share: number;
  /** Endpoints in the slices, and those routable now (ready and not ejected). */
  readonly endpoints: number;
  readonly routable: number;
  readonly ejected: number;
  /**
   * Requests in flight to its instances now (the balancer's per-instance count, added up): what
   * the region's autoscaler judges this revision by. Absent from sentinels older than autoscaling.
   */
  readonly inFlight?: number;
}

/** GET SENTINEL_STATUS_PATH on the ops port. */
export interface SentinelStatus {
  readonly environmentId: string;
  readonly region: string;
  /** Ready: both caches synced and a valid policy read; false while draining. */
  readonly ready: boolean;
  readonly draining: boolean;
  /** The policy version served (0 before any policy was read). */
  readonly routingVersion: number;
  readonly mode: RoutingMode;
  readonly revisions: readonly SentinelRevisionStatus[];
  /** Why the last policy ConfigMap was refused, if it was. */
  readonly policyError: string | null;
  /** False while the watches of the API server fail (the last table keeps being served). */
  readonly kubeConnected: boolean;
  /** ISO time of the last change of the table. */
  readonly tableUpdatedAt: string | null;
  readonly inFlight: number;
  /**
   * ISO time the last request reached this sentinel (null: none since it started): what
   * scale-to-zero's idle window is measured from. Absent from sentinels older than autoscaling.
   */
  readonly lastRequestAt?: string | null;
  /** Requests held now because no instance is routable (scale to zero). Absent: an older sentinel. */
  readonly held?: number;
  /**
   * The rate-limit exchange (absent: off): addresses listed on the sentinel's Service, and the
   * peers heard recently, which share the environment's budgets with this one.
   */
  readonly peers?: { readonly targets: number; readonly live: readonly string[] };
}

/**
 * The wake long-poll on the ops port: `GET SENTINEL_WAKE_PATH?after=N` answers as soon as the
 * sentinel's wake count differs from N (a request was held with no routable instance), or after
 * about WAKE_POLL_MS with the count unchanged. The agent keeps one open to each sentinel pod of
 * an environment that scales to zero, so a held request starts the scale-up at once, and the
 * sentinel needs no write rights for it.
 */
export const SENTINEL_WAKE_PATH = "/wake";
export const WAKE_POLL_MS = 25_000;

/** The wake long-poll's answer. */
export interface SentinelWake {
  /** Grows by one each time a request is held while none was (the start of a cold start). */
  readonly wakes: number;
  /** Requests held now. */
  readonly held: number;
}

/** The slice port the sentinel dials. */
export const ROUTING_PORT_NAME = "http";
/** Keeps kube-proxy away from the slices: they belong to no Service, and kube-proxy must not program them. */
export const ENDPOINTSLICE_HEADLESS_LABEL = "service.kubernetes.io/headless";
/** Also answered on the proxy port itself (never proxied), for probes on SENTINEL_PORT. */
export const SENTINEL_LIVE_PATH = "/_krane/live";
export const SENTINEL_READY_PATH = "/_krane/ready";
/** The ops port's JSON status document (SentinelStatus), which the agent reads. */
export const SENTINEL_STATUS_PATH = "/status";

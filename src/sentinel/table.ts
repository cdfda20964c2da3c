// The routing table a sentinel serves, built from what its caches hold: the environment's
// EndpointSlices (one or more per revision) and its policy ConfigMap (src/contracts/routing.ts).
// Pure: objects in, table and the problems found out. A bad slice or endpoint is skipped with a
// problem, never allowed to take the rest of the table down; a bad policy keeps the last good one
// (the caller decides, readPolicy only says what it found).
import { isIP } from "node:net";
import { LABEL_DEPLOYMENT_ID } from "../contracts/labels.js";
import {
  POLICY_KEY,
  READINESS_PATH_ANNOTATION,
  READINESS_PATH_RE,
  ROUTING_PORT_NAME,
  parseRoutingPolicy,
  type RoutingMode,
  type RoutingPolicy,
} from "../contracts/routing.js";
import { isRecord, type KubeObject } from "../kube/object.js";
import { mapAddress, type AddressMapping } from "../contracts/address-map.js";
import { APP_PROTOCOL_H2C } from "../contracts/protocols.js";

export interface Endpoint {
  /** "address:port" as the slice says: the identity used for health and load. */
  readonly key: string;
  readonly address: string;
  readonly port: number;
  /** Where to connect (the address, or its local alias; see address-map.ts). */
  readonly dialHost: string;
  readonly deploymentId: string;
  readonly pod: string | undefined;
  /** What the instance speaks: HTTP/2 with prior knowledge when the slice port's appProtocol says h2c. */
  readonly protocol: UpstreamProtocol;
}

export type UpstreamProtocol = "http1" | "h2c";

export interface RevisionRoute {
  readonly deploymentId: string;
  /** The policy's weight for this revision; null when the policy does not name it. */
  readonly weight: number | null;
  readonly endpoints: readonly Endpoint[];
  /** Instances listed as not ready yet and not terminating (scale to zero probes them: ./warm.ts). */
  readonly starting?: readonly Endpoint[];
  /** The path the revision's readiness probe GETs (READINESS_PATH_ANNOTATION), when known. */
  readonly readinessPath?: string;
}

export interface RoutingTable {
  readonly version: number;
  readonly mode: RoutingMode;
  /** Sorted by deployment id; includes revisions the policy names that have no endpoints. */
  readonly revisions: readonly RevisionRoute[];
  /** Blue-green preview: the revision requests with PREVIEW_HEADER go to (absent: none). */
  readonly preview?: string;
}

export interface PolicyRead {
  readonly policy: RoutingPolicy | undefined;
  /** Why a ConfigMap was refused (undefined when all were fine). */
  readonly error: string | undefined;
}

function objName(o: KubeObject): string {
  return `${o.metadata.namespace ?? ""}/${o.metadata.name ?? ""}`;
}

/**
 * The policy to route by: the valid policy document with the highest version among the
 * ConfigMaps (normally exactly one), for this environment only.
 */
export function readPolicy(configMaps: readonly KubeObject[], environmentId: string): PolicyRead {
  let best: RoutingPolicy | undefined;
  const errors: string[] = [];
  for (const cm of configMaps) {
    const data = isRecord(cm.data) ? cm.data : {};
    const text = data[POLICY_KEY];
    if (typeof text !== "string") {
      errors.push(`ConfigMap ${objName(cm)}: no ${POLICY_KEY} key`);
      continue;
    }
    let p: RoutingPolicy;
    try {
      p = parseRoutingPolicy(text);
    } catch (err) {
      errors.push(`ConfigMap ${objName(cm)}: ${err instanceof Error ? err.message : String(err)}`);
      continue;
    }
    if (p.environmentId !== environmentId) {
      errors.push(`ConfigMap ${objName(cm)}: policy is for environment ${p.environmentId}, not ${environmentId}`);
      continue;
    }
    if (!best || p.version > best.version) best = p;
  }
  return { policy: best, error: errors.length > 0 ? errors.join("; ") : undefined };
}

interface SlicePort {
  readonly name?: unknown;
  readonly port?: unknown;
  readonly protocol?: unknown;
  readonly appProtocol?: unknown;
}

function slicePort(ports: unknown): { port: number; protocol: UpstreamProtocol } | undefined {
  if (!Array.isArray(ports) || ports.length === 0) return undefined;
  const list = ports.filter(isRecord) as SlicePort[];
  const named = list.find((p) => p.name === ROUTING_PORT_NAME) ?? (list.length === 1 ? list[0] : undefined);
  if (!named || (named.protocol !== undefined && named.protocol !== "TCP")) return undefined;
  const port = named.port;
  if (typeof port !== "number" || !Number.isInteger(port) || port <= 0 || port >= 65_536) return undefined;
  // Any other appProtocol (or none) is spoken to in HTTP/1.1, as before the field was read.
  return { port, protocol: named.appProtocol === APP_PROTOCOL_H2C ? "h2c" : "http1" };
}

/** Builds the table from the slices in the cache and the policy in force. */
export function buildTable(
  slices: readonly KubeObject[],
  policy: RoutingPolicy,
  addressMap?: AddressMapping,
): { table: RoutingTable; problems: string[] } {
  const problems: string[] = [];
  const byRevision = new Map<string, Map<string, Endpoint>>();
  const startingByRevision = new Map<string, Map<string, Endpoint>>();
  const readinessPaths = new Map<string, string>();
  const owner = new Map<string, string>();
  for (const slice of [...slices].sort((a, b) => objName(a).localeCompare(objName(b)))) {
    const labels = slice.metadata.labels ?? {};
    const deploymentId = labels[LABEL_DEPLOYMENT_ID];
    if (!deploymentId) {
      problems.push(`EndpointSlice ${objName(slice)}: no ${LABEL_DEPLOYMENT_ID} label`);
      continue;
    }
    const addressType = slice.addressType;
    if (addressType !== "IPv4" && addressType !== "IPv6") {
      problems.push(`EndpointSlice ${objName(slice)}: addressType ${String(addressType)} is not routed`);
      continue;
    }
    let eps = byRevision.get(deploymentId);
    if (!eps) byRevision.set(deploymentId, (eps = new Map()));
    let starting = startingByRevision.get(deploymentId);
    if (!starting) startingByRevision.set(deploymentId, (starting = new Map()));
    const readinessPath = slice.metadata.annotations?.[READINESS_PATH_ANNOTATION];
    if (readinessPath !== undefined) {
      if (READINESS_PATH_RE.test(readinessPath)) {
        if (!readinessPaths.has(deploymentId)) readinessPaths.set(deploymentId, readinessPath);
      } else problems.push(`EndpointSlice ${objName(slice)}: ${READINESS_PATH_ANNOTATION} is not a path`);
    }
    const endpoints = Array.isArray(slice.endpoints) ? slice.endpoints : [];
    if (endpoints.length === 0) continue; // an empty slice (it may carry no port): nothing to route
    const sp = slicePort(slice.ports);
    if (sp === undefined) {
      problems.push(`EndpointSlice ${objName(slice)}: no TCP port named "${ROUTING_PORT_NAME}"`);
      continue;
    }
    const { port, protocol } = sp;
    for (const raw of endpoints) {
      if (!isRecord(raw)) continue;
      const conditions = isRecord(raw.conditions) ? raw.conditions : {};
      // Not ready: routed only if it is starting (not terminating) and the sentinel finds it
      // answering while requests are held (./warm.ts).
      const notReady = conditions.ready === false;
      if (notReady && conditions.terminating === true) continue;
      const address = Array.isArray(raw.addresses) ? raw.addresses[0] : undefined;
      if (typeof address !== "string" || isIP(address) === 0) {
        problems.push(`EndpointSlice ${objName(slice)}: endpoint address ${String(address)} is not an IP`);
        continue;
      }
      const key = isIP(address) === 6 ? `[${address}]:${port}` : `${address}:${port}`;
      const other = owner.get(key);
      if (other !== undefined && other !== deploymentId) {
        problems.push(`endpoint ${key} is listed for revisions ${other} and ${deploymentId}; kept in ${other}`);
        continue;
      }
      if (other !== undefined) continue; // listed twice for the same revision: the first one counts
      owner.set(key, deploymentId);
      const targetRef = isRecord(raw.targetRef) ? raw.targetRef : {};
      (notReady ? starting : eps).set(key, {
        key,
        address,
        port,
        dialHost: mapAddress(address, addressMap),
        deploymentId,
        pod: typeof targetRef.name === "string" ? targetRef.name : undefined,
        protocol,
      });
    }
  }
  const weights = new Map(policy.revisions.map((r) => [r.deploymentId, r.weight]));
  const ids = new Set([...byRevision.keys(), ...weights.keys()]);
  const sorted = (m: Map<string, Endpoint> | undefined): Endpoint[] =>
    [...(m?.values() ?? [])].sort((a, b) => a.key.localeCompare(b.key));
  const revisions: RevisionRoute[] = [...ids].sort().map((deploymentId) => {
    const starting = sorted(startingByRevision.get(deploymentId));
    const readinessPath = readinessPaths.get(deploymentId);
    return {
      deploymentId,
      weight: weights.get(deploymentId) ?? null,
      endpoints: sorted(byRevision.get(deploymentId)),
      ...(starting.length > 0 ? { starting } : {}),
      ...(readinessPath !== undefined ? { readinessPath } : {}),
    };
  });
  return {
    table: {
      version: policy.version,
      mode: policy.mode,
      revisions,
      ...(policy.preview !== undefined ? { preview: policy.preview } : {}),
    },
    problems,
  };
}

/** Total endpoints of a table. */
export function endpointCount(t: RoutingTable): number {
  return t.revisions.reduce((n, r) => n + r.endpoints.length, 0);
}

/**
 * The table with the starting instances named in `keys` routable (the sentinel found them
 * answering their readiness path: ./warm.ts). Pure; the table itself when none is named.
 */
export function promote(t: RoutingTable, keys: ReadonlySet<string>): RoutingTable {
  if (keys.size === 0) return t;
  let changed = false;
  const revisions = t.revisions.map((r) => {
    const up = (r.starting ?? []).filter((e) => keys.has(e.key));
    if (up.length === 0) return r;
    changed = true;
    const starting = (r.starting ?? []).filter((e) => !keys.has(e.key));
    const { starting: _, ...rest } = r;
    return {
      ...rest,
      endpoints: [...r.endpoints, ...up].sort((a, b) => a.key.localeCompare(b.key)),
      ...(starting.length > 0 ? { starting } : {}),
    };
  });
  return changed ? { ...t, revisions } : t;
}

/** Every starting instance's key. */
export function startingKeys(t: RoutingTable): Set<string> {
  return new Set(t.revisions.flatMap((r) => (r.starting ?? []).map((e) => e.key)));
}

// What the agent's shared caches keep of each object: only the fields some controller kind
// reads (client-go's cache transforms do the same). Pods and Nodes are where the memory goes —
// a Pod's full JSON is several KiB of spec defaults, managedFields and status that krane never
// looks at — and both are only observed, never rendered, so they are cut down to a few fields.
// Objects krane renders keep their whole spec (drift detection compares the rendered fields
// with them) and lose only managedFields and the status nobody reads.
//
// When a kind starts reading a field that is cut here, add it here: the informer cannot give a
// reader what its transform dropped. Readers today:
//   Pod:  status → instances (deployments/status.ts), routing table (endpoints);
//   Node: the zone label (deployments/status.ts, endpoints);
//   ReplicaSet, CiliumNetworkPolicy, Service: drift (rendered fields only);
//   Deployment: drift, and status.availableReplicas for sentinel health (sentinels/status.ts);
//   CronJob, Job: drift, and status (last schedule, start, completion, result) for cron job runs (jobs/).
//   HTTPRoute, Certificate: drift, and their status conditions (gateways/status.ts).
import type { KubeObject, ObjectMeta } from "../../kube/object.js";
import { isRecord } from "../../kube/object.js";
import type { ResourceType } from "../../kube/resources.js";

type Json = Record<string, unknown>;

function meta(m: ObjectMeta, keepAnnotations: boolean): ObjectMeta {
  const out: ObjectMeta = { name: m.name, resourceVersion: m.resourceVersion };
  if (m.namespace !== undefined) out.namespace = m.namespace;
  if (m.uid !== undefined) out.uid = m.uid;
  if (m.labels !== undefined) out.labels = m.labels;
  if (m.deletionTimestamp !== undefined) out.deletionTimestamp = m.deletionTimestamp;
  if (keepAnnotations) {
    if (m.generation !== undefined) out.generation = m.generation;
    if (m.ownerReferences !== undefined) out.ownerReferences = m.ownerReferences;
    if (m.annotations !== undefined) {
      const { "kubectl.kubernetes.io/last-applied-configuration": _lastApplied, ...rest } = m.annotations;
      out.annotations = rest;
    }
  }
  return out;
}

function pick(o: unknown, keys: readonly string[]): Json | undefined {
  if (!isRecord(o)) return undefined;
  const out: Json = {};
  for (const k of keys) if (o[k] !== undefined) out[k] = o[k];
  return out;
}

function list(o: unknown, f: (x: unknown) => Json | undefined): Json[] | undefined {
  if (!Array.isArray(o)) return undefined;
  const out: Json[] = [];
  for (const x of o) {
    const v = f(x);
    if (v) out.push(v);
  }
  return out;
}

function trimPod(p: KubeObject): KubeObject {
  const spec = isRecord(p.spec) ? p.spec : {};
  const status = isRecord(p.status) ? p.status : {};
  return {
    apiVersion: p.apiVersion,
    kind: p.kind,
    metadata: meta(p.metadata, false),
    spec: {
      nodeName: spec.nodeName,
      containers: list(spec.containers, (c) => {
        const out = pick(c, ["name"]);
        if (!out || !isRecord(c)) return out;
        const ports = list(c.ports, (x) => pick(x, ["name", "containerPort", "protocol"]));
        if (ports) out.ports = ports;
        const limits = isRecord(c.resources) ? c.resources.limits : undefined;
        if (isRecord(limits)) out.resources = { limits: pick(limits, ["cpu", "memory"]) };
        return out;
      }),
    },
    status: {
      phase: status.phase,
      podIP: status.podIP,
      conditions: list(status.conditions, (c) => pick(c, ["type", "status", "lastTransitionTime"])),
      containerStatuses: list(status.containerStatuses, (c) => {
        const out = pick(c, ["name", "ready"]);
        const waiting = isRecord(c) && isRecord(c.state) ? pick(c.state.waiting, ["reason"]) : undefined;
        if (out && waiting) out.state = { waiting };
        return out;
      }),
    },
  };
}

function trimNode(n: KubeObject): KubeObject {
  return { apiVersion: n.apiVersion, kind: n.kind, metadata: meta(n.metadata, false) };
}

/** Rendered kinds: everything krane may have set, without managedFields (and status unless read). */
function trimRendered(keepStatus: boolean): (o: KubeObject) => KubeObject {
  return (o) => {
    const { metadata, status, ...rest } = o;
    const out: KubeObject = { ...rest, metadata: meta(metadata, true) };
    if (keepStatus && status !== undefined) out.status = status;
    return out;
  };
}

/** The transform for a cached resource type. */
export function trimFor(r: ResourceType): (o: KubeObject) => KubeObject {
  if (r.group === "" && r.kind === "Pod") return trimPod;
  if (r.group === "" && r.kind === "Node") return trimNode;
  // Deployment status carries availableReplicas (sentinel health); Job and CronJob status the
  // runs a cron job reports (agent/jobs); HTTPRoute and Certificate status the conditions the
  // gateway kind reports; the others' status is unread.
  return trimRendered(
    (r.group === "apps" && r.kind === "Deployment") ||
      (r.group === "batch" && (r.kind === "Job" || r.kind === "CronJob")) ||
      (r.group === "gateway.networking.k8s.io" && r.kind === "HTTPRoute") ||
      (r.group === "cert-manager.io" && r.kind === "Certificate"),
  );
}

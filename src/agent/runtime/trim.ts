// What the agent's shared caches keep of each object: only the fields some controller kind
// reads (client-go's cache transforms do the same). Pods and Nodes are where the memory goes —
// a Pod's full JSON is several KiB of spec defaults, managedFields and status that krane never
// looks at — and both are only observed, never rendered, so they are cut down to a few fields.
// Objects krane renders keep their whole spec (drift detection compares the rendered fields
// with them) and lose only managedFields and the status nobody reads.
//
// Objects of a release (component=release) are kept whole, whatever their kind: see trimFor.
//
// When a kind starts reading a field that is cut here, add it here: the informer cannot give a
// reader what its transform dropped. Readers today:
//   Pod:  status → instances (deployments/status.ts), routing table (endpoints): the phase,
//         podIP, the Ready and ContainersReady conditions, containers' waiting reasons, the
//         first container's ports and limits, nodeName, labels; instance events
//         (deployments/events.ts): each container's image, restart count, ready and started,
//         its state and last state (reasons, exit code, times, messages cut to 512 characters),
//         and the pod's reason and message (an eviction);
//   Node: the zone label (deployments/status.ts, endpoints);
//   ReplicaSet, CiliumNetworkPolicy, Service: drift (rendered fields only);
//   Deployment: drift, and status.availableReplicas for sentinel health (sentinels/status.ts);
//   CronJob, Job: drift, and status (last schedule, start, completion, result) for cron job runs (jobs/).
//   HTTPRoute, Certificate: drift, and their status conditions (gateways/status.ts);
//   Gateway: drift, and its listeners' status conditions (gateways/status.ts).
//   Event (Warning events about pods only, resources.podWarningEvents): the pod it is about, its
//         reason, and for the reasons in POD_START_FAILURES the message and first time
//         (deployments/events.ts: why a pod does not start); other events keep only their reason.
//
// Strings repeat across thousands of cached objects (label values, images, env names, node
// names, condition types, timestamps of pods started in the same second): every kept string
// that is not unique to its object is interned, so each distinct value is held once.
import { COMPONENT, LABEL_COMPONENT } from "../../contracts/labels.js";
import type { KubeObject, ObjectMeta } from "../../kube/object.js";
import { isRecord } from "../../kube/object.js";
import type { ResourceType } from "../../kube/resources.js";

type Json = Record<string, unknown>;

/** The kubelet's messages are cut to this many characters (they can quote registry answers). */
export const MESSAGE_MAX = 512;

/** A kubelet message as kept and reported: control characters as spaces, at most MESSAGE_MAX. */
export function cutMessage(s: string): string {
  // eslint-disable-next-line no-control-regex
  const clean = s.replace(/[\u0000-\u001f\u007f]/g, " ");
  return clean.length <= MESSAGE_MAX ? clean : `${clean.slice(0, MESSAGE_MAX - 1)}…`;
}

/**
 * One copy of each repeated string. Bounded: when it holds too many distinct strings it starts
 * afresh (values already cached keep their copies; only later ones share anew), so strings of
 * objects long gone are not kept forever.
 */
const INTERN_MAX = 200_000;
let interned = new Map<string, string>();

export function intern(s: string): string {
  const got = interned.get(s);
  if (got !== undefined) return got;
  if (interned.size >= INTERN_MAX) interned = new Map();
  interned.set(s, s);
  return s;
}

function internValue(v: unknown): unknown {
  return typeof v === "string" ? intern(v) : v;
}

/** Interns every string of a JSON value in place (keys are already shared by V8). */
function internDeep(v: unknown): unknown {
  if (typeof v === "string") return intern(v);
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) v[i] = internDeep(v[i]);
  } else if (isRecord(v)) {
    for (const k in v) v[k] = internDeep(v[k]);
  }
  return v;
}

function internLabels(l: Record<string, string> | undefined): Record<string, string> | undefined {
  if (l === undefined) return undefined;
  for (const k in l) l[k] = intern(l[k] as string);
  return l;
}

/**
 * Metadata kept for every cached object: what identifies it, its labels, and for rendered kinds
 * (`full`) what drift and owner references read. The uid is kept only there (the sentinel's
 * Service is owned by its Deployment); nothing reads a pod's or node's uid.
 */
function meta(m: ObjectMeta, full: boolean): ObjectMeta {
  const out: ObjectMeta = { name: m.name, resourceVersion: m.resourceVersion };
  if (m.namespace !== undefined) out.namespace = intern(m.namespace);
  if (full && m.uid !== undefined) out.uid = m.uid;
  if (m.labels !== undefined) out.labels = internLabels(m.labels);
  if (m.deletionTimestamp !== undefined) out.deletionTimestamp = m.deletionTimestamp;
  if (full) {
    if (m.generation !== undefined) out.generation = m.generation;
    if (m.ownerReferences !== undefined) out.ownerReferences = m.ownerReferences;
    if (m.annotations !== undefined) {
      const { "kubectl.kubernetes.io/last-applied-configuration": _lastApplied, ...rest } = m.annotations;
      out.annotations = internLabels(rest);
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

/** The pod conditions a reader looks at (instances: ContainersReady; ready since: Ready). */
const POD_CONDITIONS = new Set(["Ready", "ContainersReady"]);

function trimPod(p: KubeObject): KubeObject {
  const spec = isRecord(p.spec) ? p.spec : {};
  const status = isRecord(p.status) ? p.status : {};
  const conditions = Array.isArray(status.conditions)
    ? status.conditions.filter((c) => isRecord(c) && POD_CONDITIONS.has(c.type as string))
    : undefined;
  return {
    apiVersion: p.apiVersion === undefined ? undefined : intern(p.apiVersion),
    kind: p.kind === undefined ? undefined : intern(p.kind),
    metadata: meta(p.metadata, false),
    spec: {
      nodeName: internValue(spec.nodeName),
      containers: list(spec.containers, (c) => {
        if (!isRecord(c)) return undefined;
        const out: Json = {};
        const ports = list(
          c.ports,
          (x) => internDeep(pick(x, ["name", "containerPort", "protocol"])) as Json | undefined,
        );
        if (ports) out.ports = ports;
        const limits = isRecord(c.resources) ? c.resources.limits : undefined;
        if (isRecord(limits)) out.resources = { limits: internDeep(pick(limits, ["cpu", "memory"])) };
        return out;
      }),
    },
    status: {
      phase: internValue(status.phase),
      podIP: status.podIP,
      conditions: list(
        conditions,
        (c) => internDeep(pick(c, ["type", "status", "lastTransitionTime"])) as Json | undefined,
      ),
      // One entry per container: what instances (the waiting reason) and instance events read.
      containerStatuses: list(status.containerStatuses, trimContainerStatus),
      // An eviction (instance events).
      ...(status.reason === undefined ? {} : { reason: internValue(status.reason) }),
      ...(typeof status.message === "string" ? { message: cutMessage(status.message) } : {}),
    },
  };
}

/** A container state's fields read by instances and instance events (deployments/events.ts). */
function trimState(s: unknown): Json | undefined {
  if (!isRecord(s)) return undefined;
  const out: Json = {};
  const pickState = (x: unknown, keys: readonly string[]): Json | undefined => {
    const p = pick(x, keys);
    if (p && typeof p.message === "string") p.message = cutMessage(p.message);
    return p ? (internDeep(p) as Json) : undefined;
  };
  const waiting = pickState(s.waiting, ["reason", "message"]);
  const running = pickState(s.running, ["startedAt"]);
  const terminated = pickState(s.terminated, ["reason", "exitCode", "finishedAt", "message"]);
  if (waiting) out.waiting = waiting;
  if (running) out.running = running;
  if (terminated) out.terminated = terminated;
  return out;
}

function trimContainerStatus(c: unknown): Json | undefined {
  if (!isRecord(c)) return {};
  const out: Json = {};
  const state = trimState(c.state);
  const lastState = trimState(c.lastState);
  if (state) out.state = state;
  if (lastState && Object.keys(lastState).length > 0) out.lastState = lastState;
  for (const k of ["image", "restartCount", "ready", "started"] as const) {
    if (c[k] !== undefined) out[k] = internValue(c[k]);
  }
  return out;
}

/**
 * Warning events that say why a pod cannot start where its status cannot: a volume the kubelet
 * cannot mount (an external secret the store refuses, a store that does not answer), and the
 * Secrets Store CSI driver failing to sync a pod's Secret from what it mounted.
 */
export const POD_START_FAILURES: ReadonlySet<string> = new Set(["FailedMount", "FailedToCreateSecret"]);

function trimEvent(e: KubeObject): KubeObject {
  const o = e as KubeObject & Json;
  const involved = isRecord(o.involvedObject) ? o.involvedObject : {};
  const reason = typeof o.reason === "string" ? intern(o.reason) : "";
  const out: Json = {
    apiVersion: e.apiVersion,
    kind: e.kind,
    metadata: { name: e.metadata.name, namespace: e.metadata.namespace, resourceVersion: e.metadata.resourceVersion },
    involvedObject: { name: involved.name, uid: involved.uid },
    reason,
  };
  if (POD_START_FAILURES.has(reason)) {
    out.message = cutMessage(typeof o.message === "string" ? o.message : "");
    // Events written with the newer API carry eventTime and no firstTimestamp.
    out.firstTimestamp = o.firstTimestamp ?? o.eventTime;
  }
  return out as KubeObject;
}

function trimNode(n: KubeObject): KubeObject {
  return { apiVersion: n.apiVersion, kind: n.kind, metadata: meta(n.metadata, false) };
}

/** Rendered kinds: everything krane may have set, without managedFields (and status unless read). */
function trimRendered(keepStatus: boolean): (o: KubeObject) => KubeObject {
  return (o) => {
    const { metadata, status, ...rest } = o;
    const out: KubeObject = { ...(internDeep(rest) as Json), metadata: meta(metadata, true) };
    if (keepStatus && status !== undefined) out.status = status;
    return out;
  };
}

/** The transform for a cached resource type. */
export function trimFor(r: ResourceType): (o: KubeObject) => KubeObject {
  const own = ownTrimFor(r);
  // Objects a release holds (any allow-listed kind, in the same caches as the other kinds'
  // objects) are rendered from what a user wrote and their health reads their status
  // (agent/releases): they keep their whole spec and status, whatever their kind.
  return (o) => (o.metadata.labels?.[LABEL_COMPONENT] === COMPONENT.release ? keepWhole(o) : own(o));
}

const keepWhole = trimRendered(true);

function ownTrimFor(r: ResourceType): (o: KubeObject) => KubeObject {
  if (r.group === "" && r.kind === "Pod") return trimPod;
  if (r.group === "" && r.kind === "Node") return trimNode;
  if (r.group === "" && r.kind === "Event") return trimEvent;
  // Deployment status carries availableReplicas (sentinel health); Job and CronJob status the
  // runs a cron job reports (agent/jobs); HTTPRoute, Gateway and Certificate status the
  // conditions the gateway kind reports; the others' status is unread.
  return trimRendered(
    (r.group === "apps" && r.kind === "Deployment") ||
      (r.group === "batch" && (r.kind === "Job" || r.kind === "CronJob")) ||
      (r.group === "gateway.networking.k8s.io" && (r.kind === "HTTPRoute" || r.kind === "Gateway")) ||
      (r.group === "cert-manager.io" && r.kind === "Certificate"),
  );
}

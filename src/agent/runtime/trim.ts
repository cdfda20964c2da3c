// What the agent's shared caches keep of each object: only the fields some controller kind
// reads (client-go's cache transforms do the same). Pods and Nodes are where the memory goes —
// a Pod's full JSON is several KiB of spec defaults, managedFields and status that krane never
// looks at — and both are only observed, never rendered, so they are cut down to a few fields.
// Objects krane renders keep their whole spec (drift detection compares the rendered fields
// with them) and lose only managedFields and the status nobody reads. Each kind declares, per
// resource, whether it reads the status and which cut an observed resource gets (`readsStatus`,
// `trim` in its builder: ./builder.ts); the kinds sharing a cache get the merge (SharedShape),
// so a new kind changes nothing here.
//
// Objects of a release (component=release) are kept whole, whatever their kind: see trimFor.
//
// When a kind starts reading a field that is cut here, add it here: the informer cannot give a
// reader what its transform dropped. Readers today:
//   Pod:  status → instances (deployments/status.ts), routing table (endpoints): the phase,
//         podIP, the Ready and ContainersReady conditions, containers' waiting reasons, the
//         first container's ports, limits and readiness probe's HTTP GET (a starting
//         instance the sentinel may probe), nodeName, labels; instance events
//         (deployments/events.ts): each container's image, restart count, ready and started,
//         its state and last state (reasons, exit code, times, messages cut to 512 characters),
//         the pod's reason and message and its DisruptionTarget condition (an eviction);
//   Node: the zone label (deployments/status.ts, endpoints);
//   Event (Warning events about pods only, resources.podWarningEvents): the pod it is about, its
//         reason, and for the reasons in POD_START_FAILURES the message and first time
//         (deployments/events.ts: why a pod does not start); other events keep only their reason.
//
// Strings repeat across thousands of cached objects (label values, images, env names, node
// names, condition types, timestamps of pods started in the same second): every kept string
// that is not unique to its object is interned, so each distinct value is held once. So do
// small subtrees (the parts of a pod template, a pod's labels and ports): `share` holds each
// once, frozen, for the caches and for the desired state's rendered objects.
//
// Measured with heap snapshots of the agent at 1,000 deployments (npm run bench -- agent): a
// rendered and a cached ReplicaSet were about 3 KiB each and a cached pod 1.6 KiB, of which a
// third was room in arrays grown by push.
import { COMPONENT, LABEL_COMPONENT } from "../../contracts/labels.js";
import type { KubeObject, ObjectMeta } from "../../kube/object.js";
import { isRecord } from "../../kube/object.js";

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

/**
 * One copy of each small subtree that repeats. The pod template of every ReplicaSet krane
 * renders repeats the same parts (tolerations, node selector, the affinity of its environment,
 * probes, resources, security context, most environment variables), both in the desired state's
 * rendered objects and in the cache of what the API server holds; a workspace's Namespace and an
 * environment's network policy are rendered alike for each of their deployments; the pods of a
 * ReplicaSet have the same labels and container ports. A subtree of at most SHARE_WEIGHT keys
 * and values is held once (hash-consing: equal subtrees, found by a hash of their keys and
 * values, become one object), frozen: a reader that tried to change a shared object would
 * change every holder's, and gets a TypeError instead. Larger subtrees stay as they are, their
 * small parts shared. Key order does not matter (the API server sorts map keys, krane's renderer
 * does not).
 *
 * Bounded like `intern`, in two generations: a subtree not met again while SHARED_MAX others
 * were is dropped from the table (its holders keep it), so subtrees of objects long gone are
 * not kept.
 */
export const SHARE_WEIGHT = 48;
const SHARED_MAX = 100_000;
type Bucket = object | object[];
let sharedNow = new Map<number, Bucket>();
let sharedBefore = new Map<number, Bucket>();

/** `v` (a JSON value) with its strings interned and its small subtrees shared (see SHARE_WEIGHT). */
export function share<T>(v: T): T {
  return shareNode(v).v as T;
}

interface Shared {
  readonly v: unknown;
  /** A hash of the value; undefined when it is not shared (too large, or not JSON). */
  readonly hash: number | undefined;
  readonly weight: number;
}

function shareNode(v: unknown): Shared {
  if (typeof v === "string") {
    const s = intern(v);
    return { v: s, hash: stringHash(s), weight: 1 };
  }
  if (typeof v === "number") return { v, hash: mix(0x6e756d62, Math.trunc(v) ^ Math.trunc(v * 1e6)), weight: 1 };
  if (typeof v === "boolean") return { v, hash: v ? 0x74727565 : 0x66616c73, weight: 1 };
  if (v === null) return { v, hash: 0x6e756c6c, weight: 1 };
  // undefined (an absent field), a bigint: not JSON, so never part of a shared subtree.
  if (typeof v !== "object") return { v, hash: undefined, weight: SHARE_WEIGHT + 1 };
  // A frozen object (shared already) is looked at but not changed.
  const frozen = Object.isFrozen(v);
  let hash: number | undefined = Array.isArray(v) ? 0x5b5d : 0x7b7d;
  let weight = 1;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const c = shareNode(v[i]);
      if (c.v !== v[i] && !frozen) v[i] = c.v;
      weight += c.weight;
      hash = hash === undefined || c.hash === undefined ? undefined : mix(hash, c.hash);
    }
  } else {
    const o = v as Record<string, unknown>;
    // Keys in any order: the hash adds the entries' hashes (commutative).
    let sum = 0;
    for (const k in o) {
      const c = shareNode(o[k]);
      if (c.v !== o[k] && !frozen) o[k] = c.v;
      weight += 1 + c.weight;
      if (c.hash === undefined) hash = undefined;
      else sum = (sum + mix(stringHash(k), c.hash)) | 0;
    }
    if (hash !== undefined) hash = mix(hash, sum);
  }
  if (hash === undefined || weight > SHARE_WEIGHT) return { v, hash: undefined, weight };
  return { v: sharedCopy(hash, v), hash, weight };
}

/** The shared object equal to `v` (whose parts are shared already), or `v` frozen as the first. */
function sharedCopy(hash: number, v: object): object {
  const found = findIn(sharedNow.get(hash), v);
  if (found !== undefined) return found;
  const kept = findIn(sharedBefore.get(hash), v) ?? Object.freeze(v);
  if (sharedNow.size >= SHARED_MAX) {
    sharedBefore = sharedNow;
    sharedNow = new Map();
  }
  const bucket = sharedNow.get(hash);
  if (bucket === undefined) sharedNow.set(hash, kept);
  else if (Array.isArray(bucket) && !Object.isFrozen(bucket)) bucket.push(kept);
  else sharedNow.set(hash, [bucket, kept]);
  return kept;
}

function findIn(bucket: Bucket | undefined, v: object): object | undefined {
  if (bucket === undefined) return undefined;
  // A bucket of several is an unfrozen array made here; a frozen array is a shared value.
  if (Array.isArray(bucket) && !Object.isFrozen(bucket)) return bucket.find((b) => sameShallow(b, v));
  return sameShallow(bucket, v) ? bucket : undefined;
}

/** Equal, for two values whose parts are shared (so equal parts are the same object). */
function sameShallow(a: object, b: object): boolean {
  if (a === b) return true;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ra = a as Record<string, unknown>;
  const rb = b as Record<string, unknown>;
  const ka = Object.keys(ra);
  if (ka.length !== Object.keys(rb).length) return false;
  for (const k of ka) if (!Object.hasOwn(rb, k) || !Object.is(ra[k], rb[k])) return false;
  return true;
}

function mix(h: number, x: number): number {
  return Math.imul((h ^ x) + 0x9e3779b9, 0x85ebca6b) ^ (h >>> 15);
}

function stringHash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h | 0;
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
  if (m.labels !== undefined) out.labels = share(m.labels);
  if (m.deletionTimestamp !== undefined) out.deletionTimestamp = m.deletionTimestamp;
  if (full) {
    if (m.generation !== undefined) out.generation = m.generation;
    if (m.ownerReferences !== undefined) out.ownerReferences = share(m.ownerReferences);
    if (m.annotations !== undefined) {
      const { "kubectl.kubernetes.io/last-applied-configuration": _lastApplied, ...rest } = m.annotations;
      out.annotations = share(rest);
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

/**
 * The trimmed elements of a list, in an array of exactly their number: an array grown by push
 * (or made by filter) keeps room for 17 elements, 136 bytes more than one element needs, and a
 * cached pod holds four such lists. map and slice allocate the exact length.
 */
function list(o: unknown, f: (x: unknown) => Json | undefined): Json[] | undefined {
  if (!Array.isArray(o)) return undefined;
  const mapped = o.map(f);
  return mapped.every((v) => v !== undefined)
    ? (mapped as Json[])
    : mapped.filter((v): v is Json => v !== undefined).slice();
}

/**
 * The pod conditions a reader looks at (instances: ContainersReady; ready since: Ready; instance
 * events: DisruptionTarget, an eviction, with its reason and message).
 */
const POD_CONDITIONS = new Set(["Ready", "ContainersReady", "DisruptionTarget"]);

export function trimPod(p: KubeObject): KubeObject {
  const spec = isRecord(p.spec) ? p.spec : {};
  const status = isRecord(p.status) ? p.status : {};
  const conditions = Array.isArray(status.conditions)
    ? status.conditions.filter((c) => isRecord(c) && POD_CONDITIONS.has(c.type as string))
    : undefined;
  return {
    apiVersion: p.apiVersion === undefined ? undefined : intern(p.apiVersion),
    kind: p.kind === undefined ? undefined : intern(p.kind),
    metadata: meta(p.metadata, false),
    // The same for the pods of a ReplicaSet on one node: shared.
    spec: share({
      nodeName: internValue(spec.nodeName),
      containers: list(spec.containers, (c) => {
        if (!isRecord(c)) return undefined;
        // The name: the startup CPU boost resizes the app container by it (deployments/boost.ts).
        const out: Json = typeof c.name === "string" ? { name: intern(c.name) } : {};
        const ports = list(
          c.ports,
          (x) => internDeep(pick(x, ["name", "containerPort", "protocol"])) as Json | undefined,
        );
        if (ports) out.ports = ports;
        const limits = isRecord(c.resources) ? c.resources.limits : undefined;
        if (isRecord(limits)) out.resources = { limits: internDeep(pick(limits, ["cpu", "memory"])) };
        // The readiness probe's HTTP GET: the sentinel may probe a starting instance on it
        // (sentinels/routing.ts, src/sentinel/warm.ts).
        const get = isRecord(c.readinessProbe) ? c.readinessProbe.httpGet : undefined;
        const httpGet = internDeep(pick(get, ["path", "port", "scheme"]));
        if (httpGet) out.readinessProbe = { httpGet };
        return out;
      }),
    }),
    status: {
      phase: internValue(status.phase),
      podIP: status.podIP,
      conditions: list(conditions, (c) => {
        if (!isRecord(c) || c.type !== "DisruptionTarget")
          return internDeep(pick(c, ["type", "status", "lastTransitionTime"])) as Json | undefined;
        const d = pick(c, ["type", "status", "lastTransitionTime", "reason", "message"]);
        if (d && typeof d.message === "string") d.message = cutMessage(d.message);
        return d;
      }),
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

export function trimEvent(e: KubeObject): KubeObject {
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

export function trimNode(n: KubeObject): KubeObject {
  return { apiVersion: n.apiVersion, kind: n.kind, metadata: meta(n.metadata, false) };
}

/** Rendered kinds: everything krane may have set, without managedFields (and status unless read). */
function trimRendered(keepStatus: boolean): (o: KubeObject) => KubeObject {
  return (o) => {
    const { metadata, status, ...rest } = o;
    const out: KubeObject = { ...(share(rest) as Json), metadata: meta(metadata, true) };
    if (keepStatus && status !== undefined) out.status = status;
    return out;
  };
}

/** A cut of an observed object to the fields its readers use. */
export type Trim = (o: KubeObject) => KubeObject;

/** What a kind needs the shared cache to keep of a resource (its declaration, ./builder.ts). */
export interface CacheShape {
  /** The kind reads the objects' status (rendered objects keep their spec in any case). */
  readonly readsStatus: boolean;
  /** Only these fields are kept (an observed resource: trimPod, trimNode, trimEvent). */
  readonly trim?: Trim;
}

/**
 * What the kinds sharing one cache need of it, merged as they declare it: the status is kept
 * when any reads it; a cut is shared only by kinds that declare the same one.
 */
export class SharedShape {
  #readsStatus = false;
  #trim: Trim | undefined;
  #declared = false;

  constructor(readonly resource: string) {}

  add(shape: CacheShape): void {
    if (this.#declared && shape.trim !== this.#trim)
      throw new Error(`${this.resource}: kinds sharing its cache declare different trims`);
    this.#declared = true;
    this.#trim = shape.trim;
    this.#readsStatus ||= shape.readsStatus;
  }

  /** The cache's transform, reading the shape as declared when each object arrives. */
  transform(): Trim {
    const keep = trimRendered(true);
    const drop = trimRendered(false);
    // Objects a release holds (any allow-listed kind, in the same caches as the other kinds'
    // objects) are rendered from what a user wrote and their health reads their status
    // (agent/releases): they keep their whole spec and status, whatever their kind.
    return (o) => {
      if (o.metadata.labels?.[LABEL_COMPONENT] === COMPONENT.release) return keep(o);
      if (this.#trim) return this.#trim(o);
      return this.#readsStatus ? keep(o) : drop(o);
    };
  }
}

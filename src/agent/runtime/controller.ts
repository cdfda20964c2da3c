// One controller kind on the shared runtime (DESIGN §1, §6, §9), shaped like controller-runtime:
//
//   ctrl ─stream/snapshot/resync─▶ CtrlLink ─▶ DesiredStore ─┐
//                                                            ├─▶ WorkQueue(keys) ─▶ reconcile(key) → Result
//   Manager's shared informers ─events─▶ keysOf(obj) ────────┘        │ apply when the caches differ
//                                                                     ▼ from what it renders; status
//   Reporter (dedup + breaker) ◀─ status / rejected / deleted ─────────┘
//
// A kind is declared with the builder below: the protocol it speaks with ctrl, the primary
// resource it owns (one object per key marks the key's presence), the resources it renders
// (compared for drift) and the ones it only watches or reads, how an event maps to keys, and a
// Reconciler (validate, render, apply, remove, status). The runtime owns every loop.
//
// Results: a reconcile is done, or fails with a retriable error (the key's own backoff), or with
// a terminal one (invalid object, forbidden: reported to ctrl as rejected and not retried until
// the desired state changes or a resync looks again, about once a minute).
import type { KubeClient } from "../../kube/client.js";
import { isPermanentKubeError } from "../../kube/client.js";
import type { Informer } from "../../kube/informer.js";
import type { KubeObject } from "../../kube/object.js";
import type { ResourceType } from "../../kube/resources.js";
import type { BackoffPolicy } from "../../retry/backoff.js";
import { sleep } from "../../retry/backoff.js";
import { Result, WorkQueue } from "../../retry/queue.js";
import type { BreakerConfig } from "./breaker.js";
import { CtrlLink, type CtrlProtocol } from "./ctrl-link.js";
import type { CursorAction } from "./cursor.js";
import { DesiredStore, type DesiredEntry } from "./desired.js";
import { findDrift } from "./drift.js";
import type { Logger } from "./log.js";
import { agentMetrics, type AgentMetrics } from "./metrics.js";
import type { Registry } from "prom-client";

/** What a kind's reconciler works with. */
export interface KindContext<D> {
  readonly kube: KubeClient;
  readonly region: string;
  readonly log: Logger;
  /** The shared cache of a resource the kind declared. */
  informer(r: ResourceType): Informer;
  /** The primary object of a key, when the cache has one. */
  primaryOf(key: string): KubeObject | undefined;
  /** The desired state of a key when it is "apply". */
  desiredOf(key: string): D | undefined;
  /** Keys whose desired state is "apply". */
  activeKeys(): Iterable<string>;
  /**
   * True when the object's owned fields already match (no write needed): the cache holds it and
   * matches, or this controller wrote exactly this object and the cache has not shown that write
   * yet.
   */
  isCurrent(obj: KubeObject): boolean;
  /**
   * Server-side applies `obj` (forced, field manager krane) and remembers the write until the
   * cache shows it, so `isCurrent` does not ask for the same write again meanwhile; concurrent
   * applies of the same object by several keys (an environment's shared objects) become one
   * request.
   */
  apply(r: ResourceType, obj: KubeObject, signal: AbortSignal): Promise<KubeObject>;
  /** Queues a key (for caches a kind keeps itself, e.g. the release kind's per-kind caches). */
  enqueue(key: string): void;
}

/** A status report for one key. */
export interface StatusReport<R> {
  readonly fingerprint: string;
  readonly report: R;
}

/** The kind-specific logic; everything else is the runtime's. */
export interface Reconciler<D, Del, R> {
  /** A reason to refuse the desired state, or undefined when it is valid. */
  validate(desired: D): string | undefined;
  validateDelete(ref: Del): string | undefined;
  /** Pure: the objects the desired state becomes (compared with the caches for drift). */
  render(desired: D): KubeObject[];
  /**
   * Objects computed at reconcile time from the caches as well as the desired state (e.g. a
   * routing table from the pods); compared and applied like the rendered ones.
   */
  derive?(key: string, desired: D, ctx: KindContext<D>): KubeObject[];
  /**
   * Makes the cluster match; called only when some rendered or derived object differs from the
   * cache, with all of them (`ctx.isCurrent` tells which already match).
   */
  apply(desired: D, objects: readonly KubeObject[], ctx: KindContext<D>, signal: AbortSignal): Promise<void>;
  /** Deletes a key's objects; a missing object counts as deleted. */
  remove(key: string, ref: Del, ctx: KindContext<D>, signal: AbortSignal): Promise<void>;
  /** The key's observed status, computed from the caches after each reconcile. */
  status?(key: string, desired: D, ctx: KindContext<D>): StatusReport<R> | undefined;
  /** Extra garbage collection after a resync pass (objects shared between keys). */
  collectGarbage?(ctx: KindContext<D>, active: ReadonlySet<string>, signal: AbortSignal): Promise<void>;
  /**
   * The cache of an object whose kind the declaration does not list (a kind that keeps caches of
   * its own, e.g. per kind a release applies), for drift checks; undefined: not compared.
   */
  cacheFor?(obj: KubeObject): Informer | undefined;

  /**
   * A loop of the kind's own that runs while the controller runs (e.g. reading what the kind's
   * pods say about themselves); `requeue(key)` makes the key reconcile (and report) again.
   */
  observe?(ctx: KindContext<D>, signal: AbortSignal, requeue: (key: string) => void): Promise<void>;
}

/**
 * Thrown by a reconciler's apply when the key must wait for others (e.g. a scale-up until its
 * siblings' scale-downs are applied): the key is reconciled again after `afterMs`, without an
 * error being logged or counted against its backoff.
 */
export class NotYet extends Error {
  constructor(
    readonly afterMs: number,
    reason: string,
  ) {
    super(reason);
  }
}

export type KeysOf<D> = (obj: KubeObject, ctx: KindContext<D>) => Iterable<string>;

/** Whether an event changes what a kind observes (`now` undefined: deleted; `before`: added). */
export type Changed = (now: KubeObject | undefined, before: KubeObject | undefined) => boolean;

export interface WatchDecl<D> {
  readonly resource: ResourceType;
  /** The label selector of the shared cache (default: everything krane manages in the region). */
  readonly selector?: string;
  /** Only this namespace (default: all; narrower scopes need narrower RBAC). */
  readonly namespace?: string;
  /** Rendered by this kind: compared with the rendered objects for drift. */
  readonly rendered: boolean;
  /** Which keys an event of this resource concerns (none: cached, no events). */
  readonly keysOf?: KeysOf<D>;
  /**
   * Whether an event matters to the kind (default: every visible one does): `now` is undefined
   * for a deletion, `before` for an addition.
   */
  readonly changed?: Changed;
  /** Label indexes the kind reads through `informer(r).byIndex(labelIndex(label), value)`. */
  readonly labelIndexes: readonly string[];
}

export interface ControllerDeclaration<Msg = unknown, D = unknown, Del = unknown, R = unknown> {
  readonly name: string;
  readonly protocol: CtrlProtocol<Msg, D, Del, R>;
  /**
   * The label every object the kind writes for a key carries, with the key as value: objects of
   * the rendered resources with it that the key no longer renders (or derives) are deleted, and
   * all of them go when the key is deleted.
   */
  readonly ownerLabel?: string;
  readonly primary: {
    readonly resource: ResourceType;
    readonly selector?: string;
    readonly namespace?: string;
    keyOf(obj: KubeObject): string | undefined;
    refOf(obj: KubeObject): Del;
    /** Whether an event of the primary object can change the key's status (default: every one). */
    readonly statusChanged?: Changed;
  };
  readonly watches: readonly WatchDecl<D>[];
  readonly reconciler: Reconciler<D, Del, R>;
}

/** The name of the shared informer index over one label's value. */
export function labelIndex(label: string): string {
  return `label:${label}`;
}

/** Where a declared resource is cached and what indexes the kind reads it by. */
export interface Scope {
  /** The cache's label selector (default: everything krane manages in the region). */
  readonly selector?: string;
  /** Only this namespace (default: all namespaces). */
  readonly namespace?: string;
  /** Label indexes the kind reads through `informer(r).byIndex(labelIndex(label), value)`. */
  readonly labelIndexes?: readonly string[];
}

/** Builder-style declaration of a controller kind. */
export class ControllerBuilder<Msg, D, Del, R> {
  #protocol: CtrlProtocol<Msg, D, Del, R> | undefined;
  #ownerLabel: string | undefined;
  #primary: ControllerDeclaration<Msg, D, Del, R>["primary"] | undefined;
  readonly #watches: WatchDecl<D>[] = [];
  #reconciler: Reconciler<D, Del, R> | undefined;

  constructor(readonly name: string) {}

  /** The ClusterService binding: stream, point reads, reports. */
  protocol(p: CtrlProtocol<Msg, D, Del, R>): this {
    this.#protocol = p;
    return this;
  }

  /** Objects the kind writes carry `label` = key; those it stops rendering are pruned. */
  ownedBy(label: string): this {
    this.#ownerLabel = label;
    return this;
  }

  /**
   * The primary resource: one object per key; its events map to that key (a drift check), and
   * mark the key's status for recomputation unless `statusChanged` says the event cannot change
   * it (e.g. a kind that reports only the object's presence and name).
   */
  owns(
    resource: ResourceType,
    o: { keyOf(obj: KubeObject): string | undefined; refOf(obj: KubeObject): Del; statusChanged?: Changed } & Scope,
  ): this {
    this.#primary = {
      resource,
      selector: o.selector,
      namespace: o.namespace,
      keyOf: o.keyOf,
      refOf: o.refOf,
      statusChanged: o.statusChanged,
    };
    this.#watches.push({
      resource,
      selector: o.selector,
      namespace: o.namespace,
      rendered: true,
      keysOf: (obj) => single(o.keyOf(obj)),
      labelIndexes: o.labelIndexes ?? [],
    });
    return this;
  }

  /** A further resource the kind renders (drift-checked); `keysOf` maps its events to keys. */
  renders(resource: ResourceType, o: { keysOf?: KeysOf<D> } & Scope = {}): this {
    this.#watches.push({
      resource,
      selector: o.selector,
      namespace: o.namespace,
      rendered: true,
      keysOf: o.keysOf,
      labelIndexes: o.labelIndexes ?? [],
    });
    return this;
  }

  /**
   * A resource the kind observes: its events map to keys through `keysOf`; `changed` filters
   * events (additions, updates, deletions) that cannot change what the kind reports or derives,
   * so status work follows real change. Each event that passes marks its keys' status for
   * recomputation.
   */
  watches(resource: ResourceType, o: { keysOf: KeysOf<D>; changed?: Changed } & Scope): this {
    this.#watches.push({
      resource,
      selector: o.selector,
      namespace: o.namespace,
      rendered: false,
      keysOf: o.keysOf,
      changed: o.changed,
      labelIndexes: o.labelIndexes ?? [],
    });
    return this;
  }

  /** A resource the kind only reads from the cache (no events). */
  reads(resource: ResourceType, o: Scope = {}): this {
    this.#watches.push({
      resource,
      selector: o.selector,
      namespace: o.namespace,
      rendered: false,
      labelIndexes: o.labelIndexes ?? [],
    });
    return this;
  }

  reconciler(r: Reconciler<D, Del, R>): this {
    this.#reconciler = r;
    return this;
  }

  build(): ControllerDeclaration<Msg, D, Del, R> {
    if (!this.#protocol) throw new Error(`controller ${this.name}: no protocol`);
    if (!this.#primary) throw new Error(`controller ${this.name}: no primary resource (owns)`);
    if (!this.#reconciler) throw new Error(`controller ${this.name}: no reconciler`);
    return {
      name: this.name,
      protocol: this.#protocol,
      ownerLabel: this.#ownerLabel,
      primary: this.#primary,
      watches: this.#watches,
      reconciler: this.#reconciler,
    };
  }
}

export function controller<Msg, D, Del, R>(name: string): ControllerBuilder<Msg, D, Del, R> {
  return new ControllerBuilder<Msg, D, Del, R>(name);
}

function single(k: string | undefined): string[] {
  return k === undefined ? [] : [k];
}

/** Per-controller settings (the agent passes the same to every kind). */
export interface ControllerOptions {
  readonly concurrency?: number;
  readonly resyncPeriodMs?: number;
  readonly resyncBatchSize?: number;
  readonly callTimeoutMs?: number;
  readonly retry?: BackoffPolicy;
  readonly reconnect?: BackoffPolicy;
  readonly breaker?: Partial<BreakerConfig>;
  /** How long ctrl has to accept a desired-state stream before the attempt is abandoned. */
  readonly openTimeoutMs?: number;
  /** Told when ctrl did not accept a stream in time (the agent drops a connection that never completed). */
  readonly onOpenTimeout?: () => void;
}

/** What the manager gives a controller. */
export interface ControllerEnv {
  readonly kube: KubeClient;
  readonly region: string;
  readonly log: Logger;
  readonly registry: Registry;
  informer(r: ResourceType, selector?: string, namespace?: string): Informer;
}

/**
 * A controller kind on the shared caches. Its queue, desired store and ctrl link belong to one
 * run (start → stop): a replica that loses leadership stops, and when it leads again it starts
 * afresh from a snapshot, as after a restart.
 */
export class Controller<Msg, D, Del, R> {
  readonly name: string;
  #link: CtrlLink<Msg, D, Del, R>;
  readonly #decl: ControllerDeclaration<Msg, D, Del, R>;
  readonly #o: ControllerOptions;
  readonly #env: ControllerEnv;
  readonly #m: AgentMetrics;
  #desired: DesiredStore<D, Del>;
  #queue: WorkQueue;
  readonly #informers = new Map<string, Informer>();
  /** kind/apiVersion → informer, for the rendered kinds' drift checks. */
  readonly #renderedCaches = new Map<string, Informer>();
  /**
   * Objects this controller deleted, by "kind/namespace/name" → the resourceVersion deleted: until
   * the cache hears of the deletion, a second reconcile must not delete the same version again.
   */
  readonly #pruned = new Map<string, string>();
  readonly #primary: Informer;
  readonly #primaryIndex: string;
  readonly #ctx: KindContext<D>;
  /**
   * Objects this controller applied while its cache has not moved yet (object id → the applied
   * JSON and the cached resourceVersion from before the write), and applies in flight (id + JSON).
   */
  readonly #written = new Map<string, { json: string; before: string | undefined; at: number }>();
  readonly #inflight = new Map<string, Promise<KubeObject>>();
  /** Rendered object → the live resourceVersion it was last found to match. */
  readonly #verified = new WeakMap<KubeObject, string>();
  /**
   * Keys whose status was computed since the last event that could change it (an event of the
   * primary or an observed resource for the key, a rejection, a snapshot): a reconcile computes
   * the status only for keys not in here, so desired-state changes and drift checks cost no
   * status work.
   */
  readonly #statusClean = new Set<string>();
  #started = false;
  #abort = new AbortController();
  #running: Promise<unknown> | undefined;
  #resyncs = 0;

  constructor(decl: ControllerDeclaration<Msg, D, Del, R>, env: ControllerEnv, opts: ControllerOptions = {}) {
    this.#decl = decl;
    this.#env = env;
    this.#o = opts;
    this.name = decl.name;
    this.#m = agentMetrics(env.registry);
    this.#link = this.#newLink();
    this.#desired = new DesiredStore<D, Del>((d) => decl.reconciler.render(d));
    for (const w of decl.watches) {
      const inf = env.informer(w.resource, w.selector, w.namespace);
      this.#informers.set(resourceId(w.resource), inf);
      if (w.rendered) {
        const id = renderedId(w.resource.kind, w.resource.group);
        if (!this.#renderedCaches.has(id)) {
          // A deletion (or a re-list that no longer has the object) voids a remembered write.
          inf.onChange((type, obj) => {
            if (type === "deleted") this.#written.delete(writtenId(obj));
          });
        }
        this.#renderedCaches.set(id, inf);
        if (decl.ownerLabel !== undefined) addLabelIndex(inf, decl.ownerLabel);
      }
      for (const label of w.labelIndexes) addLabelIndex(inf, label);
      const { keysOf, changed } = w;
      // Events of every watched resource can change what a key reports (a kind may report the
      // status of what it rendered, e.g. a route's or certificate's conditions), except those
      // of the primary resource that the kind's statusChanged rules out.
      const isPrimary = w.resource === decl.primary.resource && w.rendered;
      const statusChanged: Changed = isPrimary ? (decl.primary.statusChanged ?? (() => true)) : () => true;
      if (keysOf) {
        inf.onChange((type, obj, old) => {
          if (!this.#started) return;
          const [now, before] =
            type === "added" ? [obj, undefined] : type === "deleted" ? [undefined, obj] : [obj, old];
          if (changed && !changed(now, before)) return;
          const status = statusChanged(now, before);
          for (const k of keysOf(obj, this.#ctx)) {
            if (status) this.#statusClean.delete(k);
            this.#queue.add(k);
          }
        });
      }
    }
    this.#primary = this.#informers.get(resourceId(decl.primary.resource)) as Informer;
    // Every controller finds its primary objects by key through an index of its own.
    this.#primaryIndex = `key:${decl.name}`;
    this.#primary.addIndex(this.#primaryIndex, (o) => decl.primary.keyOf(o));
    this.#queue = this.#newQueue();
    this.#ctx = {
      kube: env.kube,
      region: env.region,
      log: env.log,
      informer: (r) => {
        const inf = this.#informers.get(resourceId(r));
        if (!inf) throw new Error(`${decl.name}: ${r.plural} is not declared`);
        return inf;
      },
      primaryOf: (key) => this.#primaryOf(key),
      desiredOf: (key) => this.#desired.desiredOf(key),
      activeKeys: () => this.#desired.activeKeys(),
      isCurrent: (obj) => this.#liveDrift(obj, this.#cacheFor(obj)) === undefined,
      apply: (r, obj, signal) => this.#apply(r, obj, signal),
      // An event of a cache the kind keeps itself may change what the key reports.
      enqueue: (key) => {
        if (!this.#started) return;
        this.#statusClean.delete(key);
        this.#queue.add(key);
      },
    };
  }

  #newLink(): CtrlLink<Msg, D, Del, R> {
    const o = this.#o;
    return new CtrlLink(this.#decl.name, this.#decl.protocol, {
      log: this.#env.log,
      registry: this.#env.registry,
      callTimeoutMs: o.callTimeoutMs,
      reconnect: o.reconnect,
      breaker: o.breaker,
      openTimeoutMs: o.openTimeoutMs,
      onOpenTimeout: o.onOpenTimeout,
    });
  }

  #newQueue(): WorkQueue {
    const labels = { controller: this.#decl.name };
    const queue: WorkQueue = new WorkQueue({
      concurrency: this.#o.concurrency ?? 16,
      retry: this.#o.retry ?? { baseMs: 500, capMs: 60_000, minMs: 100 },
      reconcile: (key, signal) => this.#reconcile(key, signal),
      onResult: (key, result) => {
        if (result.type === "retry") {
          const err = result.error;
          this.#env.log.warn(
            { controller: this.name, key, err: err instanceof Error ? err.message : String(err) },
            "reconcile failed; will retry",
          );
        }
        this.#m.queueKeys.set(labels, queue.size);
      },
    });
    return queue;
  }

  /** The ctrl side of the current (or last) run. */
  get link(): CtrlLink<Msg, D, Del, R> {
    return this.#link;
  }

  /** Whether the controller is running (on a leader, or with leader election off). */
  get running(): boolean {
    return this.#started;
  }

  get cursor(): bigint {
    return this.link.cursor;
  }

  get streamConnected(): boolean {
    return this.link.connected;
  }

  get breaker(): CtrlLink<Msg, D, Del, R>["breaker"] {
    return this.link.breaker;
  }

  get cachesSynced(): boolean {
    for (const c of this.#informers.values()) if (!c.synced) return false;
    return true;
  }

  get ready(): boolean {
    return this.cachesSynced && this.streamConnected;
  }

  /** Passes of the resync loop completed so far. */
  get resyncCount(): number {
    return this.#resyncs;
  }

  get context(): KindContext<D> {
    return this.#ctx;
  }

  /** Keys queued, running or retrying, and reports not yet acknowledged. */
  get backlog(): { keys: number; reports: number } {
    return { keys: this.#queue.size, reports: this.link.reportsPending };
  }

  /** Starts the stream, the queue and the resync loop (the manager calls it once caches synced). */
  start(): void {
    if (this.#running) return;
    if (this.#abort.signal.aborted) {
      // A new run after a stop: fresh queue, desired state and cursor (ctrl sends a snapshot).
      this.#abort = new AbortController();
      this.#queue = this.#newQueue();
      this.#link = this.#newLink();
      this.#desired = new DesiredStore<D, Del>((d) => this.#decl.reconciler.render(d));
    }
    this.#started = true;
    const signal = this.#abort.signal;
    const loops = [this.link.run(signal, (a) => this.#onStreamAction(a)), this.#resyncLoop(signal)];
    const observe = this.#decl.reconciler.observe;
    // What the observer saw is part of the key's status: a requeue computes it again.
    const requeue = (key: string): void => {
      this.#statusClean.delete(key);
      this.#queue.add(key);
    };
    if (observe) loops.push(observe(this.#ctx, signal, requeue));
    this.#running = Promise.allSettled(loops);
  }

  async stop(): Promise<void> {
    this.#started = false;
    this.#abort.abort();
    await this.#running;
    await this.#queue.stop();
    await this.link.stop();
    this.#running = undefined;
  }

  /** Resolves when no key is queued, running or retrying and every report was acknowledged. */
  async idle(): Promise<void> {
    await this.#queue.drained();
    await this.link.reportsDrained();
  }

  /**
   * One resync pass now (the loop also calls it): batched point reads of every key this agent
   * knows (live primary objects and active desired state); keys whose answer differs from what
   * the caches hold are queued. Nothing is written when nothing drifted, and statuses are not
   * recomputed for keys that did not change.
   */
  async resyncOnce(signal: AbortSignal = this.#abort.signal): Promise<void> {
    const decl = this.#decl;
    const rec = decl.reconciler;
    const labels = { controller: decl.name };
    const keys = new Set<string>(this.#desired.activeKeys());
    for (const obj of this.#primary.values()) {
      const k = decl.primary.keyOf(obj);
      if (k !== undefined) keys.add(k);
    }
    const candidates = [...keys];
    const batchSize = this.#o.resyncBatchSize ?? 500;
    const tracker = this.#desired.track();
    try {
      for (let i = 0; i < candidates.length && !signal.aborted; i += batchSize) {
        const batch = candidates.slice(i, i + batchSize);
        const answer = await this.link.readDesired(batch, signal);
        let n = 0;
        for (const entry of answer.states) {
          // Comparing thousands of objects is CPU work: let the stream, watches and queue run
          // in between so a resync never stalls change propagation.
          if (++n % 50 === 0) await new Promise<void>((r) => setImmediate(r));
          if (tracker.touched.has(entry.key)) continue;
          if (entry.type === "apply") {
            const prev = this.#desired.get(entry.key);
            // What is stored was validated when it was accepted: only a changed state is checked.
            const same = prev?.type === "apply" && decl.protocol.equal(prev.desired, entry.desired);
            const reason = same ? undefined : rec.validate(entry.desired);
            if (reason !== undefined) {
              this.#reject(entry.key, { desired: entry.desired }, reason);
              continue;
            }
            let e: DesiredEntry<D, Del>;
            if (same && prev?.type === "apply") {
              e = prev;
              // A terminal failure is looked at again once per resync (its cause may be gone).
              if (e.type === "apply" && e.terminal !== undefined) {
                e.terminal = undefined;
                this.#queue.add(entry.key);
                continue;
              }
            } else {
              e = this.#desired.apply(entry.key, entry.desired);
            }
            const drift = e.type === "apply" ? this.#driftOf(e.rendered) : undefined;
            if (drift !== undefined) {
              this.#m.resyncRepairs.inc({ ...labels, reason: "drift" });
              this.#env.log.info({ controller: decl.name, key: entry.key, field: drift }, "drift found; re-applying");
              this.#queue.add(entry.key);
            } else if (prev !== e) {
              this.#queue.add(entry.key);
            }
          } else {
            this.#desired.delete(entry.key, entry.ref);
            if (this.#primaryOf(entry.key)) {
              this.#m.resyncRepairs.inc({ ...labels, reason: "deleted" });
              this.#queue.add(entry.key);
            }
          }
        }
        for (const key of answer.notFound) {
          if (tracker.touched.has(key)) continue;
          const live = this.#primaryOf(key);
          if (live) {
            this.#m.resyncRepairs.inc({ ...labels, reason: "orphan" });
            this.#env.log.info({ controller: decl.name, key }, "orphan found (ctrl does not know it); deleting");
            this.#desired.delete(key, decl.primary.refOf(live));
            this.#queue.add(key);
          } else {
            this.#desired.forget(key);
          }
        }
      }
    } finally {
      tracker.stop();
    }
    if (rec.collectGarbage && !signal.aborted) {
      const active = new Set<string>(this.#desired.activeKeys());
      for (const obj of this.#primary.values()) {
        const k = decl.primary.keyOf(obj);
        if (k !== undefined && this.#desired.get(k)?.type !== "delete") active.add(k);
      }
      await rec.collectGarbage(this.#ctx, active, signal);
    }
    this.#resyncs++;
  }

  async #resyncLoop(signal: AbortSignal): Promise<void> {
    const period = this.#o.resyncPeriodMs ?? 60_000;
    const labels = { controller: this.name };
    while (!signal.aborted) {
      // ±10 % jitter keeps the agents of many clusters from resyncing in lockstep.
      await sleep(period * (0.9 + Math.random() * 0.2), signal);
      if (signal.aborted) break;
      try {
        await this.resyncOnce(signal);
        this.#m.resyncs.inc({ ...labels, result: "ok" });
      } catch (err) {
        this.#m.resyncs.inc({ ...labels, result: "error" });
        this.#env.log.warn(
          { controller: this.name, err: err instanceof Error ? err.message : String(err) },
          "resync failed",
        );
      }
    }
  }

  #onStreamAction(a: CursorAction<D, Del>): void {
    const decl = this.#decl;
    const rec = decl.reconciler;
    switch (a.type) {
      case "snapshot-started":
        // ctrl may have lost what it was told: every status is computed and sent again.
        this.link.forgetReports();
        this.#statusClean.clear();
        return;
      case "apply": {
        const reason = rec.validate(a.desired);
        if (reason !== undefined) {
          // What was accepted before stays desired (and repaired); the new state is refused.
          this.#reject(a.key, { desired: a.desired }, reason);
          return;
        }
        this.#desired.apply(a.key, a.desired);
        this.#queue.add(a.key, { resetBackoff: true });
        return;
      }
      case "delete": {
        const reason = rec.validateDelete(a.ref);
        if (reason !== undefined) {
          this.#reject(a.key, { ref: a.ref }, reason);
          return;
        }
        this.#desired.delete(a.key, a.ref);
        this.#queue.add(a.key, { resetBackoff: true });
        return;
      }
      case "collect-garbage": {
        for (const obj of this.#primary.values()) {
          const key = decl.primary.keyOf(obj);
          if (key === undefined || a.keep.has(key)) continue;
          this.#desired.delete(key, decl.primary.refOf(obj));
          this.#m.resyncRepairs.inc({ controller: decl.name, reason: "snapshot-gc" });
          this.#queue.add(key, { resetBackoff: true });
        }
        // Keys this agent believed active that the snapshot no longer names (and that have no
        // object) are forgotten.
        for (const [key, e] of [...this.#desired.entries()]) {
          if (e.type === "apply" && !a.keep.has(key) && !this.#primaryOf(key)) this.#desired.forget(key);
        }
        return;
      }
    }
  }

  #reject(key: string, subject: { desired: D } | { ref: Del }, reason: string): void {
    // ctrl now holds the rejection: the next successful reconcile reports the status again.
    this.#statusClean.delete(key);
    this.#m.rejected.inc({ controller: this.name });
    this.#env.log.warn({ controller: this.name, key, reason }, "desired state rejected; not applied");
    this.link.reject(key, subject, reason);
  }

  async #reconcile(key: string, signal: AbortSignal): Promise<Result> {
    const entry = this.#desired.get(key);
    if (!entry) return Result.done; // unknown: the stream, a snapshot or a resync will tell
    const rec = this.#decl.reconciler;
    const op = entry.type;
    const labels = { controller: this.name, op };
    const started = performance.now();
    try {
      if (entry.type === "apply") {
        if (entry.terminal === undefined) {
          const derived = rec.derive?.(key, entry.desired, this.#ctx);
          const objects = derived && derived.length > 0 ? [...entry.rendered, ...derived] : entry.rendered;
          if (this.#driftOf(objects) === undefined) this.#m.reconcileSkipped.inc({ controller: this.name });
          else await rec.apply(entry.desired, objects, this.#ctx, signal);
          await this.#prune(key, objects, signal);
        }
        // Synchronous from here to the mark: an event that arrives later marks the key again.
        const s = rec.status && !this.#statusClean.has(key) ? rec.status(key, entry.desired, this.#ctx) : undefined;
        if (s) {
          this.#statusClean.add(key);
          this.#m.reportsComputed.inc({ controller: this.name });
          this.link.report(key, s.fingerprint, s.report);
        }
      } else {
        await rec.remove(key, entry.ref, this.#ctx, signal);
        await this.#prune(key, [], signal);
        this.#statusClean.delete(key);
        this.link.deleted(key, entry.ref);
        this.#desired.forgetIf(key, entry);
      }
      this.#m.reconciles.inc({ ...labels, result: "ok" });
      return Result.done;
    } catch (err) {
      if (signal.aborted) return Result.done;
      if (err instanceof NotYet) {
        this.#m.reconciles.inc({ ...labels, result: "deferred" });
        return Result.requeueAfter(err.afterMs);
      }
      if (isPermanentKubeError(err)) {
        const reason = err instanceof Error ? err.message : String(err);
        this.#m.reconciles.inc({ ...labels, result: "terminal" });
        if (entry.type === "apply") {
          entry.terminal = reason;
          this.#reject(key, { desired: entry.desired }, reason);
        } else {
          this.#reject(key, { ref: entry.ref }, reason);
        }
        return Result.terminal(reason);
      }
      this.#m.reconciles.inc({ ...labels, result: "error" });
      return Result.retry(err);
    } finally {
      this.#m.reconcileSeconds.observe(labels, (performance.now() - started) / 1000);
    }
  }

  /** Deletes the objects of the rendered kinds labelled as the key's that `keep` does not name. */
  async #prune(key: string, keep: readonly KubeObject[], signal: AbortSignal): Promise<void> {
    const label = this.#decl.ownerLabel;
    if (label === undefined) return;
    const wanted = new Set(keep.map((o) => `${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name ?? ""}`));
    for (const inf of new Set(this.#renderedCaches.values())) {
      for (const live of inf.byIndex(labelIndex(label), key)) {
        const id = `${inf.resource.kind}/${live.metadata.namespace ?? ""}/${live.metadata.name ?? ""}`;
        if (live.metadata.deletionTimestamp || wanted.has(id)) continue;
        const version = live.metadata.resourceVersion ?? "";
        if (version !== "" && this.#pruned.get(id) === version) continue;
        this.#m.resyncRepairs.inc({ controller: this.name, reason: "pruned" });
        await this.#env.kube.delete(inf.resource, live.metadata.namespace, live.metadata.name ?? "", signal);
        // Bounded: entries of deletions the cache has long seen are worthless; start over when large.
        if (this.#pruned.size >= 10_000) this.#pruned.clear();
        this.#pruned.set(id, version);
      }
    }
  }

  /** The first drifted field over the rendered objects that have a cache, or undefined. */
  #driftOf(rendered: readonly KubeObject[]): string | undefined {
    for (const obj of rendered) {
      const cache = this.#cacheFor(obj);
      if (!cache) continue;
      const d = this.#liveDrift(obj, cache);
      if (d !== undefined) return `${obj.kind}/${obj.metadata.name}${d}`;
    }
    return undefined;
  }

  /**
   * Where the live object differs from `obj` (": missing" when absent), or undefined when it
   * matches — or when this controller applied exactly `obj` and the cache has not caught up with
   * that write yet (its event is on the way; asking again would only repeat the write).
   */
  #liveDrift(obj: KubeObject, cache: Informer | undefined): string | undefined {
    const live = cache?.get(obj.metadata.namespace, obj.metadata.name ?? "");
    const id = writtenId(obj);
    const w = this.#written.get(id);
    if (w) {
      // Trusted only while the cache still shows the version it held before the write: once it
      // shows any other (the write itself, or a later change by someone else — the informer
      // does not announce every version, so waiting for the write's own would miss drift),
      // the cache decides.
      if (live?.metadata.resourceVersion !== w.before || Date.now() - w.at > WRITTEN_TTL_MS) this.#written.delete(id);
      else if (w.json === JSON.stringify(obj)) return undefined;
    }
    if (!live) return ": missing";
    // A rendered object (cached per desired state) already found to match this very version of
    // the live object still matches: idle resyncs and repeated events cost no comparison.
    const rv = live.metadata.resourceVersion;
    if (rv !== undefined && this.#verified.get(obj) === rv) return undefined;
    const d = findDrift(obj, live);
    if (d === undefined && rv !== undefined) this.#verified.set(obj, rv);
    return d;
  }

  async #apply(r: ResourceType, obj: KubeObject, signal: AbortSignal): Promise<KubeObject> {
    const id = writtenId(obj);
    const json = JSON.stringify(obj);
    const flight = `${id}\n${json}`;
    const cache = this.#cacheFor(obj);
    const versionOf = (): string | undefined =>
      cache?.get(obj.metadata.namespace, obj.metadata.name ?? "")?.metadata.resourceVersion;
    const before = versionOf();
    let p = this.#inflight.get(flight);
    if (!p) {
      p = this.#env.kube.apply(r, obj, { force: true, signal }).finally(() => this.#inflight.delete(flight));
      this.#inflight.set(flight, p);
    }
    const live = await p;
    // Remembered only while the cache has not moved since before the write (see #liveDrift).
    if (live.metadata.resourceVersion !== undefined && versionOf() === before)
      this.#written.set(id, { json, before, at: Date.now() });
    return live;
  }

  #cacheFor(obj: KubeObject): Informer | undefined {
    const group = (obj.apiVersion ?? "").includes("/") ? ((obj.apiVersion ?? "").split("/")[0] ?? "") : "";
    return this.#renderedCaches.get(renderedId(obj.kind ?? "", group)) ?? this.#decl.reconciler.cacheFor?.(obj);
  }

  #primaryOf(key: string): KubeObject | undefined {
    return this.#primary.byIndex(this.#primaryIndex, key)[0];
  }
}

/** How long a remembered write is trusted while the cache does not move (then the cache decides). */
const WRITTEN_TTL_MS = 30_000;

function writtenId(obj: KubeObject): string {
  return `${obj.apiVersion ?? ""}/${obj.kind ?? ""}/${obj.metadata.namespace ?? ""}/${obj.metadata.name ?? ""}`;
}

function resourceId(r: ResourceType): string {
  return `${r.group}/${r.version}/${r.plural}`;
}

function renderedId(kind: string, group: string): string {
  return `${group}/${kind}`;
}

/** Adds the shared index over a label's value, once per informer. */
export function addLabelIndex(inf: Informer, label: string): void {
  const name = labelIndex(label);
  if (!inf.hasIndex(name)) inf.addIndex(name, (o) => o.metadata.labels?.[label]);
}

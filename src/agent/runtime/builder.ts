// How a controller kind is declared: the builder (`controller(name)…build()`), what the kind's
// reconcile is given (KindContext: the caches, the clients and the runtime's services) and what
// it writes (Reconciler). The runtime owns every loop; a kind names its protocol with ctrl, the
// primary resource it owns (one object per key marks the key's presence), the resources it
// renders (compared for drift) and the ones it only watches or reads, how an event maps to keys,
// and its `reconcile(key) → Result`.
import type { KubeClient } from "../../kube/client.js";
import type { Informer } from "../../kube/informer.js";
import type { KubeObject } from "../../kube/object.js";
import type { ResourceType } from "../../kube/resources.js";
import type { Result } from "../../retry/queue.js";
import type { CtrlProtocol } from "./ctrl-link.js";
import type { DesiredEntry } from "./desired.js";
import type { Logger } from "../../base/log.js";
import type { CacheShape, Trim } from "./trim.js";

export { Result } from "../../retry/queue.js";

/** What ctrl wants of a key, as this agent knows it: an apply (with its rendered objects) or a delete. */
export type Want<D, Del> = DesiredEntry<D, Del>;

/** What a kind's reconcile works with: the caches, the clients and the runtime's services. */
export interface KindContext<D, Del = unknown, R = unknown> {
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
  /**
   * A shared cache of a resource the declaration could not list up front (e.g. each kind a
   * release holds), added to the manager while it runs, synced before it resolves. Its events
   * reach the kind only through handlers it adds (`onChange` → `enqueue`).
   */
  cache(r: ResourceType, selector?: string): Promise<Informer>;
  /** Queues a key and marks its status for recomputation (for events of caches from `cache`). */
  enqueue(key: string): void;
  /**
   * Renders a key's desired state again and queues it: for a kind whose render also reads state
   * of the agent's own (the autoscaler's local count, src/agent/autoscale), when that changed.
   */
  rerender(key: string): void;

  /**
   * Brings the cluster to `objects` for the key: when some differ from the caches, `write` is
   * called (it applies those that differ: `isCurrent`, `apply`) and a requeue it returns is
   * returned as is; then what the key wrote (the owner label) and no longer renders is deleted.
   * A key the API server refused for good is left as it is (no write, no pruning) until its
   * desired state changes or a resync looks again.
   */
  sync(
    key: string,
    objects: readonly KubeObject[],
    signal: AbortSignal,
    write: () => Promise<Result | void>,
  ): Promise<Result>;
  /**
   * Reports the key's status to ctrl (deduplicated by fingerprint, behind the breaker). `status`
   * is called only when an event may have changed the status since it was last computed, so
   * desired-state changes and drift checks cost no status work.
   */
  report(key: string, status: () => StatusReport<R> | undefined): void;
  /**
   * The end of a deleted key, once the kind removed its objects: what else it wrote (the owner
   * label) is deleted, ctrl is told, and the key is forgotten unless a newer state came meanwhile.
   */
  deleted(key: string, want: Want<D, Del> & { readonly type: "delete" }, signal: AbortSignal): Promise<Result>;
}

/** A status report for one key. */
export interface StatusReport<R> {
  readonly fingerprint: string;
  readonly report: R;
}

/**
 * The kind-specific logic; the loops, the queue and the link to ctrl are the runtime's. The
 * runtime validates and renders each desired state once, when it arrives (a refused one is
 * reported and not stored; the rendered objects are what a resync compares with the caches), and
 * calls `reconcile` for a key whenever its desired state or something it concerns changes.
 */
export interface Reconciler<D, Del, R> {
  /** A reason to refuse the desired state, or undefined when it is valid. */
  validate(desired: D): string | undefined;
  validateDelete(ref: Del): string | undefined;
  /** Pure: the objects the desired state becomes (compared with the caches for drift). */
  render(desired: D): KubeObject[];
  /**
   * Makes the cluster match what ctrl wants of the key and reports it, with the runtime's
   * services (`ctx.sync`, `ctx.report`, `ctx.deleted`). A key that must wait returns a requeue
   * (`Result.requeueAfter`: looked at again then, not counted as a failure); an error thrown is
   * retried with the key's backoff, or, when the API server refused for good (400, 403, 422),
   * makes the key terminal: reported to ctrl as rejected.
   */
  reconcile(key: string, want: Want<D, Del>, ctx: KindContext<D, Del, R>, signal: AbortSignal): Promise<Result>;
  /** Extra garbage collection after a resync pass (objects shared between keys). */
  collectGarbage?(ctx: KindContext<D, Del, R>, active: ReadonlySet<string>, signal: AbortSignal): Promise<void>;
  /**
   * The cache of an object whose kind the declaration does not list (a kind that keeps caches of
   * its own, e.g. per kind a release applies), for drift checks; undefined: not compared.
   */
  cacheFor?(obj: KubeObject): Informer | undefined;

  /**
   * A loop of the kind's own that runs while the controller runs (e.g. reading what the kind's
   * pods say about themselves); `requeue(key)` makes the key reconcile (and report) again.
   */
  observe?(ctx: KindContext<D, Del, R>, signal: AbortSignal, requeue: (key: string) => void): Promise<void>;
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
  /** What the shared cache keeps of each object for this kind. */
  readonly shape: CacheShape;
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
  /**
   * What of each object the shared cache keeps for this kind (./trim.ts): a resource the kind
   * renders keeps its spec, and its status only when the kind reads it (`readsStatus`); a
   * resource it only observes may be cut to the fields it reads (`trim`, e.g. trimPod).
   */
  readonly readsStatus?: boolean;
  readonly trim?: Trim;
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
      shape: { readsStatus: o.readsStatus === true, trim: o.trim },
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
      shape: { readsStatus: o.readsStatus === true, trim: o.trim },
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
      shape: { readsStatus: o.readsStatus === true, trim: o.trim },
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
      shape: { readsStatus: o.readsStatus === true, trim: o.trim },
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

/** Adds the shared index over a label's value, once per informer. */
export function addLabelIndex(inf: Informer, label: string): void {
  const name = labelIndex(label);
  if (!inf.hasIndex(name)) inf.addIndex(name, (o) => o.metadata.labels?.[label]);
}

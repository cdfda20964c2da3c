// One controller kind on the shared runtime, shaped like controller-runtime:
//
//   ctrl ─stream/snapshot/resync─▶ CtrlLink ─▶ DesiredStore ─┐
//                                                            ├─▶ WorkQueue(keys) ─▶ kind's reconcile(key) → Result
//   Manager's shared informers ─events─▶ keysOf(obj) ────────┘        │ sync (write when the caches differ,
//                                                                     ▼ prune), report, deleted
//   Reporter (dedup + breaker) ◀─ status / rejected / deleted ─────────┘
//
// This file wires the parts and owns the run (start → stop): cache events to keys, the queue,
// the ctrl link. The parts: the declaration (builder.ts), stream intake (intake.ts), the call of
// the kind's reconcile and the services it uses (reconcile.ts), resync (resync.ts), remembered
// writes, pruning and drift (writes.ts).
import type { Informer } from "../../kube/informer.js";
import type { KubeObject } from "../../kube/object.js";
import type { ResourceType } from "../../kube/resources.js";
import { WorkQueue } from "../../retry/queue.js";
import { addLabelIndex, type Changed, type ControllerDeclaration, type KindContext } from "./builder.js";
import type { ControllerCore, ControllerEnv, ControllerOptions } from "./core.js";
import { CtrlLink } from "./ctrl-link.js";
import { DesiredStore } from "./desired.js";
import { takeStreamAction } from "./intake.js";
import { agentMetrics, type AgentMetrics } from "./metrics.js";
import { deletedKey, reconcileKey, reportStatus, syncKey } from "./reconcile.js";
import { resyncLoop, resyncPass } from "./resync.js";
import { ClusterWrites } from "./writes.js";

export type { ControllerEnv, ControllerOptions } from "./core.js";

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
  readonly #writes: ClusterWrites;
  readonly #primary: Informer;
  readonly #primaryIndex: string;
  readonly #ctx: KindContext<D, Del, R>;
  readonly #core: ControllerCore<Msg, D, Del, R>;
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
    const extraCache = decl.reconciler.cacheFor;
    this.#writes = new ClusterWrites(decl.name, env.kube, this.#m, decl.ownerLabel, extraCache);
    for (const w of decl.watches) {
      const inf = env.informer(w.resource, w.selector, w.namespace, w.shape);
      this.#informers.set(resourceId(w.resource), inf);
      if (w.rendered) {
        this.#writes.addRendered(w.resource, inf);
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
      cache: (r, selector) => env.cache(r, selector),
      primaryOf: (key) => this.#primaryOf(key),
      desiredOf: (key) => this.#desired.desiredOf(key),
      activeKeys: () => this.#desired.activeKeys(),
      isCurrent: (obj) => this.#writes.isCurrent(obj),
      apply: (r, obj, signal) => this.#writes.apply(r, obj, signal),
      // An event of a cache the kind reads beyond its declaration may change what the key reports.
      enqueue: (key) => {
        if (!this.#started) return;
        this.#statusClean.delete(key);
        this.#queue.add(key);
      },
      rerender: (key) => {
        if (!this.#started) return;
        this.#desired.rerender(key);
        this.#queue.add(key);
      },
      sync: (key, objects, signal, write) => syncKey(this.#core, key, objects, signal, write),
      report: (key, status) => reportStatus(this.#core, key, status),
      deleted: (key, want, signal) => deletedKey(this.#core, key, want, signal),
    };
    this.#core = {
      name: decl.name,
      decl,
      env,
      opts,
      m: this.#m,
      ctx: this.#ctx,
      writes: this.#writes,
      primary: this.#primary,
      statusClean: this.#statusClean,
      desired: this.#desired,
      queue: this.#queue,
      link: this.#link,
      primaryOf: (key) => this.#primaryOf(key),
      reject: (key, subject, reason) => this.#reject(key, subject, reason),
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
      reconcile: (key, signal) => reconcileKey(this.#core, key, signal),
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

  get context(): KindContext<D, Del, R> {
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
      this.#core.queue = this.#queue;
      this.#core.link = this.#link;
      this.#core.desired = this.#desired;
    }
    this.#started = true;
    const signal = this.#abort.signal;
    const loops = [
      this.link.run(signal, (a) => takeStreamAction(this.#core, a)),
      resyncLoop(this.#core, signal, (s) => this.resyncOnce(s)),
    ];
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
    await resyncPass(this.#core, signal);
    this.#resyncs++;
  }

  #reject(key: string, subject: { desired: D } | { ref: Del }, reason: string): void {
    // ctrl now holds the rejection: the next successful reconcile reports the status again.
    this.#statusClean.delete(key);
    this.#m.rejected.inc({ controller: this.name });
    this.#env.log.warn({ controller: this.name, key, reason }, "desired state rejected; not applied");
    this.link.reject(key, subject, reason);
  }

  #primaryOf(key: string): KubeObject | undefined {
    return this.#primary.byIndex(this.#primaryIndex, key)[0];
  }
}

function resourceId(r: ResourceType): string {
  return `${r.group}/${r.version}/${r.plural}`;
}

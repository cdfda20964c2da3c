// The generic controller runtime (DESIGN §1, §6, §9): one instance per controller kind
// (deployments, sentinels, later gateways). It owns the loops; the kind supplies only what
// differs through ControllerSpec (decode, validate, render, apply, remove, observe).
//
//   ctrl stream ──▶ cursor ──▶ validate ──▶ per-key work queue ──▶ spec.apply / spec.remove
//                               │ invalid: Rejected report       │ skipped when the cache
//                               ▼                                 ▼ already matches the render
//   reflectors (watch caches) ──▶ drift checks on events, resync every period (batched reads)
//   spec.observe ──▶ Reporter (dedup + breaker + deadline) ──▶ Report*Status
//
// Ordering: one key's work runs in order (latest wins); keys run in parallel up to
// `concurrency`. A resync never overwrites newer stream state: it skips keys the stream touched
// while its batched read was in flight.
import { setMaxListeners } from "node:events";
import type { KubeClient } from "../../kube/client.js";
import type { KubeObject } from "../../kube/object.js";
import type { ResourceType } from "../../kube/resources.js";
import type { BackoffPolicy } from "../../retry/backoff.js";
import { sleep } from "../../retry/backoff.js";
import { CircuitBreaker, type BreakerConfig } from "./breaker.js";
import type { CursorAction, StreamEvent } from "./cursor.js";
import { findDrift } from "./drift.js";
import type { Logger } from "./log.js";
import { agentMetrics, breakerPhaseValue, type AgentMetrics } from "./metrics.js";
import { Reflector } from "./reflector.js";
import { Reporter } from "./reporter.js";
import { DesiredStateStream } from "./stream.js";
import { KeyedWorkQueue } from "./workqueue.js";
import type { Registry } from "prom-client";
import { isCtrlDownstreamFailure } from "./ctrl-errors.js";

export type DesiredEntry<D, Del> =
  | { readonly key: string; readonly type: "apply"; readonly desired: D }
  | { readonly key: string; readonly type: "delete"; readonly ref: Del };

export interface DesiredBatch<D, Del> {
  readonly states: DesiredEntry<D, Del>[];
  /** Keys that should not exist in the region: their objects are deleted. */
  readonly notFound: string[];
}

export interface CallOptions {
  readonly signal: AbortSignal;
  readonly timeoutMs: number;
}

/** What a controller kind's apply/remove/observe get to work with. */
export interface RuntimeContext<R, D = unknown> {
  readonly kube: KubeClient;
  readonly region: string;
  readonly log: Logger;
  /** The watch cache of a resource the spec declared. */
  cache(r: ResourceType): Reflector;
  /** Queue a status report (deduplicated against what ctrl acknowledged). */
  report(key: string, fingerprint: string, request: R): void;
  /** Whether the key's current desired state is "apply" (as far as this agent knows). */
  isActive(key: string): boolean;
  /** The last accepted desired state of a key, when it is "apply". */
  desiredOf(key: string): D | undefined;
  /** True when a cache holds this object and its owned fields already match (no write needed). */
  isCurrent(obj: KubeObject): boolean;
}

export interface ControllerSpec<Msg, D, Del, R> {
  readonly name: string;
  /** Label selector for everything this controller manages in its region. */
  readonly labelSelector: string;
  /** The resource whose objects identify a key's presence in the cluster (one per key). */
  readonly primary: ResourceType;
  /** Further resources to cache: rendered kinds (for drift checks) and observed ones. */
  readonly secondary: readonly ResourceType[];
  /** A different label selector for a cached resource (e.g. nodes); default labelSelector. */
  readonly selectorFor?: (r: ResourceType) => string | undefined;
  /** Secondary index for a cached resource (e.g. pods by owning key). */
  readonly indexBy?: (r: ResourceType, obj: KubeObject) => string | undefined;

  watch(cursor: bigint, signal: AbortSignal, onOpen: () => void): AsyncIterable<Msg>;
  decode(msg: Msg): StreamEvent<D, Del>;
  getDesired(keys: string[], opts: CallOptions): Promise<DesiredBatch<D, Del>>;
  sendReport(request: R, opts: CallOptions): Promise<void>;

  /** The key of a cached primary object (undefined: not ours to manage). */
  keyOf(obj: KubeObject): string | undefined;
  /** How to delete the key of a cached primary object whose desired state is gone. */
  refOf(obj: KubeObject): Del;
  /** A reason to refuse the desired state, or undefined when it is valid. */
  validate(desired: D): string | undefined;
  validateDelete(ref: Del): string | undefined;
  /** Pure: the objects the desired state becomes (compared with the caches for drift). */
  render(desired: D): KubeObject[];
  apply(desired: D, rendered: KubeObject[], ctx: RuntimeContext<R, D>, signal: AbortSignal): Promise<void>;
  remove(key: string, ref: Del, ctx: RuntimeContext<R, D>, signal: AbortSignal): Promise<void>;
  /** Reports: refused desired state, deletion done. */
  rejectedReport(key: string, subject: { desired: D } | { ref: Del }, reason: string): R;
  deletedReport(key: string, ref: Del): R;
  /** Wire observation (called once, before the caches start). */
  observe?(ctx: RuntimeContext<R, D>): void;
  /** Recompute and submit the status of a key (resync, after apply). */
  refreshStatus?(key: string, ctx: RuntimeContext<R, D>): void;
  /** Extra garbage collection after a resync pass (objects shared between keys). */
  collectGarbage?(ctx: RuntimeContext<R, D>, activeKeys: ReadonlySet<string>, signal: AbortSignal): Promise<void>;
}

export interface RuntimeOptions {
  readonly region: string;
  readonly kube: KubeClient;
  readonly log: Logger;
  readonly registry: Registry;
  readonly concurrency?: number;
  readonly resyncPeriodMs?: number;
  readonly resyncBatchSize?: number;
  readonly callTimeoutMs?: number;
  readonly retry?: BackoffPolicy;
  readonly reconnect?: BackoffPolicy;
  readonly breaker?: Partial<BreakerConfig>;
  readonly watchTimeoutSeconds?: number;
  readonly watchdogMs?: number;
}

type Work<D, Del> = { readonly op: "apply"; readonly desired: D } | { readonly op: "delete"; readonly ref: Del };

export class ControllerRuntime<Msg, D, Del, R> {
  readonly name: string;
  readonly breaker: CircuitBreaker;
  readonly #spec: ControllerSpec<Msg, D, Del, R>;
  readonly #o: RuntimeOptions;
  readonly #m: AgentMetrics;
  readonly #caches = new Map<string, Reflector>();
  readonly #queue: KeyedWorkQueue<Work<D, Del>>;
  readonly #reporter: Reporter<R>;
  readonly #stream: DesiredStateStream<Msg, D, Del>;
  /** The last desired state accepted per key (from the stream or a resync). */
  readonly #desired = new Map<string, { type: "apply"; desired: D } | { type: "delete" }>();
  /** Bumped whenever the stream touches a key; lets a resync detect that its read is stale. */
  readonly #touched = new Map<string, number>();
  #touchCounter = 0;
  readonly #ctx: RuntimeContext<R, D>;
  #abort = new AbortController();
  #running: Promise<unknown> | undefined;
  #resyncs = 0;

  constructor(spec: ControllerSpec<Msg, D, Del, R>, opts: RuntimeOptions) {
    this.#spec = spec;
    this.#o = opts;
    this.name = spec.name;
    const m = (this.#m = agentMetrics(opts.registry));
    const labels = { controller: spec.name };
    this.breaker = new CircuitBreaker({
      name: spec.name,
      config: opts.breaker,
      isFailure: isCtrlDownstreamFailure,
      onPhaseChange: (p) => {
        m.breakerState.set(labels, breakerPhaseValue(p));
        opts.log.warn({ controller: spec.name, phase: p }, "ctrl circuit breaker changed state");
      },
    });
    m.breakerState.set(labels, 0);
    m.streamConnected.set(labels, 0);
    for (const r of [spec.primary, ...spec.secondary]) {
      const reflector = new Reflector({
        resource: r,
        labelSelector: spec.selectorFor?.(r) ?? spec.labelSelector,
        client: opts.kube,
        log: opts.log,
        timeoutSeconds: opts.watchTimeoutSeconds,
        watchdogMs: opts.watchdogMs,
        // The primary cache is indexed by key; others by whatever the spec asks for.
        indexBy: r === spec.primary ? (o) => spec.keyOf(o) : spec.indexBy ? (o) => spec.indexBy?.(r, o) : undefined,
        onEvent: (event) => m.watchEvents.inc({ resource: r.plural, event }),
      });
      this.#caches.set(cacheId(r), reflector);
    }
    this.#queue = new KeyedWorkQueue<Work<D, Del>>({
      concurrency: opts.concurrency ?? 16,
      retry: opts.retry ?? { baseMs: 500, capMs: 60_000, minMs: 100 },
      handle: (key, work, signal) => this.#reconcile(key, work, signal),
      onResult: (key, result, ms, err) => {
        if (result === "error") {
          opts.log.warn({ controller: spec.name, key, err: err instanceof Error ? err.message : String(err) }, "reconcile failed; will retry");
        }
        m.queueKeys.set(labels, this.#queue.size);
        void ms;
      },
    });
    this.#reporter = new Reporter<R>({
      name: spec.name,
      breaker: this.breaker,
      send: (req, o) => this.#ctrlCall("report", () => spec.sendReport(req, o)),
      timeoutMs: opts.callTimeoutMs,
      log: opts.log,
      onSent: (result) => m.reportsSent.inc({ ...labels, result }),
      onDeduplicated: () => m.reportsDeduplicated.inc(labels),
    });
    this.#ctx = {
      kube: opts.kube,
      region: opts.region,
      log: opts.log,
      cache: (r) => {
        const c = this.#caches.get(cacheId(r));
        if (!c) throw new Error(`${spec.name}: ${r.plural} is not cached`);
        return c;
      },
      report: (key, fp, req) => this.#reporter.submit(key, fp, req),
      isActive: (key) => {
        const d = this.#desired.get(key);
        if (d) return d.type === "apply";
        // Unknown (e.g. right after a restart): active while its primary object exists.
        return this.#primaryByKey(key) !== undefined;
      },
      desiredOf: (key) => {
        const d = this.#desired.get(key);
        return d?.type === "apply" ? d.desired : undefined;
      },
      isCurrent: (obj) => {
        const live = this.#cacheForObject(obj)?.get(obj.metadata.namespace, obj.metadata.name ?? "");
        return live !== undefined && findDrift(obj, live) === undefined;
      },
    };
    this.#stream = new DesiredStateStream<Msg, D, Del>({
      name: spec.name,
      open: (cursor, signal, onOpen) => spec.watch(cursor, signal, onOpen),
      decode: (msg) => {
        m.streamMessages.inc(labels);
        return spec.decode(msg);
      },
      onAction: (a) => this.#onStreamAction(a),
      reconnect: opts.reconnect ?? { baseMs: 250, capMs: 30_000, minMs: 100 },
      log: opts.log,
      onConnectedChange: (c) => m.streamConnected.set(labels, c ? 1 : 0),
      onCursor: (c) => m.cursor.set(labels, Number(c)),
      onReconnect: (reason) => m.streamReconnects.inc({ ...labels, reason }),
    });
    spec.observe?.(this.#ctx);
    for (const r of [spec.primary]) {
      this.#caches.get(cacheId(r))?.onChange((type, obj) => this.#onPrimaryChange(type, obj));
    }
  }

  get cursor(): bigint {
    return this.#stream.cursor;
  }

  get streamConnected(): boolean {
    return this.#stream.connected;
  }

  get cachesSynced(): boolean {
    for (const c of this.#caches.values()) if (!c.synced) return false;
    return true;
  }

  get ready(): boolean {
    return this.cachesSynced && this.streamConnected;
  }

  /** Passes of the resync loop completed so far. */
  get resyncCount(): number {
    return this.#resyncs;
  }

  get context(): RuntimeContext<R, D> {
    return this.#ctx;
  }

  /** Work still queued, running or retrying (keys), and reports not yet acknowledged. */
  get backlog(): { keys: number; reports: number } {
    return { keys: this.#queue.size, reports: this.#reporter.pending };
  }

  start(): void {
    if (this.#running) return;
    const signal = this.#abort.signal;
    // Watches, calls and sleeps of all loops listen on this one signal.
    setMaxListeners(0, signal);
    const caches = [...this.#caches.values()];
    const loops: Promise<unknown>[] = caches.map((c) => c.run(signal));
    // The stream starts once the caches are synced: snapshot garbage collection and the
    // skip-if-unchanged check both read them.
    loops.push(
      Promise.all(caches.map((c) => c.waitSynced())).then(() => (signal.aborted ? undefined : this.#stream.run(signal))),
    );
    loops.push(this.#resyncLoop(signal));
    this.#running = Promise.allSettled(loops);
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    await this.#running;
    await this.#queue.stop();
    await this.#reporter.stop();
    this.#running = undefined;
  }

  /** Runs one resync pass now (tests and benchmarks; the loop also calls it). */
  async resyncOnce(signal: AbortSignal = this.#abort.signal): Promise<void> {
    const spec = this.#spec;
    const labels = { controller: spec.name };
    const keys = new Set<string>();
    for (const obj of this.#primaryCache().list()) {
      const k = spec.keyOf(obj);
      if (k !== undefined) keys.add(k);
    }
    for (const [k, d] of this.#desired) if (d.type === "apply") keys.add(k);
    const candidates = [...keys].filter((k) => !this.#queue.has(k));
    const batchSize = this.#o.resyncBatchSize ?? 500;
    for (let i = 0; i < candidates.length && !signal.aborted; i += batchSize) {
      const batch = candidates.slice(i, i + batchSize);
      const before = new Map(batch.map((k) => [k, this.#touched.get(k) ?? 0]));
      const answer = await this.breaker.execute(() =>
        this.#ctrlCall("get-desired", () =>
          spec.getDesired(batch, { signal, timeoutMs: this.#o.callTimeoutMs ?? 10_000 }),
        ),
      );
      const fresh = (k: string): boolean => (this.#touched.get(k) ?? 0) === before.get(k) && !this.#queue.has(k);
      let n = 0;
      for (const entry of answer.states) {
        // Rendering and comparing thousands of objects is CPU work: let the stream, watches and
        // queue run in between so a resync never stalls change propagation.
        if (++n % 50 === 0) await new Promise<void>((r) => setImmediate(r));
        if (!before.has(entry.key) || !fresh(entry.key)) continue;
        if (entry.type === "apply") {
          const reason = spec.validate(entry.desired);
          if (reason !== undefined) {
            this.#reject(entry.key, { desired: entry.desired }, reason);
            continue;
          }
          this.#desired.set(entry.key, { type: "apply", desired: entry.desired });
          const drift = this.#drift(entry.desired);
          if (drift !== undefined) {
            this.#m.resyncRepairs.inc({ ...labels, reason: "drift" });
            this.#o.log.info({ controller: spec.name, key: entry.key, field: drift }, "drift found; re-applying");
            this.#queue.add(entry.key, { op: "apply", desired: entry.desired });
          }
        } else {
          this.#desired.set(entry.key, { type: "delete" });
          if (this.#primaryByKey(entry.key)) {
            this.#m.resyncRepairs.inc({ ...labels, reason: "deleted" });
            this.#queue.add(entry.key, { op: "delete", ref: entry.ref });
          }
        }
      }
      for (const key of answer.notFound) {
        if (!before.has(key) || !fresh(key)) continue;
        this.#desired.delete(key);
        const live = this.#primaryByKey(key);
        if (live) {
          this.#m.resyncRepairs.inc({ ...labels, reason: "orphan" });
          this.#o.log.info({ controller: spec.name, key }, "orphan found (ctrl does not know it); deleting");
          this.#queue.add(key, { op: "delete", ref: spec.refOf(live) });
        }
      }
    }
    if (spec.collectGarbage && !signal.aborted) {
      const active = new Set<string>();
      for (const [k, d] of this.#desired) if (d.type === "apply") active.add(k);
      for (const obj of this.#primaryCache().list()) {
        const k = spec.keyOf(obj);
        if (k !== undefined && this.#desired.get(k)?.type !== "delete") active.add(k);
      }
      await spec.collectGarbage(this.#ctx, active, signal);
    }
    if (spec.refreshStatus) for (const k of keys) spec.refreshStatus(k, this.#ctx);
    this.#resyncs++;
  }

  /** Resolves when no work is queued, running or retrying and every report was acknowledged. */
  async idle(): Promise<void> {
    await this.#queue.drained();
    await this.#reporter.drained();
  }

  async #resyncLoop(signal: AbortSignal): Promise<void> {
    const period = this.#o.resyncPeriodMs ?? 60_000;
    const labels = { controller: this.#spec.name };
    await Promise.all([...this.#caches.values()].map((c) => c.waitSynced()));
    while (!signal.aborted) {
      // ±10 % jitter keeps the agents of many clusters from resyncing in lockstep.
      await sleep(period * (0.9 + Math.random() * 0.2), signal);
      if (signal.aborted) break;
      try {
        await this.resyncOnce(signal);
        this.#m.resyncs.inc({ ...labels, result: "ok" });
      } catch (err) {
        this.#m.resyncs.inc({ ...labels, result: "error" });
        this.#o.log.warn({ controller: this.#spec.name, err: err instanceof Error ? err.message : String(err) }, "resync failed");
      }
    }
  }

  #onStreamAction(a: CursorAction<D, Del>): void {
    const spec = this.#spec;
    switch (a.type) {
      case "snapshot-started":
        this.#reporter.forgetAll();
        return;
      case "apply": {
        this.#touch(a.key);
        const reason = spec.validate(a.desired);
        if (reason !== undefined) {
          this.#reject(a.key, { desired: a.desired }, reason);
          return;
        }
        this.#desired.set(a.key, { type: "apply", desired: a.desired });
        this.#queue.add(a.key, { op: "apply", desired: a.desired });
        return;
      }
      case "delete": {
        this.#touch(a.key);
        const reason = spec.validateDelete(a.ref);
        if (reason !== undefined) {
          this.#reject(a.key, { ref: a.ref }, reason);
          return;
        }
        this.#desired.set(a.key, { type: "delete" });
        this.#queue.add(a.key, { op: "delete", ref: a.ref });
        return;
      }
      case "collect-garbage": {
        for (const obj of this.#primaryCache().list()) {
          const key = spec.keyOf(obj);
          if (key === undefined || a.keep.has(key)) continue;
          this.#touch(key);
          this.#desired.set(key, { type: "delete" });
          this.#m.resyncRepairs.inc({ controller: spec.name, reason: "snapshot-gc" });
          this.#queue.add(key, { op: "delete", ref: spec.refOf(obj) });
        }
        // Keys this agent believed active but the snapshot no longer names (and that have no
        // object) are forgotten.
        for (const [key, d] of [...this.#desired]) if (d.type === "apply" && !a.keep.has(key)) this.#desired.delete(key);
        if (spec.refreshStatus) {
          for (const obj of this.#primaryCache().list()) {
            const key = spec.keyOf(obj);
            if (key !== undefined && a.keep.has(key)) spec.refreshStatus(key, this.#ctx);
          }
        }
        return;
      }
    }
  }

  #reject(key: string, subject: { desired: D } | { ref: Del }, reason: string): void {
    this.#m.rejected.inc({ controller: this.#spec.name });
    this.#o.log.warn({ controller: this.#spec.name, key, reason }, "desired state rejected; not applied");
    this.#reporter.submit(key, `rejected:${reason}`, this.#spec.rejectedReport(key, subject, reason));
  }

  async #reconcile(key: string, work: Work<D, Del>, signal: AbortSignal): Promise<void> {
    const spec = this.#spec;
    const started = performance.now();
    const labels = { controller: spec.name, op: work.op };
    try {
      if (work.op === "apply") {
        const rendered = spec.render(work.desired);
        if (this.#driftOf(rendered) === undefined) {
          this.#m.reconcileSkipped.inc({ controller: spec.name });
        } else {
          await spec.apply(work.desired, rendered, this.#ctx, signal);
        }
        spec.refreshStatus?.(key, this.#ctx);
      } else {
        await spec.remove(key, work.ref, this.#ctx, signal);
        this.#reporter.submit(key, "deleted", spec.deletedReport(key, work.ref));
      }
      this.#m.reconciles.inc({ ...labels, result: "ok" });
    } catch (err) {
      this.#m.reconciles.inc({ ...labels, result: "error" });
      throw err;
    } finally {
      this.#m.reconcileSeconds.observe(labels, (performance.now() - started) / 1000);
    }
  }

  /** A primary object changed: if it no longer matches the desired state, repair it now. */
  #onPrimaryChange(type: "added" | "updated" | "deleted", obj: KubeObject): void {
    const key = this.#spec.keyOf(obj);
    if (key === undefined) return;
    if (type !== "deleted" && this.#ctx.isActive(key)) this.#spec.refreshStatus?.(key, this.#ctx);
    if (this.#queue.has(key)) return;
    const d = this.#desired.get(key);
    if (d?.type !== "apply") return;
    const drift = type === "deleted" ? "(deleted)" : this.#drift(d.desired);
    if (drift === undefined) return;
    this.#m.resyncRepairs.inc({ controller: this.#spec.name, reason: "watch-drift" });
    this.#o.log.info({ controller: this.#spec.name, key, field: drift }, "live object drifted; re-applying");
    this.#queue.add(key, { op: "apply", desired: d.desired });
  }

  #drift(desired: D): string | undefined {
    return this.#driftOf(this.#spec.render(desired));
  }

  /** The first drifted field over the rendered objects that have a cache, or undefined. */
  #driftOf(rendered: KubeObject[]): string | undefined {
    for (const obj of rendered) {
      const cache = this.#cacheForObject(obj);
      if (!cache) continue;
      const live = cache.get(obj.metadata.namespace, obj.metadata.name ?? "");
      if (!live) return `${obj.kind}/${obj.metadata.name}: missing`;
      const d = findDrift(obj, live);
      if (d !== undefined) return `${obj.kind}/${obj.metadata.name}${d}`;
    }
    return undefined;
  }

  #cacheForObject(obj: KubeObject): Reflector | undefined {
    for (const c of this.#caches.values()) if (c.resource.kind === obj.kind) return c;
    return undefined;
  }

  #primaryCache(): Reflector {
    return this.#caches.get(cacheId(this.#spec.primary)) as Reflector;
  }

  #primaryByKey(key: string): KubeObject | undefined {
    return this.#primaryCache().byIndex(key)[0];
  }

  #touch(key: string): void {
    this.#touched.set(key, ++this.#touchCounter);
  }

  async #ctrlCall<T>(method: string, fn: () => Promise<T>): Promise<T> {
    try {
      const r = await fn();
      this.#m.ctrlRequests.inc({ controller: this.#spec.name, method, result: "ok" });
      return r;
    } catch (err) {
      this.#m.ctrlRequests.inc({ controller: this.#spec.name, method, result: "error" });
      throw err;
    }
  }
}

function cacheId(r: ResourceType): string {
  return `${r.group}/${r.version}/${r.plural}`;
}

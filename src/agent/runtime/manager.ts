// The manager: owns one shared, trimmed watch cache per resource type and the
// controllers built on them, and starts the controllers only once every cache has synced (the
// snapshot's garbage collection and the skip-if-unchanged check both read the caches).
//
// Caches are shared: two kinds that both read pods share one pods watch and one cache. Each
// cache selects what krane manages in this region (`regionSelector`) unless a kind asks for
// another selector (nodes: by zone label); two kinds asking different selectors of one resource
// is a programming error, reported at start-up.
//
// It also probes the Kubernetes API (GET /version every few seconds): watches can sit idle for
// minutes, so "the API server is not answering" is measured, not inferred (metric and /readyz).
//
// High availability: with leader election on, every replica keeps its caches warm but only the
// replica holding the Lease runs controllers; one that stops leading stops them at once, and the
// Kubernetes client refuses its writes from the moment its last renewal is older than the renew
// deadline (`writeRefusal`), before any other replica can have taken over.
import { setMaxListeners } from "node:events";
import type { Registry } from "prom-client";
import { Gauge } from "prom-client";
import { regionSelector } from "../../contracts/labels.js";
import type { KubeClient } from "../../kube/client.js";
import { Informer } from "../../kube/informer.js";
import { LeaderElector, type ElectionTiming } from "../../kube/leader-election.js";
import type { ResourceType } from "../../kube/resources.js";
import { sleep } from "../../retry/backoff.js";
import type { ControllerDeclaration } from "./builder.js";
import { Controller, type ControllerOptions } from "./controller.js";
import type { Logger } from "../../base/log.js";
import { agentMetrics } from "./metrics.js";
import { SharedShape, type CacheShape } from "./trim.js";

export interface ManagerOptions {
  readonly kube: KubeClient;
  readonly region: string;
  readonly log: Logger;
  readonly registry: Registry;
  readonly watchTimeoutSeconds?: number;
  readonly watchdogMs?: number;
  /** How often the Kubernetes API is probed (default 5 s; 0 disables). */
  readonly probeIntervalMs?: number;
  /** Leader election among the agent replicas of this cluster and region (default: off). */
  readonly election?: {
    readonly namespace: string;
    readonly name: string;
    readonly identity: string;
    readonly timing?: ElectionTiming;
  };
}

/** How long a cache added while running may take to sync before the kind's call fails. */
const CACHE_SYNC_TIMEOUT_MS = 30_000;

// Erasing a controller's type parameters for a heterogeneous list.
type AnyController = Controller<unknown, unknown, unknown, unknown>;

export class Manager {
  readonly #o: ManagerOptions;
  readonly #informers = new Map<string, Informer>();
  /** What the kinds sharing each cache declared they read of it. */
  readonly #shapes = new Map<string, SharedShape>();
  readonly #controllers: AnyController[] = [];
  readonly #abort = new AbortController();
  #running = false;
  #kubeOkAt: number | undefined;
  #kubeState: "unknown" | "up" | "down" = "unknown";
  readonly #elector: LeaderElector | undefined;
  #transition: Promise<unknown> = Promise.resolve();
  /** Caches added after start, and the loops of this run. */
  readonly #late = new Set<Informer>();
  #loops: Promise<unknown>[] = [];

  constructor(opts: ManagerOptions) {
    this.#o = opts;
    const up = (): number => (this.#kubeState === "up" ? 1 : 0);
    const age = (): number => (this.#kubeOkAt === undefined ? -1 : (Date.now() - this.#kubeOkAt) / 1000);
    new Gauge({
      name: "krane_agent_kube_api_up",
      help: "1 while the Kubernetes API server answers the agent's probe.",
      registers: [opts.registry],
      collect() {
        this.set(up());
      },
    });
    const leading = (): number => (this.leading ? 1 : 0);
    new Gauge({
      name: "krane_agent_leader",
      help: "1 while this replica runs the controllers (leads, or leader election is off).",
      registers: [opts.registry],
      collect() {
        this.set(leading());
      },
    });
    const e = opts.election;
    if (e) {
      this.#elector = new LeaderElector({
        kube: opts.kube,
        namespace: e.namespace,
        name: e.name,
        identity: e.identity,
        timing: e.timing,
        log: opts.log,
        // Controllers start and stop in order: a stop finishes before the next start begins.
        onStartedLeading: () => void (this.#transition = this.#transition.then(() => this.#startControllers())),
        onStoppedLeading: () =>
          (this.#transition = this.#transition.then(() => Promise.all(this.#controllers.map((c) => c.stop())))),
      });
    }
    new Gauge({
      name: "krane_agent_kube_api_last_ok_age_seconds",
      help: "Seconds since the Kubernetes API server last answered the agent's probe (-1: never).",
      registers: [opts.registry],
      collect() {
        this.set(age());
      },
    });
  }

  /**
   * The shared cache of a resource type in one namespace (or all). Kinds that read the same
   * resource in the same scope share it. One created while the manager runs starts at once,
   * under the same watchdog and metrics as the others.
   */
  informer(r: ResourceType, selector?: string, namespace?: string, shape?: CacheShape): Informer {
    const id = `${r.group}/${r.version}/${r.plural}@${namespace ?? "*"}`;
    const want = selector ?? regionSelector(this.#o.region);
    let shared = this.#shapes.get(id);
    if (!shared) {
      shared = new SharedShape(r.plural);
      this.#shapes.set(id, shared);
    }
    if (shape) shared.add(shape);
    const existing = this.#informers.get(id);
    if (existing) {
      if (existing.labelSelector !== want) {
        throw new Error(`${r.plural} is cached with selector "${existing.labelSelector}"; a kind asked for "${want}"`);
      }
      return existing;
    }
    const m = agentMetrics(this.#o.registry);
    const inf = new Informer({
      resource: r,
      labelSelector: want,
      namespace,
      client: this.#o.kube,
      log: this.#o.log,
      timeoutSeconds: this.#o.watchTimeoutSeconds,
      watchdogMs: this.#o.watchdogMs,
      transform: shared.transform(),
      onEvent: (event) => m.watchEvents.inc({ resource: r.plural, event }),
    });
    this.#informers.set(id, inf);
    if (this.#running) {
      // Added while running (a kind found it needs it): it starts now. It does not count for
      // readiness — a kind the agent may not list would keep the agent unready for good —
      // the kind that asked waits for it instead (`cache`).
      this.#late.add(inf);
      const signal = this.#abort.signal;
      setMaxListeners(this.#listenerLimit(), signal);
      this.#loops.push(inf.run(signal));
    }
    return inf;
  }

  /**
   * A shared cache (all namespaces) of a resource no kind declared, added while the manager runs
   * and synced: rejects when it has not synced within `syncTimeoutMs` (e.g. the agent may not
   * list the resource), so the caller's reconcile retries with its backoff instead of hanging.
   */
  async cache(r: ResourceType, selector?: string, syncTimeoutMs = CACHE_SYNC_TIMEOUT_MS): Promise<Informer> {
    const inf = this.informer(r, selector);
    if (inf.synced) return inf;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        inf.waitSynced(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new Error(
                  `the cache of ${r.plural}.${r.group || "core"} did not sync within ${syncTimeoutMs / 1000} s (may the agent list them?)`,
                ),
              ),
            syncTimeoutMs,
          );
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
    return inf;
  }

  /** Builds a controller of a declared kind on the shared caches. */
  add<Msg, D, Del, R>(
    decl: ControllerDeclaration<Msg, D, Del, R>,
    opts: ControllerOptions = {},
  ): Controller<Msg, D, Del, R> {
    if (this.#controllers.some((c) => c.name === decl.name))
      throw new Error(`controller ${decl.name} registered twice`);
    const c = new Controller(
      decl,
      {
        kube: this.#o.kube,
        region: this.#o.region,
        log: this.#o.log,
        registry: this.#o.registry,
        informer: (r, s, ns, shape) => this.informer(r, s, ns, shape),
        cache: (r, s) => this.cache(r, s),
      },
      opts,
    );
    this.#controllers.push(c as unknown as AnyController);
    return c;
  }

  get controllers(): readonly AnyController[] {
    return this.#controllers;
  }

  controller(name: string): AnyController | undefined {
    return this.#controllers.find((c) => c.name === name);
  }

  /** Whether every cache declared before start has synced (caches added later: see `informer`). */
  get cachesSynced(): boolean {
    for (const i of this.#informers.values()) if (!i.synced && !this.#late.has(i)) return false;
    return true;
  }

  /** Whether this replica runs the controllers (it leads, or leader election is off). */
  get leading(): boolean {
    return this.#elector === undefined || this.#elector.isLeading();
  }

  /** The leader-election identity (undefined with election off). */
  get identity(): string | undefined {
    return this.#elector?.identity;
  }

  /** Why a Kubernetes write must not happen now (undefined: go ahead). */
  writeRefusal(): string | undefined {
    if (this.#elector === undefined || this.#elector.isLeading()) return undefined;
    return `this agent replica (${this.#elector.identity}) does not hold the leader lease`;
  }

  /** Test hook: stop renewing the lease, as a stalled replica would. */
  pauseLeaseRenewals(paused: boolean): void {
    this.#elector?.pauseRenewals(paused);
  }

  /** Whether the API server answered the last probe, and when it last did (unix ms). */
  get kubeApi(): { up: boolean; lastOkAt: number | undefined } {
    return { up: this.#kubeState === "up", lastOkAt: this.#kubeOkAt };
  }

  start(): void {
    if (this.#running) return;
    const signal = this.#abort.signal;
    const informers = [...this.#informers.values()];
    setMaxListeners(this.#listenerLimit(), signal);
    const loops: Promise<unknown>[] = informers.map((i) => i.run(signal));
    loops.push(
      Promise.all(informers.map((i) => i.waitSynced())).then(() => {
        if (signal.aborted) return;
        if (this.#elector) return this.#elector.run(signal);
        this.#startControllers();
      }),
    );
    loops.push(this.#probeLoop(signal));
    this.#loops = loops;
    this.#running = true;
  }

  /**
   * Listeners on the manager's signal, all removed when their wait or request ends: per informer
   * its watch and a list request or backoff sleep (2), the API probe's request and sleep (2), the
   * elector's request and sleep (2). More would be a leak, so the limit says exactly that.
   */
  #listenerLimit(): number {
    return 2 * this.#informers.size + 6;
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    // Loops may be added while the earlier ones settle (a cache a reconcile asked for).
    for (let settled = 0; settled < this.#loops.length;) {
      const upTo = this.#loops.length;
      await Promise.allSettled(this.#loops.slice(settled, upTo));
      settled = upTo;
    }
    await this.#transition;
    await Promise.all(this.#controllers.map((c) => c.stop()));
    this.#running = false;
  }

  #startControllers(): void {
    if (this.#abort.signal.aborted) return;
    for (const c of this.#controllers) c.start();
  }

  async #probeLoop(signal: AbortSignal): Promise<void> {
    const every = this.#o.probeIntervalMs ?? 5_000;
    if (every <= 0) return;
    while (!signal.aborted) {
      const probe = new AbortController();
      const cancel = (): void => probe.abort();
      signal.addEventListener("abort", cancel, { once: true });
      const timer = setTimeout(cancel, Math.min(every, 3_000));
      try {
        await this.#o.kube.raw("GET", "/version", undefined, probe.signal);
        if (this.#kubeState === "down") this.#o.log.warn({}, "Kubernetes API answering again");
        this.#kubeState = "up";
        this.#kubeOkAt = Date.now();
      } catch (err) {
        if (signal.aborted) break;
        // Logged once per outage, not per probe.
        if (this.#kubeState !== "down")
          this.#o.log.warn({ err: err instanceof Error ? err.message : String(err) }, "Kubernetes API not answering");
        this.#kubeState = "down";
      } finally {
        clearTimeout(timer);
        signal.removeEventListener("abort", cancel);
      }
      await sleep(every, signal);
    }
  }
}

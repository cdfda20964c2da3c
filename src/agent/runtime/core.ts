// What the parts of one controller share (controller.ts builds it; intake.ts, reconcile.ts and
// resync.ts work on it): the kind's declaration, the agent's clients, and the state of the
// current run (queue, desired store, ctrl link), which a new run after a lost leadership replaces.
import type { Registry } from "prom-client";
import type { KubeClient } from "../../kube/client.js";
import type { Informer } from "../../kube/informer.js";
import type { KubeObject } from "../../kube/object.js";
import type { ResourceType } from "../../kube/resources.js";
import type { CacheShape } from "./trim.js";
import type { BackoffPolicy } from "../../retry/backoff.js";
import type { WorkQueue } from "../../retry/queue.js";
import type { BreakerConfig } from "./breaker.js";
import type { ControllerDeclaration, KindContext } from "./builder.js";
import type { CtrlLink } from "./ctrl-link.js";
import type { DesiredStore } from "./desired.js";
import type { Logger } from "../../base/log.js";
import type { AgentMetrics } from "./metrics.js";
import type { ClusterWrites } from "./writes.js";

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
  /** The shared cache of `r`, keeping what `shape` says the kind reads (./trim.ts). */
  informer(r: ResourceType, selector?: string, namespace?: string, shape?: CacheShape): Informer;
  /** A shared cache of a resource no kind declared, added after start and synced (see Manager.cache). */
  cache(r: ResourceType, selector?: string): Promise<Informer>;
}

export interface ControllerCore<Msg, D, Del, R> {
  readonly name: string;
  readonly decl: ControllerDeclaration<Msg, D, Del, R>;
  readonly env: ControllerEnv;
  readonly opts: ControllerOptions;
  readonly m: AgentMetrics;
  readonly ctx: KindContext<D, Del, R>;
  readonly writes: ClusterWrites;
  readonly primary: Informer;
  /** Of the current run: the controller replaces them when a new run starts. */
  desired: DesiredStore<D, Del>;
  queue: WorkQueue;
  link: CtrlLink<Msg, D, Del, R>;
  /**
   * Keys whose status was computed since the last event that could change it (an event of the
   * primary or an observed resource for the key, a rejection, a snapshot): a reconcile computes
   * the status only for keys not in here, so desired-state changes and drift checks cost no
   * status work.
   */
  readonly statusClean: Set<string>;
  primaryOf(key: string): KubeObject | undefined;
  /** Refuses a desired state or delete: logged, counted and reported to ctrl as rejected. */
  reject(key: string, subject: { desired: D } | { ref: Del }, reason: string): void;
}

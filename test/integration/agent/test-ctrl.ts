// TestCtrl: an in-memory ClusterService for the agent's tests and bench, serving both kinds
// (deployments and sentinels) over real HTTP/2 (h2c). It is a fake rather than the real ctrl
// (src/ctrl) because a test needs three things the real one does not offer: take ctrl down and
// bring it back on the same port, as in a crash; make chosen methods answer Unavailable (to fail
// one controller's stream and trip its breaker but not the other's); and drive desired state
// directly, including dropping an object without telling the stream (an orphan). Per region and
// kind it keeps the desired state and an outbox with its own version sequence; streams start with
// a bookmark as ctrl's do, then a snapshot at cursor 0, and get a bookmark whenever they have been
// quiet for `keepaliveMs`. It records reports and heartbeats and counts calls per method.
import { setMaxListeners } from "node:events";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { create, type DescMessage, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import {
  ApplyDeploymentSchema,
  ApplySentinelSchema,
  ClusterService,
  DeploymentStateSchema,
  JobStateSchema,
  ReleaseStateSchema,
  SentinelStateSchema,
  type ApplyDeployment,
  type ApplySentinel,
  type DeploymentState,
  type Health,
  type Instance,
  type ReportMeasurementsRequest,
  type ReportUsageRequest,
  type SentinelState,
} from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";

/** A ClusterService method, by its local name ("watchDeployments", "heartbeat", …). */
export type ClusterMethod = keyof ServiceImpl<typeof ClusterService>;

export type DeploymentInit = Partial<Omit<ApplyDeployment, "$typeName">> & { deploymentId: string };
export type SentinelInit = Partial<Omit<ApplySentinel, "$typeName">> & { sentinelId: string };

/** What the agent last reported about a deployment. */
export interface DeploymentReport {
  instances?: Instance[];
  deleted: boolean;
  rejected?: string;
  /** How many "update" reports arrived. */
  updates: number;
}

/** What the agent last reported about a sentinel. */
export interface SentinelReport {
  availableReplicas?: number;
  health?: Health;
  deleted: boolean;
  rejected?: string;
  /** How many "update" reports arrived. */
  updates: number;
}

export interface Heartbeat {
  region: string;
  agentId: string;
  deploymentsVersion: bigint;
  sentinelsVersion: bigint;
}

/**
 * The report kept for an object, with what every kind's report means applied: an update counts
 * and clears "deleted", a delete sets it (a rejection changes neither). The caller adds the
 * kind's own fields.
 */
function record<R extends { deleted: boolean; updates: number }>(
  reports: Map<string, R>,
  id: string,
  change: "update" | "delete" | "rejected",
): R {
  let rep = reports.get(id);
  if (!rep) reports.set(id, (rep = { deleted: false, updates: 0 } as R));
  if (change === "update") {
    rep.deleted = false;
    rep.updates++;
  } else if (change === "delete") rep.deleted = true;
  return rep;
}

/** One message of a watch stream, before it is put into the kind's state message. */
type Frame<A> =
  | { case: "bookmark"; keepaliveMs: number }
  | { case: "snapshotStart" }
  | { case: "snapshotEnd"; head: bigint }
  | { case: "apply"; value: A }
  | { case: "delete"; value: A };

interface Change<A> {
  readonly version: bigint;
  readonly case: "apply" | "delete";
  readonly value: A;
}

interface RegionLog<A> {
  readonly desired: Map<string, A>;
  /** outbox[i].version === i + 1: versions are dense from 1 to head. */
  readonly outbox: Change<A>[];
  head: bigint;
}

/** The `state` oneof of a kind's stream message; a delete carries only what `deleteOf` keeps. */
function oneof<A, Del>(
  f: Frame<A>,
  deleteOf: (a: A) => Del,
):
  | { case: "bookmark"; value: { keepaliveIntervalMs: number } }
  | { case: "snapshotStart"; value: Record<string, never> }
  | { case: "snapshotEnd"; value: { headVersion: bigint } }
  | { case: "apply"; value: A }
  | { case: "delete"; value: Del } {
  switch (f.case) {
    case "bookmark":
      return { case: "bookmark", value: { keepaliveIntervalMs: f.keepaliveMs } };
    case "snapshotStart":
      return { case: "snapshotStart", value: {} };
    case "snapshotEnd":
      return { case: "snapshotEnd", value: { headVersion: f.head } };
    case "apply":
      return { case: "apply", value: f.value };
    case "delete":
      return { case: "delete", value: deleteOf(f.value) };
  }
}

/** Desired state and outbox of one kind, per region. */
class Kind<D extends DescMessage, S> {
  readonly #regions = new Map<string, RegionLog<MessageShape<D>>>();

  constructor(
    private readonly schema: D,
    readonly state: (version: bigint, f: Frame<MessageShape<D>>) => S,
    private readonly committed: () => void,
  ) {}

  log(region: string): RegionLog<MessageShape<D>> {
    let l = this.#regions.get(region);
    if (!l) this.#regions.set(region, (l = { desired: new Map(), outbox: [], head: 0n }));
    return l;
  }

  /** The current desired message with `init`'s fields set over it (and the region). */
  preview(region: string, id: string, init: MessageInitShape<D>): MessageShape<D> {
    const prev: Record<string, unknown> = { ...this.log(region).desired.get(id) };
    delete prev.$typeName;
    return create(this.schema, { ...prev, ...init, region } as MessageInitShape<D>);
  }

  apply(region: string, id: string, init: MessageInitShape<D>): MessageShape<D> {
    const msg = this.preview(region, id, init);
    const log = this.log(region);
    log.desired.set(id, msg);
    this.#append(log, "apply", msg);
    return msg;
  }

  delete(region: string, id: string): void {
    const log = this.log(region);
    const msg = log.desired.get(id);
    if (!msg) return;
    log.desired.delete(id);
    this.#append(log, "delete", msg);
  }

  forget(region: string, id: string): void {
    this.log(region).desired.delete(id);
  }

  /** The batch read: the desired state of each id, or the id in notFound. */
  states(region: string, ids: readonly string[]): { states: S[]; notFound: string[] } {
    const desired = this.log(region).desired;
    const states: S[] = [];
    const notFound: string[] = [];
    for (const id of ids) {
      const m = desired.get(id);
      if (m) states.push(this.state(0n, { case: "apply", value: m }));
      else notFound.push(id);
    }
    return { states, notFound };
  }

  one(region: string, id: string): S {
    const m = this.log(region).desired.get(id);
    if (!m) throw new ConnectError("not found", Code.NotFound);
    return this.state(0n, { case: "apply", value: m });
  }

  #append(log: RegionLog<MessageShape<D>>, kind: "apply" | "delete", value: MessageShape<D>): void {
    log.head++;
    log.outbox.push({ version: log.head, case: kind, value });
    this.committed();
  }
}

export class TestCtrl {
  readonly token: string;
  readonly calls = new Map<ClusterMethod, number>();
  readonly deploymentReports = new Map<string, DeploymentReport>();
  readonly sentinelReports = new Map<string, SentinelReport>();
  readonly heartbeats: Heartbeat[] = [];
  /** Measurement reports received, in order. */
  readonly measurements: ReportMeasurementsRequest[] = [];
  readonly usage: ReportUsageRequest[] = [];
  /** Methods that answer Unavailable until removed (see setFailing). */
  readonly failing = new Set<ClusterMethod>();
  readonly #deployments = new Kind(
    ApplyDeploymentSchema,
    (version, f): DeploymentState =>
      create(DeploymentStateSchema, {
        version,
        state: oneof(f, ({ deploymentId, k8sName, k8sNamespace }) => ({ deploymentId, k8sName, k8sNamespace })),
      }),
    () => this.#notify(),
  );
  readonly #sentinels = new Kind(
    ApplySentinelSchema,
    (version, f): SentinelState =>
      create(SentinelStateSchema, { version, state: oneof(f, ({ sentinelId, k8sName }) => ({ sentinelId, k8sName })) }),
    () => this.#notify(),
  );
  readonly #waiters = new Set<() => void>();
  readonly #sessions = new Set<http2.ServerHttp2Session>();
  #server: http2.Http2Server | undefined;
  #shutdown: AbortController | undefined;
  #port = 0;

  /** A quiet stream gets a bookmark this often, as from ctrl (ms). */
  keepaliveMs = 1_000;

  constructor(token = "test-token") {
    this.token = token;
  }

  get url(): string {
    return `http://127.0.0.1:${this.#port}`;
  }

  count(method: ClusterMethod): number {
    return this.calls.get(method) ?? 0;
  }

  /** Makes methods fail with Unavailable (or succeed again); their open streams break now. */
  setFailing(methods: readonly ClusterMethod[], failing: boolean): void {
    for (const m of methods) {
      if (failing) this.failing.add(m);
      else this.failing.delete(m);
    }
    this.#notify();
  }

  /** Commits a deployment: new, or these fields changed over its current desired state. */
  applyDeployment(region: string, d: DeploymentInit): ApplyDeployment {
    return this.#deployments.apply(region, d.deploymentId, d);
  }

  /** The message applyDeployment would commit, without committing it. */
  previewDeployment(region: string, d: DeploymentInit): ApplyDeployment {
    return this.#deployments.preview(region, d.deploymentId, d);
  }

  /** Commits the deletion of a deployment (nothing if it is not desired). */
  deleteDeployment(region: string, deploymentId: string): void {
    this.#deployments.delete(region, deploymentId);
  }

  /** Drops a deployment from the desired state without a stream message (an orphan). */
  forgetDeployment(region: string, deploymentId: string): void {
    this.#deployments.forget(region, deploymentId);
  }

  /** Commits a sentinel: new, or these fields changed over its current desired state. */
  applySentinel(region: string, s: SentinelInit): ApplySentinel {
    return this.#sentinels.apply(region, s.sentinelId, s);
  }

  /** The message applySentinel would commit, without committing it. */
  previewSentinel(region: string, s: SentinelInit): ApplySentinel {
    return this.#sentinels.preview(region, s.sentinelId, s);
  }

  /** Commits the deletion of a sentinel (nothing if it is not desired). */
  deleteSentinel(region: string, sentinelId: string): void {
    this.#sentinels.delete(region, sentinelId);
  }

  /** Drops a sentinel from the desired state without a stream message (an orphan). */
  forgetSentinel(region: string, sentinelId: string): void {
    this.#sentinels.forget(region, sentinelId);
  }

  /** Listens on `port`; by default the port of the previous start (a fresh one the first time). */
  async start(port = this.#port): Promise<void> {
    this.#shutdown = new AbortController();
    // Connect adds one listener per call in flight to the shutdown signal (removed when the call
    // ends); past ten, Node would warn of a leak that is not one (as in ctrl's server.ts).
    setMaxListeners(0, this.#shutdown.signal);
    const handler = connectNodeAdapter({
      routes: (router) => this.#routes(router),
      shutdownSignal: this.#shutdown.signal,
    });
    const server = http2.createServer(handler);
    server.on("session", (sess) => {
      this.#sessions.add(sess);
      sess.on("close", () => this.#sessions.delete(sess));
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => resolve());
    });
    this.#port = (server.address() as AddressInfo).port;
    this.#server = server;
  }

  /** Goes down as in a crash: the listener closes and open streams die now. */
  async stop(): Promise<void> {
    this.#shutdown?.abort();
    this.#notify();
    const server = this.#server;
    this.#server = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      for (const s of this.#sessions) s.destroy();
    });
  }

  /** Wakes every open stream (a commit, a failure injected, a stop). */
  #notify(): void {
    const w = [...this.#waiters];
    this.#waiters.clear();
    for (const f of w) f();
  }

  /** Until a commit, the signal, or the keepalive interval (then true: time for a bookmark). */
  #wait(signal: AbortSignal): Promise<boolean> {
    return new Promise((resolve) => {
      const done = (quiet: boolean): void => {
        clearTimeout(timer);
        this.#waiters.delete(woken);
        signal.removeEventListener("abort", woken);
        resolve(quiet);
      };
      const woken = (): void => done(false);
      const timer = setTimeout(() => done(true), this.keepaliveMs);
      this.#waiters.add(woken);
      signal.addEventListener("abort", woken, { once: true });
    });
  }

  /** Auth, call counting and injected failures, for every method. */
  #enter(method: ClusterMethod, ctx: HandlerContext): void {
    if (ctx.requestHeader.get("authorization") !== `Bearer ${this.token}`)
      throw new ConnectError("bad token", Code.Unauthenticated);
    this.calls.set(method, this.count(method) + 1);
    this.#failIfFailing(method);
  }

  #failIfFailing(method: ClusterMethod): void {
    if (this.failing.has(method)) throw new ConnectError(`${method} is failing (test)`, Code.Unavailable);
  }

  /** A snapshot at cursor 0, then every change after the cursor, then new ones as they commit. */
  async *#stream<D extends DescMessage, S>(
    method: ClusterMethod,
    kind: Kind<D, S>,
    region: string,
    versionLastSeen: bigint,
    ctx: HandlerContext,
  ): AsyncGenerator<S> {
    this.#enter(method, ctx);
    const log = kind.log(region);
    let cursor = versionLastSeen;
    // As ctrl does: a bookmark first (the stream is accepted; how often it will speak).
    yield kind.state(cursor === 0n ? 0n : cursor, { case: "bookmark", keepaliveMs: this.keepaliveMs });
    if (cursor === 0n) {
      // Desired state and head taken together: what commits while the snapshot is being sent
      // follows it as changes.
      const desired = [...log.desired.values()];
      const head = log.head;
      yield kind.state(0n, { case: "snapshotStart" });
      for (const m of desired) yield kind.state(0n, { case: "apply", value: m });
      yield kind.state(0n, { case: "snapshotEnd", head });
      cursor = head;
    }
    while (!ctx.signal.aborted) {
      this.#failIfFailing(method);
      for (let i = Number(cursor); i < log.outbox.length; i++) {
        const c = log.outbox[i];
        if (!c) break;
        cursor = c.version;
        yield kind.state(c.version, c);
      }
      if (await this.#wait(ctx.signal)) yield kind.state(cursor, { case: "bookmark", keepaliveMs: this.keepaliveMs });
    }
    throw new ConnectError("shutting down", Code.Unavailable);
  }

  /** A stream of a kind with nothing desired: an empty snapshot, then nothing until it ends. */
  async *#empty<D extends typeof ReleaseStateSchema | typeof JobStateSchema>(
    method: ClusterMethod,
    schema: D,
    ctx: HandlerContext,
  ): AsyncGenerator<MessageShape<D>> {
    this.#enter(method, ctx);
    const bookmark = (): MessageShape<D> =>
      create(schema, {
        version: 0n,
        state: { case: "bookmark", value: { keepaliveIntervalMs: this.keepaliveMs } },
      } as never) as MessageShape<D>;
    yield bookmark();
    yield create(schema, { version: 0n, state: { case: "snapshotStart", value: {} } } as never) as MessageShape<D>;
    yield create(schema, {
      version: 0n,
      state: { case: "snapshotEnd", value: { headVersion: 0n } },
    } as never) as MessageShape<D>;
    while (!ctx.signal.aborted) {
      this.#failIfFailing(method);
      if (await this.#wait(ctx.signal)) yield bookmark();
    }
    throw new ConnectError("shutting down", Code.Unavailable);
  }

  #routes(router: ConnectRouter): void {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const self = this;
    const deployments = this.#deployments;
    const sentinels = this.#sentinels;
    router.service(ClusterService, {
      watchDeployments(req, ctx) {
        return self.#stream("watchDeployments", deployments, req.region, req.versionLastSeen, ctx);
      },
      async getDesiredDeploymentStates(req, ctx) {
        self.#enter("getDesiredDeploymentStates", ctx);
        return deployments.states(req.region, req.deploymentIds);
      },
      async getDesiredDeploymentState(req, ctx) {
        self.#enter("getDesiredDeploymentState", ctx);
        return deployments.one(req.region, req.deploymentId);
      },
      async reportDeploymentStatus(req, ctx) {
        self.#enter("reportDeploymentStatus", ctx);
        const c = req.change;
        if (!c.case) throw new ConnectError("empty report", Code.InvalidArgument);
        const rep = record(self.deploymentReports, c.value.deploymentId, c.case);
        if (c.case === "update") rep.instances = c.value.instances;
        else if (c.case === "delete") rep.instances = [];
        else rep.rejected = c.value.reason;
        return {};
      },
      watchSentinels(req, ctx) {
        return self.#stream("watchSentinels", sentinels, req.region, req.versionLastSeen, ctx);
      },
      async getDesiredSentinelStates(req, ctx) {
        self.#enter("getDesiredSentinelStates", ctx);
        return sentinels.states(req.region, req.sentinelIds);
      },
      async getDesiredSentinelState(req, ctx) {
        self.#enter("getDesiredSentinelState", ctx);
        return sentinels.one(req.region, req.sentinelId);
      },
      async reportSentinelStatus(req, ctx) {
        self.#enter("reportSentinelStatus", ctx);
        const c = req.change;
        if (!c.case) throw new ConnectError("empty report", Code.InvalidArgument);
        const rep = record(self.sentinelReports, c.value.sentinelId, c.case);
        if (c.case === "update") {
          rep.availableReplicas = c.value.availableReplicas;
          rep.health = c.value.health;
        } else if (c.case === "delete") rep.availableReplicas = 0;
        else rep.rejected = c.value.reason;
        return {};
      },
      // Releases, jobs and gateways: nothing desired (an empty snapshot, then quiet), reports accepted. The
      // release, job and secret tests use the real ctrl.
      watchReleases(_req, ctx) {
        return self.#empty("watchReleases", ReleaseStateSchema, ctx);
      },
      async getDesiredReleaseStates(req, ctx) {
        self.#enter("getDesiredReleaseStates", ctx);
        return { states: [], notFound: req.releaseIds };
      },
      async getDesiredReleaseState(_req, ctx) {
        self.#enter("getDesiredReleaseState", ctx);
        throw new ConnectError("not desired", Code.NotFound);
      },
      async reportReleaseStatus(_req, ctx) {
        self.#enter("reportReleaseStatus", ctx);
        return {};
      },
      watchJobs(_req, ctx) {
        return self.#empty("watchJobs", JobStateSchema, ctx);
      },
      async getDesiredJobStates(req, ctx) {
        self.#enter("getDesiredJobStates", ctx);
        return { states: [], notFound: req.jobIds };
      },
      async getDesiredJobState(_req, ctx) {
        self.#enter("getDesiredJobState", ctx);
        throw new ConnectError("not desired", Code.NotFound);
      },
      async reportJobStatus(_req, ctx) {
        self.#enter("reportJobStatus", ctx);
        return {};
      },
      async getSecretValues(_req, ctx) {
        self.#enter("getSecretValues", ctx);
        throw new ConnectError("this test ctrl keeps no secrets", Code.NotFound);
      },
      async reportMeasurements(req, ctx) {
        self.#enter("reportMeasurements", ctx);
        self.measurements.push(req);
        return { stored: req.revisions.length };
      },
      async reportUsage(req, ctx) {
        self.#enter("reportUsage", ctx);
        self.usage.push(req);
        return { stored: req.minutes.reduce((n, m) => n + m.instances.length, 0) };
      },
      async heartbeat(req, ctx) {
        self.#enter("heartbeat", ctx);
        const { region, agentId, deploymentsVersion, sentinelsVersion } = req;
        self.heartbeats.push({ region, agentId, deploymentsVersion, sentinelsVersion });
        return {};
      },
    });
  }
}

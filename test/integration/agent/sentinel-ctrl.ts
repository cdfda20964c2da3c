// An in-memory ClusterService serving BOTH controller kinds (deployments and sentinels) for the
// sentinel controller's tests, over real HTTP/2 (h2c) so it can go down and come back on the
// same port. Each kind has its own outbox and version sequence per region, streams start with
// a snapshot at cursor 0, and chosen methods can be made to fail with Unavailable — which is
// how a test makes ctrl fail one controller's stream (and trip its breaker) but not the other's.
// The real ctrl (src/ctrl) cannot yet change or delete a sentinel through its public API, so
// these tests use this fake; sentinel-ctrl-e2e covers the real ctrl path that exists.
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter, type HandlerContext } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import {
  ApplyDeploymentSchema,
  ApplySentinelSchema,
  ClusterService,
  DeploymentStateSchema,
  SentinelStateSchema,
  type ApplyDeployment,
  type ApplySentinel,
  type DeploymentState,
  type Health,
  type SentinelState,
} from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";

type Change<A> = { readonly version: bigint; readonly id: string; readonly apply?: A; readonly deleteOf?: A };

class KindLog<A> {
  readonly desired = new Map<string, A>();
  readonly outbox: Change<A>[] = [];
  head = 0n;
}

export interface SentinelReport {
  availableReplicas?: number;
  health?: Health;
  deleted: boolean;
  rejected?: string;
  updates: number;
}

export type SentinelInit = Partial<Omit<ApplySentinel, "$typeName">> & { sentinelId: string };
export type DeploymentInit = Partial<Omit<ApplyDeployment, "$typeName">> & { deploymentId: string };

export class TwoKindCtrl {
  readonly token = "test-token";
  readonly calls = new Map<string, number>();
  readonly sentinelReports = new Map<string, SentinelReport>();
  readonly deploymentReports = new Map<string, { instances: number; deleted: boolean }>();
  /** Method names (e.g. "watchDeployments") that answer Unavailable until removed. */
  readonly failing = new Set<string>();
  readonly #sentinels = new Map<string, KindLog<ApplySentinel>>();
  readonly #deployments = new Map<string, KindLog<ApplyDeployment>>();
  readonly #waiters = new Set<() => void>();
  readonly #sessions = new Set<http2.ServerHttp2Session>();
  #server: http2.Http2Server | undefined;
  #shutdown: AbortController | undefined;
  #port = 0;

  get url(): string {
    return `http://127.0.0.1:${this.#port}`;
  }

  count(method: string): number {
    return this.calls.get(method) ?? 0;
  }

  /** Makes methods fail (or succeed again); open streams of failing methods break now. */
  setFailing(methods: string[], failing: boolean): void {
    for (const m of methods) {
      if (failing) this.failing.add(m);
      else this.failing.delete(m);
    }
    this.#notify();
  }

  /** Commits a sentinel (new, or fields changed over the current desired state). */
  applySentinel(region: string, s: SentinelInit): ApplySentinel {
    const msg = this.applySentinelPreview(region, s);
    this.#commit(this.#log(this.#sentinels, region), msg.sentinelId, msg, false);
    return msg;
  }

  /** The message applySentinel would commit, without committing it. */
  applySentinelPreview(region: string, s: SentinelInit): ApplySentinel {
    const prev: Record<string, unknown> = { ...this.#log(this.#sentinels, region).desired.get(s.sentinelId) };
    delete prev.$typeName;
    return create(ApplySentinelSchema, { ...prev, ...s, region } as MessageInitShape<typeof ApplySentinelSchema>);
  }

  deleteSentinel(region: string, sentinelId: string): void {
    const log = this.#log(this.#sentinels, region);
    const s = log.desired.get(sentinelId);
    if (s) this.#commit(log, sentinelId, s, true);
  }

  /** Drops a sentinel from the desired state without a stream message (the agent must find the orphan). */
  forgetSentinel(region: string, sentinelId: string): void {
    this.#log(this.#sentinels, region).desired.delete(sentinelId);
  }

  applyDeployment(region: string, d: DeploymentInit): ApplyDeployment {
    const log = this.#log(this.#deployments, region);
    const prev: Record<string, unknown> = { ...log.desired.get(d.deploymentId) };
    delete prev.$typeName;
    const msg = create(ApplyDeploymentSchema, { ...prev, ...d, region } as MessageInitShape<typeof ApplyDeploymentSchema>);
    this.#commit(log, msg.deploymentId, msg, false);
    return msg;
  }

  async start(port = this.#port): Promise<void> {
    this.#shutdown = new AbortController();
    const handler = connectNodeAdapter({ routes: (router) => this.#routes(router), shutdownSignal: this.#shutdown.signal });
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

  /** Goes down as in a crash: the listener closes and open streams die. */
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

  #log<A>(m: Map<string, KindLog<A>>, region: string): KindLog<A> {
    let l = m.get(region);
    if (!l) m.set(region, (l = new KindLog<A>()));
    return l;
  }

  #commit<A>(log: KindLog<A>, id: string, msg: A, isDelete: boolean): void {
    log.head++;
    if (isDelete) {
      log.desired.delete(id);
      log.outbox.push({ version: log.head, id, deleteOf: msg });
    } else {
      log.desired.set(id, msg);
      log.outbox.push({ version: log.head, id, apply: msg });
    }
    this.#notify();
  }

  #notify(): void {
    const w = [...this.#waiters];
    this.#waiters.clear();
    for (const f of w) f();
  }

  #wait(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        this.#waiters.delete(done);
        signal.removeEventListener("abort", done);
        resolve();
      };
      this.#waiters.add(done);
      signal.addEventListener("abort", done, { once: true });
    });
  }

  /** Auth, call counting and injected failures, for every method. */
  #enter(method: string, ctx: HandlerContext): void {
    if (ctx.requestHeader.get("authorization") !== `Bearer ${this.token}`) throw new ConnectError("bad token", Code.Unauthenticated);
    this.calls.set(method, this.count(method) + 1);
    if (this.failing.has(method)) throw new ConnectError(`${method} is failing (test)`, Code.Unavailable);
  }

  /** A snapshot at cursor 0, then every change after the cursor, then new ones as they commit. */
  async *#stream<A, S>(
    method: string,
    log: KindLog<A>,
    cursorIn: bigint,
    ctx: HandlerContext,
    toState: (version: bigint, c: { apply?: A; deleteOf?: A; start?: true; end?: bigint }) => S,
  ): AsyncGenerator<S> {
    let cursor = cursorIn;
    if (cursor === 0n) {
      yield toState(0n, { start: true });
      for (const a of log.desired.values()) yield toState(0n, { apply: a });
      yield toState(0n, { end: log.head });
      cursor = log.head;
    }
    while (!ctx.signal.aborted) {
      if (this.failing.has(method)) throw new ConnectError(`${method} is failing (test)`, Code.Unavailable);
      for (const c of log.outbox) {
        if (c.version <= cursor) continue;
        cursor = c.version;
        yield toState(c.version, c);
      }
      await this.#wait(ctx.signal);
    }
    throw new ConnectError("shutting down", Code.Unavailable);
  }

  #routes(router: ConnectRouter): void {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const self = this;
    const sentinelState = (version: bigint, c: { apply?: ApplySentinel; deleteOf?: ApplySentinel; start?: true; end?: bigint }): SentinelState => {
      if (c.start) return create(SentinelStateSchema, { version, state: { case: "snapshotStart", value: {} } });
      if (c.end !== undefined) return create(SentinelStateSchema, { version, state: { case: "snapshotEnd", value: { headVersion: c.end } } });
      if (c.apply) return create(SentinelStateSchema, { version, state: { case: "apply", value: c.apply } });
      const d = c.deleteOf as ApplySentinel;
      return create(SentinelStateSchema, { version, state: { case: "delete", value: { sentinelId: d.sentinelId, k8sName: d.k8sName } } });
    };
    const deploymentState = (
      version: bigint,
      c: { apply?: ApplyDeployment; deleteOf?: ApplyDeployment; start?: true; end?: bigint },
    ): DeploymentState => {
      if (c.start) return create(DeploymentStateSchema, { version, state: { case: "snapshotStart", value: {} } });
      if (c.end !== undefined) return create(DeploymentStateSchema, { version, state: { case: "snapshotEnd", value: { headVersion: c.end } } });
      if (c.apply) return create(DeploymentStateSchema, { version, state: { case: "apply", value: c.apply } });
      const d = c.deleteOf as ApplyDeployment;
      return create(DeploymentStateSchema, {
        version,
        state: { case: "delete", value: { deploymentId: d.deploymentId, k8sName: d.k8sName, k8sNamespace: d.k8sNamespace } },
      });
    };
    router.service(ClusterService, {
      async *watchSentinels(req, ctx) {
        self.#enter("watchSentinels", ctx);
        yield* self.#stream("watchSentinels", self.#log(self.#sentinels, req.region), req.versionLastSeen, ctx, sentinelState);
      },
      async getDesiredSentinelStates(req, ctx) {
        self.#enter("getDesiredSentinelStates", ctx);
        const log = self.#log(self.#sentinels, req.region);
        const states: SentinelState[] = [];
        const notFound: string[] = [];
        for (const id of req.sentinelIds) {
          const s = log.desired.get(id);
          if (s) states.push(sentinelState(0n, { apply: s }));
          else notFound.push(id);
        }
        return { states, notFound };
      },
      async getDesiredSentinelState(req, ctx) {
        self.#enter("getDesiredSentinelState", ctx);
        const s = self.#log(self.#sentinels, req.region).desired.get(req.sentinelId);
        if (!s) throw new ConnectError("not found", Code.NotFound);
        return sentinelState(0n, { apply: s });
      },
      async reportSentinelStatus(req, ctx) {
        self.#enter("reportSentinelStatus", ctx);
        const c = req.change;
        if (!c.case) throw new ConnectError("empty report", Code.InvalidArgument);
        const rep = self.sentinelReports.get(c.value.sentinelId) ?? { deleted: false, updates: 0 };
        if (c.case === "update") {
          rep.availableReplicas = c.value.availableReplicas;
          rep.health = c.value.health;
          rep.deleted = false;
          rep.updates++;
        } else if (c.case === "delete") {
          rep.deleted = true;
          rep.availableReplicas = 0;
        } else {
          rep.rejected = c.value.reason;
        }
        self.sentinelReports.set(c.value.sentinelId, rep);
        return {};
      },
      async *watchDeployments(req, ctx) {
        self.#enter("watchDeployments", ctx);
        yield* self.#stream("watchDeployments", self.#log(self.#deployments, req.region), req.versionLastSeen, ctx, deploymentState);
      },
      async getDesiredDeploymentStates(req, ctx) {
        self.#enter("getDesiredDeploymentStates", ctx);
        const log = self.#log(self.#deployments, req.region);
        const states: DeploymentState[] = [];
        const notFound: string[] = [];
        for (const id of req.deploymentIds) {
          const d = log.desired.get(id);
          if (d) states.push(deploymentState(0n, { apply: d }));
          else notFound.push(id);
        }
        return { states, notFound };
      },
      async reportDeploymentStatus(req, ctx) {
        self.#enter("reportDeploymentStatus", ctx);
        const c = req.change;
        if (c.case === "update") self.deploymentReports.set(c.value.deploymentId, { instances: c.value.instances.length, deleted: false });
        else if (c.case === "delete") self.deploymentReports.set(c.value.deploymentId, { instances: 0, deleted: true });
        return {};
      },
      async heartbeat(_req, ctx) {
        self.#enter("heartbeat", ctx);
        return {};
      },
    });
  }
}

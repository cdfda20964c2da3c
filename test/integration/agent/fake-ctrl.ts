// A small in-memory ClusterService for agent tests, served over real HTTP/2 (h2c) so a test
// can take it down and bring it back on the same port. It keeps per-region desired state and an
// outbox of versioned changes, answers streams with a snapshot when the cursor is 0, records
// reports, and counts calls. (The real ctrl lives in src/ctrl; end-to-end tests use it.)
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import {
  ApplyDeploymentSchema,
  ClusterService,
  DeploymentStateSchema,
  SentinelStateSchema,
  type ApplyDeployment,
  type DeploymentState,
  type Instance,
} from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";

interface RegionState {
  desired: Map<string, ApplyDeployment>;
  outbox: DeploymentState[];
  head: bigint;
}

export interface DeploymentReport {
  instances?: Instance[];
  deleted?: boolean;
  rejected?: string;
  updates: number;
}

export class FakeCtrl {
  readonly token: string;
  readonly calls = new Map<string, number>();
  readonly reports = new Map<string, DeploymentReport>();
  readonly heartbeats: Array<{ region: string; deploymentsVersion: bigint }> = [];
  readonly #regions = new Map<string, RegionState>();
  readonly #waiters = new Set<() => void>();
  #server: http2.Http2Server | undefined;
  #shutdown: AbortController | undefined;
  #port = 0;

  constructor(token = "test-token") {
    this.token = token;
  }

  get url(): string {
    return `http://127.0.0.1:${this.#port}`;
  }

  count(method: string): number {
    return this.calls.get(method) ?? 0;
  }

  region(name: string): RegionState {
    let r = this.#regions.get(name);
    if (!r) this.#regions.set(name, (r = { desired: new Map(), outbox: [], head: 0n }));
    return r;
  }

  /** Commits a deployment (new or changed) in a region. */
  apply(region: string, d: Partial<Omit<ApplyDeployment, "$typeName">> & { deploymentId: string }): ApplyDeployment {
    const r = this.region(region);
    const prev: Record<string, unknown> = { ...r.desired.get(d.deploymentId) };
    delete prev.$typeName;
    const init = { ...prev, ...d, region } as MessageInitShape<typeof ApplyDeploymentSchema>;
    const msg = create(ApplyDeploymentSchema, init);
    r.desired.set(msg.deploymentId, msg);
    r.head++;
    r.outbox.push(create(DeploymentStateSchema, { version: r.head, state: { case: "apply", value: msg } }));
    this.#notify();
    return msg;
  }

  delete(region: string, deploymentId: string): void {
    const r = this.region(region);
    const d = r.desired.get(deploymentId);
    if (!d) return;
    r.desired.delete(deploymentId);
    r.head++;
    r.outbox.push(
      create(DeploymentStateSchema, {
        version: r.head,
        state: { case: "delete", value: { deploymentId, k8sName: d.k8sName, k8sNamespace: d.k8sNamespace } },
      }),
    );
    this.#notify();
  }

  /** Removes a deployment from the desired state without telling the stream (an orphan). */
  forget(region: string, deploymentId: string): void {
    this.region(region).desired.delete(deploymentId);
  }

  async start(port = this.#port): Promise<void> {
    this.#shutdown = new AbortController();
    const handler = connectNodeAdapter({ routes: (router) => this.#routes(router), shutdownSignal: this.#shutdown.signal });
    const server = http2.createServer(handler);
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => resolve());
    });
    this.#port = (server.address() as AddressInfo).port;
    this.#server = server;
    server.on("session", (sess) => {
      this.#sessions.add(sess);
      sess.on("close", () => this.#sessions.delete(sess));
    });
  }

  async stop(): Promise<void> {
    this.#shutdown?.abort();
    this.#notify();
    const server = this.#server;
    this.#server = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      // Streams of the old server must die now, as in a crash.
      for (const s of this.#sessions) s.destroy();
    });
  }

  readonly #sessions = new Set<http2.ServerHttp2Session>();

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

  #auth(header: Headers): void {
    if (header.get("authorization") !== `Bearer ${this.token}`) throw new ConnectError("bad token", Code.Unauthenticated);
  }

  #count(method: string): void {
    this.calls.set(method, this.count(method) + 1);
  }

  #routes(router: ConnectRouter): void {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const self = this;
    router.service(ClusterService, {
      async *watchDeployments(req, ctx) {
        self.#auth(ctx.requestHeader);
        self.#count("watchDeployments");
        const r = self.region(req.region);
        let cursor = req.versionLastSeen;
        if (cursor === 0n) {
          yield create(DeploymentStateSchema, { version: 0n, state: { case: "snapshotStart", value: {} } });
          for (const d of r.desired.values()) yield create(DeploymentStateSchema, { version: 0n, state: { case: "apply", value: d } });
          yield create(DeploymentStateSchema, { version: 0n, state: { case: "snapshotEnd", value: { headVersion: r.head } } });
          cursor = r.head;
        }
        while (!ctx.signal.aborted) {
          for (const m of r.outbox) {
            if (m.version > cursor) {
              cursor = m.version;
              yield m;
            }
          }
          await self.#wait(ctx.signal);
        }
        throw new ConnectError("shutting down", Code.Unavailable);
      },
      async getDesiredDeploymentStates(req, ctx) {
        self.#auth(ctx.requestHeader);
        self.#count("getDesiredDeploymentStates");
        const r = self.region(req.region);
        const states: DeploymentState[] = [];
        const notFound: string[] = [];
        for (const id of req.deploymentIds) {
          const d = r.desired.get(id);
          if (d) states.push(create(DeploymentStateSchema, { version: 0n, state: { case: "apply", value: d } }));
          else notFound.push(id);
        }
        return { states, notFound };
      },
      async getDesiredDeploymentState(req, ctx) {
        self.#auth(ctx.requestHeader);
        self.#count("getDesiredDeploymentState");
        const d = self.region(req.region).desired.get(req.deploymentId);
        if (!d) throw new ConnectError("not found", Code.NotFound);
        return create(DeploymentStateSchema, { version: 0n, state: { case: "apply", value: d } });
      },
      async reportDeploymentStatus(req, ctx) {
        self.#auth(ctx.requestHeader);
        self.#count("reportDeploymentStatus");
        const c = req.change;
        if (!c.case) throw new ConnectError("empty report", Code.InvalidArgument);
        const id = c.value.deploymentId;
        const rep = self.reports.get(id) ?? { updates: 0 };
        if (c.case === "update") {
          rep.instances = c.value.instances;
          rep.deleted = false;
          rep.updates++;
        } else if (c.case === "delete") {
          rep.deleted = true;
          rep.instances = [];
        } else {
          rep.rejected = c.value.reason;
        }
        self.reports.set(id, rep);
        return {};
      },
      // Sentinels: this fake holds none (sentinel-ctrl.ts serves them for the sentinel tests);
      // an empty stream and "not found" answers keep the agent's sentinel controller ready.
      async *watchSentinels(req, ctx) {
        self.#auth(ctx.requestHeader);
        self.#count("watchSentinels");
        if (req.versionLastSeen === 0n) {
          yield create(SentinelStateSchema, { version: 0n, state: { case: "snapshotStart", value: {} } });
          yield create(SentinelStateSchema, { version: 0n, state: { case: "snapshotEnd", value: { headVersion: 0n } } });
        }
        while (!ctx.signal.aborted) await self.#wait(ctx.signal);
        throw new ConnectError("shutting down", Code.Unavailable);
      },
      async getDesiredSentinelStates(req, ctx) {
        self.#auth(ctx.requestHeader);
        self.#count("getDesiredSentinelStates");
        return { states: [], notFound: req.sentinelIds };
      },
      async reportSentinelStatus(_req, ctx) {
        self.#auth(ctx.requestHeader);
        self.#count("reportSentinelStatus");
        return {};
      },
      async heartbeat(req, ctx) {
        self.#auth(ctx.requestHeader);
        self.#count("heartbeat");
        self.heartbeats.push({ region: req.region, deploymentsVersion: req.deploymentsVersion });
        return {};
      },
    });
  }
}

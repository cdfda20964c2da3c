// `krane sentinel`, assembled: the routing source (watches) feeds the balancer; the proxy server
// serves clients on the proxy port; the ops server answers /healthz, /readyz, /metrics and
// /status. Ready means: both caches listed, a valid policy read, not draining. Requests are
// routed as soon as the caches have listed (by the default policy until one is read).
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";
import {
  SENTINEL_STATUS_PATH,
  SENTINEL_WAKE_PATH,
  WAKE_POLL_MS,
  type EdgeAuthPolicy,
  type SentinelStatus,
} from "../contracts/routing.js";
import { loadKubeConfig, type KubeConfigSource } from "../kube/kubeconfig.js";
import { KubeClient } from "../kube/client.js";
import type { ListWatchClient } from "../kube/informer.js";
import type { Logger } from "../base/log.js";
import { EdgeAuth } from "./auth.js";
import { EdgePolicies } from "./policies.js";
import { Balancer, type HealthPolicy } from "./balancer.js";
import { createHoldMetrics, HeldRequests } from "./hold.js";
import type { SentinelSettings } from "./config.js";
import { createSentinelMetrics, instanceKeys, type SentinelMetrics } from "./metrics.js";
import { RequestPath } from "./request-path.js";
import { RoutingSource, type RoutingUpdate } from "./routing-source.js";
import { runningOnBun, type ProxyShell, type ShellOptions } from "./shell.js";
import { endpointCount, promote, startingKeys, type RoutingTable } from "./table.js";
import { PROMOTION_TTL_MS, WarmUp } from "./warm.js";
import { PeerExchange, peerId } from "./peers.js";
import { RequestTap } from "./tap.js";
import { SENTINEL_REQUESTS_PATH } from "../contracts/request-view.js";

/** The proxy port's shell for the runtime this process runs on, loaded only there. */
async function createShell(o: ShellOptions): Promise<ProxyShell> {
  if (runningOnBun()) {
    const { BunProxyServer } = await import("./bun-server.js");
    return new BunProxyServer(o);
  }
  const { createNodeShell } = await import("./server.js");
  return createNodeShell(o);
}

/** Every host refused: the policy in the cluster could not be read and none was before. */
const FAIL_CLOSED: EdgeAuthPolicy = { rules: [], unmatchedHosts: "deny" };

export interface SentinelOptions {
  readonly settings: SentinelSettings;
  readonly log: Logger;
  /** Lists and watches in namespace `sentinel` (default: from kubeConfig or settings.kubeconfig). */
  readonly listWatch?: ListWatchClient;
  readonly kubeConfig?: KubeConfigSource;
  readonly registry?: Registry;
  readonly health?: HealthPolicy;
  /** Watch timeout (tests shorten it). */
  readonly watchTimeoutSeconds?: number;
}

export class Sentinel {
  readonly settings: SentinelSettings;
  readonly metrics: SentinelMetrics;
  readonly balancer: Balancer;
  /** API authentication at the edge (the policy's auth section). */
  readonly auth: EdgeAuth;
  /** Requests held while the environment is at zero (the policy's hold section). */
  readonly held: HeldRequests;
  /** The live request view's records (./tap.ts). */
  readonly tap = new RequestTap();
  /** The environment's edge policies (the policy's policies section). */
  readonly policies: EdgePolicies;
  readonly #log: Logger;
  readonly #path: RequestPath;
  #shell: ProxyShell | undefined;
  readonly #source: RoutingSource;
  readonly #kube: KubeClient | undefined;
  #ops: http.Server | undefined;
  #table: RoutingTable | undefined;
  #policyKnown = false;
  #policyError: string | undefined;
  #problems = "";
  #tableUpdatedAt: Date | undefined;
  #draining = false;
  #drained: Promise<void> | undefined;
  #address: AddressInfo | undefined;
  #opsAddress: AddressInfo | undefined;
  /** The last update from the routing source, as read (before promotions). */
  #update: RoutingUpdate | undefined;
  /** Starting instances found answering while requests were held (./warm.ts): key → when. */
  readonly #promoted = new Map<string, number>();
  readonly #warm: WarmUp;
  /** The rate-limit exchange with the environment's other replicas (undefined: counts alone). */
  readonly #peers: PeerExchange | undefined;

  constructor(o: SentinelOptions) {
    const s = o.settings;
    this.settings = s;
    this.#log = o.log;
    this.balancer = new Balancer({ health: o.health });
    this.metrics = createSentinelMetrics(() => this.#endpointCounts(), o.registry);
    this.auth = new EdgeAuth({ cacheMaxAgeMs: s.jwksCacheMs, cooldownMs: s.jwksCooldownMs });
    this.held = new HeldRequests(createHoldMetrics(this.metrics.registry));
    const self = peerId();
    this.policies = new EdgePolicies(this.metrics.policyDecisions, self);
    this.#warm = new WarmUp({
      table: () => this.#table,
      holding: () => this.held.held > 0 && !this.#draining,
      promote: (keys) => {
        const now = Date.now();
        for (const k of keys) this.#promoted.set(k, now);
        this.metrics.warmReleases.inc();
        this.#log.info({ instances: keys }, "held requests go to a starting instance that answers its readiness path");
        // Leaves the routing again unless its slice says it is ready within the TTL.
        setTimeout(() => this.#reinstall(), PROMOTION_TTL_MS + 10).unref();
        this.#reinstall();
      },
    });
    this.held.onColdStart = () => this.#warm.start();
    this.#path = new RequestPath({
      tap: this.tap,
      auth: this.auth,
      held: this.held,
      policies: this.policies,
      balancer: this.balancer,
      metrics: this.metrics,
      log: o.log,
      hasTable: () => this.#table !== undefined,
      isReady: () => this.ready,
    });
    this.metrics.inFlightNow = () => this.#path.inFlight;
    let client = o.listWatch;
    if (!client) {
      this.#kube = new KubeClient(o.kubeConfig ?? loadKubeConfig(s.kubeconfig), {
        qps: 5,
        burst: 10,
        requestTimeoutMs: 15_000,
      });
      client = this.#kube;
    }
    this.#peers =
      s.peerService !== undefined && s.peerSecret !== undefined
        ? new PeerExchange({
            self,
            environmentId: s.environmentId,
            secret: s.peerSecret,
            service: s.peerService,
            listen: s.listen,
            port: s.peerPort,
            client,
            log: o.log,
            registry: this.metrics.registry,
            addressMap: s.podAddressMap,
            limiters: () => this.policies.limiters(),
          })
        : undefined;
    if (s.peerService !== undefined && s.peerSecret === undefined)
      o.log.warn(
        { peerService: s.peerService },
        "no peer secret: rate limits are counted by this replica alone (each replica admits up to the limit)",
      );
    this.#source = new RoutingSource({
      environmentId: s.environmentId,
      region: s.region,
      client,
      log: o.log,
      addressMap: s.podAddressMap,
      watchTimeoutSeconds: o.watchTimeoutSeconds,
      onUpdate: (u) => this.#install(u),
      onConnectivity: (connected) => {
        this.metrics.kubeConnected.set(connected ? 1 : 0);
        if (connected) this.#log.info({}, "routing-table watches connected");
        else this.#log.warn({}, "routing-table watches failing; serving the last table");
      },
    });
  }

  /**
   * Routing, not draining, and (with the exchange) its peers known: what /readyz reports. A
   * replica that admitted before hearing its peers would spend the budget they already spent.
   */
  get ready(): boolean {
    return this.#table !== undefined && this.#policyKnown && !this.#draining && (this.#peers?.settled ?? true);
  }

  /** The exchange's own port (undefined: no exchange). */
  get peerAddress(): AddressInfo | undefined {
    return this.#peers?.address;
  }

  get address(): AddressInfo | undefined {
    return this.#address;
  }

  get opsAddress(): AddressInfo | undefined {
    return this.#opsAddress;
  }

  async start(): Promise<void> {
    const s = this.settings;
    const shell = await createShell({
      path: this.#path,
      balancer: this.balancer,
      metrics: this.metrics,
      log: this.#log,
      auth: this.auth,
      policies: this.policies,
      settings: s,
      hasTable: () => this.#table !== undefined,
    });
    this.#shell = shell;
    this.#address = await shell.listen(s.port, s.listen);
    if (s.opsPort >= 0) {
      this.#ops = http.createServer((req, res) => void this.#serveOps(req, res));
      this.#opsAddress = await new Promise<AddressInfo>((resolve, reject) => {
        const ops = this.#ops as http.Server;
        ops.once("error", reject);
        ops.listen(s.opsPort, s.listen, () => resolve(ops.address() as AddressInfo));
      });
    }
    await this.#peers?.start();
    this.#source.start();
    this.#log.info(
      {
        environmentId: s.environmentId,
        region: s.region,
        port: this.#address.port,
        opsPort: this.#opsAddress?.port,
        peerPort: this.#peers?.address?.port,
        runtime: shell.runtime,
      },
      "sentinel listening",
    );
  }

  /**
   * SIGTERM: not ready at once; with `delay`, keep accepting for the drain delay (the Service's
   * endpoints are still being withdrawn: a closed listener would refuse connections kube-proxy
   * still sends here); then stop accepting, finish in-flight requests (up to the drain timeout), stop.
   */
  drain(delay = true): Promise<void> {
    this.#drained ??= (async () => {
      this.#draining = true;
      // Answers say Connection: close from now on, so keep-alive clients reconnect, reaching
      // another sentinel as soon as the endpoints no longer list this one.
      this.#path.draining = true;
      const delayMs = delay ? this.settings.drainDelayMs : 0;
      this.#log.info({ inFlight: this.#path.inFlight, delayMs, timeoutMs: this.settings.drainTimeoutMs }, "draining");
      if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
      await this.#shell?.drain(Date.now() + this.settings.drainTimeoutMs);
      await this.#shutdown();
      this.#log.info({}, "drained");
    })();
    return this.#drained;
  }

  /** Stops at once (tests). */
  async stop(): Promise<void> {
    this.#draining = true;
    this.#drained ??= (async () => {
      await this.#shell?.close();
      await this.#shutdown();
    })();
    await this.#drained;
  }

  async #shutdown(): Promise<void> {
    this.held.close();
    this.tap.close();
    await this.#peers?.stop();
    await this.#source.stop();
    this.#kube?.close();
    const ops = this.#ops;
    if (ops) {
      ops.closeAllConnections();
      await new Promise<void>((resolve) => ops.close(() => resolve()));
    }
  }

  status(): SentinelStatus {
    const shares = new Map(this.balancer.shares().map((x) => [x.deploymentId, x]));
    return {
      environmentId: this.settings.environmentId,
      region: this.settings.region,
      ready: this.ready,
      draining: this.#draining,
      routingVersion: this.#table?.version ?? 0,
      mode: this.#table?.mode ?? "instances",
      revisions: this.balancer.revisions.map((r) => {
        const ejected = r.instances.filter((i) => this.balancer.isEjected(i)).length;
        const sh = shares.get(r.deploymentId);
        return {
          deploymentId: r.deploymentId,
          weight: r.weight,
          share: Math.round((sh?.share ?? 0) * 10_000) / 100,
          endpoints: r.instances.length,
          routable: r.instances.length - ejected,
          ejected,
          inFlight: r.instances.reduce((n, i) => n + i.outstanding, 0),
        };
      }),
      policyError: this.#policyError ?? null,
      kubeConnected: this.#source.connected,
      tableUpdatedAt: this.#tableUpdatedAt?.toISOString() ?? null,
      inFlight: this.#path.inFlight,
      lastRequestAt: Number.isNaN(this.#path.lastStarted)
        ? null
        : new Date(Date.now() - (performance.now() - this.#path.lastStarted)).toISOString(),
      held: this.held.held,
      ...(this.#peers ? { peers: this.#peers.status() } : {}),
    };
  }

  /** The last update again (a promotion was added or ran out). */
  #reinstall(): void {
    if (this.#update && !this.#draining) this.#install(this.#update);
  }

  /** The table read, with the starting instances still promoted made routable. */
  #withPromoted(t: RoutingTable): RoutingTable {
    if (this.#promoted.size === 0) return t;
    const starting = startingKeys(t);
    const now = Date.now();
    for (const [k, at] of this.#promoted) if (!starting.has(k) || now - at > PROMOTION_TTL_MS) this.#promoted.delete(k);
    return promote(t, new Set(this.#promoted.keys()));
  }

  #install(u: RoutingUpdate): void {
    this.#update = u;
    const table = this.#withPromoted(u.table);
    const before = this.#table;
    // A policy that could not be read yet (present but refused, none good before): refuse every
    // request rather than serve an environment that may want authentication without it.
    this.auth.setPolicy(u.policyKnown ? u.auth : u.policyError !== undefined ? FAIL_CLOSED : undefined);
    // The last good document's list stays in force while a newer one is refused or ctrl is down.
    this.policies.set(u.policies);
    this.policies.setKeys(u.apiKeys);
    this.#table = table;
    this.#policyKnown = u.policyKnown;
    if (u.policyError !== this.#policyError) {
      if (u.policyError) {
        this.metrics.policyErrors.inc();
        this.#log.error({ error: u.policyError }, "routing policy refused; keeping the last good one");
      }
      this.#policyError = u.policyError;
    }
    const problems = u.problems.join("; ");
    if (problems !== this.#problems) {
      if (problems) this.#log.warn({ problems: u.problems.slice(0, 20) }, "routing table: entries skipped");
      this.#problems = problems;
    }
    const { removed } = this.balancer.setTable(table);
    this.#shell?.release(removed.map((i) => i.endpoint));
    this.held.policy = u.hold;
    // An instance is routable (listed ready, or promoted): held requests go on.
    if (this.held.held > 0) {
      if (endpointCount(table) > 0) this.held.routable();
      else this.#warm.start();
    }
    this.#tableUpdatedAt = new Date();
    const now = Date.now();
    this.metrics.stats.forgetExcept(new Set(table.revisions.map((r) => r.deploymentId)), now);
    this.metrics.instanceStats.forgetExcept(instanceKeys(table), now);
    this.metrics.tableUpdates.inc();
    this.metrics.routingVersion.set(table.version);
    if (!before || before.version !== table.version || endpointCount(before) !== endpointCount(table)) {
      this.#log.info(
        {
          version: table.version,
          mode: table.mode,
          revisions: table.revisions.map((r) => `${r.deploymentId}:${r.endpoints.length}`),
        },
        "routing table updated",
      );
    }
  }

  #endpointCounts(): { revision: string; routable: number; ejected: number }[] {
    return this.balancer.revisions.map((r) => {
      const ejected = r.instances.filter((i) => this.balancer.isEjected(i)).length;
      return { revision: r.deploymentId, routable: r.instances.length - ejected, ejected };
    });
  }

  async #serveOps(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0];
    const send = (status: number, type: string, body: string): void => {
      res.writeHead(status, {
        "content-type": type,
        "content-length": Buffer.byteLength(body),
        "cache-control": "no-store",
      });
      res.end(body);
    };
    try {
      if (path === "/healthz") send(200, "text/plain", "ok\n");
      else if (path === "/readyz") {
        if (this.ready) send(200, "text/plain", "ready\n");
        else
          send(
            503,
            "text/plain",
            this.#draining
              ? "draining\n"
              : this.#table === undefined
                ? "no routing table yet\n"
                : !this.#policyKnown
                  ? "no routing policy yet\n"
                  : "rate-limit peers not heard yet\n",
          );
      } else if (path === "/metrics")
        send(200, this.metrics.registry.contentType, await this.metrics.registry.metrics());
      else if (path === SENTINEL_STATUS_PATH) send(200, "application/json", `${JSON.stringify(this.status())}\n`);
      else if (path === SENTINEL_WAKE_PATH) {
        // The agent's long-poll: answered as soon as a request is held at zero instances.
        const after = Number(new URL(req.url ?? "/", "http://ops").searchParams.get("after") ?? "-1");
        const gone = new AbortController();
        res.once("close", () => gone.abort());
        const wake = await this.held.waitForWake(Number.isFinite(after) ? after : -1, WAKE_POLL_MS, gone.signal);
        if (!gone.signal.aborted) send(200, "application/json", `${JSON.stringify(wake)}\n`);
      } else if (path === SENTINEL_REQUESTS_PATH) {
        // The agent, while someone watches the request view: the records since its last ask.
        const after = Number(new URL(req.url ?? "/", "http://ops").searchParams.get("after") ?? "0");
        send(200, "application/json", `${JSON.stringify(this.tap.read(Number.isFinite(after) ? after : 0))}\n`);
      } else send(404, "text/plain", "not found\n");
    } catch (err) {
      send(500, "text/plain", `${err instanceof Error ? err.message : String(err)}\n`);
    }
  }
}

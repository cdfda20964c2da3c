// The krane agent process: one per cluster/region. Builds the Kubernetes client and the ctrl
// client, a manager with shared caches and one controller per kind listed in kinds.ts, sends
// Heartbeats, and serves /healthz, /readyz and /metrics on HTTP/1.1 (kubelet probes and
// Prometheus scrapes speak HTTP/1.1, not h2c).
import * as http from "node:http";
import { hostname } from "node:os";
import type { AddressInfo } from "node:net";
import { Registry, collectDefaultMetrics } from "prom-client";
import { KubeClient } from "../kube/client.js";
import { parseAddressMapping } from "../contracts/address-map.js";
import { loadKubeConfig, type KubeConfigSource } from "../kube/kubeconfig.js";
import type { ElectionTiming } from "../kube/leader-election.js";
import { buildInfo, buildLabel } from "../build-info.js";
import { AGENT_NAMESPACE, KRANE_IMAGE_REPOSITORY } from "../contracts/cluster.js";
import { createCtrlConnection, type CtrlConnection } from "./ctrl-client.js";
import { KINDS } from "./kinds.js";
import { LogChannel } from "./logs/channel.js";
import type { Controller, ControllerOptions } from "./runtime/controller.js";
import type { GatewaySettings } from "./gateways/settings.js";
import type { BuilderSettings } from "./builds/run.js";
import type { ClusterClient } from "./runtime/kind.js";
import type { Logger } from "../base/log.js";
import { Manager } from "./runtime/manager.js";
import { agentMetrics } from "./runtime/metrics.js";
import { DEFAULT_BOOST_MILLICORES } from "./deployments/boost.js";

export interface AgentConfig {
  readonly ctrlUrl: string;
  readonly token: string;
  readonly region: string;
  /** A kubeconfig path, "in-cluster", or a loaded config (tests). Default: the usual lookup. */
  readonly kubeconfig?: string | KubeConfigSource;
  readonly concurrency?: number;
  readonly resyncPeriodMs?: number;
  readonly kubeQps?: number;
  readonly kubeBurst?: number;
  /** Port of the HTTP/1.1 ops server (health, metrics); 0 picks a free one; -1 disables it. */
  readonly opsPort?: number;
  readonly opsHost?: string;
  readonly agentId?: string;
  /** krane's own sentinel image (default: krane's image of this build). */
  readonly sentinelImage?: string;
  /** This cluster's Secrets Store CSI provider and its parameters (external secrets). */
  readonly secretStore?: { readonly provider: string; readonly parameters: Readonly<Record<string, string>> };
  /** Exposure through the cluster's Gateways (absent: the gateway kind does not run). */
  readonly gateway?: GatewaySettings;
  /** Builds from source in builder pods (absent: the build kind does not run). */
  readonly builds?: BuilderSettings;
  /** Local cluster only: where pod IPs are served on this machine ("10.S.0.0/16=127.S.0.0/16"). */
  readonly podAddressMap?: string;
  /** How often sentinel pods are asked what they serve (default 5 s). */
  readonly sentinelObserveIntervalMs?: number;
  /** How often sentinel metrics are collected for rollout analysis (default 10 s; 0 disables). */
  readonly measureIntervalMs?: number;
  /** How often the instances' CPU, memory and restarts are read for the metrics history (default 15 s; 0 disables). */
  readonly usageIntervalMs?: number;
  /** How often the region's autoscaler decides from what the sentinels last said (default 2 s). */
  readonly autoscaleIntervalMs?: number;
  /** A starting instance's CPU limit until it is Ready (millicores; default 1000, 0: off): src/agent/deployments/boost.ts. */
  readonly startupCpuBoostMillicores?: number;
  /**
   * Leader election among several replicas of this cluster's agent (a Lease; default off).
   * Only the leader runs controllers and heartbeats; the others keep their caches warm.
   */
  readonly leaderElection?: {
    readonly namespace?: string;
    readonly name?: string;
    readonly timing?: ElectionTiming;
  };
  readonly heartbeatMs?: number;
  readonly callTimeoutMs?: number;
  /**
   * How long ctrl has to answer on the link (default 5 s): to accept a desired-state stream, and
   * to answer an HTTP/2 PING; PINGs go out after twice this long without data from ctrl.
   */
  readonly ctrlTimeoutMs?: number;
  readonly log: Logger;
  readonly registry?: Registry;
  /** Advanced: runtime knobs for tests (backoffs, watch timeouts). */
  readonly runtime?: Partial<
    ControllerOptions & { watchTimeoutSeconds: number; watchdogMs: number; probeIntervalMs: number }
  >;
}

/** The Lease the agent replicas of one region elect their leader with. */
export function leaseName(region: string): string {
  return `krane-agent-${region}`;
}

/** The sentinel image an agent uses by default: krane's image of the same build. */
export function defaultSentinelImage(): string {
  return `${KRANE_IMAGE_REPOSITORY}:${buildInfo().version}`;
}

/** How long ctrl has to answer on the link by default (stream acceptance, PING). */
export const DEFAULT_CTRL_TIMEOUT_MS = 5_000;

type AnyController = Controller<unknown, unknown, unknown, unknown>;

export class Agent {
  readonly registry: Registry;
  readonly kube: KubeClient;
  readonly ctrl: ClusterClient;
  readonly manager: Manager;
  /** ctrl's requests for logs, answered from pods/log. */
  readonly logs: LogChannel;
  readonly #cfg: AgentConfig;
  readonly #agentId: string;
  readonly #link: CtrlConnection;
  #ops: http.Server | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  #beating = false;
  #lastBeatAt = 0;
  /** The controllers' stream connections counted at the last heartbeat: a new one is told at once. */
  #connectsAtBeat = "";
  /** The cursors the last heartbeat carried. */
  #cursorsAtBeat = "";
  /** Until then (a period after a stream connected), a moved cursor is told within a second. */
  #catchUpUntil = 0;
  #stopped = false;

  constructor(cfg: AgentConfig) {
    if (!cfg.region) throw new Error("agent: region is required");
    if (!cfg.ctrlUrl) throw new Error("agent: ctrl URL is required");
    this.#cfg = cfg;
    this.#agentId = cfg.agentId ?? `${hostname()}-${process.pid}`;
    this.registry = cfg.registry ?? new Registry();
    const metrics = agentMetrics(this.registry);
    this.kube = new KubeClient(loadKubeConfig(cfg.kubeconfig), {
      qps: cfg.kubeQps ?? 100,
      burst: cfg.kubeBurst ?? Math.max(200, (cfg.kubeQps ?? 100) * 2),
      onRequest: (verb, resource, status) => metrics.kubeRequests.inc({ verb, resource, code: String(status) }),
      // Fencing: a replica that does not hold the lease writes nothing (manager.ts).
      writeGuard: () => this.manager.writeRefusal(),
    });
    const ctrlTimeoutMs = cfg.ctrlTimeoutMs ?? DEFAULT_CTRL_TIMEOUT_MS;
    this.#link = createCtrlConnection(cfg.ctrlUrl, cfg.token, {
      pingIntervalMs: 2 * ctrlTimeoutMs,
      pingTimeoutMs: ctrlTimeoutMs,
      defaultTimeoutMs: cfg.callTimeoutMs ?? 10_000,
    });
    this.ctrl = this.#link.client;
    const rt = cfg.runtime ?? {};
    this.manager = new Manager({
      kube: this.kube,
      region: cfg.region,
      log: cfg.log,
      registry: this.registry,
      watchTimeoutSeconds: rt.watchTimeoutSeconds,
      watchdogMs: rt.watchdogMs,
      probeIntervalMs: rt.probeIntervalMs,
      election: cfg.leaderElection
        ? {
            namespace: cfg.leaderElection.namespace ?? AGENT_NAMESPACE,
            name: cfg.leaderElection.name ?? leaseName(cfg.region),
            identity: this.#agentId,
            timing: cfg.leaderElection.timing,
          }
        : undefined,
    });
    const opts: ControllerOptions = {
      concurrency: cfg.concurrency,
      resyncPeriodMs: cfg.resyncPeriodMs,
      callTimeoutMs: cfg.callTimeoutMs,
      openTimeoutMs: ctrlTimeoutMs,
      // A stream ctrl did not accept in time may sit on a connection that never completed (a
      // dropped SYN, a stalled TLS handshake): give that up so the next attempt dials again.
      onOpenTimeout: () => {
        if (this.#link.dropIfConnecting())
          cfg.log.warn({ ctrl: cfg.ctrlUrl }, "the connection to ctrl did not complete in time; dialing again");
      },
      ...rt,
    };
    const env = {
      region: cfg.region,
      ctrl: this.ctrl,
      sentinel: {
        image: cfg.sentinelImage ?? defaultSentinelImage(),
        observeIntervalMs: cfg.sentinelObserveIntervalMs,
        measureIntervalMs: cfg.measureIntervalMs,
        usageIntervalMs: cfg.usageIntervalMs,
        autoscaleIntervalMs: cfg.autoscaleIntervalMs,
        registry: this.registry,
        podAddressMap: cfg.podAddressMap ? parseAddressMapping(cfg.podAddressMap) : undefined,
      },
      secretStore: cfg.secretStore,
      gateway: cfg.gateway,
      ...(cfg.builds ? { builds: cfg.builds } : {}),
      startupBoost: {
        millicores: cfg.startupCpuBoostMillicores ?? DEFAULT_BOOST_MILLICORES,
        registry: this.registry,
      },
    };
    for (const register of KINDS) register(this.manager, env, opts);
    this.logs = new LogChannel({
      transport: this.#link.transport,
      kube: this.kube,
      region: cfg.region,
      log: cfg.log,
      leading: () => this.manager.leading,
      reconnect: rt.reconnect,
      callTimeoutMs: cfg.callTimeoutMs,
      addressMap: env.sentinel.podAddressMap,
    });
  }

  /** The controller of a kind ("deployments", "sentinels", …). */
  runtime(name: string): AnyController | undefined {
    return this.manager.controller(name);
  }

  /** Caches synced and, on the leader, every controller's stream connected (a follower stands by). */
  get ready(): boolean {
    if (!this.manager.cachesSynced) return false;
    return !this.manager.leading || this.manager.controllers.every((c) => c.ready);
  }

  /** The ops server's address (after start), e.g. "http://127.0.0.1:8071". */
  get opsUrl(): string | undefined {
    const a = this.#ops?.address() as AddressInfo | null | undefined;
    return a ? `http://${a.address.includes(":") ? `[${a.address}]` : a.address}:${a.port}` : undefined;
  }

  async start(): Promise<void> {
    if ((this.#cfg.opsPort ?? 8071) >= 0) await this.#startOps();
    this.manager.start();
    this.logs.start();
    // Every heartbeat period; as soon as a stream connects; and for a period after that, within a
    // second of a cursor moving (what a resumed stream delivers first). After a ctrl restart, ctrl's
    // LAST SEEN and BEHIND are current again at once rather than a period later.
    const every = this.#cfg.heartbeatMs ?? 10_000;
    const tick = (): void => {
      const now = Date.now();
      const controllers = this.manager.controllers;
      const connects = controllers.map((c) => `${c.name}:${c.link.connects}`).join(",");
      const cursors = controllers.map((c) => `${c.name}:${c.cursor}`).join(",");
      if (connects !== this.#connectsAtBeat) this.#catchUpUntil = now + every;
      const due =
        now - this.#lastBeatAt >= every ||
        connects !== this.#connectsAtBeat ||
        (now < this.#catchUpUntil && cursors !== this.#cursorsAtBeat && now - this.#lastBeatAt >= 1000);
      if (due) void this.#sendHeartbeat(connects, cursors);
    };
    tick();
    this.#heartbeat = setInterval(tick, Math.min(every, 250));
    this.#cfg.log.info(
      { region: this.#cfg.region, agentId: this.#agentId, ctrl: this.#cfg.ctrlUrl },
      "krane agent started",
    );
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    if (this.#heartbeat) clearInterval(this.#heartbeat);
    // Together: the manager's stop ends with giving up the leader lease, which a follower is
    // waiting for; it does not wait on the log sessions.
    await Promise.all([this.logs.stop(), this.manager.stop()]);
    this.#link.close();
    await new Promise<void>((resolve) => (this.#ops ? this.#ops.close(() => resolve()) : resolve()));
    this.#ops?.closeAllConnections();
    this.kube.close();
    this.#cfg.log.info({ region: this.#cfg.region }, "krane agent stopped");
  }

  /** What /readyz answers: ready, and why not (caches, streams, the Kubernetes API). */
  readiness(): object {
    const now = Date.now();
    const kube = this.manager.kubeApi;
    const since = (t: number | undefined): string | undefined =>
      t === undefined ? undefined : new Date(t).toISOString();
    return {
      ready: this.ready,
      role: this.manager.identity === undefined ? "single" : this.manager.leading ? "leader" : "follower",
      kubernetesApi: {
        answering: kube.up,
        lastAnsweredSecondsAgo: kube.lastOkAt === undefined ? undefined : Math.round((now - kube.lastOkAt) / 100) / 10,
      },
      ctrlConnection: this.#link.state(),
      controllers: this.manager.controllers.map((c) => {
        const down = c.running ? c.link.disconnectedSince : undefined;
        return {
          controller: c.name,
          cachesSynced: c.cachesSynced,
          streamConnected: c.streamConnected,
          ctrlDisconnectedSince: since(down),
          streamDownSeconds: down === undefined ? 0 : Math.round((now - down) / 100) / 10,
          breaker: c.breaker.phase,
        };
      }),
    };
  }

  async #sendHeartbeat(connects: string, cursors: string): Promise<void> {
    // Only the replica that runs the controllers speaks for the cluster; one at a time.
    if (!this.manager.leading || this.#beating) return;
    this.#beating = true;
    this.#lastBeatAt = Date.now();
    this.#connectsAtBeat = connects;
    this.#cursorsAtBeat = cursors;
    const cursorOf = (name: string): bigint => this.runtime(name)?.cursor ?? 0n;
    try {
      await this.ctrl.heartbeat(
        {
          region: this.#cfg.region,
          agentId: this.#agentId,
          build: buildLabel(),
          deploymentsVersion: cursorOf("deployments"),
          sentinelsVersion: cursorOf("sentinels"),
          // Every controller's cursor, so ctrl can show how far this cluster is behind per kind.
          cursors: this.manager.controllers.map((c) => ({ kind: c.name, version: c.cursor })),
        },
        { timeoutMs: this.#cfg.callTimeoutMs ?? 5_000 },
      );
    } catch (err) {
      this.#cfg.log.debug({ err: err instanceof Error ? err.message : String(err) }, "heartbeat failed");
    } finally {
      this.#beating = false;
    }
  }

  async #startOps(): Promise<void> {
    collectDefaultMetrics({ register: this.registry });
    const server = http.createServer((req, res) => {
      const path = (req.url ?? "/").split("?")[0];
      if (path === "/healthz") {
        res.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
      } else if (path === "/readyz") {
        res
          .writeHead(this.ready ? 200 : 503, { "content-type": "application/json" })
          .end(`${JSON.stringify(this.readiness())}\n`);
      } else if (path === "/metrics") {
        this.registry.metrics().then(
          (text) => res.writeHead(200, { "content-type": this.registry.contentType }).end(text),
          (err: unknown) => res.writeHead(500).end(String(err)),
        );
      } else {
        res.writeHead(404).end();
      }
    });
    server.keepAliveTimeout = 5_000;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.#cfg.opsPort ?? 8071, this.#cfg.opsHost ?? "0.0.0.0", () => resolve());
    });
    this.#ops = server;
  }
}

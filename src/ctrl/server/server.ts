// The ctrl server: one HTTP/2 port (h2c, or TLS when a certificate is configured) serving
// Connect, gRPC and gRPC-Web for ClusterService and the public API, and an HTTP/1.1 ops port
// with /healthz, /readyz, /metrics and /version. Every API answer carries ctrl's build in a
// header (src/contracts/version.ts).
//
// Shutdown drains: readiness turns false, the listener stops accepting, in-flight unary calls
// (and so their writes) finish, then watch streams end cleanly (agents reconnect elsewhere with
// their cursor), sessions close, and the database closes last.
import type { MeasurementSource } from "../../contracts/analysis.js";
import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import * as http from "node:http";
import * as http2 from "node:http2";
import type * as net from "node:net";
import type { AddressInfo, Socket } from "node:net";
import { setMaxListeners } from "node:events";
import type { DescService } from "@bufbuild/protobuf";
import { Code, type ConnectRouter, type ServiceImpl } from "@connectrpc/connect";
import { pino, type Logger } from "pino";
import {
  ApiTokenService,
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../gen/krane/ctrl/v1/api_pb.js";
import { ClusterService } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { DomainService, EndpointService } from "../../gen/krane/ctrl/v1/exposure_pb.js";
import { domainServiceImpl, endpointServiceImpl } from "../api/exposure.js";
import { StoredMeasurements } from "../domain/measurements.js";
import type { DomainCheckPolicy, TxtResolver } from "../domain/domains.js";
import { checkExposureSettings, DEFAULT_EXPOSURE, type ExposureSettings } from "../domain/exposure.js";
import { systemTxtResolver } from "../exposure/dns.js";
import { DomainVerifier } from "../exposure/verifier.js";
import {
  apiTokenServiceImpl,
  deploymentServiceImpl,
  environmentServiceImpl,
  projectServiceImpl,
  regionServiceImpl,
  statusServiceImpl,
  workspaceServiceImpl,
} from "../api/handlers.js";
import { RolloutService } from "../../gen/krane/ctrl/v1/rollout_pb.js";
import { Authenticator, type AuthOptions } from "../auth/authenticator.js";
import type { BackoffPolicy } from "../../retry/backoff.js";
import { PeriodicWork } from "../../retry/periodic.js";
import { clusterServiceImpl } from "../cluster-service/handlers.js";
import { compactOutbox } from "../db/outbox.js";
import { Store } from "../db/store.js";
import { addUserToken, countInstallationTokens, generateToken } from "../domain/tokens.js";
import { RolloutDriver, storeRolloutSource } from "../rollout/driver.js";
import { buildInfo, buildLabel } from "../../build-info.js";
import { CTRL_VERSION_HEADER } from "../../contracts/version.js";
import { rolloutServiceImpl } from "../api/rollout.js";
import { ConfigService } from "../../gen/krane/ctrl/v1/config_pb.js";
import { JobService } from "../../gen/krane/ctrl/v1/job_pb.js";
import { ReleaseService } from "../../gen/krane/ctrl/v1/release_pb.js";
import type { AllowedKind } from "../../contracts/releases.js";
import { configServiceImpl, jobServiceImpl, releaseServiceImpl } from "../api/environment-objects.js";
import { AuditService } from "../../gen/krane/ctrl/v1/audit_pb.js";
import { InstanceEventService } from "../../gen/krane/ctrl/v1/events_pb.js";
import { instanceEventServiceImpl } from "../api/instance-events.js";
import { auditServiceImpl } from "../api/audit.js";
import { AuditRecorder } from "../audit/recorder.js";
import type { LimiterOptions } from "../audit/limiter.js";
import { AuditWebhookSink } from "../audit/sink.js";
import { pruneAuditEvents, sinkPosition } from "../domain/audit.js";
import { PreviewService } from "../../gen/krane/ctrl/v1/preview_pb.js";
import { LogChannelService, LogService } from "../../gen/krane/ctrl/v1/logs_pb.js";
import { LocalLogBus, PgLogBus, type LogBus } from "../logs/bus.js";
import { LogHub } from "../logs/hub.js";
import { LiveService, MetricsService } from "../../gen/krane/ctrl/v1/live_pb.js";
import { LiveHub, type LiveHubOptions } from "../live/hub.js";
import { liveServiceImpl, metricsServiceImpl, type LiveServiceOptions } from "../live/service.js";
import { liveSource } from "../live/views.js";
import { logChannelServiceImpl, logServiceImpl, type LogServiceOptions } from "../logs/service.js";
import { previewServiceImpl } from "../api/previews.js";
import { pruneDeliveries } from "../domain/previews.js";
import { expirePreviews } from "../previews/expiry.js";
import { StatusReporter } from "../previews/status.js";
import { DEFAULT_REPLAY_WINDOW_MS, WebhookReceiver } from "../previews/webhooks.js";
import { finishDeletions } from "../domain/deletion.js";
import type { Keyring } from "../secrets/keyring.js";
import { FeedHub } from "../stream/feed.js";
import { storeFeedSource } from "../stream/watch.js";
import { InflightTracker, observeInterceptor } from "./interceptors.js";
import { CtrlMetrics } from "./metrics.js";
import { createRpcHandler } from "./rpc-handler.js";
import { createApiListener } from "./listener.js";
import { createDashboardHandler, type DashboardOptions } from "../dashboard/http.js";
import { pruneSessions } from "../domain/sessions.js";
import { classifyDependencyError } from "./dependency-errors.js";
import { OutageWatch } from "./outage.js";
import { HTTP2_CONNECTION_WINDOW } from "../../contracts/http2.js";
import {
  DEFAULT_IDEMPOTENCY_RETENTION_MS,
  idempotencyInterceptor,
  pruneIdempotencyKeys,
  replayable,
  type Reanswers,
} from "./idempotency.js";
import {
  deploymentReanswers,
  environmentReanswers,
  projectReanswers,
  rolloutReanswers,
  workspaceReanswers,
} from "./reanswers.js";
import { useBufferTextEncoding } from "../payloads/text-encoding.js";

/** Backoff of ctrl's periodic upkeep (compaction, key pruning, the deletion sweep) after a failed run. */
export const UPKEEP_RETRY: BackoffPolicy = { baseMs: 1_000, capMs: 60_000, minMs: 500 };

export interface ListenAddress {
  host: string;
  port: number;
}

export interface CtrlConfig {
  /** SQLite path or postgres:// URL. */
  databaseUrl: string;
  listen: ListenAddress;
  /** The HTTP/1.1 ops port; null disables it. */
  opsListen: ListenAddress | null;
  tls?: { certFile: string; keyFile: string };
  /** Versions kept per stream before compaction. */
  outboxRetention?: number;
  compactIntervalMs?: number;
  unaryTimeoutMs?: number;
  shutdownGraceMs?: number;
  /** HTTP/2 PING interval on every session; a missed answer closes the session. */
  pingIntervalMs?: number;
  /** A watch stream quiet this long gets a bookmark, so agents can tell it from a dead one (ms). */
  streamKeepaliveMs?: number;
  poolSize?: number;
  logger?: Logger;
  /**
   * Makes sure an admin user token exists before serving: `token` is registered as given;
   * without one, the token in `file` is registered when the file exists, and otherwise a database
   * with no user token gets a generated token written to `file` (mode 0600).
   */
  bootstrapAdmin?: { token?: string; file: string };
  /** Backstop re-read of live streams in case a notification was lost (ms, 0 disables). */
  feedSafetyIntervalMs?: number;
  /** Registers process metrics (off in tests that run several servers). */
  defaultMetrics?: boolean;
  /** How often the rollout driver looks for stored wake-ups (ms, 0 disables). */
  rolloutSweepIntervalMs?: number;
  /** Auth cache lifetime, stream re-check interval, usage recording (defaults suit production). */
  auth?: AuthOptions;
  /** The master keys that seal secrets at rest (absent: secrets are refused). */
  keyring?: Keyring;
  /** The platform's allow-list of release kinds (default DEFAULT_RELEASE_KINDS). */
  releaseKinds?: readonly AllowedKind[];
  /** How often finished deletions are looked for (ms; confirmations also trigger it). */
  deletionSweepIntervalMs?: number;
  /** Generated addresses of endpoints (apexes, patterns); defaults: DEFAULT_EXPOSURE. */
  exposure?: Partial<ExposureSettings>;
  /** Custom domain verification: DNS (servers, or a resolver of the caller's), schedule, sweep. */
  domains?: {
    resolver?: TxtResolver;
    dnsServers?: readonly string[];
    policy?: Partial<DomainCheckPolicy>;
    sweepIntervalMs?: number;
  };
  /** How long Idempotency-Keys are remembered (ms; default 24 h). */
  idempotencyRetentionMs?: number;
  /** Where progressive rollouts' analysis reads samples (default: the stored reports of the agents, StoredMeasurements). */
  measurements?: MeasurementSource;
  /** The audit log: retention, its pruning, the webhook sink, the folding of anonymous refusals. */
  audit?: AuditSettings;
  /** Previews: the pull-request webhook listener (HTTP/1.1; null or absent: none), expiry, status reports. */
  previews?: PreviewSettings;
  /** Logs (StreamLogs): how long a silent region is waited for, the merge's hold and room. */
  logs?: LogServiceOptions;
  /** The live views' streams (LiveService) and how their views are read (coalescing). */
  live?: LiveServiceOptions & LiveHubOptions;
  /** The web dashboard at `/`: where its built page is, how long a sign-in lasts. */
  dashboard?: { assetsDir?: string; sessionTtlMs?: number; signInLimit?: DashboardOptions["signInLimit"] };
}

export interface PreviewSettings {
  /** Where GitHub and GitLab deliver pull-request events (HTTP/1.1); null: no listener. */
  webhookListen?: ListenAddress | null;
  /** How old a delivery may be (ms; default 10 minutes). */
  replayWindowMs?: number;
  /** How often expired previews are looked for (ms; default 30 s). */
  expiryIntervalMs?: number;
  /** How often due commit statuses are looked for (ms; default 1 s). */
  statusSweepIntervalMs?: number;
  /** How soon a deploying preview's status is looked at again (ms; default 2 s). */
  statusRecheckMs?: number;
}

/** Default retention of audit events: 400 days. */
export const DEFAULT_AUDIT_RETENTION_MS = 400 * 24 * 60 * 60 * 1000;

export interface AuditSettings {
  /**
   * false: nothing is recorded (no interceptor, no events) — only to measure what the log costs
   * (`npm run bench -- audit`); `krane ctrl serve` always records.
   */
  record?: boolean;
  /** How long events are kept (ms; default 400 days). */
  retentionMs?: number;
  /** How often old events are looked for (ms; default one hour). */
  pruneIntervalMs?: number;
  /** Delivers every event to this receiver (at least once, signed). */
  webhook?: {
    url: string;
    secret: string;
    batch?: number;
    sweepIntervalMs?: number;
    retry?: BackoffPolicy;
    timeoutMs?: number;
  };
  refusalLimits?: LimiterOptions;
  /** How often folded refusals are written (ms; default 10 s). */
  flushIntervalMs?: number;
}

export interface RunningCtrl {
  /** Base URL of the API port, e.g. http://127.0.0.1:7070. */
  url: string;
  opsUrl: string | null;
  store: Store;
  hub: FeedHub;
  /** Log requests and the agents' log channels connected to this process. */
  logHub: LogHub;
  metrics: CtrlMetrics;
  rollout: RolloutDriver;
  /** Custom domains' DNS checks. */
  domains: DomainVerifier;
  /** The audit log's webhook sink, when one is configured. */
  auditSink: AuditWebhookSink | undefined;
  /** Writes the refusals folded so far (the upkeep does it every few seconds). */
  flushAuditRefusals(): Promise<number>;
  /** The pull-request webhook listener's base URL (null: none). */
  webhookUrl: string | null;
  /** Reports previews' URLs and states to their pull requests. */
  previewStatus: StatusReporter;
  /** Deletes the previews whose TTL passed now (the upkeep does it every expiryIntervalMs). */
  expirePreviews(): Promise<number>;
  /** Aborted once the server has stopped; every call in flight holds one listener on it. */
  shutdownSignal: AbortSignal;
  /** Graceful stop; safe to call twice. */
  close(): Promise<void>;
  /** What a shutdown in progress waits on ("running" before close). */
  shutdownStep(): string;
}

/** Default of CtrlConfig.shutdownGraceMs: calls in flight get this long, then open streams as long again. */
export const SHUTDOWN_GRACE_MS = 10_000;

function listen(server: net.Server, addr: ListenAddress): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(addr.port, addr.host, () => {
      server.off("error", reject);
      resolve(server.address() as AddressInfo);
    });
  });
}

async function bootstrapAdminToken(store: Store, admin: { token?: string; file: string }, log: Logger): Promise<void> {
  if (admin.token !== undefined) {
    if (!(await addUserToken(store, "admin", admin.token))) {
      log.error(
        "the configured admin token was revoked and is not registered again: remove it from the configuration (--admin-token, KRANE_ADMIN_TOKEN)",
      );
    }
    return;
  }
  const fromFile = readAdminTokenFile(admin.file, log);
  if (fromFile !== undefined) {
    if (!(await addUserToken(store, "admin", fromFile))) {
      log.warn(
        { file: admin.file },
        "the admin token in this file was revoked and is not registered again: delete the file",
      );
    }
    return;
  }
  if ((await countInstallationTokens(store.db)) > 0) return;
  let token = generateToken("user");
  mkdirSync(dirname(admin.file), { recursive: true });
  try {
    writeFileSync(admin.file, `${token}\n`, { mode: 0o600, flag: "wx" });
  } catch (err) {
    // Another ctrl on this machine wrote it first: use its token.
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    token = readAdminTokenFile(admin.file, log) ?? token;
  }
  await addUserToken(store, "admin", token);
  // Only the path is logged: tokens never go to logs.
  log.warn({ file: admin.file }, "created the first admin API token; use it as KRANE_TOKEN");
}

/** The token in the admin token file, or undefined when there is no such file. */
function readAdminTokenFile(file: string, log: Logger): string | undefined {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new Error(`admin token file ${file}: ${(err as Error).message}`);
  }
  const token = text.trim();
  if (token === "" || /\s/.test(token)) throw new Error(`admin token file ${file}: expected one token on one line`);
  if ((statSync(file).mode & 0o077) !== 0)
    log.warn({ file }, "the admin token file can be read by other users: chmod 600 it");
  return token;
}

function hostForUrl(host: string): string {
  if (host === "0.0.0.0" || host === "::" || host === "") return "127.0.0.1";
  return host.includes(":") ? `[${host}]` : host;
}

export async function startCtrl(config: CtrlConfig): Promise<RunningCtrl> {
  const log = config.logger ?? pino({ level: "silent" });
  useBufferTextEncoding();
  const store = await Store.open({ url: config.databaseUrl, poolSize: config.poolSize });
  if (config.bootstrapAdmin) {
    try {
      await bootstrapAdminToken(store, config.bootstrapAdmin, log);
    } catch (err) {
      await store.close();
      throw err;
    }
  }
  const metrics = new CtrlMetrics(config.defaultMetrics ?? false);
  const databaseKind = store.dialect.name === "postgres" ? "PostgreSQL" : "SQLite";
  const outage = new OutageWatch({
    dependency: "database",
    probe: () => store.ping(),
    log,
    gauge: metrics.dependencyUp,
  });
  /** Background work that failed: an outage goes to the outage log (once), anything else is logged. */
  const backgroundFailure =
    (what: string) =>
    (err: unknown): void => {
      const f = classifyDependencyError(err);
      if (f) outage.failed(f);
      else log.warn({ err: String(err) }, what);
    };
  const hub = new FeedHub(storeFeedSource(store), store.notifier, {
    safetyIntervalMs: config.feedSafetyIntervalMs,
    onError: backgroundFailure("feed read failed; retrying"),
  });
  // Log requests reach every replica (PostgreSQL: NOTIFY), whichever one the agent is connected to.
  let logBus: LogBus;
  if (store.dialect.name === "postgres") {
    const pgBus = new PgLogBus(config.databaseUrl, backgroundFailure("relaying logs between replicas failed"));
    try {
      await pgBus.start();
    } catch (err) {
      await pgBus.close();
      await store.close();
      throw err;
    }
    logBus = pgBus;
  } else logBus = new LocalLogBus();
  const logHub = new LogHub(logBus, { keepaliveMs: config.logs?.keepaliveMs });
  logHub.start();
  const inflight = new InflightTracker();
  const streamsStop = new AbortController();
  const adapterStop = new AbortController();
  const auth = new Authenticator(store, { secureCookies: config.tls !== undefined, ...config.auth });
  // Analysis reads the sentinels' measurements the agents report (ReportMeasurements).
  const progressive = {
    measurements: config.measurements ?? new StoredMeasurements(store),
    logger: log,
    onAbort: () => metrics.rolloutAborts.inc(),
  };
  const rollout = new RolloutDriver(storeRolloutSource(store, progressive), {
    logger: log,
    sweepIntervalMs: config.rolloutSweepIntervalMs,
    onSweepError: backgroundFailure("rollout sweep failed"),
  });
  const exposure: ExposureSettings = { ...DEFAULT_EXPOSURE, ...config.exposure };
  checkExposureSettings(exposure);
  // The dashboard's live views, read once per change per process and shared by every stream.
  const liveHub = new LiveHub(liveSource({ store, exposure, measurements: progressive.measurements }), store.notifier, {
    ...config.live,
    onError: backgroundFailure("a live view could not be read; retrying"),
  });
  const domains = new DomainVerifier({
    store,
    resolver: config.domains?.resolver ?? systemTxtResolver({ servers: config.domains?.dnsServers }),
    settings: exposure,
    policy: config.domains?.policy,
    sweepIntervalMs: config.domains?.sweepIntervalMs,
    logger: log,
  });
  let draining = false;
  const audit = new AuditRecorder({
    store,
    limits: config.audit?.refusalLimits,
    onFailure: (err, method) => {
      const f = classifyDependencyError(err);
      if (f) outage.failed(f);
      else
        log.error(
          { method, err: err instanceof Error ? err.message : String(err) },
          "an audit event could not be written",
        );
    },
  });
  const auditHook = config.audit?.webhook;
  const auditSink = auditHook
    ? new AuditWebhookSink({
        store,
        url: auditHook.url,
        secret: auditHook.secret,
        batch: auditHook.batch,
        sweepIntervalMs: auditHook.sweepIntervalMs,
        retry: auditHook.retry,
        timeoutMs: auditHook.timeoutMs,
        logger: log,
        onDelivery: (ok, n) => metrics.auditDeliveries.inc({ result: ok ? "ok" : "failed" }, ok ? n : 1),
      })
    : undefined;

  const previewStatus = new StatusReporter({
    store,
    keyring: config.keyring,
    exposure,
    sweepIntervalMs: config.previews?.statusSweepIntervalMs,
    recheckMs: config.previews?.statusRecheckMs,
    logger: log,
  });
  const statusDue = (): void => void previewStatus.sweep();

  const routes = (connectRouter: ConnectRouter): void => {
    // Every service answers repeats under an Idempotency-Key from the recorded answer (idempotency.ts).
    // Repeats whose first answer was lost are answered from state where a method can be (reanswers.ts).
    const router = {
      service: <S extends DescService>(s: S, impl: Partial<ServiceImpl<S>>, again?: Reanswers<S>) =>
        connectRouter.service(s, replayable<S, Partial<ServiceImpl<S>>>(impl, again)),
    };
    const deps = { store, rollout, auth, exposure };
    router.service(
      ClusterService,
      clusterServiceImpl({
        store,
        hub,
        metrics,
        streamsStop: streamsStop.signal,
        streamKeepaliveMs: config.streamKeepaliveMs,
        onReport: (kind, region, subject) => rollout.reported(kind, region, subject),
        onRegionScaled: (environmentId) =>
          void rollout
            .environmentChanged(environmentId)
            .catch(backgroundFailure("a rollout pass after autoscaling failed")),
        keyring: config.keyring,
        onDeletionConfirmed: (environmentId) =>
          void finishDeletions(store, environmentId).catch(backgroundFailure("finishing a deletion failed")),
      }),
    );
    const workspaces = workspaceServiceImpl(deps);
    router.service(WorkspaceService, workspaces, workspaceReanswers(workspaces));
    const projects = projectServiceImpl(deps);
    router.service(ProjectService, projects, projectReanswers(projects));
    const environments = environmentServiceImpl(deps);
    router.service(EnvironmentService, environments, environmentReanswers(environments));
    const deployments = deploymentServiceImpl(deps);
    router.service(DeploymentService, deployments, deploymentReanswers(deployments));
    router.service(RegionService, regionServiceImpl(deps));
    router.service(StatusService, statusServiceImpl(deps));
    router.service(ApiTokenService, apiTokenServiceImpl(deps));
    const rollouts = rolloutServiceImpl({ store, driver: rollout });
    router.service(RolloutService, rollouts, rolloutReanswers(rollouts));
    const objects = { store, rollout, keyring: config.keyring, releaseKinds: config.releaseKinds };
    router.service(ConfigService, configServiceImpl(objects));
    router.service(ReleaseService, releaseServiceImpl(objects));
    router.service(JobService, jobServiceImpl(objects));
    const exposureDeps = {
      store,
      settings: exposure,
      policy: domains.policy,
      verifyNow: (id: string) => domains.verifyNow(id),
    };
    router.service(EndpointService, endpointServiceImpl(exposureDeps));
    router.service(DomainService, domainServiceImpl(exposureDeps));
    router.service(AuditService, auditServiceImpl({ store }));
    router.service(InstanceEventService, instanceEventServiceImpl({ store }));
    const logDeps = { ...config.logs, store, hub: logHub, stop: streamsStop.signal };
    router.service(LogService, logServiceImpl(logDeps));
    router.service(
      LiveService,
      liveServiceImpl({
        ...config.live,
        store,
        hub: liveHub,
        stop: streamsStop.signal,
        stillValid: (header) => auth.stillValid(header),
      }),
    );
    router.service(MetricsService, metricsServiceImpl({ store }));
    router.service(LogChannelService, logChannelServiceImpl(logDeps));
    router.service(
      PreviewService,
      previewServiceImpl({ store, keyring: config.keyring, exposure, rollout, statusDue }),
    );
  };
  // Connect links every call's signal to this one with an "abort" listener, removed when the
  // call ends: one listener per call in flight, so Node's leak warning (more than ten) is no
  // sign of a leak here. test/integration/ctrl/listeners.test.ts checks they all go away.
  setMaxListeners(0, adapterStop.signal);
  const handler = createRpcHandler({
    routes,
    interceptors: [
      // First: it sees every call's final outcome, refusals by authentication included.
      ...(config.audit?.record === false ? [] : [audit.interceptor()]),
      observeInterceptor({
        metrics,
        inflight,
        unaryTimeoutMs: config.unaryTimeoutMs ?? 30_000,
        databaseKind,
        onUnexpected: (err, method) =>
          log.error({ method, err: err instanceof Error ? err.message : String(err) }, "unexpected error"),
        onDependencyFailure: (f) => outage.failed(f),
      }),
      auth.interceptor(),
      idempotencyInterceptor({ store, onRecordFailure: backgroundFailure("recording an idempotent answer failed") }),
    ],
    shutdownSignal: adapterStop.signal,
    readMaxBytes: 4 * 1024 * 1024,
    onEarlyEnd: (method, code) =>
      metrics.rpcTotal.inc({ service: method.parent.name, method: method.name, code: Code[code] }),
    fallback: createDashboardHandler({
      store,
      auth,
      secure: config.tls !== undefined,
      assetsDir: config.dashboard?.assetsDir,
      sessionTtlMs: config.dashboard?.sessionTtlMs,
      signInLimit: config.dashboard?.signInLimit,
      onError: (err) => log.warn({ err: err instanceof Error ? err.message : String(err) }, "dashboard answer failed"),
    }),
    onHandlerError: (method, err) =>
      log.warn(
        { method: `${method.parent.name}/${method.name}`, err: err instanceof Error ? err.message : String(err) },
        "rpc answer not delivered",
      ),
  });

  // Every answer names ctrl's build (src/contracts/version.ts); headers set here merge into the
  // ones Connect writes.
  const build = buildLabel();
  const withVersion = (
    req: http.IncomingMessage | http2.Http2ServerRequest,
    res: http.ServerResponse | http2.Http2ServerResponse,
  ): void => {
    res.setHeader(CTRL_VERSION_HEADER, build);
    handler(req, res);
  };
  // HTTP/2 (h2c or TLS) for agents and gRPC, HTTP/1.1 for browsers and curl, on one port.
  const listener = createApiListener(withVersion, { tls: config.tls });
  const server = listener.server;
  const sessions = new Set<http2.ServerHttp2Session>();
  // Raw sockets too: a destroyed session whose peer stopped reading can leave its socket
  // half-closed, and the server only reports closed once every socket is gone.
  const sockets = new Set<Socket>();
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  const pingEvery = config.pingIntervalMs ?? 15_000;
  listener.h2.on("session", (session: http2.ServerHttp2Session) => {
    sessions.add(session);
    // Wide receive windows (contracts/http2.ts): an agent's batch of log lines arrives in one go.
    try {
      session.setLocalWindowSize(HTTP2_CONNECTION_WINDOW);
    } catch {
      // A session already closing: nothing to widen.
    }
    // Keep-alive: a peer that does not answer a PING within the interval is gone; closing its
    // session ends its streams and frees their resources.
    let waiting = false;
    const timer = setInterval(() => {
      if (waiting) {
        session.destroy();
        return;
      }
      waiting = true;
      try {
        session.ping((err) => {
          waiting = false;
          if (err) session.destroy();
        });
      } catch {
        session.destroy();
      }
    }, pingEvery);
    timer.unref();
    session.on("close", () => {
      clearInterval(timer);
      sessions.delete(session);
    });
    session.on("error", () => undefined);
  });
  listener.h2.on("sessionError", () => undefined);

  const apiAddr = await listen(server, config.listen);
  const scheme = config.tls ? "https" : "http";
  const url = `${scheme}://${hostForUrl(config.listen.host)}:${apiAddr.port}`;

  let ops: http.Server | null = null;
  let opsUrl: string | null = null;
  if (config.opsListen) {
    ops = http.createServer((req, res) => {
      void (async () => {
        const path = (req.url ?? "/").split("?")[0];
        if (path === "/healthz") {
          res.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
        } else if (path === "/readyz") {
          let ok = !draining && store.notifier.healthy();
          if (ok)
            ok = await store.ping().then(
              () => true,
              () => false,
            );
          res.writeHead(ok ? 200 : 503, { "content-type": "text/plain" }).end(ok ? "ready\n" : "not ready\n");
        } else if (path === "/version") {
          res.writeHead(200, { "content-type": "application/json" }).end(`${JSON.stringify(buildInfo())}\n`);
        } else if (path === "/metrics") {
          res.writeHead(200, { "content-type": metrics.registry.contentType }).end(await metrics.registry.metrics());
        } else {
          res.writeHead(404).end();
        }
      })().catch(() => {
        if (!res.headersSent) res.writeHead(500).end();
      });
    });
    const a = await listen(ops, config.opsListen);
    opsUrl = `http://${hostForUrl(config.opsListen.host)}:${a.port}`;
  }

  // Pull-request webhooks: a listener of their own (HTTP/1.1, as GitHub and GitLab send).
  let webhooks: http.Server | null = null;
  let webhookUrl: string | null = null;
  const replayWindow = config.previews?.replayWindowMs ?? DEFAULT_REPLAY_WINDOW_MS;
  const webhookListen = config.previews?.webhookListen;
  if (webhookListen) {
    const receiver = new WebhookReceiver({
      store,
      deps: { keyring: config.keyring, exposure },
      replayWindowMs: replayWindow,
      onEnvironmentChanged: (id) => rollout.environmentChanged(id),
      onStatusDue: statusDue,
      onDeleted: () => void finishDeletions(store).catch(backgroundFailure("finishing a deletion failed")),
      isOutage: (err) => {
        const f = classifyDependencyError(err);
        if (f) outage.failed(f);
        return f !== undefined;
      },
      logger: log,
    });
    // Slow or idle senders are cut off: the listener faces the internet.
    webhooks = http.createServer({ requestTimeout: 30_000, headersTimeout: 10_000 }, receiver.handle);
    webhooks.keepAliveTimeout = 5_000;
    const a = await listen(webhooks, webhookListen);
    webhookUrl = `http://${hostForUrl(webhookListen.host)}:${a.port}`;
  }
  previewStatus.start();

  const retain = config.outboxRetention ?? 100_000;
  const keysRetention = config.idempotencyRetentionMs ?? DEFAULT_IDEMPOTENCY_RETENTION_MS;
  const compactEvery = config.compactIntervalMs ?? 60_000;
  const upkeepFailed: Record<string, (err: unknown) => void> = {
    "compact-outbox": backgroundFailure("outbox compaction failed; retrying"),
    "prune-idempotency-keys": backgroundFailure("forgetting old idempotency keys failed; retrying"),
    "finish-deletions": backgroundFailure("finishing deletions failed; retrying"),
    "prune-audit": backgroundFailure("pruning the audit log failed; retrying"),
    "flush-audit-refusals": backgroundFailure("recording folded refusals failed; retrying"),
    "expire-previews": backgroundFailure("deleting expired previews failed; retrying"),
    "prune-webhook-deliveries": backgroundFailure("forgetting old webhook deliveries failed; retrying"),
    "prune-sessions": backgroundFailure("forgetting ended dashboard sessions failed; retrying"),
  };
  const expire = async (): Promise<number> => {
    const n = await expirePreviews(store, store.clock());
    if (n > 0) await finishDeletions(store);
    return n;
  };
  const auditRetention = config.audit?.retentionMs ?? DEFAULT_AUDIT_RETENTION_MS;
  const upkeep = new PeriodicWork({
    retry: UPKEEP_RETRY,
    onError: (task, err) => upkeepFailed[task]?.(err),
    tasks: [
      {
        name: "compact-outbox",
        everyMs: compactEvery,
        run: async () => metrics.outboxCompacted.inc(await compactOutbox(store.db, retain)),
      },
      {
        name: "prune-idempotency-keys",
        everyMs: compactEvery,
        run: async () => void (await pruneIdempotencyKeys(store.db, store.clock() - keysRetention)),
      },
      // Deletions finish when their last confirmation arrives; this catches the rest (forced
      // regions, a confirmation recorded by another replica, a crash in between).
      {
        name: "finish-deletions",
        everyMs: config.deletionSweepIntervalMs ?? 5_000,
        run: async () => void (await finishDeletions(store)),
      },
      // Retention of the audit log: never past what the webhook sink has yet to deliver.
      {
        name: "prune-audit",
        everyMs: config.audit?.pruneIntervalMs ?? 60 * 60_000,
        run: async () => {
          const n = await pruneAuditEvents(store, store.clock() - auditRetention, {
            keepFrom: auditSink ? (ws) => sinkPosition(store.db, auditSink.name, ws) : undefined,
          });
          metrics.auditPruned.inc(n);
        },
      },
      {
        name: "flush-audit-refusals",
        everyMs: config.audit?.flushIntervalMs ?? 10_000,
        run: async () => void (await audit.flushFolded()),
      },
      // Previews whose TTL passed are deleted by ctrl itself (an audited system change).
      {
        name: "expire-previews",
        everyMs: config.previews?.expiryIntervalMs ?? 30_000,
        run: async () => void (await expire()),
      },
      // Dashboard sessions past their expiry, or whose token was revoked.
      {
        name: "prune-sessions",
        everyMs: compactEvery,
        run: async () => void (await pruneSessions(store, store.clock())),
      },
      // A delivery older than the replay window is refused by its age: its id can go.
      {
        name: "prune-webhook-deliveries",
        everyMs: compactEvery,
        run: async () => void (await pruneDeliveries(store.db, store.clock() - 2 * replayWindow)),
      },
    ],
  });
  upkeep.start();
  auditSink?.start();

  log.info({ url, opsUrl, webhookUrl, database: store.dialect.name, build }, "ctrl listening");

  let closing: Promise<void> | null = null;
  /** Where a shutdown is (the CLI names it if the shutdown outlives its deadline). */
  let shutdownStep = "running";
  const step = <T>(name: string, p: Promise<T>): Promise<T> => {
    shutdownStep = name;
    return p;
  };
  const close = (): Promise<void> => {
    closing ??= (async () => {
      draining = true;
      await step("upkeep", upkeep.stop());
      await step("audit sink", auditSink?.close() ?? Promise.resolve());
      await step("preview status", previewStatus.close());
      if (webhooks) {
        webhooks.closeAllConnections();
        await step("webhooks", new Promise<void>((r) => webhooks.close(() => r())));
      }
      const grace = config.shutdownGraceMs ?? SHUTDOWN_GRACE_MS;
      const closed = new Promise<void>((r) => server.close(() => r()));
      // In-flight unary calls (and their transactions) finish first.
      await step("calls in flight", Promise.race([inflight.idle(), new Promise((r) => setTimeout(r, grace).unref())]));
      streamsStop.abort();
      // GOAWAY: open streams may finish; after the grace period whatever is left is cut.
      for (const s of sessions) s.close();
      listener.closeIdleHttp1();
      let forced: NodeJS.Timeout | undefined;
      await step("open streams", Promise.race([closed, new Promise<void>((r) => (forced = setTimeout(r, grace)))]));
      clearTimeout(forced);
      for (const s of sessions) s.destroy();
      for (const s of sockets) s.destroy();
      await step("connections", closed);
      adapterStop.abort();
      hub.close();
      logHub.close();
      liveHub.close();
      await step("log bus", logBus.close());
      outage.close();
      await step("rollouts", rollout.close());
      await step("domains", domains.close());
      if (ops) {
        ops.closeAllConnections();
        await step("ops listener", new Promise<void>((r) => ops.close(() => r())));
      }
      await step("database", store.close());
      shutdownStep = "stopped";
      log.info("ctrl stopped");
    })();
    return closing;
  };

  return {
    url,
    opsUrl,
    store,
    hub,
    logHub,
    metrics,
    rollout,
    domains,
    auditSink,
    flushAuditRefusals: () => audit.flushFolded(),
    webhookUrl,
    previewStatus,
    expirePreviews: expire,
    shutdownSignal: adapterStop.signal,
    close,
    shutdownStep: () => shutdownStep,
  };
}

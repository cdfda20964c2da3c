// The parts ctrl is made of, each built from its settings and what it needs of the others; the
// order they start and stop in is server.ts's.
import * as http from "node:http";
import { setMaxListeners } from "node:events";
import { Code } from "@connectrpc/connect";
import type { Logger } from "pino";
import { buildInfo, buildLabel } from "../../build-info.js";
import type { MeasurementSource } from "../../contracts/analysis.js";
import { alertRunner as newAlertRunner } from "../alerts/runner.js";
import { AuditRecorder } from "../audit/recorder.js";
import { AuditWebhookSink } from "../audit/sink.js";
import type { BuildWorker } from "../builds/worker.js";
import { registryTokenHandler, REGISTRY_TOKEN_PATH } from "../builds/token-endpoint.js";
import { Authenticator } from "../auth/authenticator.js";
import { OidcSignIn } from "../auth/oidc.js";
import { createDashboardHandler } from "../dashboard/http.js";
import { pruneMemberSessions } from "../domain/member-sessions.js";
import { compactOutbox } from "../db/outbox.js";
import type { Store } from "../db/store.js";
import { pruneAuditEvents, sinkPosition } from "../domain/audit.js";
import { finishDeletions } from "../domain/deletion.js";
import { checkExposureSettings, DEFAULT_EXPOSURE, type ExposureSettings } from "../domain/exposure.js";
import { MEASUREMENT_RETENTION_MS, StoredMeasurements } from "../domain/measurements.js";
import { registerHistoryMetrics } from "../history/prometheus.js";
import { HistoryRollup } from "../history/rollup.js";
import type { DueWork } from "../../retry/due.js";
import { minutePoints } from "../history/store.js";
import { MAX_SKEW_MS } from "../validate/measurements.js";
import { dropExpiredDeliveries, pruneNotifications } from "../domain/notifications.js";
import { pruneDeliveries } from "../domain/previews.js";
import { pruneSessions } from "../domain/sessions.js";
import { systemTxtResolver } from "../exposure/dns.js";
import { DomainVerifier } from "../exposure/verifier.js";
import type { ImageResolver } from "../images/resolve.js";
import { LiveHub } from "../live/hub.js";
import { liveSource } from "../live/views.js";
import { LocalLogBus, PgLogBus, type LogBus } from "../logs/bus.js";
import type { LogHub } from "../logs/hub.js";
import { LogArchiver } from "../logs/archiver.js";
import { NotificationDeliverer } from "../notifications/deliverer.js";
import { StatusReporter } from "../previews/status.js";
import { BuildStatusReporter } from "../repositories/statuses.js";
import { WebhookReceiver } from "../previews/webhooks.js";
import { PushReceiver } from "../repositories/hooks.js";
import { RolloutDriver, storeRolloutSource } from "../rollout/driver.js";
import type { FeedHub } from "../stream/feed.js";
import { ApiServer } from "./api-server.js";
import { classifyDependencyError } from "./dependency-errors.js";
import { DEFAULT_IDEMPOTENCY_RETENTION_MS, idempotencyInterceptor, pruneIdempotencyKeys } from "./idempotency.js";
import { InflightTracker, observeInterceptor } from "./interceptors.js";
import { HttpListener, type ListenAddress } from "./listen.js";
import { CtrlMetrics } from "./metrics.js";
import { OutageWatch } from "./outage.js";
import { apiRoutes } from "./routes.js";
import { createRpcHandler, type NodeRequest, type NodeResponse } from "./rpc-handler.js";
import { DEFAULT_AUDIT_RETENTION_MS, SHUTDOWN_GRACE_MS, type CtrlConfig } from "./settings.js";
import { Upkeep } from "./upkeep.js";

/** What every part is built with: the settings, the store, logs, metrics and the outage log. */
export interface CtrlBase {
  readonly config: CtrlConfig;
  readonly store: Store;
  readonly log: Logger;
  readonly metrics: CtrlMetrics;
  readonly outage: OutageWatch;
  readonly exposure: ExposureSettings;
  /** Where progressive rollouts' analysis reads samples (the agents' reports by default). */
  readonly measurements: MeasurementSource;
  /** Background work that failed: an outage goes to the outage log (once), anything else is logged. */
  backgroundFailure(what: string): (err: unknown) => void;
  /** True (and told to the outage log) when `err` is the database being down. */
  isOutage(err: unknown): boolean;
}

export function ctrlBase(config: CtrlConfig, store: Store, log: Logger): CtrlBase {
  const metrics = new CtrlMetrics(config.defaultMetrics ?? false);
  registerHistoryMetrics(metrics.registry, (at) => minutePoints(store.db, at), store.clock);
  const outage = new OutageWatch({
    dependency: "database",
    probe: () => store.ping(),
    log,
    gauge: metrics.dependencyUp,
  });
  const exposure: ExposureSettings = { ...DEFAULT_EXPOSURE, ...config.exposure };
  checkExposureSettings(exposure);
  const isOutage = (err: unknown): boolean => {
    const f = classifyDependencyError(err);
    if (f) outage.failed(f);
    return f !== undefined;
  };
  return {
    config,
    store,
    log,
    metrics,
    outage,
    exposure,
    measurements: config.measurements ?? new StoredMeasurements(store),
    isOutage,
    backgroundFailure: (what) => (err) => {
      if (!isOutage(err)) log.warn({ err: String(err) }, what);
    },
  };
}

/** The ops port: /healthz, /readyz (ready while `running` and the database answers), /version, /metrics. */
export function opsListener(b: CtrlBase, address: ListenAddress, running: () => boolean): HttpListener {
  const { store, metrics } = b;
  const handler: http.RequestListener = (req, res) => {
    void (async () => {
      const path = (req.url ?? "/").split("?")[0];
      if (path === "/healthz") {
        res.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
      } else if (path === "/readyz") {
        let ok = running() && store.notifier.healthy();
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
  };
  return new HttpListener("ops listener", http.createServer(handler), address);
}

export function domainVerifier(b: CtrlBase): DomainVerifier {
  const d = b.config.domains;
  return new DomainVerifier({
    store: b.store,
    resolver: d?.resolver ?? systemTxtResolver({ servers: d?.dnsServers }),
    settings: b.exposure,
    policy: d?.policy,
    sweepIntervalMs: d?.sweepIntervalMs,
    logger: b.log,
  });
}

export function rolloutDriver(b: CtrlBase): RolloutDriver {
  // Analysis reads the sentinels' measurements the agents report (ReportMeasurements).
  const progressive = {
    measurements: b.measurements,
    logger: b.log,
    onAbort: () => b.metrics.rolloutAborts.inc(),
  };
  return new RolloutDriver(storeRolloutSource(b.store, progressive), {
    logger: b.log,
    sweepIntervalMs: b.config.rolloutSweepIntervalMs,
    onSweepError: b.backgroundFailure("rollout sweep failed"),
  });
}

/** Log requests reach every replica (PostgreSQL: NOTIFY), whichever one the agent is connected to. */
export function logBus(b: CtrlBase): LogBus {
  return b.store.dialect.name === "postgres"
    ? new PgLogBus(b.config.databaseUrl, b.backgroundFailure("relaying logs between replicas failed"))
    : new LocalLogBus();
}

/** The dashboard's live views, read once per change per process and shared by every stream. */
export function liveHub(b: CtrlBase): LiveHub {
  return new LiveHub(
    liveSource({ store: b.store, exposure: b.exposure, measurements: b.measurements }),
    b.store.notifier,
    {
      ...b.config.live,
      onError: b.backgroundFailure("a live view could not be read; retrying"),
    },
  );
}

export function auditRecorder(b: CtrlBase): AuditRecorder {
  return new AuditRecorder({
    store: b.store,
    limits: b.config.audit?.refusalLimits,
    onFailure: (err, method) => {
      if (!b.isOutage(err))
        b.log.error(
          { method, err: err instanceof Error ? err.message : String(err) },
          "an audit event could not be written",
        );
    },
  });
}

/** Reports previews' URLs and states to their pull requests. */
export function statusReporter(b: CtrlBase): StatusReporter {
  const p = b.config.previews;
  return new StatusReporter({
    store: b.store,
    keyring: b.config.keyring,
    exposure: b.exposure,
    sweepIntervalMs: p?.statusSweepIntervalMs,
    recheckMs: p?.statusRecheckMs,
    logger: b.log,
  });
}

/** Reports repository builds' states to their commits. */
export function buildStatusReporter(b: CtrlBase): BuildStatusReporter {
  return new BuildStatusReporter({
    store: b.store,
    keyring: b.config.keyring,
    exposure: b.exposure,
    sweepIntervalMs: b.config.previews?.statusSweepIntervalMs,
    logger: b.log,
  });
}

/** Delivers the notification outbox. */
export function notificationDeliverer(b: CtrlBase): NotificationDeliverer {
  const n = b.config.notifications;
  return new NotificationDeliverer({
    store: b.store,
    keyring: b.config.keyring,
    allowLoopback: n?.allowLoopback ?? false,
    sweepIntervalMs: n?.sweepIntervalMs,
    leaseMs: n?.leaseMs,
    timeoutMs: n?.timeoutMs,
    retry: n?.retry,
    logger: b.log,
    onAttempt: (type, ok) => b.metrics.notificationAttempts.inc({ type, result: ok ? "ok" : "failed" }),
  });
}

/** What the API port serves with, beyond the base. */
export interface ApiParts {
  readonly hub: FeedHub;
  readonly logHub: LogHub;
  readonly liveHub: LiveHub;
  readonly rollout: RolloutDriver;
  readonly domains: DomainVerifier;
  readonly audit: AuditRecorder;
  readonly statusDue: () => void;
  /** Pins deploys' images to digests (absent: images run as named). */
  readonly images: ImageResolver | undefined;
  readonly notifications: NotificationDeliverer;
  /** Builds from source (absent: this ctrl does not build). */
  readonly builds: BuildWorker | undefined;
}

/** The build registry's token realm beside the dashboard, when ctrl issues its tokens. */
function withRegistryToken(
  b: CtrlBase,
  dashboard: (req: NodeRequest, res: NodeResponse) => void,
): (req: NodeRequest, res: NodeResponse) => void {
  const builds = b.config.builds;
  if (!builds?.tokens) return dashboard;
  const tokens = registryTokenHandler({
    store: b.store,
    keyring: b.config.keyring,
    registry: builds.registry,
    tokens: builds.tokens,
    onError: (err) => b.log.warn({ err: err instanceof Error ? err.message : String(err) }, "registry token failed"),
  });
  return (req: NodeRequest, res: NodeResponse): void =>
    ((req.url ?? "").split("?", 1)[0] === REGISTRY_TOKEN_PATH ? tokens : dashboard)(req, res);
}

/**
 * The API port: every service behind the interceptors (audit first, so it sees every outcome;
 * then metrics and deadlines, authentication, idempotency keys) and the dashboard beside them.
 */
export function apiServer(b: CtrlBase, p: ApiParts): ApiServer {
  const { config, store, log, metrics } = b;
  // Behind a TLS-terminating proxy the browser's origin is the public URL's, not what ctrl sees.
  const secure = config.tls !== undefined || config.publicUrl?.startsWith("https:") === true;
  const auth = new Authenticator(store, { secureCookies: secure, publicOrigin: config.publicUrl, ...config.auth });
  const inflight = new InflightTracker();
  const streamsStop = new AbortController();
  const adapterStop = new AbortController();
  // Connect links every call's signal to this one with an "abort" listener, removed when the
  // call ends: one listener per call in flight, so Node's leak warning (more than ten) is no
  // sign of a leak here. test/integration/ctrl/listeners.test.ts checks they all go away.
  setMaxListeners(0, adapterStop.signal);
  const handler = createRpcHandler({
    routes: apiRoutes({
      ...p,
      store,
      metrics,
      auth,
      exposure: b.exposure,
      keyring: config.keyring,
      releaseKinds: config.releaseKinds,
      streamsStop: streamsStop.signal,
      streamKeepaliveMs: config.streamKeepaliveMs,
      logs: config.logs,
      live: config.live,
      backgroundFailure: (what) => b.backgroundFailure(what),
      notifications: {
        deliverer: p.notifications,
        allowLoopback: config.notifications?.allowLoopback ?? false,
        smtpCheckTimeoutMs: config.notifications?.smtpCheckTimeoutMs,
      },
    }),
    interceptors: [
      ...(config.audit?.record === false ? [] : [p.audit.interceptor()]),
      observeInterceptor({
        metrics,
        inflight,
        unaryTimeoutMs: config.unaryTimeoutMs ?? 30_000,
        databaseKind: store.dialect.name === "postgres" ? "PostgreSQL" : "SQLite",
        onUnexpected: (err, method) =>
          log.error({ method, err: err instanceof Error ? err.message : String(err) }, "unexpected error"),
        onDependencyFailure: (f) => b.outage.failed(f),
      }),
      auth.interceptor(),
      idempotencyInterceptor({ store, onRecordFailure: b.backgroundFailure("recording an idempotent answer failed") }),
    ],
    shutdownSignal: adapterStop.signal,
    readMaxBytes: 4 * 1024 * 1024,
    onEarlyEnd: (method, code) =>
      metrics.rpcTotal.inc({ service: method.parent.name, method: method.name, code: Code[code] }),
    fallback: withRegistryToken(
      b,
      createDashboardHandler({
        store,
        auth,
        secure,
        publicOrigin: config.publicUrl,
        assetsDir: config.dashboard?.assetsDir,
        sessionTtlMs: config.dashboard?.sessionTtlMs,
        signInLimit: config.dashboard?.signInLimit,
        oidc: config.oidc ? new OidcSignIn(store, config.oidc) : undefined,
        onError: (err) =>
          log.warn({ err: err instanceof Error ? err.message : String(err) }, "dashboard answer failed"),
      }),
    ),
    onHandlerError: (method, err) =>
      log.warn(
        { method: `${method.parent.name}/${method.name}`, err: err instanceof Error ? err.message : String(err) },
        "rpc answer not delivered",
      ),
  });
  return new ApiServer({
    listen: config.listen,
    tls: config.tls,
    build: buildLabel(),
    pingIntervalMs: config.pingIntervalMs ?? 15_000,
    graceMs: config.shutdownGraceMs ?? SHUTDOWN_GRACE_MS,
    inflight,
    streamsStop,
    adapterStop,
    handler,
  });
}

/**
 * Pull-request webhooks and repositories' push hooks: a listener of their own (HTTP/1.1, as
 * GitHub and GitLab send).
 */
export function webhookListener(
  b: CtrlBase,
  address: ListenAddress,
  replayWindowMs: number,
  p: {
    rollout: RolloutDriver;
    statusDue: () => void;
    images: ImageResolver | undefined;
    builds: BuildWorker | undefined;
  },
): HttpListener {
  const { store } = b;
  const receiver = new WebhookReceiver({
    store,
    deps: { keyring: b.config.keyring, exposure: b.exposure },
    images: p.images,
    replayWindowMs,
    onEnvironmentChanged: (id) => p.rollout.environmentChanged(id),
    onStatusDue: p.statusDue,
    onDeleted: () => void finishDeletions(store).catch(b.backgroundFailure("finishing a deletion failed")),
    isOutage: (err) => b.isOutage(err),
    logger: b.log,
  });
  const builds = p.builds;
  const pushes = new PushReceiver({
    store,
    keyring: b.config.keyring,
    refusals: receiver.refusals,
    builds: builds && { queued: () => builds.queued() },
    onDeleted: () => void finishDeletions(store).catch(b.backgroundFailure("finishing a deletion failed")),
    replayWindowMs,
    isOutage: (err) => b.isOutage(err),
    logger: b.log,
  });
  // Slow or idle senders are cut off: the listener faces the internet.
  const server = http.createServer({ requestTimeout: 30_000, headersTimeout: 10_000 }, (req, res) =>
    (req.url ?? "").startsWith("/hooks/repositories/") ? pushes.handle(req, res) : receiver.handle(req, res),
  );
  server.keepAliveTimeout = 5_000;
  return new HttpListener("webhooks", server, address);
}

/** The audit log's webhook sink, when one is configured. */
export function auditSink(b: CtrlBase): AuditWebhookSink | undefined {
  const hook = b.config.audit?.webhook;
  if (!hook) return undefined;
  return new AuditWebhookSink({
    store: b.store,
    url: hook.url,
    secret: hook.secret,
    batch: hook.batch,
    sweepIntervalMs: hook.sweepIntervalMs,
    retry: hook.retry,
    timeoutMs: hook.timeoutMs,
    logger: b.log,
    onDelivery: (ok, n) => b.metrics.auditDeliveries.inc({ result: ok ? "ok" : "failed" }, ok ? n : 1),
  });
}

/** The log history: every environment's lines archived as they are written, and pruned. */
export function logArchiver(b: CtrlBase, hub: LogHub): LogArchiver {
  return new LogArchiver({
    ...b.config.logArchive,
    store: b.store,
    hub,
    keyring: b.config.keyring,
    logger: b.log,
    onError: b.backgroundFailure("log archive upkeep failed; retrying"),
    onStored: (n) => b.metrics.logArchiveStored.inc(n),
    onDropped: (reason, n) => b.metrics.logArchiveDropped.inc({ reason }, n),
  });
}

/** The metrics history's rollup of minutes into hours, and its pruning. */
export function historyRollup(b: CtrlBase): HistoryRollup {
  return new HistoryRollup({
    store: b.store,
    // A report is accepted up to its retention after its window, and a minute ahead (clock skew).
    lateMs: MEASUREMENT_RETENTION_MS + MAX_SKEW_MS,
    logger: b.log,
    onError: b.backgroundFailure("metrics history upkeep failed; retrying"),
  });
}

/** Alert rules' evaluation on the metrics history. */
export function alertRunner(b: CtrlBase): DueWork {
  return newAlertRunner({
    store: b.store,
    settleMs: b.config.alerts?.settleMs,
    sweepIntervalMs: b.config.alerts?.sweepIntervalMs,
    onError: b.backgroundFailure("alert evaluation failed; retrying"),
  });
}

/** The periodic upkeep. */
export function upkeep(
  b: CtrlBase,
  p: {
    audit: AuditRecorder;
    auditSink: AuditWebhookSink | undefined;
    expirePreviews: () => Promise<number>;
    replayWindowMs: number;
  },
): Upkeep {
  const { config, store, metrics } = b;
  const { auditSink: sink } = p;
  const retain = config.outboxRetention ?? 100_000;
  const keysRetention = config.idempotencyRetentionMs ?? DEFAULT_IDEMPOTENCY_RETENTION_MS;
  const compactEvery = config.compactIntervalMs ?? 60_000;
  const auditRetention = config.audit?.retentionMs ?? DEFAULT_AUDIT_RETENTION_MS;
  const tasks = [
    {
      name: "compact-outbox",
      failure: "outbox compaction failed; retrying",
      everyMs: compactEvery,
      run: async () => metrics.outboxCompacted.inc(await compactOutbox(store.db, retain)),
    },
    {
      name: "prune-idempotency-keys",
      failure: "forgetting old idempotency keys failed; retrying",
      everyMs: compactEvery,
      run: async () => void (await pruneIdempotencyKeys(store.db, store.clock() - keysRetention)),
    },
    // Deletions finish when their last confirmation arrives; this catches the rest (forced
    // regions, a confirmation recorded by another replica, a crash in between).
    {
      name: "finish-deletions",
      failure: "finishing deletions failed; retrying",
      everyMs: config.deletionSweepIntervalMs ?? 5_000,
      run: async () => void (await finishDeletions(store)),
    },
    // Retention of the audit log: never past what the webhook sink has yet to deliver.
    {
      name: "prune-audit",
      failure: "pruning the audit log failed; retrying",
      everyMs: config.audit?.pruneIntervalMs ?? 60 * 60_000,
      run: async () => {
        const n = await pruneAuditEvents(store, store.clock() - auditRetention, {
          keepFrom: sink ? (ws) => sinkPosition(store.db, sink.name, ws) : undefined,
        });
        metrics.auditPruned.inc(n);
      },
    },
    {
      name: "flush-audit-refusals",
      failure: "recording folded refusals failed; retrying",
      everyMs: config.audit?.flushIntervalMs ?? 10_000,
      run: async () => void (await p.audit.flushFolded()),
    },
    // Previews whose TTL passed are deleted by ctrl itself (an audited system change).
    {
      name: "expire-previews",
      failure: "deleting expired previews failed; retrying",
      everyMs: config.previews?.expiryIntervalMs ?? 30_000,
      run: async () => void (await p.expirePreviews()),
    },
    // Dashboard sessions past their expiry, or whose token was revoked; members' sessions past their end.
    {
      name: "prune-sessions",
      failure: "forgetting ended dashboard sessions failed; retrying",
      everyMs: compactEvery,
      run: async () => {
        await pruneSessions(store, store.clock());
        await pruneMemberSessions(store, store.clock());
      },
    },
    // Notifications still undelivered after the age limit are given up; finished ones forgotten.
    {
      name: "expire-notifications",
      failure: "giving up old notifications failed; retrying",
      everyMs: compactEvery,
      run: async () =>
        metrics.notificationsDropped.inc(
          await dropExpiredDeliveries(store, store.clock() - (config.notifications?.maxAgeMs ?? 24 * 3_600_000)),
        ),
    },
    {
      name: "prune-notifications",
      failure: "forgetting old notifications failed; retrying",
      everyMs: compactEvery,
      run: async () =>
        void (await pruneNotifications(
          store,
          store.clock() - (config.notifications?.retentionMs ?? 7 * 24 * 3_600_000),
        )),
    },
    // A delivery older than the replay window is refused by its age: its id can go.
    {
      name: "prune-webhook-deliveries",
      failure: "forgetting old webhook deliveries failed; retrying",
      everyMs: compactEvery,
      run: async () => void (await pruneDeliveries(store.db, store.clock() - 2 * p.replayWindowMs)),
    },
  ];
  return new Upkeep(tasks, (what) => b.backgroundFailure(what));
}

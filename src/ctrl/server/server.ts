// The ctrl server: one HTTP/2 port (h2c, or TLS when a certificate is configured) serving
// Connect, gRPC and gRPC-Web for ClusterService and the public API, and an HTTP/1.1 ops port
// with /healthz, /readyz, /metrics and /version. Every API answer carries ctrl's build in a
// header (src/contracts/version.ts).
//
// ctrl is a list of parts (./parts.ts) on one Manager (../../base/lifecycle.ts), started in order
// and stopped in reverse. Shutdown drains: readiness turns false, the listener stops accepting,
// in-flight unary calls (and so their writes) finish, then watch streams end cleanly (agents
// reconnect elsewhere with their cursor), sessions close, and the database closes last; a stop
// that hangs names the part or step it waits on (`shutdownStep`).
import { pino } from "pino";
import { Manager, onStop, part } from "../../base/lifecycle.js";
import { buildLabel } from "../../build-info.js";
import { Store } from "../db/store.js";
import { finishDeletions } from "../domain/deletion.js";
import { BuildWorker } from "../builds/worker.js";
import { ImageResolver } from "../images/resolve.js";
import { LogHub } from "../logs/hub.js";
import { useBufferTextEncoding } from "../payloads/text-encoding.js";
import { expirePreviews } from "../previews/expiry.js";
import { DEFAULT_REPLAY_WINDOW_MS } from "../previews/webhooks.js";
import { FeedHub } from "../stream/feed.js";
import { storeFeedSource } from "../stream/watch.js";
import { bootstrapAdminToken } from "./admin-token.js";
import { setInstallationDefaults } from "../domain/quota-settings.js";
import {
  apiServer,
  auditRecorder,
  auditSink,
  ctrlBase,
  domainVerifier,
  liveHub,
  logBus,
  notificationDeliverer,
  opsListener,
  rolloutDriver,
  statusReporter,
  buildStatusReporter,
  upkeep,
  historyRollup,
  alertRunner,
  logArchiver,
  webhookListener,
} from "./parts.js";
import type { CtrlConfig, RunningCtrl } from "./settings.js";

export type { ListenAddress } from "./listen.js";
export {
  DEFAULT_AUDIT_RETENTION_MS,
  SHUTDOWN_GRACE_MS,
  type AuditSettings,
  type CtrlConfig,
  type PreviewSettings,
  type RunningCtrl,
} from "./settings.js";
export { UPKEEP_RETRY } from "./upkeep.js";

/**
 * Starts ctrl: its parts in the order they start. Each stops in the reverse order, so what a part
 * needs is still there while it stops (../../base/lifecycle.ts): the listeners stop taking work
 * first, the database closes last.
 */
export async function startCtrl(config: CtrlConfig): Promise<RunningCtrl> {
  const log = config.logger ?? pino({ level: "silent" });
  useBufferTextEncoding();
  const store = await Store.open({ url: config.databaseUrl, poolSize: config.poolSize });
  try {
    if (config.bootstrapAdmin) await bootstrapAdminToken(store, config.bootstrapAdmin, log);
    if (config.defaultQuota) await setInstallationDefaults(store, config.defaultQuota);
  } catch (err) {
    await store.close();
    throw err;
  }
  const b = ctrlBase(config, store, log);
  const mgr = new Manager();
  mgr.add(onStop("database", () => store.close()));
  const ops = config.opsListen && mgr.add(opsListener(b, config.opsListen, () => mgr.step() === "running"));
  const domains = mgr.add(domainVerifier(b));
  const rollout = mgr.add(rolloutDriver(b));
  mgr.add(onStop("outage watch", () => b.outage.close()));
  const bus = logBus(b);
  mgr.add(
    part(
      "log bus",
      () => bus.start(),
      () => bus.close(),
    ),
  );
  const live = liveHub(b);
  mgr.add(onStop("live views", () => live.close()));
  const logHub = new LogHub(bus, { keepaliveMs: config.logs?.keepaliveMs });
  mgr.add(
    part(
      "log hub",
      () => logHub.start(),
      () => logHub.close(),
    ),
  );
  const hub = new FeedHub(storeFeedSource(store), store.notifier, {
    safetyIntervalMs: config.feedSafetyIntervalMs,
    onError: b.backgroundFailure("feed read failed; retrying"),
  });
  mgr.add(onStop("feeds", () => hub.close()));
  const audit = auditRecorder(b);
  const previewStatus = statusReporter(b);
  const buildStatus = buildStatusReporter(b);
  const statusDue = (): void => {
    void previewStatus.sweep();
    void buildStatus.sweep();
  };
  const images = config.images && new ImageResolver(config.images);
  if (images) mgr.add(onStop("image resolver", () => images.close()));
  // Delivery stops after the listeners (they may still be sending a test message).
  const notifications = mgr.add(notificationDeliverer(b));
  // Builds stop after the listeners: a build in flight is left to its lease and runs again.
  const builds =
    config.builds &&
    mgr.add(
      new BuildWorker(config.builds, {
        store,
        environmentChanged: (id) => rollout.environmentChanged(id),
        log: (msg, fields) => log.warn(fields ?? {}, msg),
        projectFile: { settings: b.exposure, policy: domains.policy },
        keyring: config.keyring,
      }),
    );
  const api = mgr.add(
    apiServer(b, { hub, logHub, liveHub: live, rollout, domains, audit, statusDue, images, notifications, builds }),
  );
  const replayWindowMs = config.previews?.replayWindowMs ?? DEFAULT_REPLAY_WINDOW_MS;
  const hooksAt = config.previews?.webhookListen;
  const webhooks =
    hooksAt && mgr.add(webhookListener(b, hooksAt, replayWindowMs, { rollout, statusDue, images, builds }));
  mgr.add(previewStatus);
  mgr.add(buildStatus);
  const sink = auditSink(b);
  if (sink) mgr.add(sink);
  const expire = async (): Promise<number> => {
    const n = await expirePreviews(store, store.clock());
    if (n > 0) await finishDeletions(store);
    return n;
  };
  mgr.add(upkeep(b, { audit, auditSink: sink, expirePreviews: expire, replayWindowMs }));
  mgr.add(historyRollup(b));
  mgr.add(alertRunner(b));
  const logArchive = mgr.add(logArchiver(b, logHub));
  await mgr.start();

  const urls = { url: api.url, opsUrl: ops ? ops.url : null, webhookUrl: webhooks ? webhooks.url : null };
  log.info({ ...urls, database: store.dialect.name, build: buildLabel() }, "ctrl listening");
  let closing: Promise<void> | undefined;
  return {
    ...urls,
    store,
    hub,
    logHub,
    logArchive,
    metrics: b.metrics,
    rollout,
    domains,
    auditSink: sink,
    flushAuditRefusals: () => audit.flushFolded(),
    previewStatus,
    buildStatus,
    notifications,
    expirePreviews: expire,
    shutdownSignal: api.stopped,
    close: () => (closing ??= mgr.stop().then(() => log.info("ctrl stopped"))),
    shutdownStep: () => mgr.step(),
  };
}

// What startCtrl takes (CtrlConfig and its sections, with their defaults) and what it answers
// (RunningCtrl). `krane ctrl serve` builds a CtrlConfig from flags, variables and a file (./config.ts).
import type { QuotaName, QuotaSetting } from "../../contracts/quotas.js";
import type { Logger } from "pino";
import type { MeasurementSource } from "../../contracts/analysis.js";
import type { AllowedKind } from "../../contracts/releases.js";
import type { BackoffPolicy } from "../../retry/backoff.js";
import type { LimiterOptions } from "../audit/limiter.js";
import type { AuditWebhookSink } from "../audit/sink.js";
import type { AuthOptions } from "../auth/authenticator.js";
import type { OidcSettings } from "../auth/oidc.js";
import type { DashboardOptions } from "../dashboard/http.js";
import type { Store } from "../db/store.js";
import type { DomainCheckPolicy, TxtResolver } from "../domain/domains.js";
import type { ExposureSettings } from "../domain/exposure.js";
import type { DomainVerifier } from "../exposure/verifier.js";
import type { ImageSettings } from "../images/resolve.js";
import type { BuildSettings } from "../builds/worker.js";
import type { LiveHubOptions } from "../live/hub.js";
import type { LiveServiceOptions } from "../live/service.js";
import type { LogHub } from "../logs/hub.js";
import type { LogServiceOptions } from "../logs/service.js";
import type { NotificationDeliverer } from "../notifications/deliverer.js";
import type { StatusReporter } from "../previews/status.js";
import type { BuildStatusReporter } from "../repositories/statuses.js";
import type { RolloutDriver } from "../rollout/driver.js";
import type { Keyring } from "../secrets/keyring.js";
import type { LogArchiver, LogArchiverOptions } from "../logs/archiver.js";
import type { FeedHub } from "../stream/feed.js";
import type { ListenAddress } from "./listen.js";
import type { CtrlMetrics } from "./metrics.js";

export interface CtrlConfig {
  /** SQLite path or postgres:// URL. */
  databaseUrl: string;
  listen: ListenAddress;
  /** The HTTP/1.1 ops port; null disables it. */
  opsListen: ListenAddress | null;
  tls?: { certFile: string; keyFile: string };
  /**
   * The origin browsers reach ctrl at, when that is not what ctrl sees (a TLS-terminating proxy in
   * front of plain HTTP): the dashboard's sign-in redirect URI, the origin its cross-site checks
   * expect, and Secure cookies when it is https. Undefined: each request's own scheme and Host.
   */
  publicUrl?: string;
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
  /** The log history's archive (../logs/archiver.ts): how often it looks, how long it keeps. */
  logArchive?: Pick<
    LogArchiverOptions,
    "sweepIntervalMs" | "answerTimeoutMs" | "pruneIntervalMs" | "maxLinesPerEnvironment" | "lingerMs" | "leaseMs"
  >;
  /** The live views' streams (LiveService) and how their views are read (coalescing). */
  live?: LiveServiceOptions & LiveHubOptions;
  /**
   * Deploys pin their image's tag to a digest, asking its registry (../images/resolve.ts); absent:
   * images run as named (`krane ctrl serve` resolves unless --image-digests off).
   */
  images?: ImageSettings;
  /** Builds from source in ctrl's build worker (../builds/worker.ts); absent: StartBuild is refused. */
  builds?: BuildSettings;
  /** The web dashboard at `/`: where its built page is, how long a sign-in lasts. */
  dashboard?: { assetsDir?: string; sessionTtlMs?: number; signInLimit?: DashboardOptions["signInLimit"] };
  /** Notifications' delivery. */
  notifications?: NotificationSettings;
  /** Alert rules' evaluation (src/ctrl/alerts/runner.ts). */
  alerts?: { settleMs?: number; sweepIntervalMs?: number };
  /**
   * The installation's default quotas, written at start (replacing the ones before); undefined
   * leaves what the database holds.
   */
  defaultQuota?: ReadonlyMap<QuotaName, QuotaSetting>;
  /** Members sign in through this OpenID provider (absent: API tokens only). */
  oidc?: OidcSettings;
}

export interface NotificationSettings {
  /** Channels may deliver to this machine (loopback, link-local): tests, a relay beside ctrl. Default false. */
  allowLoopback?: boolean;
  /** How often due deliveries are looked for (ms; default 1 s). */
  sweepIntervalMs?: number;
  /** How long a claimed delivery is left to its replica (ms; default 30 s). */
  leaseMs?: number;
  /** One attempt's time limit (ms; default 10 s). */
  timeoutMs?: number;
  /** Backoff of failed attempts (default NOTIFY_RETRY: 1 s doubling to 5 minutes, full jitter). */
  retry?: BackoffPolicy;
  /** A delivery still pending this long is dropped (ms; default 24 h). */
  maxAgeMs?: number;
  /** Delivered and dropped deliveries, and their events, are kept this long (ms; default 7 days). */
  retentionMs?: number;
  /** How long SetSmtpServer waits for the server to answer (ms; default 10 s). */
  smtpCheckTimeoutMs?: number;
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
  /** The log history's archive (tests sweep it and wait for its writes). */
  logArchive: LogArchiver;
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
  /** Reports repository builds' states to their commits. */
  buildStatus: BuildStatusReporter;
  /** Delivers notifications (the outbox of notification_deliveries). */
  notifications: NotificationDeliverer;
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

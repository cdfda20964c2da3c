// The deliverer: drains the notification outbox (../domain/notifications.ts) at least once.
//
// A DueWork (src/retry/due.ts): every sweep claims the due deliveries — the oldest pending one of
// each (channel, lane), moved ahead by a lease so another ctrl replica leaves it alone — and runs
// each: open the channel's credentials, render the event in the channel's format, send it. A
// delivery the receiver took is recorded (the channel's failures reset) and the next one of its
// lane, when due, runs at once. A failed attempt is recorded with its next time — full-jitter
// backoff on the delivery's attempts (NOTIFY_RETRY, capped at 5 minutes), or the receiver's
// Retry-After when longer — so the backoff survives a restart, and the channel counts one more
// failure in a row (FAILING_AFTER of them and it shows as failing).
//
// A crash between a receiver's answer and its record sends that event again after the lease:
// receivers drop repeats by the event's id (X-Krane-Delivery, Idempotency-Key, the email's
// Message-ID).
import { pino, type Logger } from "pino";
import type { NotificationBody } from "../../contracts/notifications.js";
import type { Runnable } from "../../base/lifecycle.js";
import { fullJitterDelay, type BackoffPolicy } from "../../retry/backoff.js";
import { DueWork } from "../../retry/due.js";
import { Result } from "../../retry/queue.js";
import type { NotificationChannelRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { newId } from "../domain/ids.js";
import {
  claimDueDeliveries,
  deliveryToAttempt,
  openChannel,
  openSmtpPassword,
  recordDelivered,
  recordFailure,
  smtpServer,
} from "../domain/notifications.js";
import type { Keyring } from "../secrets/keyring.js";
import { receiverUrl } from "../validate/notifications.js";
import {
  DeliveryError,
  refuseLocalReceiver,
  sendEmail,
  sendSlack,
  sendWebhook,
  type Resolve,
  type SmtpConnection,
} from "./send.js";

/** Backoff of a delivery that failed, by its attempts so far. */
export const NOTIFY_RETRY: BackoffPolicy = { baseMs: 1000, capMs: 300_000, minMs: 500 };

export interface DelivererOptions {
  readonly store: Store;
  readonly keyring: Keyring | undefined;
  /** Receivers on this machine are allowed (tests, a relay beside ctrl). */
  readonly allowLoopback: boolean;
  /** How often due deliveries are looked for (ms; default 1 s). */
  readonly sweepIntervalMs?: number;
  /** How long a claimed delivery is left to its replica (ms; default 30 s). */
  readonly leaseMs?: number;
  /** One attempt's time limit (ms; default 10 s). */
  readonly timeoutMs?: number;
  readonly retry?: BackoffPolicy;
  /** Resolves receivers' hostnames (default: the system's resolver). */
  readonly resolve?: Resolve;
  readonly logger?: Logger;
  /** Told of every attempt (metrics). */
  readonly onAttempt?: (channelType: string, ok: boolean) => void;
}

export class NotificationDeliverer implements Runnable {
  readonly name = "notifications";
  readonly #o: DelivererOptions;
  readonly #work: DueWork;
  readonly #log: Logger;

  constructor(o: DelivererOptions) {
    this.#o = o;
    this.#log = o.logger ?? pino({ level: "silent" });
    const lease = o.leaseMs ?? 30_000;
    this.#work = new DueWork({
      name: this.name,
      due: (limit) => claimDueDeliveries(o.store, limit, lease),
      reconcile: (key, signal) => this.#attempt(key, signal),
      sweepIntervalMs: o.sweepIntervalMs ?? 1000,
      sweepLimit: 200,
      sweepAtStart: true,
      concurrency: 8,
      // Only the store failing gets here (an attempt's failure is recorded, not thrown).
      retry: { baseMs: 500, capMs: 10_000, minMs: 200 },
      onSweepError: (err) =>
        this.#log.warn({ err: err instanceof Error ? err.message : String(err) }, "notification sweep failed"),
    });
  }

  start(): void {
    this.#work.start();
  }

  /** Queues the deliveries due now (after a change that notified, say). */
  sweep(): Promise<void> {
    return this.#work.sweep();
  }

  idle(): Promise<void> {
    return this.#work.idle();
  }

  stop(): Promise<void> {
    return this.#work.stop();
  }

  /** Sends `body` to `channel` once; throws DeliveryError. */
  async send(channel: NotificationChannelRow, body: NotificationBody, signal?: AbortSignal): Promise<void> {
    const o = this.#o;
    const timeoutMs = o.timeoutMs ?? 10_000;
    const creds = await openChannel(o.store.db, o.keyring, channel);
    if (channel.type === "email") {
      await sendEmail(await this.#smtp(), creds.to ?? [], body, timeoutMs);
      return;
    }
    // Checked again: the installation may have stopped allowing loopback receivers since.
    let url: string;
    try {
      url = receiverUrl("url", creds.url ?? "", o.allowLoopback);
    } catch (err) {
      throw new DeliveryError(err instanceof Error ? err.message : String(err));
    }
    if (!o.allowLoopback) await refuseLocalReceiver(url, o.resolve);
    if (channel.type === "slack") await sendSlack(url, body, { timeoutMs, signal });
    else await sendWebhook(url, creds.secret ?? "", body, { timeoutMs, signal });
  }

  /** `krane notify test`: a test message to one channel, now, outside the outbox. */
  async sendTest(channel: NotificationChannelRow, workspace: string): Promise<{ delivered: boolean; error: string }> {
    const body: NotificationBody = {
      id: newId("nev"),
      type: "test",
      at: new Date().toISOString(),
      severity: "info",
      title: `test message: channel ${channel.name}`,
      text: `krane notify test ${channel.name}: this channel receives workspace ${workspace}'s notifications.`,
      workspace,
      project: null,
      environment: null,
      region: null,
      revision: null,
      deployment_id: null,
      details: {},
    };
    try {
      await this.send(channel, body);
      this.#o.onAttempt?.(channel.type, true);
      return { delivered: true, error: "" };
    } catch (err) {
      this.#o.onAttempt?.(channel.type, false);
      return { delivered: false, error: err instanceof Error ? err.message : String(err) };
    }
  }

  async #smtp(): Promise<SmtpConnection> {
    const db = this.#o.store.db;
    const row = await smtpServer(db);
    if (!row) throw new DeliveryError("the installation names no SMTP server (krane notify smtp set)");
    return {
      host: row.host,
      port: row.port,
      security: row.security,
      username: row.username,
      password: await openSmtpPassword(db, this.#o.keyring, row),
      from: row.from_address,
    };
  }

  async #attempt(key: string, signal: AbortSignal): Promise<Result> {
    const o = this.#o;
    const x = await deliveryToAttempt(o.store.db, key);
    if (!x) return Result.done;
    const body = JSON.parse(x.event.body) as NotificationBody;
    try {
      await this.send(x.channel, body, signal);
    } catch (err) {
      if (signal.aborted) return Result.done; // ctrl is stopping: the lease brings it back
      const why = err instanceof Error ? err.message : String(err);
      const backoff = fullJitterDelay(Number(x.delivery.attempts), o.retry ?? NOTIFY_RETRY);
      const wait = Math.max(backoff, err instanceof DeliveryError ? (err.retryAfterMs ?? 0) : 0);
      await recordFailure(o.store, key, why, o.store.clock() + wait);
      o.onAttempt?.(x.channel.type, false);
      this.#log.warn(
        { channel: x.channel.name, workspace: x.channel.workspace_id, event: body.id, err: why, retryInMs: wait },
        "notification not delivered; retrying with backoff",
      );
      return Result.done;
    }
    o.onAttempt?.(x.channel.type, true);
    const next = await recordDelivered(o.store, key, o.leaseMs ?? 30_000);
    if (next !== undefined) this.#work.add(next);
    return Result.done;
  }
}

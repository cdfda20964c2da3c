// The audit log's webhook sink: every event, delivered at least once to a receiver of the
// operator's, in order per chain, signed so the receiver can tell it came from this ctrl.
//
// Each chain is one key of a WorkQueue (src/retry): a run reads the events after the sink's cursor
// (../domain/audit.ts), POSTs them as NDJSON (the export's lines), and moves the cursor past them
// once the receiver answered 2xx; a failure (refused, unreachable, a timeout, any other status)
// leaves the cursor and retries the key with its own full-jitter backoff (SINK_RETRY, capped at
// 10 s, so deliveries resume within seconds once a receiver is back). A crash between delivery and
// cursor repeats that batch: receivers deduplicate by the event id (or the X-Krane-Delivery
// header, the same for the same batch). A sweep looks for chains with undelivered events every
// `sweepIntervalMs`; with several ctrl replicas one holds the sink's lease and delivers.
//
// The signature: X-Krane-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")> with
// X-Krane-Timestamp (unix seconds), so a receiver that checks the timestamp's age refuses a
// replayed delivery, and one that checks the signature refuses anything not from this ctrl.
import { createHmac, randomUUID } from "node:crypto";
import { pino, type Logger } from "pino";
import { auditRecordToJson } from "../../contracts/audit.js";
import type { BackoffPolicy } from "../../retry/backoff.js";
import type { Runnable } from "../../base/lifecycle.js";
import { DueWork } from "../../retry/due.js";
import { Result } from "../../retry/queue.js";
import type { Store } from "../db/store.js";
import { advanceSinkCursor, leaseSink, sinkBacklog, sinkPosition } from "../domain/audit.js";
import { listAuditEvents } from "../read/audit.js";

/** Backoff of a chain whose delivery failed. */
export const SINK_RETRY: BackoffPolicy = { baseMs: 250, capMs: 10_000, minMs: 100 };

export const SIGNATURE_HEADER = "x-krane-signature";
export const TIMESTAMP_HEADER = "x-krane-timestamp";
export const DELIVERY_HEADER = "x-krane-delivery";

/** What a receiver checks: the signature of a delivery's body at its timestamp. */
export function signDelivery(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex")}`;
}

export interface AuditSinkOptions {
  readonly store: Store;
  readonly url: string;
  /** The HMAC key the receiver shares. */
  readonly secret: string;
  /** The sink's name (its cursors and lease); default "webhook". */
  readonly name?: string;
  /** Events per delivery (default 500). */
  readonly batch?: number;
  readonly retry?: BackoffPolicy;
  /** How often chains with undelivered events are looked for (ms; default 1,000). */
  readonly sweepIntervalMs?: number;
  /** How long a replica's delivery lease lasts without renewal (ms; default 30 s). */
  readonly leaseMs?: number;
  /** One delivery's time limit (ms; default 10 s). */
  readonly timeoutMs?: number;
  readonly logger?: Logger;
  /** Told of every delivery attempt (metrics, tests). */
  readonly onDelivery?: (ok: boolean, events: number) => void;
}

export class AuditWebhookSink implements Runnable {
  readonly name: string;
  readonly #o: AuditSinkOptions;
  readonly #work: DueWork;
  readonly #owner = randomUUID();

  constructor(o: AuditSinkOptions) {
    this.#o = o;
    this.name = o.name ?? "webhook";
    const log = o.logger ?? pino({ level: "silent" });
    this.#work = new DueWork({
      name: `audit sink ${this.name}`,
      // The chains with undelivered events, while this replica holds the lease.
      due: async () =>
        (await leaseSink(o.store, this.name, this.#owner, o.leaseMs ?? 30_000))
          ? (await sinkBacklog(o.store.db, this.name)).map((c) => c.workspaceId)
          : [],
      reconcile: (ws, signal) => this.#deliver(ws, signal),
      sweepIntervalMs: o.sweepIntervalMs ?? 1000,
      sweepLimit: Number.MAX_SAFE_INTEGER,
      sweepAtStart: true,
      concurrency: 4,
      retry: o.retry ?? SINK_RETRY,
      onSweepError: (err) =>
        log.warn({ err: err instanceof Error ? err.message : String(err) }, "audit sink sweep failed"),
      onResult: (ws, r) => {
        if (r.type === "retry")
          log.warn(
            {
              chain: ws === "" ? "installation" : ws,
              err: r.error instanceof Error ? r.error.message : String(r.error),
            },
            "audit delivery failed; retrying with backoff",
          );
      },
    });
  }

  start(): void {
    this.#work.start();
  }

  /** Queues every chain with undelivered events (while this replica holds the lease). */
  sweep(): Promise<void> {
    return this.#work.sweep();
  }

  async #deliver(ws: string, signal: AbortSignal): Promise<Result> {
    const db = this.#o.store.db;
    const from = await sinkPosition(db, this.name, ws);
    const page = await listAuditEvents(db, { workspaceId: ws }, { limit: this.#o.batch ?? 500, after: from - 1 });
    const last = page.items[page.items.length - 1]?.seq;
    if (last === undefined) return Result.done;
    const events = page.items.map(auditRecordToJson);
    const body = `${events.map((e) => JSON.stringify(e)).join("\n")}\n`;
    const timestamp = String(Math.floor(Date.now() / 1000));
    let ok = false;
    try {
      const res = await fetch(this.#o.url, {
        method: "POST",
        headers: {
          "content-type": "application/x-ndjson",
          [TIMESTAMP_HEADER]: timestamp,
          [SIGNATURE_HEADER]: signDelivery(this.#o.secret, timestamp, body),
          [DELIVERY_HEADER]: `${ws === "" ? "installation" : ws}:${from}-${last}`,
        },
        body,
        signal: AbortSignal.any([signal, AbortSignal.timeout(this.#o.timeoutMs ?? 10_000)]),
      });
      await res.arrayBuffer().catch(() => undefined);
      ok = res.status >= 200 && res.status < 300;
      if (!ok) throw new Error(`the receiver answered ${res.status}`);
    } finally {
      this.#o.onDelivery?.(ok, events.length);
    }
    await advanceSinkCursor(this.#o.store, this.name, ws, last);
    return page.more ? Result.requeueAfter(0) : Result.done;
  }

  /** Resolves when nothing is queued, running or waiting for a retry. */
  idle(): Promise<void> {
    return this.#work.idle();
  }

  stop(): Promise<void> {
    return this.#work.stop();
  }
}

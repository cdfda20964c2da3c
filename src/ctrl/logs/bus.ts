// How ctrl replicas tell each other about log requests. A StreamLogs call may reach a replica the
// region's agent is not connected to, so every request, its keepalives and its cancellation go
// to every replica, and each forwards them to the agents connected to it; the lines come back to
// the replica the agent pushes to, which hands them to its own reader or relays them to the one
// that has the reader.
//
//   LocalLogBus — SQLite (one ctrl process): an in-process emitter.
//   PgLogBus    — PostgreSQL: NOTIFY on the `krane_logs` channel, LISTENed by every replica on a
//                 connection of its own (reconnected with backoff). Publishes go out one at a time
//                 on one connection, so a request's batches arrive in the order they were sent.
//                 A payload must stay under PostgreSQL's 8,000 bytes: lines are cut at
//                 MAX_LINE_BYTES (src/contracts/logs.ts) and batches split (hub.ts).
//
// Why NOTIFY and not a table: lines are transient (a reader that left does not want them later),
// the database already connects every replica, and nothing has to be cleaned up after a crash.
// A lost notification (a LISTEN connection that dropped) shows as a quiet region: the reader's
// replica ends a followed stream with `unavailable` and the CLI resumes from its last line.
import { EventEmitter } from "node:events";
import pg from "pg";
import type { BackoffPolicy } from "../../retry/backoff.js";
import { retry } from "../../retry/retry.js";

export const LOG_CHANNEL = "krane_logs";
/** PostgreSQL refuses NOTIFY payloads of 8,000 bytes or more. */
export const MAX_PAYLOAD = 7_900;

const RECONNECT: BackoffPolicy = { baseMs: 100, capMs: 1_000 };

export interface LogBus {
  /** Sends a message to every replica, this one included. */
  publish(payload: string): void;
  subscribe(listener: (payload: string) => void): () => void;
  /** Connects (PostgreSQL: the LISTEN connection); resolves once messages can arrive. */
  start(): Promise<void>;
  close(): Promise<void>;
}

export class LocalLogBus implements LogBus {
  protected readonly emitter = new EventEmitter();
  constructor() {
    this.emitter.setMaxListeners(0);
  }
  publish(payload: string): void {
    // Asynchronous like NOTIFY, so callers behave the same on both.
    queueMicrotask(() => this.emitter.emit("m", payload));
  }
  subscribe(listener: (payload: string) => void): () => void {
    this.emitter.on("m", listener);
    return () => this.emitter.off("m", listener);
  }
  async start(): Promise<void> {
    // In-process: nothing to connect.
  }

  async close(): Promise<void> {
    this.emitter.removeAllListeners();
  }
}

export class PgLogBus extends LocalLogBus {
  readonly #url: string;
  readonly #publisher: pg.Pool;
  #listener: pg.Client | null = null;
  readonly #stop = new AbortController();
  #reconnecting = false;
  /** Publishes in flight, in order (one connection). */
  #queue: Promise<void> = Promise.resolve();
  #onError: (err: unknown) => void;

  constructor(url: string, onError: (err: unknown) => void = () => undefined) {
    super();
    this.#url = url;
    this.#onError = onError;
    this.#publisher = new pg.Pool({ connectionString: url, max: 1, keepAlive: true });
    this.#publisher.on("error", () => undefined);
  }

  override async start(): Promise<void> {
    await this.#connect();
  }

  override publish(payload: string): void {
    this.#queue = this.#queue
      .then(() => this.#publisher.query("SELECT pg_notify($1, $2)", [LOG_CHANNEL, payload]))
      .then(
        () => undefined,
        (err: unknown) => this.#onError(err),
      );
  }

  async #connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.#url, keepAlive: true });
    client.on("notification", (m) => {
      if (m.channel === LOG_CHANNEL && m.payload !== undefined) this.emitter.emit("m", m.payload);
    });
    client.on("error", () => this.#lost(client));
    client.on("end", () => this.#lost(client));
    this.#listener = client;
    try {
      await client.connect();
      await client.query(`LISTEN ${LOG_CHANNEL}`);
    } catch (err) {
      if (this.#listener === client) this.#listener = null;
      client.end().catch(() => undefined);
      throw err;
    }
    if (this.#stop.signal.aborted) client.end().catch(() => undefined);
  }

  #lost(client: pg.Client): void {
    if (this.#listener !== client) return;
    this.#listener = null;
    client.end().catch(() => undefined);
    if (this.#reconnecting || this.#stop.signal.aborted) return;
    this.#reconnecting = true;
    retry(() => this.#connect(), {
      policy: RECONNECT,
      retryable: () => !this.#stop.signal.aborted,
      signal: this.#stop.signal,
    })
      .catch(() => undefined)
      .finally(() => (this.#reconnecting = false));
  }

  override async close(): Promise<void> {
    this.#stop.abort();
    const c = this.#listener;
    this.#listener = null;
    if (c) await c.end().catch(() => undefined);
    await this.#queue;
    await this.#publisher.end().catch(() => undefined);
    await super.close();
  }
}

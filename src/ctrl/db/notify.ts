// Change notification: tells this process's streams that a (kind, region) stream has new
// committed versions. Notifications are only pokes; streams always read the outbox by cursor,
// so a lost or duplicated poke costs latency at worst, never correctness.
//
//   LocalNotifier — SQLite: one ctrl process owns the file, so an in-process emitter is enough.
//   PgNotifier    — PostgreSQL: the commit trigger calls pg_notify (delivered only on commit, to
//                   every ctrl replica); each process LISTENs on a dedicated connection,
//                   reconnects with backoff (retry() with RECONNECT, capped at 1 s so ctrl is
//                   ready again soon after PostgreSQL answers), and after every (re)connect tells
//                   its streams to catch up, because notifications sent while disconnected are lost.
import { EventEmitter } from "node:events";
import pg from "pg";
import type { BackoffPolicy } from "../../retry/backoff.js";
import { retry } from "../../retry/retry.js";
import type { KindName } from "./schema.js";

/** The channel the commit trigger of migration 0003 notifies (the name is written out there). */
export const NOTIFY_CHANNEL = "krane_outbox";
/** The channel of live views' changes (PostgreSQL: NOTIFYed inside the writing transaction). */
export const CHANGES_CHANNEL = "krane_changes";

/** Reconnect delays of the LISTEN connection: full jitter from 100 ms, never above 1 s. */
export const RECONNECT: BackoffPolicy = { baseMs: 100, capMs: 1000 };

export interface Poke {
  kind: KindName;
  region: string;
  /** The stream's new head; absent when only "it moved" is known. */
  version?: number;
}

/**
 * What changed for the public API's live views (../live): `e:<environment id>` (anything an
 * environment's pages show) or `c:<region>` (its clusters). Like pokes, only hints: a view is
 * read again from the database, so a lost or repeated one costs latency at worst.
 */
export type ChangeTopic = string;

/** Topics in one NOTIFY payload (PostgreSQL caps a payload below 8,000 bytes). */
const CHANGES_PAYLOAD_MAX = 7_000;

/** One NOTIFY payload for `topics`: space-separated, or "*" (anything changed) when too long. */
export function encodeChanges(topics: readonly ChangeTopic[]): string {
  const s = topics.join(" ");
  return s.length > CHANGES_PAYLOAD_MAX ? "*" : s;
}

/** A payload's topics; null for "*" (anything may have changed). */
export function decodeChanges(payload: string): ChangeTopic[] | null {
  if (payload === "*") return null;
  return payload.split(" ").filter((t) => /^[ec]:\S{1,200}$/.test(t));
}

export interface ChangeNotifier {
  /** Called after a transaction commits with the live-view topics it touched (local fast path). */
  publishChangesLocal(topics: readonly ChangeTopic[]): void;
  /** Subscribes to live-view changes; `null` means "anything may have changed". */
  subscribeChanges(listener: (topics: readonly ChangeTopic[] | null) => void): () => void;
  /** Called after a transaction commits with the heads it wrote (local fast path). */
  publishLocal(pokes: readonly Poke[]): void;
  /** Subscribes to pokes; `null` means "anything may have changed: catch up everything". */
  subscribe(listener: (poke: Poke | null) => void): () => void;
  /** True when notifications are flowing (always for SQLite). */
  healthy(): boolean;
  close(): Promise<void>;
}

export function encodePoke(p: Poke): string {
  return `${p.kind}/${p.region}/${p.version ?? ""}`;
}

/** Kind names are lower-case words (`deployment`, `gateway-route`); regions are slugs. */
const NAME = /^[a-z][a-z0-9-]{0,62}$/;

/** Parses a NOTIFY payload; null for anything that is not a poke (any kind name is accepted). */
export function decodePoke(s: string): Poke | null {
  const parts = s.split("/");
  if (parts.length !== 3) return null;
  const [kind, region, version] = parts as [string, string, string];
  if (!NAME.test(kind) || region === "") return null;
  if (version === "") return { kind, region };
  const v = Number(version);
  if (!Number.isSafeInteger(v)) return null;
  return { kind, region, version: v };
}

export class LocalNotifier implements ChangeNotifier {
  protected readonly emitter = new EventEmitter();
  constructor() {
    this.emitter.setMaxListeners(0);
  }
  publishLocal(pokes: readonly Poke[]): void {
    for (const p of pokes) this.emitter.emit("poke", p);
  }
  subscribe(listener: (poke: Poke | null) => void): () => void {
    this.emitter.on("poke", listener);
    return () => this.emitter.off("poke", listener);
  }
  publishChangesLocal(topics: readonly ChangeTopic[]): void {
    if (topics.length > 0) this.emitter.emit("changes", topics);
  }
  subscribeChanges(listener: (topics: readonly ChangeTopic[] | null) => void): () => void {
    this.emitter.on("changes", listener);
    return () => this.emitter.off("changes", listener);
  }
  healthy(): boolean {
    return true;
  }
  async close(): Promise<void> {
    this.emitter.removeAllListeners();
  }
}

export class PgNotifier extends LocalNotifier {
  private client: pg.Client | null = null;
  private connected = false;
  private reconnecting = false;
  private readonly stop = new AbortController();

  constructor(
    private readonly url: string,
    private readonly policy: BackoffPolicy = RECONNECT,
  ) {
    super();
  }

  /** Connects once (throws when it cannot); later disconnects reconnect in the background. */
  async start(): Promise<void> {
    await this.connect();
  }

  override healthy(): boolean {
    return this.connected;
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url, keepAlive: true });
    client.on("notification", (m) => {
      if (m.payload === undefined) return;
      if (m.channel === CHANGES_CHANNEL) {
        this.emitter.emit("changes", decodeChanges(m.payload));
        return;
      }
      if (m.channel !== NOTIFY_CHANNEL) return;
      const poke = decodePoke(m.payload);
      if (poke) this.emitter.emit("poke", poke);
    });
    client.on("error", () => this.lost(client));
    client.on("end", () => this.lost(client));
    this.client = client;
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANGES_CHANNEL}`);
      // Last, so the connection's last statement names the outbox (operators and tests find it so).
      await client.query(`LISTEN ${NOTIFY_CHANNEL}`);
    } catch (err) {
      if (this.client === client) this.client = null;
      client.end().catch(() => undefined);
      throw err;
    }
    if (this.stop.signal.aborted || this.client !== client) {
      client.end().catch(() => undefined);
      return;
    }
    this.connected = true;
    // Anything committed while we were not listening is found by the streams' catch-up read.
    this.emitter.emit("poke", null);
    this.emitter.emit("changes", null);
  }

  private lost(client: pg.Client): void {
    if (this.client !== client) return;
    this.connected = false;
    this.client = null;
    client.end().catch(() => undefined);
    void this.reconnect();
  }

  /** One reconnect loop at a time, until connected or closed. */
  private async reconnect(): Promise<void> {
    if (this.reconnecting || this.stop.signal.aborted) return;
    this.reconnecting = true;
    try {
      await retry(() => this.connect(), {
        policy: this.policy,
        retryable: () => !this.stop.signal.aborted,
        signal: this.stop.signal,
      });
    } catch {
      // Closed while reconnecting.
    } finally {
      this.reconnecting = false;
    }
  }

  override async close(): Promise<void> {
    this.stop.abort();
    const c = this.client;
    this.client = null;
    this.connected = false;
    if (c) await c.end().catch(() => undefined);
    await super.close();
  }
}

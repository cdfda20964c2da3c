// Change notification: tells this process's streams that a (kind, region) stream has new
// committed versions. Notifications are only pokes; streams always read the outbox by cursor,
// so a lost or duplicated poke costs latency at worst, never correctness.
//
//   LocalNotifier — SQLite: one ctrl process owns the file, so an in-process emitter is enough.
//   PgNotifier    — PostgreSQL: writers call pg_notify inside their transaction (delivered only
//                   on commit, to every ctrl replica); each process LISTENs on a dedicated
//                   connection, reconnects with backoff, and after every (re)connect tells its
//                   streams to catch up, because notifications sent while disconnected are lost.
import { EventEmitter } from "node:events";
import pg from "pg";
import type { ObjectKind } from "./schema.js";

export const NOTIFY_CHANNEL = "krane_outbox";

export interface Poke {
  kind: ObjectKind;
  region: string;
  /** The stream's new head; absent when only "it moved" is known. */
  version?: number;
}

export interface ChangeNotifier {
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

export function decodePoke(s: string): Poke | null {
  const parts = s.split("/");
  if (parts.length !== 3) return null;
  const [kind, region, version] = parts as [string, string, string];
  if (kind !== "deployment" && kind !== "sentinel") return null;
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
  private closed = false;
  private retryTimer: NodeJS.Timeout | null = null;
  private attempt = 0;

  constructor(private readonly url: string) {
    super();
  }

  /** Connects once; later disconnects reconnect in the background. */
  async start(): Promise<void> {
    await this.connect();
  }

  override healthy(): boolean {
    return this.connected;
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url, keepAlive: true });
    client.on("notification", (m) => {
      if (m.channel !== NOTIFY_CHANNEL || m.payload === undefined) return;
      const poke = decodePoke(m.payload);
      if (poke) this.emitter.emit("poke", poke);
    });
    client.on("error", () => this.lost(client));
    client.on("end", () => this.lost(client));
    this.client = client;
    await client.connect();
    await client.query(`LISTEN ${NOTIFY_CHANNEL}`);
    this.connected = true;
    this.attempt = 0;
    // Anything committed while we were not listening is found by the streams' catch-up read.
    this.emitter.emit("poke", null);
  }

  private lost(client: pg.Client): void {
    if (this.client !== client) return;
    this.connected = false;
    this.client = null;
    client.end().catch(() => undefined);
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.closed || this.retryTimer) return;
    const cap = Math.min(10_000, 100 * 2 ** this.attempt);
    this.attempt++;
    const delay = Math.random() * cap;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      if (this.closed) return;
      this.connect().catch(() => {
        const c = this.client;
        if (c) this.lost(c);
        else this.scheduleReconnect();
      });
    }, delay);
    this.retryTimer.unref();
  }

  override async close(): Promise<void> {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    const c = this.client;
    this.client = null;
    this.connected = false;
    if (c) await c.end().catch(() => undefined);
    await super.close();
  }
}

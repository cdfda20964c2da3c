// The dialect object: every difference between SQLite and PostgreSQL sits behind it, so no other
// file asks which database it runs on. Two implementations, ./sqlite.ts and ./postgres.ts; the
// one for a database URL is picked in ./open.ts.
//
// What differs: how to connect (and warm a pool), the binary column type, where outbox versions
// are allocated (SQLite: at the end of the write transaction; PostgreSQL: inside the COMMIT, by
// the trigger of migration 0003), whether a committed write must poke this process's streams
// itself, row locks and named locks (PostgreSQL; SQLite has one writer at a time), repeatable
// reads, and which errors mean "run the transaction again" or "unique constraint".
import type { Kysely, RawBuilder, SelectQueryBuilder, Transaction, TransactionBuilder } from "kysely";
import type { ChangeNotifier, Poke } from "./notify.js";
import type { Database, KindName } from "./schema.js";

export type DialectName = "sqlite" | "postgres";

export interface DatabaseConfig {
  /** A SQLite file path (or ":memory:"), or a postgres:// / postgresql:// URL. */
  url: string;
  /** PostgreSQL pool size. */
  poolSize?: number;
}

/** A connected database, before migrations. */
export interface Connection {
  readonly db: Kysely<Database>;
  /** Made after the migrations ran: the change notifier of this database. */
  notifier(): Promise<ChangeNotifier>;
  /** Closes the database's connections (the notifier closes on its own). */
  close(): Promise<void>;
}

/** One object's desired state in one region (WriteTx.putDesired says what each field means). */
export interface DesiredPut {
  region: string;
  kind: KindName;
  objectId: string;
  payload: Uint8Array;
  replicas: number | null;
  environmentId: string | null;
}

/**
 * Records the desired-state changes of one write transaction with their outbox rows. Each change
 * updates `desired_objects` at once; its outbox row gets a version allocated inside the same
 * transaction (how and when is the dialect's business).
 */
export interface OutboxWriter {
  /** Sets the desired state of one object in one region (create or replace), with the environment it belongs to. */
  put(p: DesiredPut): Promise<void>;
  /** Removes an object from a region's desired state; streams the delete only if it was desired. */
  remove(region: string, kind: KindName, objectId: string, payload: Uint8Array): Promise<boolean>;
  /** Called last in the transaction; one poke per stream touched, for this process once committed. */
  flush(): Promise<Poke[]>;
}

export type LockMode = "share" | "update";

export interface Dialect {
  readonly name: DialectName;
  connect(config: DatabaseConfig): Promise<Connection>;

  /** Column type of encoded protobuf payloads (migrations). */
  readonly binaryType: RawBuilder<unknown>;
  /** Outbox versions are allocated by a commit-time trigger (migration 0003 installs it). */
  readonly versionsAtCommit: boolean;
  /**
   * One connection runs every transaction (SQLite): Store.write then queues its writers in
   * order itself, so a burst of them does not all wake at every commit.
   */
  readonly singleWriter: boolean;
  /**
   * Concurrent writes may share one transaction (PostgreSQL): Store.write then commits writes
   * that queue up while others commit together, one commit (and one turn at each stream's
   * counter lock) for the lot.
   */
  readonly groupCommit: boolean;
  /** Whether a failed COMMIT was refused by the server (so it certainly rolled back), not cut off. */
  refusedCommit(err: unknown): boolean;

  outboxWriter(trx: Transaction<Database>, now: number): OutboxWriter;
  /**
   * Whether a committed write must poke this process's streams itself: always on SQLite; on
   * PostgreSQL only while the LISTEN connection is down (the commit's NOTIFY reaches this
   * process too).
   */
  pokeLocally(notifierHealthy: boolean): boolean;
  /**
   * Tells every ctrl process of live-view changes (`payload`: ./notify.ts encodeChanges): on
   * PostgreSQL a NOTIFY, delivered when `db` (a transaction, or the pool) commits; nothing on
   * SQLite, whose one process hears of them locally.
   */
  notifyChanges(db: Kysely<Database> | Transaction<Database>, payload: string): Promise<void>;

  /** The rows `q` reads, locked until the transaction ends (a no-op where writers are serial). */
  lockRows<TB extends keyof Database, O>(
    q: SelectQueryBuilder<Database, TB, O>,
    mode: LockMode,
  ): SelectQueryBuilder<Database, TB, O>;
  /** Serializes transactions that take the same named lock, until they end. */
  lockNamed(trx: Transaction<Database>, name: string): Promise<void>;
  /** A transaction whose reads all see one snapshot. */
  snapshot(db: Kysely<Database>): TransactionBuilder<Database>;

  /** The transaction failed only because of concurrent ones (deadlock, serialization): run it again. */
  isRetryable(err: unknown): boolean;
  isUniqueViolation(err: unknown): boolean;
}

/** The `code` of a driver error (PostgreSQL SQLSTATE, better-sqlite3 result code), if any. */
export function errorCode(err: unknown): string | undefined {
  if (typeof err === "object" && err !== null && "code" in err) {
    const code = (err as { code: unknown }).code;
    return typeof code === "string" ? code : undefined;
  }
  return undefined;
}

/** better-sqlite3 binds Buffers, not bare Uint8Arrays; pg accepts both. */
export function toBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

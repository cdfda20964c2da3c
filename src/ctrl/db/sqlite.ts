// The SQLite dialect (better-sqlite3, the default): one file in WAL mode, one connection, one
// writer at a time, so the write transaction itself is the lock and nothing needs row locks.
//
// Outbox versions (SQLite): each change updates `desired_objects` at once and is kept in memory;
// `flush`, the last step of the write transaction, allocates each touched stream's versions with
// `allocateVersions` (UPDATE stream_versions … RETURNING, in (kind, region) order) and writes
// the outbox rows. The transaction commits right after, so versions commit in order.
//
// Speed: the database Kysely gets keeps its prepared statements (./sqlite-statements.ts),
// and the statements every change runs (the desired_objects upsert, the version bump, the
// outbox insert) are written out once below as SQL, so the write path neither builds nor
// compiles a query per change.
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import SQLite from "better-sqlite3";
import { CompiledQuery, Kysely, sql, SqliteDialect, type SelectQueryBuilder, type Transaction } from "kysely";
import {
  errorCode,
  toBuffer,
  type Connection,
  type DatabaseConfig,
  type Dialect,
  type DesiredPut,
  type OutboxWriter,
} from "./dialect.js";
import { LocalNotifier, type Poke } from "./notify.js";
import type { ChangeOp, Database, KindName } from "./schema.js";
import { Checkpointer } from "./sqlite-checkpoint.js";
import { CachedStatements } from "./sqlite-statements.js";

/** The hot path's statements, as Kysely would compile them (same tables, same semantics). */
const PUT_DESIRED =
  'insert into "desired_objects" ("region", "kind", "object_id", "payload", "replicas", "environment_id") values (?, ?, ?, ?, ?, ?) ' +
  'on conflict ("region", "kind", "object_id") do update set "payload" = excluded."payload", "replicas" = excluded."replicas", ' +
  '"environment_id" = coalesce(excluded."environment_id", "desired_objects"."environment_id")';
const BUMP_VERSION =
  'update "stream_versions" set "version" = "version" + ? where "region" = ? and "kind" = ? returning "version"';
const INSERT_OUTBOX =
  'insert into "outbox" ("region", "kind", "version", "object_id", "op", "payload", "created_at") values (?, ?, ?, ?, ?, ?, ?)';

interface PendingChange {
  region: string;
  kind: KindName;
  objectId: string;
  op: ChangeOp;
  payload: Uint8Array;
}

/** Reserves n versions of a stream inside the caller's transaction; returns the last one. */
export async function allocateVersions(
  trx: Transaction<Database>,
  region: string,
  kind: KindName,
  n: number,
): Promise<number> {
  for (let attempt = 0; attempt < 2; attempt++) {
    const { rows } = await trx.executeQuery(
      CompiledQuery.raw(BUMP_VERSION, [n, region, kind]) as CompiledQuery<{ version: number }>,
    );
    const row = rows[0];
    if (row) return Number(row.version);
    await trx
      .insertInto("stream_versions")
      .values({ region, kind, version: 0, compacted_through: 0 })
      .onConflict((oc) => oc.columns(["region", "kind"]).doNothing())
      .execute();
  }
  throw new Error(`cannot allocate a version for ${kind}/${region}`);
}

class SqliteOutbox implements OutboxWriter {
  private readonly pending: PendingChange[] = [];

  constructor(
    private readonly trx: Transaction<Database>,
    private readonly now: number,
  ) {}

  async put({ region, kind, objectId, payload, replicas, environmentId }: DesiredPut): Promise<void> {
    await this.trx.executeQuery(
      CompiledQuery.raw(PUT_DESIRED, [region, kind, objectId, toBuffer(payload), replicas, environmentId]),
    );
    this.pending.push({ region, kind, objectId, op: "apply", payload });
  }

  async remove(region: string, kind: KindName, objectId: string, payload: Uint8Array): Promise<boolean> {
    const res = await this.trx
      .deleteFrom("desired_objects")
      .where("region", "=", region)
      .where("kind", "=", kind)
      .where("object_id", "=", objectId)
      .executeTakeFirst();
    if (Number(res.numDeletedRows) === 0) return false;
    this.pending.push({ region, kind, objectId, op: "delete", payload });
    return true;
  }

  async flush(): Promise<Poke[]> {
    if (this.pending.length === 0) return [];
    const groups = new Map<string, PendingChange[]>();
    for (const c of this.pending) {
      const key = `${c.kind}/${c.region}`;
      const g = groups.get(key);
      if (g) g.push(c);
      else groups.set(key, [c]);
    }
    const pokes: Poke[] = [];
    // A fixed (kind, region) order keeps two multi-stream writers from deadlocking.
    for (const key of [...groups.keys()].sort()) {
      const changes = groups.get(key) ?? [];
      const first = changes[0];
      if (!first) continue;
      const version = await this.writeOutbox(first.region, first.kind, changes);
      pokes.push({ kind: first.kind, region: first.region, version });
    }
    this.pending.length = 0;
    return pokes;
  }

  /** Allocates the versions and writes the outbox rows of one stream. */
  private async writeOutbox(region: string, kind: KindName, changes: PendingChange[]): Promise<number> {
    const last = await allocateVersions(this.trx, region, kind, changes.length);
    const base = last - changes.length;
    // One prepared statement run per row: SQLite runs it in-process, so a multi-row statement
    // would save no round trip, only add compiling.
    for (const [i, c] of changes.entries()) {
      await this.trx.executeQuery(
        CompiledQuery.raw(INSERT_OUTBOX, [region, kind, base + i + 1, c.objectId, c.op, toBuffer(c.payload), this.now]),
      );
    }
    return last;
  }
}

const UNIQUE_CODES = new Set(["SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY"]);

export const sqliteDialect: Dialect = {
  name: "sqlite",
  binaryType: sql`blob`,
  versionsAtCommit: false,
  singleWriter: true,
  groupCommit: false,
  // No group commit here; a SQLite COMMIT runs in this process, it is never cut off halfway.
  refusedCommit: () => true,

  async connect(config: DatabaseConfig): Promise<Connection> {
    if (config.url !== ":memory:") mkdirSync(dirname(config.url), { recursive: true });
    const file = new SQLite(config.url);
    file.pragma("journal_mode = WAL");
    file.pragma("synchronous = NORMAL");
    file.pragma("busy_timeout = 5000");
    file.pragma("foreign_keys = ON");
    // WAL checkpoints run on a worker thread, not inside ctrl's commits (./sqlite-checkpoint.ts).
    const checkpointer = await Checkpointer.start(file, config.url, undefined, (err) =>
      process.emitWarning(`krane ctrl: SQLite checkpoints: ${String(err)}`),
    );
    const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: new CachedStatements(file) }) });
    return {
      db,
      // One process owns the file: an in-process emitter is all the notification there is.
      notifier: async () => new LocalNotifier(),
      async close() {
        await checkpointer.stop();
        await db.destroy();
      },
    };
  },

  outboxWriter: (trx, now) => new SqliteOutbox(trx, now),
  pokeLocally: () => true,
  notifyChanges: async () => undefined,

  // One write transaction at a time: it is the lock.
  lockRows<TB extends keyof Database, O>(q: SelectQueryBuilder<Database, TB, O>): SelectQueryBuilder<Database, TB, O> {
    return q;
  },
  lockNamed: async () => undefined,
  // The single connection serializes transactions: every read of one sees the same state.
  snapshot: (db) => db.transaction(),

  // SQLITE_BUSY waits out busy_timeout inside the driver; nothing is worth running again.
  isRetryable: () => false,
  isUniqueViolation: (err) => UNIQUE_CODES.has(errorCode(err) ?? ""),
};

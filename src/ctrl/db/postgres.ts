// The PostgreSQL dialect (production; several ctrl replicas share one database): a pool for
// queries, opened in full at start, plus one dedicated connection for LISTEN (./notify.ts).
//
// Outbox versions (PostgreSQL): a writer never touches the version counters. Each change is one
// statement that updates `desired_objects` and inserts the change into `outbox_staging`; the
// deferred trigger `krane_outbox_commit()` (migration 0003_commit_sequencer) numbers the staged
// rows inside the COMMIT, moves them into `outbox` and NOTIFYs every ctrl replica. Row locks
// (SELECT … FOR SHARE / FOR UPDATE) and advisory locks order writers that read what others
// change; deadlocks and serialization failures are reported as retryable.
import { Kysely, PostgresDialect, sql, type SelectQueryBuilder, type Transaction } from "kysely";
import pg from "pg";
import {
  errorCode,
  toBuffer,
  type Connection,
  type DatabaseConfig,
  type Dialect,
  type LockMode,
  type DesiredPut,
  type OutboxWriter,
} from "./dialect.js";
import { CHANGES_CHANNEL, PgNotifier, type Poke } from "./notify.js";
import { BatchingPool, DEFERRABLE } from "./pg-batching.js";
import type { Database, KindName } from "./schema.js";

/** INT8 and NUMERIC counts come back as JS numbers: every value we store is far below 2^53. */
export function pgTypes(): pg.CustomTypesConfig {
  return {
    getTypeParser: ((oid: number, format?: string) => {
      if (oid === pg.types.builtins.INT8) return (v: string) => Number(v);
      return pg.types.getTypeParser(oid, format as "text");
    }) as pg.CustomTypesConfig["getTypeParser"],
  };
}

/**
 * Opens every connection of the pool at start (a new backend costs a fork and cold catalog
 * caches, which the first burst of writes would otherwise pay for), then returns them to it.
 */
async function warmPool(pool: pg.Pool, size: number): Promise<void> {
  const settled = await Promise.allSettled(Array.from({ length: size }, () => pool.connect()));
  const clients = settled.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  try {
    const failed = settled.find((r) => r.status === "rejected");
    if (failed) throw failed.reason;
    await Promise.all(clients.map((c) => c.query("SELECT 1 FROM stream_versions LIMIT 1")));
  } finally {
    for (const c of clients) c.release();
  }
}

/**
 * Changes staged so far in each transaction: numbers them in the order they were made. Shared by
 * every writer of one transaction (Store.write's group commit runs several in one), so the
 * trigger orders one transaction's changes as they were made, whoever made them.
 */
const stagedIn = new WeakMap<Transaction<Database>, { n: number }>();

/** Stages each change in the statement that changes desired_objects; the commit trigger numbers them. */
class PgOutbox implements OutboxWriter {
  private readonly counter: { n: number };
  /** Streams staged to, as `kind/region`. */
  private readonly streams = new Map<string, Poke>();

  constructor(
    private readonly trx: Transaction<Database>,
    private readonly now: number,
  ) {
    let counter = stagedIn.get(trx);
    if (!counter) stagedIn.set(trx, (counter = { n: 0 }));
    this.counter = counter;
  }

  private get staged(): number {
    return this.counter.n;
  }

  async put({ region, kind, objectId, payload, replicas, environmentId }: DesiredPut): Promise<void> {
    const bytes = toBuffer(payload);
    // Nobody reads its answer: it goes with the transaction's next statement or its COMMIT.
    await sql`${sql.raw(DEFERRABLE)}
      WITH put AS (
        INSERT INTO desired_objects (region, kind, object_id, payload, replicas, environment_id)
        VALUES (${region}, ${kind}, ${objectId}, ${bytes}, ${replicas}::integer, ${environmentId}::text)
        ON CONFLICT (region, kind, object_id) DO UPDATE SET payload = excluded.payload, replicas = excluded.replicas,
          environment_id = coalesce(excluded.environment_id, desired_objects.environment_id)
      )
      INSERT INTO outbox_staging (kind, region, seq, head, object_id, op, payload, created_at)
      VALUES (${kind}, ${region}, ${this.staged + 1}, ${this.staged === 0}, ${objectId}, 'apply', ${bytes}, ${this.now}::bigint)`.execute(
      this.trx,
    );
    this.noteStaged(kind, region);
  }

  async remove(region: string, kind: KindName, objectId: string, payload: Uint8Array): Promise<boolean> {
    const res = await sql<{ n: number }>`
      WITH gone AS (
        DELETE FROM desired_objects WHERE region = ${region} AND kind = ${kind} AND object_id = ${objectId} RETURNING object_id
      ), staged AS (
        INSERT INTO outbox_staging (kind, region, seq, head, object_id, op, payload, created_at)
        SELECT ${kind}, ${region}, ${this.staged + 1}, ${this.staged === 0}, object_id, 'delete', ${toBuffer(payload)}, ${this.now}::bigint FROM gone
        RETURNING 1
      )
      SELECT count(*)::integer AS n FROM staged`.execute(this.trx);
    if ((res.rows[0]?.n ?? 0) === 0) return false;
    this.noteStaged(kind, region);
    return true;
  }

  /**
   * Nothing left to write: the pokes carry no version (the commit trigger allocates it and
   * NOTIFYs it to every ctrl replica, this one included).
   */
  async flush(): Promise<Poke[]> {
    return [...this.streams.values()];
  }

  private noteStaged(kind: KindName, region: string): void {
    this.counter.n++;
    this.streams.set(`${kind}/${region}`, { kind, region });
  }
}

/**
 * How long a query waits for a connection of the pool (or for a new connection to open). Without
 * it a full pool keeps callers waiting until their 30 s deadline; with it they are answered
 * resource_exhausted ("no free connection in ctrl's pool", server/dependency-errors.ts) after a
 * few seconds, which clients retry with backoff.
 */
export const POOL_WAIT_MS = 5_000;

/** serialization_failure, deadlock_detected */
const RETRYABLE_CODES = new Set(["40001", "40P01"]);

export const postgresDialect: Dialect = {
  name: "postgres",
  binaryType: sql`bytea`,
  versionsAtCommit: true,
  singleWriter: false,
  groupCommit: true,
  // The server answered the COMMIT with an error of these classes: integrity (a deferred
  // constraint), transaction rollback (serialization, deadlock), data, syntax or access, invalid
  // transaction state, or one the commit trigger raised. Connection (08), operator intervention
  // (57, e.g. a shutdown) and the rest leave the outcome open.
  refusedCommit: (err) => /^(22|23|25|40|42|P0)/.test(errorCode(err) ?? ""),

  async connect(config: DatabaseConfig): Promise<Connection> {
    const poolSize = config.poolSize ?? 10;
    // `min` keeps the pool's connections open once made, so a burst of writes after a quiet
    // spell does not pay for new backends.
    const pool = new pg.Pool({
      connectionString: config.url,
      max: poolSize,
      min: poolSize,
      connectionTimeoutMillis: POOL_WAIT_MS,
      types: pgTypes(),
    });
    // An idle client's error (e.g. the server restarted) must not crash the process.
    pool.on("error", () => undefined);
    // Nor a checked-out one's: the pool listens only while a client is idle, and a client in use
    // (in a transaction, between statements) emits the server's "terminating connection" as an
    // 'error' event; its queries are failed all the same, which is how the caller learns of it.
    pool.on("connect", (client) => client.on("error", () => undefined));
    // Transactions through BatchingPool: BEGIN and the outbox's puts travel with the next
    // statement or the COMMIT, so a change of desired state is one round trip.
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: new BatchingPool(pool) }) });
    return {
      db,
      async notifier() {
        await warmPool(pool, poolSize);
        const notifier = new PgNotifier(config.url);
        try {
          await notifier.start();
        } catch (err) {
          await notifier.close();
          throw err;
        }
        return notifier;
      },
      close: () => db.destroy(),
    };
  },

  outboxWriter: (trx, now) => new PgOutbox(trx, now),
  // The commit's NOTIFY wakes this process's streams too, with the version; a local poke only
  // stands in while the LISTEN connection is down.
  pokeLocally: (notifierHealthy) => !notifierHealthy,
  // Nobody reads its answer: within a transaction it goes with the next statement or COMMIT.
  async notifyChanges(db, payload) {
    await sql`${sql.raw(DEFERRABLE)} SELECT pg_notify(${CHANGES_CHANNEL}, ${payload})`.execute(db);
  },

  lockRows<TB extends keyof Database, O>(
    q: SelectQueryBuilder<Database, TB, O>,
    mode: LockMode,
  ): SelectQueryBuilder<Database, TB, O> {
    return mode === "share" ? q.forShare() : q.forUpdate();
  },
  async lockNamed(trx, name) {
    await sql`SELECT pg_advisory_xact_lock(hashtext(${name}))`.execute(trx);
  },
  snapshot: (db) => db.transaction().setIsolationLevel("repeatable read"),

  isRetryable: (err) => RETRYABLE_CODES.has(errorCode(err) ?? ""),
  isUniqueViolation: (err) => errorCode(err) === "23505",
};

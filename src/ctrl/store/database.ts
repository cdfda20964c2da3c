// Opens ctrl's database: better-sqlite3 (default, a file in WAL mode) or PostgreSQL (a pool for
// queries plus one dedicated connection for LISTEN), runs the migrations, and pairs the database
// with the matching change notifier.
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import SQLite from "better-sqlite3";
import { Kysely, PostgresDialect, SqliteDialect } from "kysely";
import pg from "pg";
import { migrateToLatest } from "./migrations.js";
import { LocalNotifier, PgNotifier, type ChangeNotifier } from "./notify.js";
import type { Database } from "./schema.js";

export type DialectName = "sqlite" | "postgres";

export interface DatabaseConfig {
  /** A SQLite file path (or ":memory:"), or a postgres:// / postgresql:// URL. */
  url: string;
  /** PostgreSQL pool size. */
  poolSize?: number;
}

export interface OpenDatabase {
  db: Kysely<Database>;
  dialect: DialectName;
  notifier: ChangeNotifier;
  close(): Promise<void>;
}

export function dialectOf(url: string): DialectName {
  return /^postgres(ql)?:\/\//.test(url) ? "postgres" : "sqlite";
}

/** INT8 and NUMERIC counts come back as JS numbers: every value we store is far below 2^53. */
export function pgTypes(): pg.CustomTypesConfig {
  return {
    getTypeParser: ((oid: number, format?: string) => {
      if (oid === pg.types.builtins.INT8) return (v: string) => Number(v);
      return pg.types.getTypeParser(oid, format as "text");
    }) as pg.CustomTypesConfig["getTypeParser"],
  };
}

export async function openDatabase(config: DatabaseConfig): Promise<OpenDatabase> {
  const dialect = dialectOf(config.url);
  if (dialect === "sqlite") {
    if (config.url !== ":memory:") mkdirSync(dirname(config.url), { recursive: true });
    const sqlite = new SQLite(config.url);
    sqlite.pragma("journal_mode = WAL");
    sqlite.pragma("synchronous = NORMAL");
    sqlite.pragma("busy_timeout = 5000");
    sqlite.pragma("foreign_keys = ON");
    const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
    return ready(db, dialect, async () => new LocalNotifier());
  }

  const poolSize = config.poolSize ?? 10;
  // `min` keeps the pool's connections open once made, so a burst of writes after a quiet spell
  // does not pay for new backends.
  const pool = new pg.Pool({ connectionString: config.url, max: poolSize, min: poolSize, types: pgTypes() });
  // An idle client's error (e.g. the server restarted) must not crash the process.
  pool.on("error", () => undefined);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return ready(db, dialect, async () => {
    await warmPool(pool, poolSize);
    const notifier = new PgNotifier(config.url);
    try {
      await notifier.start();
    } catch (err) {
      await notifier.close();
      throw err;
    }
    return notifier;
  });
}

/** Migrates, then makes the notifier; on any failure closes the database and rethrows. */
async function ready(db: Kysely<Database>, dialect: DialectName, makeNotifier: () => Promise<ChangeNotifier>): Promise<OpenDatabase> {
  let notifier: ChangeNotifier;
  try {
    await migrateToLatest(db as Kysely<unknown>, dialect);
    notifier = await makeNotifier();
  } catch (err) {
    await db.destroy();
    throw err;
  }
  return {
    db,
    dialect,
    notifier,
    async close() {
      await notifier.close();
      await db.destroy();
    },
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

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
    try {
      await migrateToLatest(db as Kysely<unknown>, dialect);
    } catch (err) {
      await db.destroy();
      throw err;
    }
    const notifier = new LocalNotifier();
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

  const pool = new pg.Pool({ connectionString: config.url, max: config.poolSize ?? 10, types: pgTypes() });
  // An idle client's error (e.g. the server restarted) must not crash the process.
  pool.on("error", () => undefined);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  try {
    await migrateToLatest(db as Kysely<unknown>, dialect);
  } catch (err) {
    await db.destroy();
    throw err;
  }
  const notifier = new PgNotifier(config.url);
  try {
    await notifier.start();
  } catch (err) {
    await notifier.close();
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

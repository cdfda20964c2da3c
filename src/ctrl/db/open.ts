// Opens ctrl's database: picks the dialect from the URL (a postgres:// URL is PostgreSQL,
// anything else a SQLite file), connects, runs the migrations, and pairs the database with its
// change notifier. On any failure everything opened so far is closed again.
import type { Kysely } from "kysely";
import type { Connection, DatabaseConfig, Dialect } from "./dialect.js";
import { migrateToLatest } from "./migrate.js";
import type { ChangeNotifier } from "./notify.js";
import { postgresDialect } from "./postgres.js";
import type { Database } from "./schema.js";
import { sqliteDialect } from "./sqlite.js";

export interface OpenDatabase {
  db: Kysely<Database>;
  dialect: Dialect;
  notifier: ChangeNotifier;
  close(): Promise<void>;
}

export function dialectFor(url: string): Dialect {
  return /^postgres(ql)?:\/\//.test(url) ? postgresDialect : sqliteDialect;
}

export async function openDatabase(config: DatabaseConfig): Promise<OpenDatabase> {
  const dialect = dialectFor(config.url);
  const conn: Connection = await dialect.connect(config);
  let notifier: ChangeNotifier;
  try {
    await migrateToLatest(conn.db as Kysely<unknown>, dialect);
    notifier = await conn.notifier();
  } catch (err) {
    await conn.close();
    throw err;
  }
  return {
    db: conn.db,
    dialect,
    notifier,
    async close() {
      await notifier.close();
      await conn.close();
    },
  };
}

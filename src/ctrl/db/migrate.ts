// Runs the schema migrations at every start, through Kysely's Migrator, which records the ones
// that ran in `krane_migrations` (and serializes concurrent starts with `krane_migrations_lock`).
// The migrations themselves are in ./migrations, one per file.
import { Migrator, type Kysely, type Migration, type MigrationProvider } from "kysely";
import type { Dialect } from "./dialect.js";
import { MIGRATIONS } from "./migrations/index.js";

class StaticProvider implements MigrationProvider {
  constructor(private readonly dialect: Dialect) {}
  getMigrations(): Promise<Record<string, Migration>> {
    const out: Record<string, Migration> = {};
    for (const [name, m] of Object.entries(MIGRATIONS)) out[name] = { up: (db) => m.up(db, this.dialect) };
    return Promise.resolve(out);
  }
}

/** Brings the schema up to date; throws with the failing migration's error. */
export async function migrateToLatest(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const migrator = new Migrator({
    db,
    provider: new StaticProvider(dialect),
    migrationTableName: "krane_migrations",
    migrationLockTableName: "krane_migrations_lock",
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error !== undefined) {
    const failed = results?.find((r) => r.status === "Error")?.migrationName ?? "unknown";
    throw new Error(`migration ${failed} failed: ${error instanceof Error ? error.message : String(error)}`);
  }
}

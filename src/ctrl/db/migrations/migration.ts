// The shape of one migration. Migrations are numbered, one per file (`NNNN_name.ts`, the file
// name being the name Kysely records in `krane_migrations`), registered in ./index.ts, and never
// edited once shipped. They import nothing from the rest of ctrl, so what they do cannot change
// when live code changes: what differs between the databases is passed in.
import { sql, type Kysely, type RawBuilder } from "kysely";

/** What a migration may ask about the database it runs on (the dialect object provides it). */
export interface MigrationDialect {
  /** Column type of encoded protobuf payloads: BLOB or BYTEA. */
  readonly binaryType: RawBuilder<unknown>;
  /** Outbox versions are allocated at commit by a trigger (PostgreSQL). */
  readonly versionsAtCommit: boolean;
}

export interface KraneMigration {
  up(db: Kysely<unknown>, dialect: MigrationDialect): Promise<void>;
}

/**
 * Runs a migration's schema statements, written out as the SQL they send (the text Kysely's
 * schema builder made of them when they shipped: no library upgrade can change it now), as a
 * tagged template: await runSchema(db)`create table …;`. A `;` at a line's end ends a statement;
 * a line break and the indentation after it read as one space.
 * test/unit/ctrl/db/migration-sql.test.ts holds every shipped migration's statements.
 */
export function runSchema(db: Kysely<unknown>) {
  return async (parts: TemplateStringsArray, ...values: string[]): Promise<void> => {
    const text = parts.reduce((all, part, i) => all + (values[i - 1] ?? "") + part);
    for (const statement of text.split(/;\s*$/m)) {
      const one = statement.trim().replace(/\s*\n\s*/g, " ");
      if (one !== "") await sql.raw(one).execute(db);
    }
  };
}

/** The dialect's binary column type as SQL text, for runSchema's statements. */
export function binaryType(db: Kysely<unknown>, dialect: MigrationDialect): string {
  return dialect.binaryType.compile(db).sql;
}

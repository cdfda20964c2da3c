// The shape of one migration. Migrations are numbered, one per file (`NNNN_name.ts`, the file
// name being the name Kysely records in `krane_migrations`), registered in ./index.ts, and never
// edited once shipped. They import nothing from the rest of ctrl, so what they do cannot change
// when live code changes: what differs between the databases is passed in.
import type { Kysely, RawBuilder } from "kysely";

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

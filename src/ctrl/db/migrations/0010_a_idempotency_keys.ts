// Migration 0010_a_idempotency_keys: the Idempotency-Key of each public API call that changed
// something, per caller and method (../../server/idempotency.ts): a digest of the request, the
// ctrl process that ran it, and, once known, the answer (encrypted under a key only the caller's token gives). Rows are written
// in the same transaction as the change itself and deleted after the retention period, by age
// (hence the index). Never edit once shipped.
import type { Kysely } from "kysely";
import { binaryType, runSchema, type KraneMigration, type MigrationDialect } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>, dialect: MigrationDialect): Promise<void> {
    const bytes = binaryType(db, dialect);
    await runSchema(db)`
      create table "idempotency_keys" ("scope" text not null, "method" text not null, "idempotency_key" text not null,
        "request_digest" text not null, "created_at" bigint not null, "owner" text not null, "answer" ${bytes},
        "answered_at" bigint, constraint "idempotency_keys_pk" primary key ("scope", "method", "idempotency_key"));
      create index "idempotency_keys_created_at" on "idempotency_keys" ("created_at");
    `;
  },
};

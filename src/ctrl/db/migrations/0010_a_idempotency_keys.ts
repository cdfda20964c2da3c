// Migration 0010_a_idempotency_keys: the Idempotency-Key of each public API call that changed
// something, per caller and method (../../server/idempotency.ts): a digest of the request, the
// ctrl process that ran it, and, once known, the answer (encrypted under a key only the caller's token gives). Rows are written
// in the same transaction as the change itself and deleted after the retention period, by age
// (hence the index). Never edit once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration, MigrationDialect } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>, dialect: MigrationDialect): Promise<void> {
    await db.schema
      .createTable("idempotency_keys")
      .addColumn("scope", "text", (c) => c.notNull())
      .addColumn("method", "text", (c) => c.notNull())
      .addColumn("idempotency_key", "text", (c) => c.notNull())
      .addColumn("request_digest", "text", (c) => c.notNull())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .addColumn("owner", "text", (c) => c.notNull())
      .addColumn("answer", dialect.binaryType)
      .addColumn("answered_at", "bigint")
      .addPrimaryKeyConstraint("idempotency_keys_pk", ["scope", "method", "idempotency_key"])
      .execute();
    await db.schema.createIndex("idempotency_keys_created_at").on("idempotency_keys").column("created_at").execute();
  },
};

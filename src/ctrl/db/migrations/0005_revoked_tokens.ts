// Migration 0005_revoked_tokens: digests of revoked user API tokens, so that a token revoked
// through the API stays revoked even when it is still given in ctrl's configuration
// (`--admin-token` is registered at every start). Never edit once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable("revoked_tokens")
      .addColumn("token_hash", "text", (c) => c.primaryKey())
      .addColumn("revoked_at", "bigint", (c) => c.notNull())
      .execute();
  },
};

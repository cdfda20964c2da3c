// Migration 0004_api_tokens: when each user API token was last used (for `krane api-token list`).
// Never edit once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable("api_tokens").addColumn("last_used_at", "bigint").execute();
  },
};

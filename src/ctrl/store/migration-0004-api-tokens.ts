// Migration 0004_api_tokens: when each user API token was last used (for `krane api-token list`).
// Registered in migrations.ts as "0004_api_tokens"; never edit once shipped.
import type { Kysely, Migration } from "kysely";

export const apiTokensMigration: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable("api_tokens").addColumn("last_used_at", "bigint").execute();
  },
};

// Migration 0004_api_tokens: when each user API token was last used (for `krane api-token list`).
// Registered in migrations.ts as "0004_api_tokens"; never edit once shipped.
//
// Until it runs, the column is simply absent: listing reports 0 ("not recorded") and recording a
// use fails quietly (see recordApiTokenUse in clusters.ts), so nothing else depends on it.
import type { Kysely, Migration } from "kysely";

/** The column this migration adds to `api_tokens` (unix ms, null until first recorded). */
export interface ApiTokenUsageColumns {
  last_used_at: number | null;
}

export const apiTokensMigration: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable("api_tokens").addColumn("last_used_at", "bigint").execute();
  },
};

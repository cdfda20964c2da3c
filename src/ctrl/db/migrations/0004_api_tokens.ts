// Migration 0004_api_tokens: when each user API token was last used (for `krane api-token list`).
// Never edit once shipped.
import type { Kysely } from "kysely";
import { runSchema, type KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await runSchema(db)`alter table "api_tokens" add column "last_used_at" bigint;`;
  },
};

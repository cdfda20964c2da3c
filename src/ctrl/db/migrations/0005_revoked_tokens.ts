// Migration 0005_revoked_tokens: digests of revoked user API tokens, so that a token revoked
// through the API stays revoked even when it is still given in ctrl's configuration
// (`--admin-token` is registered at every start). Never edit once shipped.
import type { Kysely } from "kysely";
import { runSchema, type KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await runSchema(db)`create table "revoked_tokens" ("token_hash" text primary key, "revoked_at" bigint not null);`;
  },
};

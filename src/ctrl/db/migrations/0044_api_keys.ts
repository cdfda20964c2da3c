// Migration 0044_api_keys: the API keys of an environment's "apikey" edge policy
// (src/ctrl/domain/api-keys.ts).
//   - api_keys: one row per key, holding the key's SHA-256 (never the key), its name, optional
//     expiry and own rate limit, its metadata (JSON, at most 1 KiB), who made it and when it was
//     revoked.
//   - environments.edge_api_keys: the keys its sentinels carry (neither revoked nor expired when
//     last changed) as the routing document's JSON list, null: none; set with the routing version
//     it is carried under.
// Never edit once shipped.
import type { Kysely } from "kysely";
import { runSchema, type KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable("api_keys")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("environment_id", "text", (c) => c.notNull())
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("digest", "text", (c) => c.notNull().unique())
      .addColumn("hint", "text", (c) => c.notNull())
      .addColumn("expires_at", "bigint")
      .addColumn("rate_limit", "bigint")
      .addColumn("rate_window_seconds", "bigint")
      .addColumn("metadata", "text", (c) => c.notNull())
      .addColumn("created_by", "text", (c) => c.notNull())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .addColumn("revoked_at", "bigint")
      .execute();
    await db.schema.createIndex("api_keys_environment").on("api_keys").column("environment_id").execute();
    await runSchema(db)`alter table "environments" add column "edge_api_keys" text;`;
  },
};

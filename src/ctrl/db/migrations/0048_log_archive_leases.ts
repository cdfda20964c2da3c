// Migration 0048_log_archive_leases: which ctrl replica archives an environment's lines
// (src/ctrl/logs/lease.ts). One row per environment: the replica holding it and when its lease
// ends unless renewed (unix ms); another replica takes the environment once it has. Never edit
// once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable("log_archive_leases")
      .addColumn("environment_id", "text", (c) => c.primaryKey())
      .addColumn("holder", "text", (c) => c.notNull())
      .addColumn("expires_at", "bigint", (c) => c.notNull())
      .execute();
  },
};

// Migration 0048_log_archive_leases: which ctrl replica archives an environment's lines
// (src/ctrl/logs/lease.ts). One row per environment: the replica holding it and when its lease
// ends unless renewed (unix ms); another replica takes the environment once it has. Never edit
// once shipped.
import { sql, type Kysely } from "kysely";
import type { KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await sql`
      create table "log_archive_leases" ("environment_id" text primary key, "holder" text not null, "expires_at" bigint not null)
    `.execute(db);
  },
};

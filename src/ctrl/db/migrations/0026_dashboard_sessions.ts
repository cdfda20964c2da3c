// Migration 0026_dashboard_sessions: the web dashboard's sign-in sessions. A browser trades an
// API token for a session; the cookie holds a random id, the table only its SHA-256 digest,
// the token it was made from (sessions end with it: a revoked token's row is gone) and when it
// expires. Never edit once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable("dashboard_sessions")
      .addColumn("session_hash", "text", (c) => c.primaryKey())
      .addColumn("token_id", "text", (c) => c.notNull())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .addColumn("expires_at", "bigint", (c) => c.notNull())
      .execute();
    await db.schema.createIndex("dashboard_sessions_expiry").on("dashboard_sessions").column("expires_at").execute();
  },
};

// Migration 0026_dashboard_sessions: the web dashboard's sign-in sessions. A browser trades an
// API token for a session; the cookie holds a random id, the table only its SHA-256 digest,
// the token it was made from (sessions end with it: a revoked token's row is gone) and when it
// expires. Never edit once shipped.
import type { Kysely } from "kysely";
import { runSchema, type KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await runSchema(db)`
      create table "dashboard_sessions" ("session_hash" text primary key, "token_id" text not null,
        "created_at" bigint not null, "expires_at" bigint not null);
      create index "dashboard_sessions_expiry" on "dashboard_sessions" ("expires_at");
    `;
  },
};

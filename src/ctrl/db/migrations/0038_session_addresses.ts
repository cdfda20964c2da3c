// Migration 0038_session_addresses: member_sessions.ip, the address a session was made or last
// refreshed from as ctrl saw it (`krane session list` shows it, so a member can tell a session
// they do not recognise). Never edit once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .alterTable("member_sessions")
      .addColumn("ip", "text", (c) => c.notNull().defaultTo(""))
      .execute();
  },
};

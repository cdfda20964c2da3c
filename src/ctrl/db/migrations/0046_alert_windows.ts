// Migration 0046_alert_windows: alert_rules.window_ms, the span each minute's value of a rule
// covers, ending with that minute ("restarts > 3 in 10 minutes": the restarts of the last ten
// minutes). Rules from before it keep their one-minute values. Never edit once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .alterTable("alert_rules")
      .addColumn("window_ms", "bigint", (c) => c.notNull().defaultTo(60_000))
      .execute();
  },
};

// Migration 0042_alert_rules: an environment's alert rules on its metrics history and each
// rule's evaluation state (src/ctrl/domain/alerts.ts). The state columns are what the evaluator
// carries from one minute to the next (src/ctrl/history/alerts.ts), stored with the minute it
// has evaluated up to, so a restart of ctrl neither loses a firing alert nor fires it twice.
// Never edit once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable("alert_rules")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("environment_id", "text", (c) => c.notNull())
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("metric", "text", (c) => c.notNull())
      .addColumn("op", "text", (c) => c.notNull())
      .addColumn("threshold", "double precision", (c) => c.notNull())
      .addColumn("for_ms", "bigint", (c) => c.notNull())
      .addColumn("phase", "text", (c) => c.notNull())
      .addColumn("since_ms", "bigint", (c) => c.notNull())
      .addColumn("gap_run", "integer", (c) => c.notNull())
      .addColumn("last_held", "integer", (c) => c.notNull())
      .addColumn("last_value", "double precision")
      .addColumn("next_minute_ms", "bigint", (c) => c.notNull())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .addUniqueConstraint("alert_rules_env_name", ["environment_id", "name"])
      .execute();
    // The runner's sweep: rules whose next minute has closed.
    await db.schema.createIndex("alert_rules_next").on("alert_rules").column("next_minute_ms").execute();
  },
};

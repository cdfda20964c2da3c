// Migration 0041_log_history: the embedded log history (src/ctrl/logs/history.ts). One row per
// line an instance wrote, keyed by where it came from and the kubelet's time stamp (unix ns), so a
// line relayed twice (an archive request asked again after a reconnect) is stored once. The time
// is text of 19 digits (unix ns do not fit the doubles 64-bit integers are read back as; equal
// lengths sort as numbers). `stream`
// is "" while the kubelet's pods/log gives stdout and stderr merged. `log_retention` holds a
// workspace's own retention (absent: the default, 7 days). Never edit once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable("log_lines")
      .addColumn("environment_id", "text", (c) => c.notNull())
      .addColumn("region", "text", (c) => c.notNull())
      .addColumn("instance", "text", (c) => c.notNull())
      .addColumn("time_ns", "text", (c) => c.notNull())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("deployment_id", "text", (c) => c.notNull())
      .addColumn("revision", "bigint", (c) => c.notNull())
      .addColumn("stream", "text", (c) => c.notNull())
      .addColumn("line", "text", (c) => c.notNull())
      .addPrimaryKeyConstraint("log_lines_pk", ["environment_id", "region", "instance", "time_ns"])
      .execute();
    // Searches read an environment by time; pruning reads a workspace by time.
    await db.schema.createIndex("log_lines_env_time").on("log_lines").columns(["environment_id", "time_ns"]).execute();
    await db.schema.createIndex("log_lines_ws_time").on("log_lines").columns(["workspace_id", "time_ns"]).execute();
    await db.schema
      .createTable("log_retention")
      .addColumn("workspace_id", "text", (c) => c.primaryKey())
      .addColumn("retention_ms", "bigint", (c) => c.notNull())
      .addColumn("updated_at", "bigint", (c) => c.notNull())
      .execute();
  },
};

// Migration 0034_quotas: a workspace's quotas (tables workspace_quotas).
//   - one row per workspace that set any, plus the installation's defaults under workspace_id
//     "*" (written by `ctrl serve --default-quota`); per quota a column: null = the default
//     (for the "*" row: the built-in one), -1 = unlimited, else the limit (CPU in millicores,
//     memory in MiB, counts, build minutes per calendar month);
//   - a workspace's preview limit (preview_limits.max_previews) becomes its previews quota;
//     previews' separate CPU and memory limits end: previews count in the workspace's own.
// Never edit once shipped.
import { sql, type Kysely } from "kysely";
import type { KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable("workspace_quotas")
      .addColumn("workspace_id", "text", (c) => c.primaryKey())
      .addColumn("cpu_millicores", "bigint")
      .addColumn("memory_mib", "bigint")
      .addColumn("instances", "bigint")
      .addColumn("environments", "bigint")
      .addColumn("previews", "bigint")
      .addColumn("build_minutes", "bigint")
      .addColumn("updated_at", "bigint", (c) => c.notNull())
      .execute();
    await sql`INSERT INTO workspace_quotas (workspace_id, previews, updated_at)
      SELECT workspace_id, max_previews, updated_at FROM preview_limits`.execute(db);
  },
};

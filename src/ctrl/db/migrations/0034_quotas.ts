// Migration 0034_quotas: a workspace's quotas (tables workspace_quotas).
//   - one row per workspace that set any, plus the installation's defaults under workspace_id
//     "*" (written by `ctrl serve --default-quota`); per quota a column: null = the default
//     (for the "*" row: the built-in one), -1 = unlimited, else the limit (CPU in millicores,
//     memory in MiB, counts, build minutes per calendar month);
//   - a workspace's preview limit (preview_limits.max_previews) becomes its previews quota;
//     previews' separate CPU and memory limits end: previews count in the workspace's own.
// Never edit once shipped.
import { sql, type Kysely } from "kysely";
import { runSchema, type KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await runSchema(db)`
      create table "workspace_quotas" ("workspace_id" text primary key, "cpu_millicores" bigint, "memory_mib" bigint,
        "instances" bigint, "environments" bigint, "previews" bigint, "build_minutes" bigint,
        "updated_at" bigint not null);
    `;
    await sql`INSERT INTO workspace_quotas (workspace_id, previews, updated_at)
      SELECT workspace_id, max_previews, updated_at FROM preview_limits`.execute(db);
  },
};

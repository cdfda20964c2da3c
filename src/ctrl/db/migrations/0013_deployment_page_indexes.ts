// Migration 0013_deployment_page_indexes: indexes in the order deployment lists are
// paged in (newest first: created_at, revision, id), one per filter the list takes (workspace,
// project, environment). Without them every page of `krane deployments list` scanned and sorted
// all of the workspace's deployments (100,000 in the scale bench) to return 1,000; with them a
// page is one index range read after the previous page's last key. Never edit once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const scope of ["workspace", "project", "environment"]) {
      await db.schema
        .createIndex(`deployments_${scope}_page`)
        .on("deployments")
        .columns([`${scope}_id`, "created_at", "revision", "id"])
        .execute();
    }
  },
};

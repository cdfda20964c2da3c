// Migration 0010_b_cluster_cursors: the cursor of each desired-state stream of a cluster's
// agent, by kind, as its last Heartbeat reported it — so ctrl can say how many changes a region
// has not taken yet for every kind, including kinds added after the clusters table's
// deployments_version / sentinels_version columns. Never edit once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable("cluster_cursors")
      .addColumn("cluster_id", "text", (c) => c.notNull())
      .addColumn("kind", "text", (c) => c.notNull())
      .addColumn("version", "bigint", (c) => c.notNull())
      .addColumn("reported_at", "bigint", (c) => c.notNull())
      .addPrimaryKeyConstraint("cluster_cursors_pk", ["cluster_id", "kind"])
      .execute();
  },
};

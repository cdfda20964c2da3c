// Migration 0010_b_cluster_cursors: the cursor of each desired-state stream of a cluster's
// agent, by kind, as its last Heartbeat reported it — so ctrl can say how many changes a region
// has not taken yet for every kind, including kinds added after the clusters table's
// deployments_version / sentinels_version columns. Never edit once shipped.
import type { Kysely } from "kysely";
import { runSchema, type KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await runSchema(db)`
      create table "cluster_cursors" ("cluster_id" text not null, "kind" text not null, "version" bigint not null,
        "reported_at" bigint not null, constraint "cluster_cursors_pk" primary key ("cluster_id", "kind"));
    `;
  },
};

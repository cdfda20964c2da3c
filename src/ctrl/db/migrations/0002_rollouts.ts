// Migration 0002_rollouts: the rollout driver's tables (rollouts, rollout_revisions,
// rollout_events; shapes in ../schema.ts). Never edit once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable("rollouts")
      .addColumn("environment_id", "text", (c) => c.notNull())
      .addColumn("region", "text", (c) => c.notNull())
      .addColumn("target_deployment_id", "text")
      .addColumn("target_seen_revision", "bigint", (c) => c.notNull())
      .addColumn("rollback_to", "bigint")
      .addColumn("status", "text", (c) => c.notNull())
      .addColumn("conditions", "text", (c) => c.notNull())
      .addColumn("observed_spec", "text", (c) => c.notNull())
      .addColumn("requeue_at", "bigint")
      .addColumn("updated_at", "bigint", (c) => c.notNull())
      .addPrimaryKeyConstraint("rollouts_pk", ["environment_id", "region"])
      .execute();
    await db.schema.createIndex("rollouts_requeue_at").on("rollouts").column("requeue_at").execute();

    await db.schema
      .createTable("rollout_revisions")
      .addColumn("deployment_id", "text", (c) => c.notNull())
      .addColumn("environment_id", "text", (c) => c.notNull())
      .addColumn("region", "text", (c) => c.notNull())
      .addColumn("revision", "bigint")
      .addColumn("replicas", "integer", (c) => c.notNull())
      .addColumn("desired_replicas", "integer")
      .addColumn("max_replicas", "integer")
      .addPrimaryKeyConstraint("rollout_revisions_pk", ["deployment_id", "region"])
      .execute();
    await db.schema
      .createIndex("rollout_revisions_env")
      .on("rollout_revisions")
      .columns(["environment_id", "region"])
      .execute();

    await db.schema
      .createTable("rollout_events")
      .addColumn("environment_id", "text", (c) => c.notNull())
      .addColumn("region", "text", (c) => c.notNull())
      .addColumn("seq", "bigint", (c) => c.notNull())
      .addColumn("at", "bigint", (c) => c.notNull())
      .addColumn("type", "text", (c) => c.notNull())
      .addColumn("reason", "text", (c) => c.notNull())
      .addColumn("message", "text", (c) => c.notNull())
      .addPrimaryKeyConstraint("rollout_events_pk", ["environment_id", "region", "seq"])
      .execute();
  },
};

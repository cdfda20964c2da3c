// Migration 0025_autoscaling: autoscaling policies and what the agents decided.
//   - environments.autoscale: the environment's policy (JSON AutoscalePolicy), null: none;
//   - environment_regions.autoscale: a region's own policy (JSON), "off" to switch it off there,
//     null to follow the environment's;
//   - autoscale_status: per environment and region, the replica count the region's agent last
//     decided, why, and when (for `krane status`).
// Never edit once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable("environments").addColumn("autoscale", "text").execute();
    await db.schema.alterTable("environment_regions").addColumn("autoscale", "text").execute();
    await db.schema
      .createTable("autoscale_status")
      .addColumn("environment_id", "text", (c) => c.notNull())
      .addColumn("region", "text", (c) => c.notNull())
      .addColumn("replicas", "bigint", (c) => c.notNull())
      .addColumn("reason", "text", (c) => c.notNull())
      .addColumn("decided_at", "bigint", (c) => c.notNull())
      .addColumn("reported_at", "bigint", (c) => c.notNull())
      .addPrimaryKeyConstraint("autoscale_status_pk", ["environment_id", "region"])
      .execute();
  },
};

// Migration 0011_progressive: progressive delivery.
//  - environments.progressive: the strategy beyond rolling/recreate (JSON ProgressiveSpec of
//    src/rollout/progressive: canary steps or blue-green, region waves), null: the rolling engine.
//  - environments.routing_regions: per-region routing overrides (JSON {region: {weights,
//    preview}}) written by progressive rollouts; a region without one uses the environment's
//    routing_mode / routing_weights (folded in and dropped by 0015). Null: none.
//  - progressive_rollouts: one row per environment under a progressive strategy: its state (JSON
//    ProgressiveState), a pending command (promote / abort) and when to decide again.
// Never edit once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable("environments").addColumn("progressive", "text").execute();
    await db.schema.alterTable("environments").addColumn("routing_regions", "text").execute();
    await db.schema
      .createTable("progressive_rollouts")
      .addColumn("environment_id", "text", (c) => c.primaryKey())
      .addColumn("state", "text", (c) => c.notNull())
      .addColumn("command", "text")
      .addColumn("wake_at", "bigint")
      .addColumn("updated_at", "bigint", (c) => c.notNull())
      .execute();
  },
};

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
import { runSchema, type KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await runSchema(db)`
      alter table "environments" add column "progressive" text;
      alter table "environments" add column "routing_regions" text;
      create table "progressive_rollouts" ("environment_id" text primary key, "state" text not null, "command" text,
        "wake_at" bigint, "updated_at" bigint not null);
    `;
  },
};

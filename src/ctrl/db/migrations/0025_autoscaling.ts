// Migration 0025_autoscaling: autoscaling policies and what the agents decided.
//   - environments.autoscale: the environment's policy (JSON AutoscalePolicy), null: none;
//   - environment_regions.autoscale: a region's own policy (JSON), "off" to switch it off there,
//     null to follow the environment's;
//   - autoscale_status: per environment and region, the replica count the region's agent last
//     decided, why, and when (for `krane status`).
// Never edit once shipped.
import type { Kysely } from "kysely";
import { runSchema, type KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await runSchema(db)`
      alter table "environments" add column "autoscale" text;
      alter table "environment_regions" add column "autoscale" text;
      create table "autoscale_status" ("environment_id" text not null, "region" text not null,
        "replicas" bigint not null, "reason" text not null, "decided_at" bigint not null,
        "reported_at" bigint not null, constraint "autoscale_status_pk" primary key ("environment_id", "region"));
    `;
  },
};

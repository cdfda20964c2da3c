// Migration 0002_rollouts: the rollout driver's tables (rollouts, rollout_revisions,
// rollout_events; shapes in ../schema.ts). Never edit once shipped.
import type { Kysely } from "kysely";
import { runSchema, type KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await runSchema(db)`
      create table "rollouts" ("environment_id" text not null, "region" text not null, "target_deployment_id" text,
        "target_seen_revision" bigint not null, "rollback_to" bigint, "status" text not null,
        "conditions" text not null, "observed_spec" text not null, "requeue_at" bigint, "updated_at" bigint not null,
        constraint "rollouts_pk" primary key ("environment_id", "region"));
      create index "rollouts_requeue_at" on "rollouts" ("requeue_at");
      create table "rollout_revisions" ("deployment_id" text not null, "environment_id" text not null,
        "region" text not null, "revision" bigint, "replicas" integer not null, "desired_replicas" integer,
        "max_replicas" integer, constraint "rollout_revisions_pk" primary key ("deployment_id", "region"));
      create index "rollout_revisions_env" on "rollout_revisions" ("environment_id", "region");
      create table "rollout_events" ("environment_id" text not null, "region" text not null, "seq" bigint not null,
        "at" bigint not null, "type" text not null, "reason" text not null, "message" text not null,
        constraint "rollout_events_pk" primary key ("environment_id", "region", "seq"));
    `;
  },
};

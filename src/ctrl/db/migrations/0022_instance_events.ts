// Migration 0022_instance_events: what agents saw happen to each instance's container (OOM kills,
// exit codes, crash loops, image pull errors, failing readiness probes, evictions), one row per
// fact. seq numbers an environment's events in the order ctrl recorded them (a cursor to follow);
// the identity index makes a fact reported again one row. Bounded by domain/instance-events.ts:
// the newest per instance, per revision and region, and by age. Never edit once shipped.
import type { Kysely } from "kysely";
import { runSchema, type KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await runSchema(db)`
      create table "instance_events" ("environment_id" text not null, "seq" bigint not null,
        "deployment_id" text not null, "region" text not null, "instance" text not null, "kind" text not null,
        "reason" text not null, "at_ms" bigint not null, "exit_code" integer, "restarts" bigint not null,
        "image" text not null, "message" text not null, "recorded_at" bigint not null,
        constraint "instance_events_pk" primary key ("environment_id", "seq"));
      create unique index "instance_events_identity" on "instance_events" ("deployment_id", "region", "instance",
        "kind", "reason", "at_ms");
      create index "instance_events_recorded" on "instance_events" ("recorded_at");
    `;
  },
};

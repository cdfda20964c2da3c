// Migration 0022_instance_events: what agents saw happen to each instance's container (OOM kills,
// exit codes, crash loops, image pull errors, failing readiness probes, evictions), one row per
// fact. seq numbers an environment's events in the order ctrl recorded them (a cursor to follow);
// the identity index makes a fact reported again one row. Bounded by domain/instance-events.ts:
// the newest per instance, per revision and region, and by age. Never edit once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable("instance_events")
      .addColumn("environment_id", "text", (c) => c.notNull())
      .addColumn("seq", "bigint", (c) => c.notNull())
      .addColumn("deployment_id", "text", (c) => c.notNull())
      .addColumn("region", "text", (c) => c.notNull())
      .addColumn("instance", "text", (c) => c.notNull())
      .addColumn("kind", "text", (c) => c.notNull())
      .addColumn("reason", "text", (c) => c.notNull())
      .addColumn("at_ms", "bigint", (c) => c.notNull())
      .addColumn("exit_code", "integer")
      .addColumn("restarts", "bigint", (c) => c.notNull())
      .addColumn("image", "text", (c) => c.notNull())
      .addColumn("message", "text", (c) => c.notNull())
      .addColumn("recorded_at", "bigint", (c) => c.notNull())
      .addPrimaryKeyConstraint("instance_events_pk", ["environment_id", "seq"])
      .execute();
    await db.schema
      .createIndex("instance_events_identity")
      .on("instance_events")
      .columns(["deployment_id", "region", "instance", "kind", "reason", "at_ms"])
      .unique()
      .execute();
    await db.schema.createIndex("instance_events_recorded").on("instance_events").columns(["recorded_at"]).execute();
  },
};

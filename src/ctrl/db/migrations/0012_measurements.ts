// Migration 0012_measurements: what each region's sentinels answered per
// revision, as the agents report it (ClusterService.ReportMeasurements), one row per
// (environment, revision, region, window); the rollout analysis adds them up. Rows are pruned by
// age and with their environment. The key makes a report sent twice (a retry after a lost
// answer) count once. Never edit once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable("measurements")
      .addColumn("environment_id", "text", (c) => c.notNull())
      .addColumn("deployment_id", "text", (c) => c.notNull())
      .addColumn("region", "text", (c) => c.notNull())
      .addColumn("from_ms", "bigint", (c) => c.notNull())
      .addColumn("to_ms", "bigint", (c) => c.notNull())
      .addColumn("r2xx", "bigint", (c) => c.notNull())
      .addColumn("r3xx", "bigint", (c) => c.notNull())
      .addColumn("r4xx", "bigint", (c) => c.notNull())
      .addColumn("r5xx", "bigint", (c) => c.notNull())
      // Non-cumulative latency observations per bucket, a JSON list of numbers (15 slots).
      .addColumn("latency", "text", (c) => c.notNull())
      .addColumn("received_at", "bigint", (c) => c.notNull())
      .addPrimaryKeyConstraint("measurements_pk", ["environment_id", "deployment_id", "region", "from_ms", "to_ms"])
      .execute();
    await db.schema.createIndex("measurements_to").on("measurements").columns(["to_ms"]).execute();
  },
};

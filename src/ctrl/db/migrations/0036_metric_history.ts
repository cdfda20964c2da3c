// Migration 0036_metric_history: the embedded metrics history (src/ctrl/domain/metric-history.ts).
// One row per (environment, revision, region, instance, step, start): what the sentinels answered
// (requests, errors, the latency histogram as 15 non-cumulative bucket counts l00..l14, so that
// minutes add up into hours exactly) and what the instances used (CPU and memory as sums over
// `usage_samples` readings, restarts as a count). `instance` is "" for the revision's figures as
// its sentinels count them (they count per revision, not per instance). `step_ms` is 60000
// (minutes, kept 7 days) or 3600000 (hours, kept 30 days). Never edit once shipped.
import type { Kysely } from "kysely";
import { runSchema, type KraneMigration } from "./migration.js";

const LATENCY_SLOTS = 15;

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    let t = db.schema
      .createTable("metric_points")
      .addColumn("environment_id", "text", (c) => c.notNull())
      .addColumn("deployment_id", "text", (c) => c.notNull())
      .addColumn("region", "text", (c) => c.notNull())
      .addColumn("instance", "text", (c) => c.notNull())
      .addColumn("step_ms", "bigint", (c) => c.notNull())
      .addColumn("at_ms", "bigint", (c) => c.notNull())
      .addColumn("requests", "bigint", (c) => c.notNull())
      .addColumn("errors", "bigint", (c) => c.notNull());
    for (let i = 0; i < LATENCY_SLOTS; i++)
      t = t.addColumn(`l${String(i).padStart(2, "0")}`, "bigint", (c) => c.notNull());
    await t
      .addColumn("cpu_millicores_sum", "double precision", (c) => c.notNull())
      .addColumn("memory_bytes_sum", "double precision", (c) => c.notNull())
      .addColumn("usage_samples", "bigint", (c) => c.notNull())
      .addColumn("restarts", "bigint", (c) => c.notNull())
      .addPrimaryKeyConstraint("metric_points_pk", [
        "environment_id",
        "step_ms",
        "at_ms",
        "deployment_id",
        "region",
        "instance",
      ])
      .execute();
    // Pruning and rollup read by step and time across environments.
    await runSchema(db)`create index "metric_points_step_at" on "metric_points" ("step_ms", "at_ms");`;
  },
};

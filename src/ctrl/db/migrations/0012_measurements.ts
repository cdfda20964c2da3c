// Migration 0012_measurements: what each region's sentinels answered per
// revision, as the agents report it (ClusterService.ReportMeasurements), one row per
// (environment, revision, region, window); the rollout analysis adds them up. Rows are pruned by
// age and with their environment. The key makes a report sent twice (a retry after a lost
// answer) count once. Never edit once shipped.
import type { Kysely } from "kysely";
import { runSchema, type KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    // measurements.latency: non-cumulative latency observations per bucket, a JSON list of numbers (15 slots).
    await runSchema(db)`
      create table "measurements" ("environment_id" text not null, "deployment_id" text not null,
        "region" text not null, "from_ms" bigint not null, "to_ms" bigint not null, "r2xx" bigint not null,
        "r3xx" bigint not null, "r4xx" bigint not null, "r5xx" bigint not null, "latency" text not null,
        "received_at" bigint not null, constraint "measurements_pk" primary key ("environment_id", "deployment_id",
        "region", "from_ms", "to_ms"));
      create index "measurements_to" on "measurements" ("to_ms");
    `;
  },
};

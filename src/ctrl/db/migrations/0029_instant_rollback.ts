// Migration 0029_instant_rollback: the previous revision kept warm after a rollout, and the pin
// a `krane rollback` leaves.
//   - environments.warm_window_seconds: how long the previous revision keeps its pods (0: not
//     at all); existing environments get the default, 30 minutes;
//   - environments.pinned_deployment_id: the revision every region runs whatever is deployed
//     after it (null: the newest, as before);
//   - rollouts.warm_deployment_id / warm_replicas / warm_until: per region, the revision kept
//     warm, the size the rollout engine counts for it (its pods beyond that are kept outside the
//     rollout) and when it goes (null while the rollout that left it is under way).
// Never edit once shipped.
import type { Kysely } from "kysely";
import { runSchema, type KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await runSchema(db)`
      alter table "environments" add column "warm_window_seconds" integer default 1800 not null;
      alter table "environments" add column "pinned_deployment_id" text;
      alter table "rollouts" add column "warm_deployment_id" text;
      alter table "rollouts" add column "warm_replicas" integer default 0 not null;
      alter table "rollouts" add column "warm_until" bigint;
    `;
  },
};

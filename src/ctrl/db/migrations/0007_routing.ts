// Migration 0007_routing: an environment's routing policy and what its sentinels report of it.
//  - environments.routing_mode / routing_weights / routing_version: how traffic is split between
//    revisions ("instances" like a Service, or "weighted" by the JSON list of
//    {deploymentId, weight}), and a version that grows with every change of the policy. Sentinels
//    report the version they serve, so status can tell when a change has reached every region.
//  - sentinels.address / served_routing_version: the sentinel's in-cluster
//    address and the policy version its pods serve (the lowest across its pods), as the agent
//    reported them.
// Existing environments start at version 1 of the "instances" policy, which is what they served.
// Never edit once shipped.
import type { Kysely } from "kysely";
import { runSchema, type KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await runSchema(db)`
      alter table "environments" add column "routing_mode" text default 'instances' not null;
      alter table "environments" add column "routing_weights" text default '[]' not null;
      alter table "environments" add column "routing_version" bigint default 1 not null;
      alter table "sentinels" add column "address" text;
      alter table "sentinels" add column "served_routing_version" bigint;
    `;
  },
};

// Migration 0035_edge_policies: an environment's ordered edge policies.
//   - environments.edge_policies: the list as JSON (src/contracts/edge-policy.ts), null: none;
//     carried in its sentinels' routing document with the routing version it was set under.
// Never edit once shipped.
import type { Kysely } from "kysely";
import { runSchema, type KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await runSchema(db)`alter table "environments" add column "edge_policies" text;`;
  },
};

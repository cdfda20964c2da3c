// Migration 0014_idempotency_subject: what a keyed call created (e.g. a deployment id), recorded
// in the same transaction as the change, so that a repeat whose first answer was lost in a crash
// can be answered from the state the call left. Never edit once shipped.
import type { Kysely } from "kysely";
import { runSchema, type KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await runSchema(db)`alter table "idempotency_keys" add column "subject" text;`;
  },
};

// Migration 0024_deployment_protocol: what a revision's app speaks on its port ("http1", "h2c"
// or "grpc"). Existing revisions were all served in HTTP/1.1, so they get "http1".
// Never edit once shipped.
import type { Kysely } from "kysely";
import { runSchema, type KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await runSchema(db)`alter table "deployments" add column "protocol" text default 'http1' not null;`;
  },
};

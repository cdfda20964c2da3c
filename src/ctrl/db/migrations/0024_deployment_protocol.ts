// Migration 0024_deployment_protocol: what a revision's app speaks on its port ("http1", "h2c"
// or "grpc"). Existing revisions were all served in HTTP/1.1, so they get "http1".
// Never edit once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .alterTable("deployments")
      .addColumn("protocol", "text", (c) => c.notNull().defaultTo("http1"))
      .execute();
  },
};

// Migration 0008_exposure: an environment's endpoints (one per visibility), its custom domains
// (one environment per hostname in the whole installation, with their DNS verification state),
// the agents' gateway reports per region, and the environment's edge auth document (rendered
// from its endpoints and domains into the sentinel's routing policy). Rows of an environment go
// with it (ON DELETE CASCADE), so deleting an environment needs no knowledge of these tables.
// Never edit once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable("endpoints")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("environment_id", "text", (c) => c.notNull().references("environments.id").onDelete("cascade"))
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("project_id", "text", (c) => c.notNull())
      .addColumn("visibility", "text", (c) => c.notNull())
      .addColumn("hostname", "text", (c) => c.notNull())
      .addColumn("path_prefix", "text", (c) => c.notNull())
      .addColumn("auth", "text")
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .addColumn("updated_at", "bigint", (c) => c.notNull())
      .addUniqueConstraint("endpoints_environment_visibility", ["environment_id", "visibility"])
      .addUniqueConstraint("endpoints_address", ["hostname", "path_prefix"])
      .execute();
    await db.schema.createIndex("endpoints_hostname").on("endpoints").column("hostname").execute();

    await db.schema
      .createTable("domains")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("environment_id", "text", (c) => c.notNull().references("environments.id").onDelete("cascade"))
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("project_id", "text", (c) => c.notNull())
      .addColumn("hostname", "text", (c) => c.notNull().unique())
      .addColumn("token", "text", (c) => c.notNull())
      .addColumn("state", "text", (c) => c.notNull())
      .addColumn("last_error", "text")
      .addColumn("last_checked_at", "bigint")
      .addColumn("verified_at", "bigint")
      .addColumn("lost_since", "bigint")
      .addColumn("next_check_at", "bigint", (c) => c.notNull())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .execute();
    await db.schema.createIndex("domains_environment").on("domains").column("environment_id").execute();
    await db.schema.createIndex("domains_next_check").on("domains").column("next_check_at").execute();

    await db.schema
      .createTable("gateway_reports")
      .addColumn("environment_id", "text", (c) => c.notNull().references("environments.id").onDelete("cascade"))
      .addColumn("region", "text", (c) => c.notNull())
      .addColumn("routes", "text", (c) => c.notNull())
      .addColumn("rejected_reason", "text")
      .addColumn("reported_at", "bigint", (c) => c.notNull())
      .addPrimaryKeyConstraint("gateway_reports_pk", ["environment_id", "region"])
      .execute();

    await db.schema.alterTable("environments").addColumn("edge_auth", "text").execute();
  },
};

// Migration 0032_builds: builds from source.
//  - build_source_chunks: a source archive being uploaded to a project, in order, chunk by chunk,
//    under the digest the CLI computed (checked when a build names it);
//  - builds: one build of an environment from an uploaded archive: its state (queued, running,
//    succeeded, failed, cancelled), the worker's lease while it runs, its log (bounded), the
//    image and digest it pushed, and the revision it deployed.
// Never edit once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>, dialect): Promise<void> {
    await db.schema
      .createTable("build_source_chunks")
      .addColumn("project_id", "text", (c) => c.notNull())
      .addColumn("digest", "text", (c) => c.notNull())
      .addColumn("position", "bigint", (c) => c.notNull())
      .addColumn("size", "bigint", (c) => c.notNull())
      .addColumn("data", dialect.binaryType, (c) => c.notNull())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .addPrimaryKeyConstraint("build_source_chunks_pk", ["project_id", "digest", "position"])
      .execute();
    await db.schema
      .createTable("builds")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("project_id", "text", (c) => c.notNull())
      .addColumn("environment_id", "text", (c) => c.notNull())
      .addColumn("production", "integer", (c) => c.notNull())
      .addColumn("state", "text", (c) => c.notNull())
      .addColumn("source_digest", "text", (c) => c.notNull())
      .addColumn("dockerfile", "text")
      .addColumn("deploy", "integer", (c) => c.notNull())
      .addColumn("image", "text")
      .addColumn("image_digest", "text")
      .addColumn("deployment_id", "text")
      .addColumn("error", "text")
      .addColumn("failed_step", "text")
      .addColumn("failed_output", "text")
      .addColumn("log", "text", (c) => c.notNull())
      .addColumn("log_lines", "integer", (c) => c.notNull())
      .addColumn("lease_until", "bigint")
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .addColumn("started_at", "bigint")
      .addColumn("finished_at", "bigint")
      .execute();
    await db.schema.createIndex("builds_state").on("builds").columns(["state", "created_at"]).execute();
    await db.schema.createIndex("builds_environment").on("builds").columns(["environment_id", "created_at"]).execute();
  },
};

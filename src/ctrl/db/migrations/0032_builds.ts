// Migration 0032_builds: builds from source.
//  - build_source_chunks: a source archive being uploaded to a project, in order, chunk by chunk,
//    under the digest the CLI computed (checked when a build names it);
//  - builds: one build of an environment from an uploaded archive: its state (queued, running,
//    succeeded, failed, cancelled), the worker's lease while it runs, its log (bounded), the
//    image and digest it pushed, and the revision it deployed.
// Never edit once shipped.
import type { Kysely } from "kysely";
import { binaryType, runSchema, type KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>, dialect): Promise<void> {
    const bytes = binaryType(db, dialect);
    await runSchema(db)`
      create table "build_source_chunks" ("project_id" text not null, "digest" text not null,
        "position" bigint not null, "size" bigint not null, "data" ${bytes} not null, "created_at" bigint not null,
        constraint "build_source_chunks_pk" primary key ("project_id", "digest", "position"));
      create table "builds" ("id" text primary key, "workspace_id" text not null, "project_id" text not null,
        "environment_id" text not null, "production" integer not null, "state" text not null,
        "source_digest" text not null, "dockerfile" text, "deploy" integer not null, "image" text,
        "image_digest" text, "deployment_id" text, "error" text, "failed_step" text, "failed_output" text,
        "log" text not null, "log_lines" integer not null, "lease_until" bigint, "created_at" bigint not null,
        "started_at" bigint, "finished_at" bigint);
      create index "builds_state" on "builds" ("state", "created_at");
      create index "builds_environment" on "builds" ("environment_id", "created_at");
    `;
  },
};

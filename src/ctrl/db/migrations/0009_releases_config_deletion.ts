// Migration 0009_releases_config_deletion: configuration and secrets per environment
// and per revision, the data keys that encrypt secrets (envelope encryption), releases of
// arbitrary objects, scheduled jobs, and deletion of environments, projects and workspaces.
//
//  - desired_objects.environment_id: the environment an object belongs to, so deleting an
//    environment finds every streamed object of it, of every kind, with one indexed read
//    (back-filled here for deployments and sentinels);
//  - deleting_at on workspaces, projects and environments: a deletion in progress;
//  - environment_config / environment_secrets: the values new revisions get; a secret's value is
//    stored only as AES-256-GCM ciphertext under its environment's data key;
//  - deployments.config / secrets / external_secrets / secrets_digest: each revision's own copy
//    (immutable, so `rollout undo` restores the configuration of the revision it goes back to);
//  - data_keys: per environment, a random data key wrapped by the installation's master key
//    (rotating the master key rewraps these rows, never the values);
//  - releases, release_objects (the current version's objects), release_kinds (every kind a
//    release ever had: the prune sweep's inventory), release_status (per region);
//  - jobs, job_status (per region);
//  - pending_deletions (per object and region until its agent confirms), deletions, audit_log.
// Never edit once shipped.
import { sql, type Kysely } from "kysely";
import { binaryType, runSchema, type KraneMigration, type MigrationDialect } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>, dialect: MigrationDialect): Promise<void> {
    const bytes = binaryType(db, dialect);
    await runSchema(db)`alter table "desired_objects" add column "environment_id" text;`;
    await sql`UPDATE desired_objects SET environment_id = (SELECT d.environment_id FROM deployments d WHERE d.id = desired_objects.object_id) WHERE kind = 'deployment'`.execute(
      db,
    );
    await sql`UPDATE desired_objects SET environment_id = (SELECT s.environment_id FROM sentinels s WHERE s.id = desired_objects.object_id) WHERE kind = 'sentinel'`.execute(
      db,
    );
    await runSchema(db)`create index "desired_objects_environment" on "desired_objects" ("environment_id");`;

    for (const table of ["workspaces", "projects", "environments"]) {
      await db.schema.alterTable(table).addColumn("deleting_at", "bigint").execute();
    }

    await runSchema(db)`
      create table "environment_config" ("environment_id" text not null, "key" text not null, "value" text not null,
        "updated_at" bigint not null, constraint "environment_config_pk" primary key ("environment_id", "key"));
      create table "environment_secrets" ("environment_id" text not null, "key" text not null, "source" text not null,
        "ciphertext" ${bytes}, "external_path" text, "updated_at" bigint not null,
        constraint "environment_secrets_pk" primary key ("environment_id", "key"));
      alter table "deployments" add column "config" text;
      alter table "deployments" add column "secrets" ${bytes};
      alter table "deployments" add column "secret_keys" text;
      alter table "deployments" add column "secrets_digest" text;
      alter table "deployments" add column "external_secrets" text;
      create table "data_keys" ("id" text primary key, "environment_id" text not null unique,
        "wrapped" ${bytes} not null, "master_key_id" text not null, "created_at" bigint not null,
        "rotated_at" bigint);
      create table "releases" ("id" text primary key, "workspace_id" text not null, "project_id" text not null,
        "environment_id" text not null, "name" text not null, "version" bigint not null, "digest" text not null,
        "created_at" bigint not null, "updated_at" bigint not null,
        constraint "releases_environment_name" unique ("environment_id", "name"));
      create table "release_objects" ("release_id" text not null, "object_id" text not null, "seq" integer not null,
        "api_group" text not null, "api_version" text not null, "kind" text not null, "name" text not null,
        "manifest" text not null, "sealed" ${bytes}, constraint "release_objects_pk" primary key ("release_id",
        "object_id"));
      create table "release_kinds" ("release_id" text not null, "api_group" text not null,
        "api_version" text not null, "kind" text not null, constraint "release_kinds_pk" primary key ("release_id",
        "api_group", "api_version", "kind"));
      create table "release_status" ("release_id" text not null, "region" text not null,
        "observed_version" bigint not null, "objects" text not null, "rejected_reason" text,
        "reported_at" bigint not null, constraint "release_status_pk" primary key ("release_id", "region"));
      create table "jobs" ("id" text primary key, "workspace_id" text not null, "project_id" text not null,
        "environment_id" text not null, "name" text not null, "k8s_name" text not null, "spec" text not null,
        "created_at" bigint not null, "updated_at" bigint not null,
        constraint "jobs_environment_name" unique ("environment_id", "name"));
      create table "job_status" ("job_id" text not null, "region" text not null, "runs" text not null,
        "last_schedule" bigint not null, "rejected_reason" text, "reported_at" bigint not null,
        constraint "job_status_pk" primary key ("job_id", "region"));
      create table "deletions" ("id" text primary key, "scope" text not null, "requested_at" bigint not null,
        "forced_regions" text not null);
      create table "pending_deletions" ("environment_id" text not null, "region" text not null, "kind" text not null,
        "object_id" text not null, "requested_at" bigint not null,
        constraint "pending_deletions_pk" primary key ("environment_id", "region", "kind", "object_id"));
      create index "pending_deletions_object" on "pending_deletions" ("kind", "object_id", "region");
      create table "audit_log" ("id" text primary key, "at" bigint not null, "actor" text not null,
        "action" text not null, "target_id" text not null, "detail" text not null);
    `;
  },
};

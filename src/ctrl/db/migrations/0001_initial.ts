// Migration 0001_initial: the tables of the first release (tenancy, deployments, sentinels,
// desired state, the outbox and its version counters, regions, clusters, API tokens, reports).
// Never edit once shipped; add a migration instead.
import type { Kysely } from "kysely";
import { binaryType, runSchema, type KraneMigration, type MigrationDialect } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>, dialect: MigrationDialect): Promise<void> {
    const bytes = binaryType(db, dialect);
    await runSchema(db)`
      create table "workspaces" ("id" text primary key, "slug" text not null unique, "name" text not null,
        "k8s_namespace" text not null unique, "created_at" bigint not null);
      create table "projects" ("id" text primary key, "workspace_id" text not null references "workspaces" ("id"),
        "slug" text not null, "name" text not null, "created_at" bigint not null,
        constraint "projects_workspace_slug" unique ("workspace_id", "slug"));
      create table "environments" ("id" text primary key, "workspace_id" text not null,
        "project_id" text not null references "projects" ("id"), "slug" text not null, "sentinel_image" text,
        "sentinel_replicas" integer not null, "sentinel_cpu_millicores" integer not null,
        "sentinel_memory_mib" integer not null, "strategy" text not null, "max_surge" text not null,
        "max_unavailable" text not null, "min_ready_seconds" integer not null,
        "progress_deadline_seconds" integer not null, "revision_history_limit" integer not null,
        "paused" integer not null, "last_revision" bigint not null, "created_at" bigint not null,
        "updated_at" bigint not null, constraint "environments_project_slug" unique ("project_id", "slug"));
      create table "regions" ("name" text primary key, "created_at" bigint not null);
      create table "environment_regions" ("environment_id" text not null references "environments" ("id"),
        "region" text not null references "regions" ("name"), "replicas" integer not null,
        constraint "environment_regions_pk" primary key ("environment_id", "region"));
      create table "deployments" ("id" text primary key, "workspace_id" text not null, "project_id" text not null,
        "environment_id" text not null references "environments" ("id"), "revision" bigint not null,
        "k8s_name" text not null unique, "image" text not null, "command" text not null, "args" text not null,
        "port" integer not null, "env" text not null, "cpu_millicores" integer not null,
        "memory_mib" integer not null, "health_check" text, "build_id" text not null, "created_at" bigint not null,
        constraint "deployments_environment_revision" unique ("environment_id", "revision"));
      create table "sentinels" ("id" text primary key, "workspace_id" text not null, "project_id" text not null,
        "environment_id" text not null references "environments" ("id"), "region" text not null,
        "k8s_name" text not null unique, "health" text not null, "available_replicas" integer not null,
        "rejected_reason" text, "reported_at" bigint,
        constraint "sentinels_environment_region" unique ("environment_id", "region"));
      create table "desired_objects" ("region" text not null, "kind" text not null, "object_id" text not null,
        "payload" ${bytes} not null, constraint "desired_objects_pk" primary key ("region", "kind", "object_id"));
      create table "outbox" ("region" text not null, "kind" text not null, "version" bigint not null,
        "object_id" text not null, "op" text not null, "payload" ${bytes} not null, "created_at" bigint not null,
        constraint "outbox_pk" primary key ("region", "kind", "version"));
      create table "stream_versions" ("region" text not null, "kind" text not null, "version" bigint not null,
        "compacted_through" bigint not null, constraint "stream_versions_pk" primary key ("region", "kind"));
      create table "clusters" ("id" text primary key, "region" text not null references "regions" ("name"),
        "name" text not null, "token_hash" text not null unique, "created_at" bigint not null,
        "last_heartbeat_at" bigint, "agent_id" text not null, "build" text not null,
        "deployments_version" bigint not null, "sentinels_version" bigint not null,
        constraint "clusters_region_name" unique ("region", "name"));
      create table "api_tokens" ("id" text primary key, "name" text not null, "token_hash" text not null unique,
        "created_at" bigint not null);
      create table "instances" ("deployment_id" text not null, "region" text not null, "k8s_name" text not null,
        "address" text not null, "status" text not null, "cpu_millicores" bigint not null,
        "memory_mib" bigint not null, "node_name" text not null, "zone" text not null, "ready_since" bigint not null,
        "reported_at" bigint not null, constraint "instances_pk" primary key ("deployment_id", "region", "k8s_name"));
      create table "deployment_reports" ("deployment_id" text not null, "region" text not null,
        "rejected_reason" text, "reported_at" bigint not null,
        constraint "deployment_reports_pk" primary key ("deployment_id", "region"));
      create index "deployments_environment" on "deployments" ("environment_id", "revision");
      create index "desired_objects_object" on "desired_objects" ("kind", "object_id");
      create index "outbox_created_at" on "outbox" ("created_at");
    `;
  },
};

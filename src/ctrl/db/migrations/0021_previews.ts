// Migration 0021_previews: preview environments.
//   - previews: one per preview, the environment it runs as (null while a fork's preview waits
//     for approval), where it came from (the CLI or a pull request of a hook), its image, region,
//     resources, expiry and state, and what was last reported to the pull request's commit status;
//   - preview_limits: a workspace's limits on its previews (none: the defaults);
//   - preview_hooks: a pull-request webhook of a project's environment (GitHub or GitLab), its
//     secret and the commit-status token sealed with that environment's data key;
//   - webhook_deliveries: the deliveries a hook accepted, kept for the replay window.
// Never edit once shipped.
import type { Kysely } from "kysely";
import { binaryType, runSchema, type KraneMigration, type MigrationDialect } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>, dialect: MigrationDialect): Promise<void> {
    const bytes = binaryType(db, dialect);
    // preview_hooks.verification: "hmac-sha256" (GitHub), "signing-token" or "secret-token" (GitLab).
    await runSchema(db)`
      create table "previews" ("id" text primary key, "workspace_id" text not null, "project_id" text not null,
        "base_environment_id" text not null, "environment_id" text, "name" text not null, "source" text not null,
        "hook_id" text, "repository" text not null, "pr_number" bigint not null, "head_sha" text not null,
        "fork" integer not null, "with_secrets" integer not null, "image" text not null, "region" text not null,
        "cpu_millicores" bigint not null, "memory_mib" bigint not null, "ttl_ms" bigint not null,
        "expires_at" bigint not null, "state" text not null, "approved_at" bigint, "status_reported" text not null,
        "status_due_at" bigint, "created_at" bigint not null, "updated_at" bigint not null);
      create unique index "previews_name" on "previews" ("project_id", "name");
      create index "previews_environment" on "previews" ("environment_id");
      create index "previews_workspace" on "previews" ("workspace_id", "name");
      create index "previews_expiry" on "previews" ("expires_at");
      create index "previews_status_due" on "previews" ("status_due_at");
      create table "preview_limits" ("workspace_id" text primary key, "max_previews" bigint not null,
        "max_cpu_millicores" bigint not null, "max_memory_mib" bigint not null, "fork_approval" integer not null,
        "updated_at" bigint not null);
      create table "preview_hooks" ("id" text primary key, "workspace_id" text not null, "project_id" text not null,
        "base_environment_id" text not null, "provider" text not null, "repository" text not null,
        "verification" text not null, "secret_sealed" ${bytes} not null, "status_token_sealed" ${bytes},
        "status_api_url" text not null, "image_template" text not null, "region" text not null,
        "ttl_ms" bigint not null, "with_secrets" integer not null, "created_at" bigint not null);
      create index "preview_hooks_environment" on "preview_hooks" ("base_environment_id");
      create table "webhook_deliveries" ("hook_id" text not null, "delivery_id" text not null,
        "received_at" bigint not null, constraint "webhook_deliveries_pk" primary key ("hook_id", "delivery_id"));
      create index "webhook_deliveries_received" on "webhook_deliveries" ("received_at");
    `;
  },
};

// Migration 0043_repositories: a project's git repository (src/ctrl/domain/repositories.ts) and
// the builds of its pushed commits.
//   - repositories: one per project: its URL and transport (https or ssh), the provider whose
//     webhooks and commit statuses it speaks (github or gitlab), the fetch credential (a token or
//     a deploy key, or none for a public repository), the webhook secret and the status token,
//     each sealed with the workspace's data key, and the branch → environment map (JSON);
//   - builds gain the repository, branch and commit they build (null: an uploaded source), and
//     the commit status to post (status_due_at set in the transaction that changes the build's
//     state, cleared once posted; status_reported is what was posted last).
// Never edit once shipped.
import type { Kysely } from "kysely";
import { binaryType, runSchema, type KraneMigration, type MigrationDialect } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>, dialect: MigrationDialect): Promise<void> {
    const bytes = binaryType(db, dialect);
    await runSchema(db)`
      create table "repositories" ("id" text primary key, "workspace_id" text not null, "project_id" text not null,
        "provider" text not null, "url" text not null, "transport" text not null, "path" text not null,
        "credential_kind" text not null, "credential_username" text not null, "credential_sealed" ${bytes},
        "webhook_verification" text not null, "webhook_secret_sealed" ${bytes} not null,
        "status_api_url" text not null, "status_token_sealed" ${bytes}, "branches" text not null,
        "created_at" bigint not null, "updated_at" bigint not null);
      create unique index "repositories_project" on "repositories" ("project_id");
      create index "repositories_workspace" on "repositories" ("workspace_id");
      alter table "builds" add column "repository_id" text;
      alter table "builds" add column "branch" text;
      alter table "builds" add column "commit_sha" text;
      alter table "builds" add column "status_reported" text;
      alter table "builds" add column "status_due_at" bigint;
      create index "builds_status_due" on "builds" ("status_due_at");
    `;
  },
};

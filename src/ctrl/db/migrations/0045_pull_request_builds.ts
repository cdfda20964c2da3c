// Migration 0045_pull_request_builds: a connected repository's pull requests build previews.
//   - repositories.preview_base: the environment (slug) a pull request's preview is made from,
//     "" for none (pull requests build nothing); repositories.preview_forks: 1 when pull requests
//     from forks are built too (their code runs in the build);
//   - builds.preview: the preview (e.g. "pr-7") a pull request's build creates or updates, null
//     for a branch's build; builds.pr_number and builds.pr_fork: its pull request and whether it
//     comes from a fork. Such a build's environment_id is the preview's base.
// Never edit once shipped.
import type { Kysely } from "kysely";
import { runSchema, type KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await runSchema(db)`
      alter table "repositories" add column "preview_base" text default '' not null;
      alter table "repositories" add column "preview_forks" integer default 0 not null;
      alter table "builds" add column "preview" text;
      alter table "builds" add column "pr_number" bigint;
      alter table "builds" add column "pr_fork" integer;
    `;
  },
};

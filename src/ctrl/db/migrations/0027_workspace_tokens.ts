// Migration 0027_workspace_tokens: API tokens bound to one workspace. `api_tokens.workspace_id`
// is null for an installation token (every token before this migration) and otherwise the id of
// the workspace the token is bound to — the id, not the slug, so a workspace deleted and created
// again under the same slug is not the old one's tokens' to reach. Token names become unique per
// scope (a workspace's names tell nothing of another's). `audit_events.actor_scope` records the
// scope a user token acted with (null: not a user token, or recorded before this migration).
// Never edit once shipped.
import type { Kysely } from "kysely";
import { runSchema, type KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await runSchema(db)`
      alter table "api_tokens" add column "workspace_id" text;
      create index "api_tokens_workspace" on "api_tokens" ("workspace_id", "name");
      alter table "audit_events" add column "actor_scope" text;
    `;
  },
};

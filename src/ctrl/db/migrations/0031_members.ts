// Migration 0031_members: who may do what in a workspace.
//   - members: a workspace's people by email address, with the role the workspace gave
//     (granted_role, an invitation's) and the one the provider's groups gave at the last sign-in
//     (group_role); `subject` ("<issuer>#<sub>") is null until the first sign-in accepts the
//     invitation;
//   - service_accounts: named owners of a workspace's CI tokens, each with a role;
//   - api_tokens.member_id / service_account_id: a workspace token's owner. Every workspace token
//     made before this migration becomes a service account of its own name with role admin (what
//     such a token could do: everything in its workspace, nothing of the installation's);
//   - audit_events.actor_owner: who owned the workspace token that acted, hashed with the event
//     when present (src/contracts/audit.ts);
// Never edit once shipped.
import { randomBytes } from "node:crypto";
import { sql, type Kysely } from "kysely";
import { runSchema, type KraneMigration } from "./migration.js";

const ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";

function saId(): string {
  return `sa_${[...randomBytes(20)].map((b) => ALPHABET[b % 36]).join("")}`;
}

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await runSchema(db)`
      create table "members" ("id" text primary key, "workspace_id" text not null, "email" text not null,
        "name" text not null, "granted_role" text, "group_role" text, "subject" text, "created_at" bigint not null,
        "joined_at" bigint);
      create unique index "members_workspace_email" on "members" ("workspace_id", "email");
      create index "members_subject" on "members" ("subject");
      create index "members_email" on "members" ("email");
      create table "service_accounts" ("id" text primary key, "workspace_id" text not null, "name" text not null,
        "role" text not null, "created_at" bigint not null);
      create unique index "service_accounts_workspace_name" on "service_accounts" ("workspace_id", "name");
      alter table "api_tokens" add column "member_id" text;
      alter table "api_tokens" add column "service_account_id" text;
      create index "api_tokens_member" on "api_tokens" ("member_id");
      create index "api_tokens_service_account" on "api_tokens" ("service_account_id");
    `;
    const legacy = await sql<{ id: string; name: string; workspace_id: string; created_at: number }>`
      SELECT id, name, workspace_id, created_at FROM api_tokens WHERE workspace_id IS NOT NULL`.execute(db);
    for (const t of legacy.rows) {
      const id = saId();
      await sql`INSERT INTO service_accounts (id, workspace_id, name, role, created_at)
        VALUES (${id}, ${t.workspace_id}, ${t.name}, 'admin', ${t.created_at})`.execute(db);
      await sql`UPDATE api_tokens SET service_account_id = ${id} WHERE id = ${t.id}`.execute(db);
    }

    await runSchema(db)`alter table "audit_events" add column "actor_owner" text;`;
  },
};

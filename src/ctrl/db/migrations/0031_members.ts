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
import type { KraneMigration } from "./migration.js";

const ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";

function saId(): string {
  return `sa_${[...randomBytes(20)].map((b) => ALPHABET[b % 36]).join("")}`;
}

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable("members")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("email", "text", (c) => c.notNull())
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("granted_role", "text")
      .addColumn("group_role", "text")
      .addColumn("subject", "text")
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .addColumn("joined_at", "bigint")
      .execute();
    await db.schema
      .createIndex("members_workspace_email")
      .on("members")
      .columns(["workspace_id", "email"])
      .unique()
      .execute();
    await db.schema.createIndex("members_subject").on("members").column("subject").execute();
    await db.schema.createIndex("members_email").on("members").column("email").execute();

    await db.schema
      .createTable("service_accounts")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("role", "text", (c) => c.notNull())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex("service_accounts_workspace_name")
      .on("service_accounts")
      .columns(["workspace_id", "name"])
      .unique()
      .execute();

    await db.schema.alterTable("api_tokens").addColumn("member_id", "text").execute();
    await db.schema.alterTable("api_tokens").addColumn("service_account_id", "text").execute();
    await db.schema.createIndex("api_tokens_member").on("api_tokens").column("member_id").execute();
    await db.schema.createIndex("api_tokens_service_account").on("api_tokens").column("service_account_id").execute();
    const legacy = await sql<{ id: string; name: string; workspace_id: string; created_at: number }>`
      SELECT id, name, workspace_id, created_at FROM api_tokens WHERE workspace_id IS NOT NULL`.execute(db);
    for (const t of legacy.rows) {
      const id = saId();
      await sql`INSERT INTO service_accounts (id, workspace_id, name, role, created_at)
        VALUES (${id}, ${t.workspace_id}, ${t.name}, 'admin', ${t.created_at})`.execute(db);
      await sql`UPDATE api_tokens SET service_account_id = ${id} WHERE id = ${t.id}`.execute(db);
    }

    await db.schema.alterTable("audit_events").addColumn("actor_owner", "text").execute();
  },
};

// Migration 0033_member_sessions: members' sign-in sessions through the installation's OpenID
// provider.
//   - oidc_logins: a sign-in under way, keyed by the digest of its `state`; holds the nonce and
//     the PKCE verifier ctrl checks the provider's answer with, and is deleted when the answer
//     comes (a state is good once);
//   - member_sessions: a member's session: digests of its short-lived access token and of its
//     refresh token (each replaced at a refresh), the provider's subject it was made for, and when
//     each expires. A revocation deletes the row.
// Never edit once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable("oidc_logins")
      .addColumn("state_hash", "text", (c) => c.primaryKey())
      .addColumn("nonce", "text", (c) => c.notNull())
      .addColumn("code_verifier", "text", (c) => c.notNull())
      .addColumn("redirect_uri", "text", (c) => c.notNull())
      .addColumn("workspace", "text", (c) => c.notNull())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .addColumn("expires_at", "bigint", (c) => c.notNull())
      .execute();
    await db.schema.createIndex("oidc_logins_expiry").on("oidc_logins").column("expires_at").execute();

    await db.schema
      .createTable("member_sessions")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("member_id", "text", (c) => c.notNull())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("subject", "text", (c) => c.notNull())
      .addColumn("client", "text", (c) => c.notNull())
      .addColumn("access_hash", "text", (c) => c.notNull())
      .addColumn("access_expires_at", "bigint", (c) => c.notNull())
      .addColumn("refresh_hash", "text", (c) => c.notNull())
      .addColumn("expires_at", "bigint", (c) => c.notNull())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .addColumn("refreshed_at", "bigint", (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex("member_sessions_access")
      .on("member_sessions")
      .column("access_hash")
      .unique()
      .execute();
    await db.schema
      .createIndex("member_sessions_refresh")
      .on("member_sessions")
      .column("refresh_hash")
      .unique()
      .execute();
    await db.schema.createIndex("member_sessions_member").on("member_sessions").column("member_id").execute();
    await db.schema.createIndex("member_sessions_expiry").on("member_sessions").column("expires_at").execute();
  },
};

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
import { runSchema, type KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await runSchema(db)`
      create table "oidc_logins" ("state_hash" text primary key, "nonce" text not null, "code_verifier" text not null,
        "redirect_uri" text not null, "workspace" text not null, "created_at" bigint not null,
        "expires_at" bigint not null);
      create index "oidc_logins_expiry" on "oidc_logins" ("expires_at");
      create table "member_sessions" ("id" text primary key, "member_id" text not null, "workspace_id" text not null,
        "subject" text not null, "client" text not null, "access_hash" text not null,
        "access_expires_at" bigint not null, "refresh_hash" text not null, "expires_at" bigint not null,
        "created_at" bigint not null, "refreshed_at" bigint not null);
      create unique index "member_sessions_access" on "member_sessions" ("access_hash");
      create unique index "member_sessions_refresh" on "member_sessions" ("refresh_hash");
      create index "member_sessions_member" on "member_sessions" ("member_id");
      create index "member_sessions_expiry" on "member_sessions" ("expires_at");
    `;
  },
};

// Migration 0008_exposure: an environment's endpoints (one per visibility), its custom domains
// (one environment per hostname in the whole installation, with their DNS verification state),
// the agents' gateway reports per region, and the environment's edge auth document (rendered
// from its endpoints and domains into the sentinel's routing policy). Rows of an environment go
// with it (ON DELETE CASCADE), so deleting an environment needs no knowledge of these tables.
// Never edit once shipped.
import type { Kysely } from "kysely";
import { runSchema, type KraneMigration } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await runSchema(db)`
      create table "endpoints" ("id" text primary key,
        "environment_id" text not null references "environments" ("id") on delete cascade,
        "workspace_id" text not null, "project_id" text not null, "visibility" text not null,
        "hostname" text not null, "path_prefix" text not null, "auth" text, "created_at" bigint not null,
        "updated_at" bigint not null, constraint "endpoints_environment_visibility" unique ("environment_id",
        "visibility"), constraint "endpoints_address" unique ("hostname", "path_prefix"));
      create index "endpoints_hostname" on "endpoints" ("hostname");
      create table "domains" ("id" text primary key,
        "environment_id" text not null references "environments" ("id") on delete cascade,
        "workspace_id" text not null, "project_id" text not null, "hostname" text not null unique,
        "token" text not null, "state" text not null, "last_error" text, "last_checked_at" bigint,
        "verified_at" bigint, "lost_since" bigint, "next_check_at" bigint not null, "created_at" bigint not null);
      create index "domains_environment" on "domains" ("environment_id");
      create index "domains_next_check" on "domains" ("next_check_at");
      create table "gateway_reports" ("environment_id" text not null references "environments" ("id") on delete cascade,
        "region" text not null, "routes" text not null, "rejected_reason" text, "reported_at" bigint not null,
        constraint "gateway_reports_pk" primary key ("environment_id", "region"));
      alter table "environments" add column "edge_auth" text;
    `;
  },
};

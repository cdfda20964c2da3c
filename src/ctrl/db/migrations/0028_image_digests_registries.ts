// Migration 0028_image_digests_registries: images pinned to digests, and private registries.
//  - deployments.image_digest: the digest the revision's image (its tag) named when it was
//    recorded ("sha256:…"); the revision's pods run `image@digest` wherever and whenever they
//    start. Null: run as named (revisions before this migration; images ctrl does not resolve).
//  - registry_credentials: per workspace and registry host, the user name and the password
//    sealed (AES-256-GCM) with a data key of its own, stored wrapped by the master key.
// Never edit once shipped.
import type { Kysely } from "kysely";
import { binaryType, runSchema, type KraneMigration, type MigrationDialect } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>, dialect: MigrationDialect): Promise<void> {
    const bytes = binaryType(db, dialect);
    await runSchema(db)`
      alter table "deployments" add column "image_digest" text;
      create table "registry_credentials" ("id" text primary key, "workspace_id" text not null, "host" text not null,
        "username" text not null, "sealed_password" ${bytes} not null, "wrapped_key" ${bytes} not null,
        "master_key_id" text not null, "created_at" bigint not null, "updated_at" bigint not null,
        constraint "registry_credentials_workspace_host" unique ("workspace_id", "host"));
    `;
  },
};

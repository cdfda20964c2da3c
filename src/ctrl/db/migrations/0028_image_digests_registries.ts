// Migration 0028_image_digests_registries: images pinned to digests, and private registries.
//  - deployments.image_digest: the digest the revision's image (its tag) named when it was
//    recorded ("sha256:…"); the revision's pods run `image@digest` wherever and whenever they
//    start. Null: run as named (revisions before this migration; images ctrl does not resolve).
//  - registry_credentials: per workspace and registry host, the user name and the password
//    sealed (AES-256-GCM) with a data key of its own, stored wrapped by the master key.
// Never edit once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration, MigrationDialect } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>, dialect: MigrationDialect): Promise<void> {
    await db.schema.alterTable("deployments").addColumn("image_digest", "text").execute();
    await db.schema
      .createTable("registry_credentials")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("host", "text", (c) => c.notNull())
      .addColumn("username", "text", (c) => c.notNull())
      .addColumn("sealed_password", dialect.binaryType, (c) => c.notNull())
      .addColumn("wrapped_key", dialect.binaryType, (c) => c.notNull())
      .addColumn("master_key_id", "text", (c) => c.notNull())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .addColumn("updated_at", "bigint", (c) => c.notNull())
      .addUniqueConstraint("registry_credentials_workspace_host", ["workspace_id", "host"])
      .execute();
  },
};

// Migration 0009_releases_config_deletion: configuration and secrets per environment
// and per revision, the data keys that encrypt secrets (envelope encryption), releases of
// arbitrary objects, scheduled jobs, and deletion of environments, projects and workspaces.
//
//  - desired_objects.environment_id: the environment an object belongs to, so deleting an
//    environment finds every streamed object of it, of every kind, with one indexed read
//    (back-filled here for deployments and sentinels);
//  - deleting_at on workspaces, projects and environments: a deletion in progress;
//  - environment_config / environment_secrets: the values new revisions get; a secret's value is
//    stored only as AES-256-GCM ciphertext under its environment's data key;
//  - deployments.config / secrets / external_secrets / secrets_digest: each revision's own copy
//    (immutable, so `rollout undo` restores the configuration of the revision it goes back to);
//  - data_keys: per environment, a random data key wrapped by the installation's master key
//    (rotating the master key rewraps these rows, never the values);
//  - releases, release_objects (the current version's objects), release_kinds (every kind a
//    release ever had: the prune sweep's inventory), release_status (per region);
//  - jobs, job_status (per region);
//  - pending_deletions (per object and region until its agent confirms), deletions, audit_log.
// Never edit once shipped.
import { sql, type Kysely } from "kysely";
import type { KraneMigration, MigrationDialect } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>, dialect: MigrationDialect): Promise<void> {
    await db.schema.alterTable("desired_objects").addColumn("environment_id", "text").execute();
    await sql`UPDATE desired_objects SET environment_id = (SELECT d.environment_id FROM deployments d WHERE d.id = desired_objects.object_id) WHERE kind = 'deployment'`.execute(
      db,
    );
    await sql`UPDATE desired_objects SET environment_id = (SELECT s.environment_id FROM sentinels s WHERE s.id = desired_objects.object_id) WHERE kind = 'sentinel'`.execute(
      db,
    );
    await db.schema
      .createIndex("desired_objects_environment")
      .on("desired_objects")
      .columns(["environment_id"])
      .execute();

    for (const table of ["workspaces", "projects", "environments"]) {
      await db.schema.alterTable(table).addColumn("deleting_at", "bigint").execute();
    }

    await db.schema
      .createTable("environment_config")
      .addColumn("environment_id", "text", (c) => c.notNull())
      .addColumn("key", "text", (c) => c.notNull())
      .addColumn("value", "text", (c) => c.notNull())
      .addColumn("updated_at", "bigint", (c) => c.notNull())
      .addPrimaryKeyConstraint("environment_config_pk", ["environment_id", "key"])
      .execute();

    await db.schema
      .createTable("environment_secrets")
      .addColumn("environment_id", "text", (c) => c.notNull())
      .addColumn("key", "text", (c) => c.notNull())
      .addColumn("source", "text", (c) => c.notNull())
      .addColumn("ciphertext", dialect.binaryType)
      .addColumn("external_path", "text")
      .addColumn("updated_at", "bigint", (c) => c.notNull())
      .addPrimaryKeyConstraint("environment_secrets_pk", ["environment_id", "key"])
      .execute();

    await db.schema.alterTable("deployments").addColumn("config", "text").execute();
    await db.schema.alterTable("deployments").addColumn("secrets", dialect.binaryType).execute();
    await db.schema.alterTable("deployments").addColumn("secret_keys", "text").execute();
    await db.schema.alterTable("deployments").addColumn("secrets_digest", "text").execute();
    await db.schema.alterTable("deployments").addColumn("external_secrets", "text").execute();

    await db.schema
      .createTable("data_keys")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("environment_id", "text", (c) => c.notNull().unique())
      .addColumn("wrapped", dialect.binaryType, (c) => c.notNull())
      .addColumn("master_key_id", "text", (c) => c.notNull())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .addColumn("rotated_at", "bigint")
      .execute();

    await db.schema
      .createTable("releases")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("project_id", "text", (c) => c.notNull())
      .addColumn("environment_id", "text", (c) => c.notNull())
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("version", "bigint", (c) => c.notNull())
      .addColumn("digest", "text", (c) => c.notNull())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .addColumn("updated_at", "bigint", (c) => c.notNull())
      .addUniqueConstraint("releases_environment_name", ["environment_id", "name"])
      .execute();

    await db.schema
      .createTable("release_objects")
      .addColumn("release_id", "text", (c) => c.notNull())
      .addColumn("object_id", "text", (c) => c.notNull())
      .addColumn("seq", "integer", (c) => c.notNull())
      .addColumn("api_group", "text", (c) => c.notNull())
      .addColumn("api_version", "text", (c) => c.notNull())
      .addColumn("kind", "text", (c) => c.notNull())
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("manifest", "text", (c) => c.notNull())
      .addColumn("sealed", dialect.binaryType)
      .addPrimaryKeyConstraint("release_objects_pk", ["release_id", "object_id"])
      .execute();

    await db.schema
      .createTable("release_kinds")
      .addColumn("release_id", "text", (c) => c.notNull())
      .addColumn("api_group", "text", (c) => c.notNull())
      .addColumn("api_version", "text", (c) => c.notNull())
      .addColumn("kind", "text", (c) => c.notNull())
      .addPrimaryKeyConstraint("release_kinds_pk", ["release_id", "api_group", "api_version", "kind"])
      .execute();

    await db.schema
      .createTable("release_status")
      .addColumn("release_id", "text", (c) => c.notNull())
      .addColumn("region", "text", (c) => c.notNull())
      .addColumn("observed_version", "bigint", (c) => c.notNull())
      .addColumn("objects", "text", (c) => c.notNull())
      .addColumn("rejected_reason", "text")
      .addColumn("reported_at", "bigint", (c) => c.notNull())
      .addPrimaryKeyConstraint("release_status_pk", ["release_id", "region"])
      .execute();

    await db.schema
      .createTable("jobs")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("project_id", "text", (c) => c.notNull())
      .addColumn("environment_id", "text", (c) => c.notNull())
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("k8s_name", "text", (c) => c.notNull())
      .addColumn("spec", "text", (c) => c.notNull())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .addColumn("updated_at", "bigint", (c) => c.notNull())
      .addUniqueConstraint("jobs_environment_name", ["environment_id", "name"])
      .execute();

    await db.schema
      .createTable("job_status")
      .addColumn("job_id", "text", (c) => c.notNull())
      .addColumn("region", "text", (c) => c.notNull())
      .addColumn("runs", "text", (c) => c.notNull())
      .addColumn("last_schedule", "bigint", (c) => c.notNull())
      .addColumn("rejected_reason", "text")
      .addColumn("reported_at", "bigint", (c) => c.notNull())
      .addPrimaryKeyConstraint("job_status_pk", ["job_id", "region"])
      .execute();

    await db.schema
      .createTable("deletions")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("scope", "text", (c) => c.notNull())
      .addColumn("requested_at", "bigint", (c) => c.notNull())
      .addColumn("forced_regions", "text", (c) => c.notNull())
      .execute();

    await db.schema
      .createTable("pending_deletions")
      .addColumn("environment_id", "text", (c) => c.notNull())
      .addColumn("region", "text", (c) => c.notNull())
      .addColumn("kind", "text", (c) => c.notNull())
      .addColumn("object_id", "text", (c) => c.notNull())
      .addColumn("requested_at", "bigint", (c) => c.notNull())
      .addPrimaryKeyConstraint("pending_deletions_pk", ["environment_id", "region", "kind", "object_id"])
      .execute();
    await db.schema
      .createIndex("pending_deletions_object")
      .on("pending_deletions")
      .columns(["kind", "object_id", "region"])
      .execute();

    await db.schema
      .createTable("audit_log")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("at", "bigint", (c) => c.notNull())
      .addColumn("actor", "text", (c) => c.notNull())
      .addColumn("action", "text", (c) => c.notNull())
      .addColumn("target_id", "text", (c) => c.notNull())
      .addColumn("detail", "text", (c) => c.notNull())
      .execute();
  },
};

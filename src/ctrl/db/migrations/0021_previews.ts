// Migration 0021_previews: preview environments.
//   - previews: one per preview, the environment it runs as (null while a fork's preview waits
//     for approval), where it came from (the CLI or a pull request of a hook), its image, region,
//     resources, expiry and state, and what was last reported to the pull request's commit status;
//   - preview_limits: a workspace's limits on its previews (none: the defaults);
//   - preview_hooks: a pull-request webhook of a project's environment (GitHub or GitLab), its
//     secret and the commit-status token sealed with that environment's data key;
//   - webhook_deliveries: the deliveries a hook accepted, kept for the replay window.
// Never edit once shipped.
import type { Kysely } from "kysely";
import type { KraneMigration, MigrationDialect } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>, dialect: MigrationDialect): Promise<void> {
    await db.schema
      .createTable("previews")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("project_id", "text", (c) => c.notNull())
      .addColumn("base_environment_id", "text", (c) => c.notNull())
      .addColumn("environment_id", "text")
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("source", "text", (c) => c.notNull())
      .addColumn("hook_id", "text")
      .addColumn("repository", "text", (c) => c.notNull())
      .addColumn("pr_number", "bigint", (c) => c.notNull())
      .addColumn("head_sha", "text", (c) => c.notNull())
      .addColumn("fork", "integer", (c) => c.notNull())
      .addColumn("with_secrets", "integer", (c) => c.notNull())
      .addColumn("image", "text", (c) => c.notNull())
      .addColumn("region", "text", (c) => c.notNull())
      .addColumn("cpu_millicores", "bigint", (c) => c.notNull())
      .addColumn("memory_mib", "bigint", (c) => c.notNull())
      .addColumn("ttl_ms", "bigint", (c) => c.notNull())
      .addColumn("expires_at", "bigint", (c) => c.notNull())
      .addColumn("state", "text", (c) => c.notNull())
      .addColumn("approved_at", "bigint")
      .addColumn("status_reported", "text", (c) => c.notNull())
      .addColumn("status_due_at", "bigint")
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .addColumn("updated_at", "bigint", (c) => c.notNull())
      .execute();
    await db.schema.createIndex("previews_name").on("previews").columns(["project_id", "name"]).unique().execute();
    await db.schema.createIndex("previews_environment").on("previews").columns(["environment_id"]).execute();
    await db.schema.createIndex("previews_workspace").on("previews").columns(["workspace_id", "name"]).execute();
    await db.schema.createIndex("previews_expiry").on("previews").columns(["expires_at"]).execute();
    await db.schema.createIndex("previews_status_due").on("previews").columns(["status_due_at"]).execute();

    await db.schema
      .createTable("preview_limits")
      .addColumn("workspace_id", "text", (c) => c.primaryKey())
      .addColumn("max_previews", "bigint", (c) => c.notNull())
      .addColumn("max_cpu_millicores", "bigint", (c) => c.notNull())
      .addColumn("max_memory_mib", "bigint", (c) => c.notNull())
      .addColumn("fork_approval", "integer", (c) => c.notNull())
      .addColumn("updated_at", "bigint", (c) => c.notNull())
      .execute();

    await db.schema
      .createTable("preview_hooks")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("project_id", "text", (c) => c.notNull())
      .addColumn("base_environment_id", "text", (c) => c.notNull())
      .addColumn("provider", "text", (c) => c.notNull())
      .addColumn("repository", "text", (c) => c.notNull())
      // "hmac-sha256" (GitHub), "signing-token" or "secret-token" (GitLab).
      .addColumn("verification", "text", (c) => c.notNull())
      .addColumn("secret_sealed", dialect.binaryType, (c) => c.notNull())
      .addColumn("status_token_sealed", dialect.binaryType)
      .addColumn("status_api_url", "text", (c) => c.notNull())
      .addColumn("image_template", "text", (c) => c.notNull())
      .addColumn("region", "text", (c) => c.notNull())
      .addColumn("ttl_ms", "bigint", (c) => c.notNull())
      .addColumn("with_secrets", "integer", (c) => c.notNull())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex("preview_hooks_environment")
      .on("preview_hooks")
      .columns(["base_environment_id"])
      .execute();

    await db.schema
      .createTable("webhook_deliveries")
      .addColumn("hook_id", "text", (c) => c.notNull())
      .addColumn("delivery_id", "text", (c) => c.notNull())
      .addColumn("received_at", "bigint", (c) => c.notNull())
      .addPrimaryKeyConstraint("webhook_deliveries_pk", ["hook_id", "delivery_id"])
      .execute();
    await db.schema
      .createIndex("webhook_deliveries_received")
      .on("webhook_deliveries")
      .columns(["received_at"])
      .execute();
  },
};

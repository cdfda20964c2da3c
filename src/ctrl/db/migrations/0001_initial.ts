// Migration 0001_initial: the tables of the first release (tenancy, deployments, sentinels,
// desired state, the outbox and its version counters, regions, clusters, API tokens, reports).
// Never edit once shipped; add a migration instead.
import type { Kysely } from "kysely";
import type { KraneMigration, MigrationDialect } from "./migration.js";

export const migration: KraneMigration = {
  async up(db: Kysely<unknown>, dialect: MigrationDialect): Promise<void> {
    await db.schema
      .createTable("workspaces")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("slug", "text", (c) => c.notNull().unique())
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("k8s_namespace", "text", (c) => c.notNull().unique())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .execute();

    await db.schema
      .createTable("projects")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull().references("workspaces.id"))
      .addColumn("slug", "text", (c) => c.notNull())
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .addUniqueConstraint("projects_workspace_slug", ["workspace_id", "slug"])
      .execute();

    await db.schema
      .createTable("environments")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("project_id", "text", (c) => c.notNull().references("projects.id"))
      .addColumn("slug", "text", (c) => c.notNull())
      .addColumn("sentinel_image", "text")
      .addColumn("sentinel_replicas", "integer", (c) => c.notNull())
      .addColumn("sentinel_cpu_millicores", "integer", (c) => c.notNull())
      .addColumn("sentinel_memory_mib", "integer", (c) => c.notNull())
      .addColumn("strategy", "text", (c) => c.notNull())
      .addColumn("max_surge", "text", (c) => c.notNull())
      .addColumn("max_unavailable", "text", (c) => c.notNull())
      .addColumn("min_ready_seconds", "integer", (c) => c.notNull())
      .addColumn("progress_deadline_seconds", "integer", (c) => c.notNull())
      .addColumn("revision_history_limit", "integer", (c) => c.notNull())
      .addColumn("paused", "integer", (c) => c.notNull())
      .addColumn("last_revision", "bigint", (c) => c.notNull())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .addColumn("updated_at", "bigint", (c) => c.notNull())
      .addUniqueConstraint("environments_project_slug", ["project_id", "slug"])
      .execute();

    await db.schema
      .createTable("regions")
      .addColumn("name", "text", (c) => c.primaryKey())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .execute();

    await db.schema
      .createTable("environment_regions")
      .addColumn("environment_id", "text", (c) => c.notNull().references("environments.id"))
      .addColumn("region", "text", (c) => c.notNull().references("regions.name"))
      .addColumn("replicas", "integer", (c) => c.notNull())
      .addPrimaryKeyConstraint("environment_regions_pk", ["environment_id", "region"])
      .execute();

    await db.schema
      .createTable("deployments")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("project_id", "text", (c) => c.notNull())
      .addColumn("environment_id", "text", (c) => c.notNull().references("environments.id"))
      .addColumn("revision", "bigint", (c) => c.notNull())
      .addColumn("k8s_name", "text", (c) => c.notNull().unique())
      .addColumn("image", "text", (c) => c.notNull())
      .addColumn("command", "text", (c) => c.notNull())
      .addColumn("args", "text", (c) => c.notNull())
      .addColumn("port", "integer", (c) => c.notNull())
      .addColumn("env", "text", (c) => c.notNull())
      .addColumn("cpu_millicores", "integer", (c) => c.notNull())
      .addColumn("memory_mib", "integer", (c) => c.notNull())
      .addColumn("health_check", "text")
      .addColumn("build_id", "text", (c) => c.notNull())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .addUniqueConstraint("deployments_environment_revision", ["environment_id", "revision"])
      .execute();

    await db.schema
      .createTable("sentinels")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("project_id", "text", (c) => c.notNull())
      .addColumn("environment_id", "text", (c) => c.notNull().references("environments.id"))
      .addColumn("region", "text", (c) => c.notNull())
      .addColumn("k8s_name", "text", (c) => c.notNull().unique())
      .addColumn("health", "text", (c) => c.notNull())
      .addColumn("available_replicas", "integer", (c) => c.notNull())
      .addColumn("rejected_reason", "text")
      .addColumn("reported_at", "bigint")
      .addUniqueConstraint("sentinels_environment_region", ["environment_id", "region"])
      .execute();

    await db.schema
      .createTable("desired_objects")
      .addColumn("region", "text", (c) => c.notNull())
      .addColumn("kind", "text", (c) => c.notNull())
      .addColumn("object_id", "text", (c) => c.notNull())
      .addColumn("payload", dialect.binaryType, (c) => c.notNull())
      .addPrimaryKeyConstraint("desired_objects_pk", ["region", "kind", "object_id"])
      .execute();

    await db.schema
      .createTable("outbox")
      .addColumn("region", "text", (c) => c.notNull())
      .addColumn("kind", "text", (c) => c.notNull())
      .addColumn("version", "bigint", (c) => c.notNull())
      .addColumn("object_id", "text", (c) => c.notNull())
      .addColumn("op", "text", (c) => c.notNull())
      .addColumn("payload", dialect.binaryType, (c) => c.notNull())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .addPrimaryKeyConstraint("outbox_pk", ["region", "kind", "version"])
      .execute();

    await db.schema
      .createTable("stream_versions")
      .addColumn("region", "text", (c) => c.notNull())
      .addColumn("kind", "text", (c) => c.notNull())
      .addColumn("version", "bigint", (c) => c.notNull())
      .addColumn("compacted_through", "bigint", (c) => c.notNull())
      .addPrimaryKeyConstraint("stream_versions_pk", ["region", "kind"])
      .execute();

    await db.schema
      .createTable("clusters")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("region", "text", (c) => c.notNull().references("regions.name"))
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("token_hash", "text", (c) => c.notNull().unique())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .addColumn("last_heartbeat_at", "bigint")
      .addColumn("agent_id", "text", (c) => c.notNull())
      .addColumn("build", "text", (c) => c.notNull())
      .addColumn("deployments_version", "bigint", (c) => c.notNull())
      .addColumn("sentinels_version", "bigint", (c) => c.notNull())
      .addUniqueConstraint("clusters_region_name", ["region", "name"])
      .execute();

    await db.schema
      .createTable("api_tokens")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("token_hash", "text", (c) => c.notNull().unique())
      .addColumn("created_at", "bigint", (c) => c.notNull())
      .execute();

    await db.schema
      .createTable("instances")
      .addColumn("deployment_id", "text", (c) => c.notNull())
      .addColumn("region", "text", (c) => c.notNull())
      .addColumn("k8s_name", "text", (c) => c.notNull())
      .addColumn("address", "text", (c) => c.notNull())
      .addColumn("status", "text", (c) => c.notNull())
      .addColumn("cpu_millicores", "bigint", (c) => c.notNull())
      .addColumn("memory_mib", "bigint", (c) => c.notNull())
      .addColumn("node_name", "text", (c) => c.notNull())
      .addColumn("zone", "text", (c) => c.notNull())
      .addColumn("ready_since", "bigint", (c) => c.notNull())
      .addColumn("reported_at", "bigint", (c) => c.notNull())
      .addPrimaryKeyConstraint("instances_pk", ["deployment_id", "region", "k8s_name"])
      .execute();

    await db.schema
      .createTable("deployment_reports")
      .addColumn("deployment_id", "text", (c) => c.notNull())
      .addColumn("region", "text", (c) => c.notNull())
      .addColumn("rejected_reason", "text")
      .addColumn("reported_at", "bigint", (c) => c.notNull())
      .addPrimaryKeyConstraint("deployment_reports_pk", ["deployment_id", "region"])
      .execute();

    await db.schema
      .createIndex("deployments_environment")
      .on("deployments")
      .columns(["environment_id", "revision"])
      .execute();
    await db.schema
      .createIndex("desired_objects_object")
      .on("desired_objects")
      .columns(["kind", "object_id"])
      .execute();
    await db.schema.createIndex("outbox_created_at").on("outbox").column("created_at").execute();
  },
};

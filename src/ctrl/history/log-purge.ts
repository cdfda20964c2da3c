// The log history's part of a deletion (tables log_lines and log_retention, kept by
// ../logs/history.ts): a purged environment's lines and a purged workspace's retention go in the
// purge's transaction (../domain/deletion.ts), not at the end of their retention. Here, not in
// logs/, because the deletion's domain layer sits below logs/ (which imports auth/).
import type { Kysely } from "kysely";
import type { Database } from "../db/schema.js";

type Db = Kysely<Database>;

/** Deletes an environment's kept lines. */
export async function purgeEnvironmentLogs(db: Db, environmentId: string): Promise<void> {
  await db.deleteFrom("log_lines").where("environment_id", "=", environmentId).execute();
}

/** Deletes what is left of a workspace's log history: any line, and its own retention. */
export async function purgeWorkspaceLogs(db: Db, workspaceId: string): Promise<void> {
  await db.deleteFrom("log_lines").where("workspace_id", "=", workspaceId).execute();
  await db.deleteFrom("log_retention").where("workspace_id", "=", workspaceId).execute();
}

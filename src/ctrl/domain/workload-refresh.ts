// What a workspace-wide setting that every workload payload carries changes (the pull Secret:
// ./pull-secrets.ts; the quota: ./quota-settings.ts): in the setting's transaction, every
// revision desired in a region is rendered again (through setDesiredReplicas, at the count it
// has) and the environments' cron jobs with it, so agents get the new value and nothing
// half-applied is ever streamed.
import type { WriteTx } from "../db/outbox.js";
import { deploymentPayloads } from "../payloads/deployment.js";
import { setDesiredReplicas } from "./deployments.js";
import { syncEnvironmentObjects } from "./environment-objects.js";
import { lockEnvironment } from "./environments.js";

/** Re-renders the workspace's desired revisions and cron jobs with its settings as they are now. */
export async function refreshWorkspaceWorkloads(tx: WriteTx, workspaceId: string): Promise<void> {
  const workspace = await tx.trx
    .selectFrom("workspaces")
    .selectAll()
    .where("id", "=", workspaceId)
    .executeTakeFirstOrThrow();
  const envIds = await tx.trx
    .selectFrom("environments")
    .select("id")
    .where("workspace_id", "=", workspaceId)
    .orderBy("id")
    .execute();
  for (const { id } of envIds) {
    // Exclusively, as every write that changes what a rollout pass reads (the counts kept here).
    const environment = await lockEnvironment(tx, id, "update");
    if (!environment) continue;
    const project = await tx.trx
      .selectFrom("projects")
      .selectAll()
      .where("id", "=", environment.project_id)
      .executeTakeFirstOrThrow();
    const desired = await tx.trx
      .selectFrom("desired_objects as o")
      .innerJoin("deployments as d", "d.id", "o.object_id")
      .selectAll("d")
      .select(["o.region as desired_region", "o.replicas as desired_count"])
      .where("o.kind", "=", deploymentPayloads.name)
      .where("d.environment_id", "=", id)
      .orderBy("o.region")
      .orderBy("d.revision")
      .execute();
    for (const { desired_region, desired_count, ...deployment } of desired)
      await setDesiredReplicas(tx, { workspace, project, environment, deployment }, desired_region, desired_count ?? 0);
    await syncEnvironmentObjects(tx, environment, workspace);
  }
}

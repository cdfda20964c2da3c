// No table of its own: adding, replacing or removing a workspace's registry credential
// (./registries.ts) and, in the same transaction, re-rendering what names the workspace's pull
// Secret — every revision desired in a region (through setDesiredReplicas, at the count it has)
// and the environments' cron jobs — so the agents write the Secret's new content, or delete it
// with the last credential, and nothing half-applied is ever streamed.
import type { WriteTx } from "../db/outbox.js";
import type { Store } from "../db/store.js";
import { deploymentPayloads } from "../payloads/deployment.js";
import { setDesiredReplicas } from "./deployments.js";
import { syncEnvironmentObjects } from "./environment-objects.js";
import { lockEnvironment } from "./environments.js";
import { putRegistryCredentialIn, removeRegistryCredentialIn, type RegistryCredentialInfo } from "./registries.js";
import type { Keyring } from "../secrets/keyring.js";

/** Re-renders the workspace's desired revisions and cron jobs with its pull Secret as it is now. */
export async function refreshPullSecrets(tx: WriteTx, workspaceId: string): Promise<void> {
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

/** `krane registry add`: stores the credential and re-renders what names the pull Secret. */
export async function addRegistry(
  store: Store,
  keyring: Keyring,
  workspaceRef: string,
  host: string,
  username: string,
  password: string,
): Promise<{ credential: RegistryCredentialInfo; replaced: boolean }> {
  return store.write(async (tx) => {
    const put = await putRegistryCredentialIn(tx, keyring, workspaceRef, host, username, password);
    await refreshPullSecrets(tx, put.workspaceId);
    return { credential: put.credential, replaced: put.replaced };
  });
}

/** `krane registry remove`: forgets the credential; not_found when there is none. */
export async function removeRegistry(store: Store, workspaceRef: string, host: string): Promise<void> {
  await store.write(async (tx) => refreshPullSecrets(tx, await removeRegistryCredentialIn(tx, workspaceRef, host)));
}

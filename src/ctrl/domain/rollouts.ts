// The rollout records of an environment's regions (tables rollouts, rollout_revisions,
// rollout_events; the rollout driver in ../rollout reads and writes them in its passes): what
// other domain writes need of them — the record to lock, a joining region starting on its
// siblings' revision, and a region's records going when the environment leaves it.
import type { DeploymentStatus } from "../../rollout/index.js";
import type { WriteTx } from "../db/outbox.js";
import type { RolloutsTable } from "../db/schema.js";

/** The status of a rollout record before its first pass. */
export const EMPTY_STATUS: DeploymentStatus = {
  replicas: 0,
  updatedReplicas: 0,
  readyReplicas: 0,
  availableReplicas: 0,
  unavailableReplicas: 0,
};

/** Creates the region's rollout record if missing (so it can be locked). */
export async function ensureRolloutRow(tx: WriteTx, environmentId: string, region: string): Promise<void> {
  await tx.trx
    .insertInto("rollouts")
    .values({
      environment_id: environmentId,
      region,
      target_deployment_id: null,
      target_seen_revision: 0,
      rollback_to: null,
      status: JSON.stringify(EMPTY_STATUS),
      conditions: "[]",
      observed_spec: "",
      requeue_at: null,
      updated_at: tx.now,
    })
    .onConflict((oc) => oc.columns(["environment_id", "region"]).doNothing())
    .execute();
}

/**
 * The region's rollout record, created if missing and locked for the rest of the transaction, so
 * passes of one (environment, region) from several ctrl replicas run one after the other.
 */
export async function lockRolloutRow(tx: WriteTx, environmentId: string, region: string): Promise<RolloutsTable> {
  await ensureRolloutRow(tx, environmentId, region);
  const q = tx.trx
    .selectFrom("rollouts")
    .selectAll()
    .where("environment_id", "=", environmentId)
    .where("region", "=", region);
  return tx.dialect.lockRows(q, "update").executeTakeFirstOrThrow();
}

/**
 * Starts a joining region's rollout record on the revision another region of the environment
 * targets. With none (no pass has run anywhere yet) the driver picks the newest revision itself.
 */
export async function startLikeSiblings(tx: WriteTx, environmentId: string, region: string): Promise<void> {
  const sibling = await tx.trx
    .selectFrom("rollouts")
    .select(["target_deployment_id", "target_seen_revision"])
    .where("environment_id", "=", environmentId)
    .where("region", "!=", region)
    .where("target_deployment_id", "is not", null)
    .orderBy("region")
    .executeTakeFirst();
  if (!sibling) return;
  await ensureRolloutRow(tx, environmentId, region);
  await tx.trx
    .updateTable("rollouts")
    // The sibling's seen revision, not last_revision: a deployment the sibling has not picked up
    // yet must still retarget the new region too.
    .set({
      target_deployment_id: sibling.target_deployment_id,
      target_seen_revision: sibling.target_seen_revision,
      updated_at: tx.now,
    })
    .where("environment_id", "=", environmentId)
    .where("region", "=", region)
    .execute();
}

/** Deletes the rollout records of an environment in a region it leaves. */
export async function forgetRolloutRegion(tx: WriteTx, environmentId: string, region: string): Promise<void> {
  await tx.trx
    .deleteFrom("rollout_events")
    .where("environment_id", "=", environmentId)
    .where("region", "=", region)
    .execute();
  await tx.trx
    .deleteFrom("rollout_revisions")
    .where("environment_id", "=", environmentId)
    .where("region", "=", region)
    .execute();
  await tx.trx
    .deleteFrom("rollouts")
    .where("environment_id", "=", environmentId)
    .where("region", "=", region)
    .execute();
}

// The rollout records of an environment (tables rollouts, rollout_revisions, rollout_events and
// progressive_rollouts): per region the Deployment-like record the engine works on, per revision
// and region the ReplicaSet-like record, recent events, and a progressive strategy's state. The
// rollout driver (../rollout) decides; these functions are how its decisions, and what other
// writes need of the records (the record to lock, a joining region starting on its siblings'
// revision, a region's records going when the environment leaves it, a pending undo), are stored.
import { sql } from "kysely";
import type { Condition, DeploymentStatus } from "../../rollout/index.js";
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

/** Changes a region's rollout record. */
async function updateRecord(
  tx: WriteTx,
  environmentId: string,
  region: string,
  patch: Partial<Omit<RolloutsTable, "environment_id" | "region" | "updated_at">>,
): Promise<void> {
  await tx.trx
    .updateTable("rollouts")
    .set({ ...patch, updated_at: tx.now })
    .where("environment_id", "=", environmentId)
    .where("region", "=", region)
    .execute();
}

/** Creates the region's rollout record if missing (so it can be locked). */
export async function ensureRolloutRow(tx: WriteTx, environmentId: string, region: string): Promise<void> {
  tx.environmentChanged(environmentId);
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
      warm_deployment_id: null,
      warm_replicas: 0,
      warm_until: null,
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
  tx.environmentChanged(environmentId);
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
  // The sibling's seen revision, not last_revision: a deployment the sibling has not picked up
  // yet must still retarget the new region too.
  await updateRecord(tx, environmentId, region, {
    target_deployment_id: sibling.target_deployment_id,
    target_seen_revision: sibling.target_seen_revision,
  });
}

/** Deletes the rollout records of an environment in a region it leaves. */
export async function forgetRolloutRegion(tx: WriteTx, environmentId: string, region: string): Promise<void> {
  tx.environmentChanged(environmentId);
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

/** Records a pending rollback in a region: null = the previous revision. */
export async function requestRollback(
  tx: WriteTx,
  environmentId: string,
  region: string,
  toRevision: number | null,
): Promise<void> {
  tx.environmentChanged(environmentId);
  await ensureRolloutRow(tx, environmentId, region);
  await updateRecord(tx, environmentId, region, { rollback_to: toRevision ?? 0 });
}

/** What one rolling pass leaves on the region's record. */
export interface PassRecord {
  targetDeploymentId: string | null;
  targetSeenRevision: number;
  rollbackTo: number | null;
  status: DeploymentStatus;
  conditions: Condition[];
  observedSpec: string;
  requeueAt: number | null;
  /** The revision kept warm (../rollout/warm.ts), or null. */
  warm: { deploymentId: string; replicas: number; until: number | null } | null;
}

/** Stores a pass's outcome on the region's record (which the pass holds locked). */
export async function recordPass(tx: WriteTx, environmentId: string, region: string, p: PassRecord): Promise<void> {
  tx.environmentChanged(environmentId);
  await updateRecord(tx, environmentId, region, {
    target_deployment_id: p.targetDeploymentId,
    target_seen_revision: p.targetSeenRevision,
    rollback_to: p.rollbackTo,
    status: JSON.stringify(p.status),
    conditions: JSON.stringify(p.conditions),
    observed_spec: p.observedSpec,
    requeue_at: p.requeueAt,
    warm_deployment_id: p.warm?.deploymentId ?? null,
    warm_replicas: p.warm?.replicas ?? 0,
    warm_until: p.warm?.until ?? null,
  });
}

/** A region with no revision to roll out: no target, every revision up to `seenRevision` seen. */
export async function clearTarget(
  tx: WriteTx,
  environmentId: string,
  region: string,
  seenRevision: number,
): Promise<void> {
  tx.environmentChanged(environmentId);
  await updateRecord(tx, environmentId, region, {
    target_deployment_id: null,
    target_seen_revision: seenRevision,
    requeue_at: null,
    warm_deployment_id: null,
    warm_replicas: 0,
    warm_until: null,
  });
}

/**
 * Makes every region of the environment take its newest revision at its next pass, as if it had
 * not seen it yet (a pin was lifted: the target the pin held is no longer the one to keep).
 */
export async function retargetNewest(tx: WriteTx, environmentId: string): Promise<void> {
  tx.environmentChanged(environmentId);
  await tx.trx
    .updateTable("rollouts")
    .set({ target_seen_revision: 0, updated_at: tx.now })
    .where("environment_id", "=", environmentId)
    .execute();
}

/**
 * A progressive decision's target in a region (the canary, else the stable revision) and when to
 * decide again; creates the record if missing.
 */
export async function setDecidedTarget(
  tx: WriteTx,
  environmentId: string,
  region: string,
  target: { deploymentId: string | null; seenRevision: number; requeueAt: number | null },
): Promise<void> {
  tx.environmentChanged(environmentId);
  await ensureRolloutRow(tx, environmentId, region);
  await updateRecord(tx, environmentId, region, {
    target_deployment_id: target.deploymentId,
    target_seen_revision: target.seenRevision,
    requeue_at: target.requeueAt,
  });
}

/** A revision's record in a region (created or replaced). */
export async function putRevisionRecord(
  tx: WriteTx,
  r: {
    deploymentId: string;
    environmentId: string;
    region: string;
    revision: number | null;
    desiredReplicas: number | null;
    maxReplicas: number | null;
  },
): Promise<void> {
  tx.environmentChanged(r.environmentId);
  const values = { revision: r.revision, desired_replicas: r.desiredReplicas, max_replicas: r.maxReplicas };
  await tx.trx
    .insertInto("rollout_revisions")
    .values({ deployment_id: r.deploymentId, environment_id: r.environmentId, region: r.region, ...values })
    .onConflict((oc) => oc.columns(["deployment_id", "region"]).doUpdateSet(values))
    .execute();
}

/** Drops the records of revisions in a region (retired by history cleanup, or deleted). */
export async function dropRevisionRecords(
  tx: WriteTx,
  region: string,
  deploymentIds: readonly string[],
): Promise<void> {
  if (deploymentIds.length === 0) return;
  await tx.trx
    .deleteFrom("rollout_revisions")
    .where("region", "=", region)
    .where("deployment_id", "in", [...deploymentIds])
    .execute();
}

/** Events kept per (environment, region). */
export const EVENTS_KEPT = 50;

/**
 * Appends a pass's events, numbered after the region's last one, keeping the newest EVENTS_KEPT.
 * Only those are written: a pass that retires thousands of revisions emits an event for each,
 * and one INSERT of them all would exceed SQLite's limit on bound parameters.
 */
export async function appendEvents(
  tx: WriteTx,
  environmentId: string,
  region: string,
  events: readonly { type: string; reason: string; message: string }[],
): Promise<void> {
  tx.environmentChanged(environmentId);
  const last = await tx.trx
    .selectFrom("rollout_events")
    .select(sql<number | null>`max(seq)`.as("seq"))
    .where("environment_id", "=", environmentId)
    .where("region", "=", region)
    .executeTakeFirst();
  const first = Number(last?.seq ?? 0) + 1;
  const kept = events.slice(-EVENTS_KEPT);
  let seq = first + events.length - kept.length - 1;
  await tx.trx
    .insertInto("rollout_events")
    .values(
      kept.map((e) => ({
        environment_id: environmentId,
        region,
        seq: ++seq,
        at: tx.now,
        type: e.type,
        reason: e.reason,
        message: e.message,
      })),
    )
    .execute();
  await tx.trx
    .deleteFrom("rollout_events")
    .where("environment_id", "=", environmentId)
    .where("region", "=", region)
    .where("seq", "<=", seq - EVENTS_KEPT)
    .execute();
}

// ---------------------------------------------------------------- progressive strategies

/** Stores a progressive decision's state (JSON ProgressiveState) and wake time; a pending command is consumed. */
export async function saveProgressiveState(
  tx: WriteTx,
  environmentId: string,
  state: string,
  wakeAt: number | null,
): Promise<void> {
  tx.environmentChanged(environmentId);
  const values = { state, command: null, wake_at: wakeAt, updated_at: tx.now };
  await tx.trx
    .insertInto("progressive_rollouts")
    .values({ environment_id: environmentId, ...values })
    .onConflict((oc) => oc.column("environment_id").doUpdateSet(values))
    .execute();
}

/** Records a promote or abort for the next decision (`initialState`: the state of a rollout not decided yet). */
export async function setProgressiveCommand(
  tx: WriteTx,
  environmentId: string,
  command: "promote" | "abort",
  initialState: string,
): Promise<void> {
  tx.environmentChanged(environmentId);
  await tx.trx
    .insertInto("progressive_rollouts")
    .values({ environment_id: environmentId, state: initialState, command, wake_at: null, updated_at: tx.now })
    .onConflict((oc) => oc.column("environment_id").doUpdateSet({ command, updated_at: tx.now }))
    .execute();
}

/** Forgets a progressive strategy's state (the environment left the strategy). */
export async function dropProgressiveState(tx: WriteTx, environmentId: string): Promise<void> {
  tx.environmentChanged(environmentId);
  await tx.trx.deleteFrom("progressive_rollouts").where("environment_id", "=", environmentId).execute();
}

/** Deletes every rollout record of an environment (the end of its deletion). */
export async function purgeRollouts(tx: WriteTx, environmentId: string): Promise<void> {
  await tx.trx.deleteFrom("rollouts").where("environment_id", "=", environmentId).execute();
  await tx.trx.deleteFrom("rollout_revisions").where("environment_id", "=", environmentId).execute();
  await tx.trx.deleteFrom("rollout_events").where("environment_id", "=", environmentId).execute();
  await dropProgressiveState(tx, environmentId);
}

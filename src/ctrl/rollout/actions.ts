// What users do to a rollout (scale, pause, resume, undo, restart, promote, abort) as store
// writes through the tables' owners (../domain). The caller runs the driver afterwards; these
// functions only change the spec. What a rollout looks like is ../read/rollout.ts.
import type { Kysely } from "kysely";
import { INITIAL_STATE, type Command } from "../../rollout/progressive/index.js";
import type { Database, DeploymentRow, EnvironmentRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import type { WriteTx } from "../db/outbox.js";
import { insertDeployment, revisionCopyOf } from "../domain/deployments.js";
import {
  environmentRegions,
  lockEnvironment,
  setPaused as storePaused,
  setPinned,
  setRegionReplicas,
  touchEnvironment,
} from "../domain/environments.js";
import { policyInRegion } from "../domain/autoscale.js";
import { notify } from "../domain/notifications.js";
import { guardQuota } from "../domain/quotas.js";
import { requestRollback, retargetNewest, setProgressiveCommand as storeCommand } from "../domain/rollouts.js";
import { findEnvironment } from "../domain/tenancy.js";
import { failedPrecondition, invalidArgument, notFound } from "../errors.js";
import type { EnvironmentRef } from "../validate/types.js";
import { rollbackNotice } from "./notices.js";
import { chooseTarget, keepsWarm } from "./pass.js";
import { rollbackPlan, type RollbackPlan } from "./warm.js";

type Reader = Kysely<Database>;

/** Sets the environment's replicas in one region (or all); returns the environment id. */
export async function scaleEnvironment(
  store: Store,
  ref: EnvironmentRef,
  region: string | null,
  replicas: number,
): Promise<string> {
  return store.write(async (tx) => {
    const { environment } = await findEnvironment(tx.trx, ref);
    const quota = await guardQuota(tx, environment.workspace_id);
    // One writer per number: where the autoscaler sets the count, a person sets its bounds.
    for (const r of await environmentRegions(tx.trx, environment.id)) {
      if (region !== null && r.region !== region) continue;
      if ((await policyInRegion(tx.trx, environment, r.region)) !== null)
        throw failedPrecondition(
          `environment "${environment.slug}" autoscales in region "${r.region}": set its bounds instead (\`krane env update --autoscale min=…,max=…\`) or stop autoscaling there (\`--no-autoscale\`)`,
        );
    }
    if ((await setRegionReplicas(tx, environment.id, region, replicas)) === 0) {
      throw region !== null
        ? notFound(`region "${region}" of environment "${environment.slug}"`)
        : failedPrecondition(`environment "${environment.slug}" has no regions`);
    }
    await touchEnvironment(tx, environment.id);
    await quota.check();
    return environment.id;
  });
}

/** Pause, resume and undo are the rolling engine's; a progressive strategy has promote and abort. */
function refuseProgressive(environment: { slug: string; progressive: string | null }, what: string): void {
  if (environment.progressive !== null) {
    throw failedPrecondition(
      `environment "${environment.slug}" rolls out progressively: ${what} does not apply (use \`krane rollout promote\` or \`krane rollout abort\`)`,
    );
  }
}

export async function setPaused(store: Store, ref: EnvironmentRef, paused: boolean): Promise<string> {
  return store.write(async (tx) => {
    const { environment } = await findEnvironment(tx.trx, ref);
    refuseProgressive(environment, paused ? "pause" : "resume");
    await storePaused(tx, environment.id, paused);
    return environment.id;
  });
}

/**
 * Undo and restart choose a revision themselves; the pin `krane rollback` left would take the
 * target straight back (a restart's copy would take no traffic), so they ask for unpin first.
 */
function refusePinned(environment: Pick<EnvironmentRow, "slug" | "pinned_deployment_id">, what: string): void {
  if (environment.pinned_deployment_id !== null)
    throw failedPrecondition(
      `environment "${environment.slug}" is pinned by \`krane rollback\`: ${what} does not apply until \`krane rollback --unpin\``,
    );
}

/** Records a pending rollback in every region: null = the previous revision. */
export async function undoRollout(store: Store, ref: EnvironmentRef, toRevision: number | null): Promise<string> {
  return store.write(async (tx) => {
    const { environment } = await findEnvironment(tx.trx, ref);
    refuseProgressive(environment, "undo");
    refusePinned(environment, "undo");
    const regions = await environmentRegions(tx.trx, environment.id);
    if (regions.length === 0) throw failedPrecondition(`environment "${environment.slug}" has no regions`);
    if (toRevision !== null) {
      const found = await tx.trx
        .selectFrom("rollout_revisions")
        .select("region")
        .where("environment_id", "=", environment.id)
        .where("revision", "=", toRevision)
        .executeTakeFirst();
      if (!found)
        throw invalidArgument(
          "to_revision",
          `no region of environment "${environment.slug}" has revision ${toRevision}`,
        );
    }
    for (const r of regions) await requestRollback(tx, environment.id, r.region, toRevision);
    await notify(tx, { ...rollbackNotice(toRevision), environmentId: environment.id });
    return environment.id;
  });
}

/**
 * The revision the environment is rolling out to (the first region's target, else the newest;
 * after a rollback, the one gone back to): what `rollout restart` copies and what `deploy`
 * carries settings over from (domain/deployments.ts createDeployment). Undefined without one.
 */
export async function currentRevision(db: Reader, environmentId: string): Promise<DeploymentRow | undefined> {
  const deployments = await db
    .selectFrom("deployments")
    .selectAll()
    .where("environment_id", "=", environmentId)
    .execute();
  const row = await db
    .selectFrom("rollouts")
    .selectAll()
    .where("environment_id", "=", environmentId)
    .orderBy("region")
    .executeTakeFirst();
  const env = await db
    .selectFrom("environments")
    .select("pinned_deployment_id")
    .where("id", "=", environmentId)
    .executeTakeFirst();
  const t = chooseTarget(
    deployments,
    { targetId: row?.target_deployment_id ?? null, seenRevision: Number(row?.target_seen_revision ?? 0) },
    env?.pinned_deployment_id ?? null,
  );
  return t === null ? undefined : deployments.find((x) => x.id === t.targetId);
}

/**
 * A fresh copy of the current revision as a new revision: every pod gets replaced. Read and
 * written in one transaction with the environment locked, so a deploy committing meanwhile is
 * either copied or comes after the copy, never undone by it.
 */
export async function restartRollout(
  store: Store,
  ref: EnvironmentRef,
): Promise<{ environmentId: string; deploymentId: string }> {
  return store.write(async (tx) => {
    const envCtx = await findEnvironment(tx.trx, ref);
    const locked = await lockEnvironment(tx, envCtx.environment.id, "update");
    if (locked) refusePinned(locked, "restart");
    const d = await currentRevision(tx.trx, envCtx.environment.id);
    if (d === undefined) throw failedPrecondition("the environment has no deployment to restart");
    const copy = await insertDeployment(tx, envCtx, revisionCopyOf(d));
    return { environmentId: envCtx.environment.id, deploymentId: copy.deployment.id };
  });
}

/** Records a promote or abort for the next decision; refuses environments without a progressive strategy. */
export async function setProgressiveCommand(
  store: Store,
  environment: EnvironmentRow,
  command: Command,
): Promise<void> {
  await store.write(async (tx) => {
    const env = await lockEnvironment(tx, environment.id, "update");
    if (!env || env.progressive === null) {
      throw failedPrecondition(
        `environment "${environment.slug}" has no progressive strategy (set one with \`krane env update --strategy canary|blue-green\`)`,
      );
    }
    await storeCommand(tx, env.id, command, JSON.stringify(INITIAL_STATE));
  });
}

/**
 * `krane rollback`: pins the environment to the revision before the one it runs (./warm.ts
 * rollbackPlan): the warm one where regions keep it (the next pass switches traffic to its pods),
 * else a rolling update to it. With `instant`, refuses unless every region keeps it warm. One
 * transaction with the environment locked: nothing is half-applied.
 */
export async function rollbackEnvironment(
  store: Store,
  ref: EnvironmentRef,
  instant: boolean,
): Promise<RollbackPlan & { environmentId: string }> {
  return store.write(async (tx) => {
    const found = await findEnvironment(tx.trx, ref);
    const environment = await lockEnvironment(tx, found.environment.id, "update");
    if (!environment) throw notFound(`environment "${ref.environment}"`);
    if (environment.progressive !== null)
      throw failedPrecondition(
        `environment "${environment.slug}" rolls out progressively: rollback does not apply (use \`krane rollout abort\`)`,
      );
    // As Kubernetes refuses to undo a paused Deployment: a paused rollout changes nothing.
    if (environment.paused === 1)
      throw failedPrecondition(
        `environment "${environment.slug}" is paused: resume it first (\`krane rollout resume\`)`,
      );
    const regions = await environmentRegions(tx.trx, environment.id);
    if (regions.length === 0) throw failedPrecondition(`environment "${environment.slug}" has no regions`);
    const deployments = await tx.trx
      .selectFrom("deployments")
      .select(["id", "revision"])
      .where("environment_id", "=", environment.id)
      .execute();
    const rows = await tx.trx
      .selectFrom("rollouts")
      .select(["region", "warm_deployment_id"])
      .where("environment_id", "=", environment.id)
      .execute();
    const current = await currentRevision(tx.trx, environment.id);
    const plan = rollbackPlan({
      environment: environment.slug,
      current: current === undefined ? null : { id: current.id, revision: Number(current.revision) },
      deployments: deployments.map((d) => ({ id: d.id, revision: Number(d.revision) })),
      regions: regions.map((r) => ({
        region: r.region,
        replicas: r.replicas,
        warm: rows.find((x) => x.region === r.region)?.warm_deployment_id ?? null,
      })),
      instant,
      windowSeconds: environment.warm_window_seconds,
      keepsWarm: keepsWarm(environment),
    });
    await setPinned(tx, environment.id, plan.deploymentId);
    return { ...plan, environmentId: environment.id };
  });
}

/** `krane rollback --unpin`: lifts the pin, and every region rolls out to the newest revision. */
export async function unpinEnvironment(
  store: Store,
  ref: EnvironmentRef,
): Promise<{ environmentId: string; unpinned: boolean }> {
  return store.write(async (tx) => {
    const found = await findEnvironment(tx.trx, ref);
    const environment = await lockEnvironment(tx, found.environment.id, "update");
    if (!environment) throw notFound(`environment "${ref.environment}"`);
    const unpinned = await liftPin(tx, environment);
    return { environmentId: environment.id, unpinned };
  });
}

/** Lifts a pin in the caller's transaction (environment locked); false when there was none. */
export async function liftPin(tx: WriteTx, environment: EnvironmentRow): Promise<boolean> {
  if (environment.pinned_deployment_id === null) return false;
  await setPinned(tx, environment.id, null);
  await retargetNewest(tx, environment.id);
  return true;
}

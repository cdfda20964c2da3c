// What users do to a rollout (scale, pause, resume, undo, restart) as store writes, and the
// rollout read model (per region: revisions with counts, conditions, events, progress). The
// caller runs the driver afterwards; these functions only change the spec.
import type { Kysely } from "kysely";
import type { Condition, DeploymentStatus, RolloutEvent } from "../../rollout/index.js";
import type { Database, DeploymentRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { createDeployment, desiredReplicasOf, revisionCopyOf } from "../domain/deployments.js";
import { environmentRegions } from "../domain/environments.js";
import { ensureRolloutRow } from "../domain/rollouts.js";
import { findEnvironment, type EnvironmentContext } from "../domain/tenancy.js";
import { failedPrecondition, invalidArgument, notFound } from "../errors.js";
import type { EnvironmentRef } from "../validate/types.js";
import { chooseTarget } from "./pass.js";
import { EMPTY_STATUS, revisionStatus, rolloutProgress, specKey, type ProgressView } from "./plan.js";
import { progressiveView, type ProgressiveView } from "./progressive.js";

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
    let q = tx.trx.updateTable("environment_regions").set({ replicas }).where("environment_id", "=", environment.id);
    if (region !== null) q = q.where("region", "=", region);
    const res = await q.executeTakeFirst();
    if (Number(res.numUpdatedRows) === 0) {
      throw region !== null
        ? notFound(`region "${region}" of environment "${environment.slug}"`)
        : failedPrecondition(`environment "${environment.slug}" has no regions`);
    }
    await tx.trx.updateTable("environments").set({ updated_at: tx.now }).where("id", "=", environment.id).execute();
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
    await tx.trx
      .updateTable("environments")
      .set({ paused: paused ? 1 : 0, updated_at: tx.now })
      .where("id", "=", environment.id)
      .execute();
    return environment.id;
  });
}

/** Records a pending rollback in every region: null = the previous revision. */
export async function undoRollout(store: Store, ref: EnvironmentRef, toRevision: number | null): Promise<string> {
  return store.write(async (tx) => {
    const { environment } = await findEnvironment(tx.trx, ref);
    refuseProgressive(environment, "undo");
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
    for (const r of regions) {
      await ensureRolloutRow(tx, environment.id, r.region);
      await tx.trx
        .updateTable("rollouts")
        .set({ rollback_to: toRevision ?? 0, updated_at: tx.now })
        .where("environment_id", "=", environment.id)
        .where("region", "=", r.region)
        .execute();
    }
    return environment.id;
  });
}

/** The deployment the environment is rolling out to (the first region's target, else newest). */
async function currentTarget(db: Reader, environmentId: string): Promise<DeploymentRow> {
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
  const t = chooseTarget(deployments, {
    targetId: row?.target_deployment_id ?? null,
    seenRevision: Number(row?.target_seen_revision ?? 0),
  });
  const d = t === null ? undefined : deployments.find((x) => x.id === t.targetId);
  if (d === undefined) throw failedPrecondition("the environment has no deployment to restart");
  return d;
}

/** A fresh copy of the current target as a new revision: every pod gets replaced. */
export async function restartRollout(
  store: Store,
  ref: EnvironmentRef,
): Promise<{ environmentId: string; deploymentId: string }> {
  const { environment } = await findEnvironment(store.db, ref);
  const d = await currentTarget(store.db, environment.id);
  const copy = await createDeployment(store, {
    workspace: d.workspace_id,
    project: d.project_id,
    environment: d.environment_id,
    ...revisionCopyOf(d),
  });
  return { environmentId: environment.id, deploymentId: copy.deployment.id };
}

// ---------------------------------------------------------------- read model

export interface RevisionView {
  deployment: DeploymentRow;
  revision: number | null;
  desiredReplicas: number;
  currentReplicas: number;
  readyReplicas: number;
  availableReplicas: number;
  target: boolean;
}

export interface RegionRolloutView extends ProgressView {
  region: string;
  replicas: number;
  paused: boolean;
  targetDeploymentId: string | null;
  status: DeploymentStatus;
  conditions: Condition[];
  revisions: RevisionView[];
  events: (RolloutEvent & { at: number })[];
}

export interface RolloutView {
  environment: EnvironmentContext;
  regions: RegionRolloutView[];
  /** Set when the environment has a progressive strategy. */
  progressive: ProgressiveView | null;
}

export async function rolloutStatus(db: Reader, ref: EnvironmentRef, now: number): Promise<RolloutView> {
  const environment = await findEnvironment(db, ref);
  const env = environment.environment;
  const regions = await environmentRegions(db, env.id);
  const deployments = await db
    .selectFrom("deployments")
    .selectAll()
    .where("environment_id", "=", env.id)
    .orderBy("revision", "desc")
    .execute();
  const ids = deployments.map((d) => d.id);
  const rows = await db.selectFrom("rollouts").selectAll().where("environment_id", "=", env.id).execute();
  const records = await db.selectFrom("rollout_revisions").selectAll().where("environment_id", "=", env.id).execute();
  const desired = await desiredReplicasOf(db, ids);
  const instances = ids.length
    ? await db
        .selectFrom("instances")
        .select(["deployment_id", "region", "status", "ready_since"])
        .where("deployment_id", "in", ids)
        .execute()
    : [];
  const events = await db
    .selectFrom("rollout_events")
    .selectAll()
    .where("environment_id", "=", env.id)
    .orderBy("seq")
    .execute();

  const out: RegionRolloutView[] = [];
  for (const { region, replicas } of regions) {
    const row = rows.find((r) => r.region === region);
    const rollbackTo = row?.rollback_to === null || row === undefined ? null : Number(row.rollback_to);
    const policy = {
      replicas,
      strategy: env.strategy,
      maxSurge: env.max_surge,
      maxUnavailable: env.max_unavailable,
      minReadySeconds: env.min_ready_seconds,
      progressDeadlineSeconds: env.progress_deadline_seconds,
      revisionHistoryLimit: env.revision_history_limit,
      paused: env.paused === 1,
      rollbackTo,
    };
    const observed = row !== undefined && row.observed_spec === specKey(policy, Number(env.last_revision));
    const status = row ? (JSON.parse(row.status) as DeploymentStatus) : EMPTY_STATUS;
    const conditions = row ? (JSON.parse(row.conditions) as Condition[]) : [];
    const revisions: RevisionView[] = [];
    for (const d of deployments) {
      const rec = records.find((r) => r.deployment_id === d.id && r.region === region);
      const desiredReplicas = desired.get(region)?.get(d.id);
      if (rec === undefined && desiredReplicas === undefined) continue;
      const counts = revisionStatus(
        instances
          .filter((i) => i.deployment_id === d.id && i.region === region)
          .map((i) => ({ status: i.status, readySince: Number(i.ready_since) })),
        env.min_ready_seconds,
        now,
      );
      revisions.push({
        deployment: d,
        revision: rec?.revision === null || rec === undefined ? null : Number(rec.revision),
        desiredReplicas: desiredReplicas ?? 0,
        currentReplicas: counts.replicas,
        readyReplicas: counts.readyReplicas,
        availableReplicas: counts.availableReplicas,
        target: row?.target_deployment_id === d.id,
      });
    }
    out.push({
      region,
      replicas,
      paused: env.paused === 1,
      targetDeploymentId: row?.target_deployment_id ?? null,
      status,
      conditions,
      revisions,
      events: events
        .filter((e) => e.region === region)
        .map((e) => ({
          at: Number(e.at),
          type: e.type === "Warning" ? "Warning" : "Normal",
          reason: e.reason,
          message: e.message,
        })),
      ...rolloutProgress(replicas, status, conditions, observed),
    });
  }
  const progressive = await progressiveView(
    db,
    env,
    regions.map((r) => r.region),
  );
  if (progressive !== null) {
    // A progressive rollout's progress is the engine's phase, not the rolling engine's conditions.
    const st = progressive.state;
    const done = st.canary === null && st.phase === "Healthy";
    for (const r of out) {
      r.observed = progressive.pendingCommand === null;
      r.complete = done;
      r.failed = st.aborted;
      r.message = `${st.phase}${st.reason !== "" ? `: ${st.reason}` : ""}`;
    }
  }
  return { environment, regions: out, progressive };
}

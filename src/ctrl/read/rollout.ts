// The read model of a rollout (RolloutService's answers): per region of the environment its
// revisions with desired and reported counts, conditions, events and progress as kubectl rollout
// status reads a Deployment, and, under a progressive strategy, the engine's phase, step, wave
// and the routing each region's sentinels are told.
import type { Kysely } from "kysely";
import type { Condition, DeploymentStatus, RolloutEvent } from "../../rollout/index.js";
import {
  wavesOf,
  type ProgressiveSpec,
  type ProgressiveState,
  type RevisionWeight,
} from "../../rollout/progressive/index.js";
import type { Database, DeploymentRow, EnvironmentRow } from "../db/schema.js";
import { desiredReplicasOf } from "../domain/deployments.js";
import { environmentRegions } from "../domain/environments.js";
import { findEnvironment, type EnvironmentContext } from "../domain/tenancy.js";
import { regionRoutingOf, type RegionRouting } from "../payloads/sentinel.js";
import { EMPTY_STATUS, revisionStatus, rolloutProgress, specKey, type ProgressView } from "../rollout/plan.js";
import { parseState, specOf } from "../rollout/progressive.js";
import type { EnvironmentRef } from "../validate/types.js";

type Reader = Kysely<Database>;

export interface RevisionView {
  deployment: DeploymentRow;
  revision: number | null;
  desiredReplicas: number;
  currentReplicas: number;
  readyReplicas: number;
  availableReplicas: number;
  target: boolean;
  /** Kept warm for an instant rollback (../rollout/warm.ts). */
  warm: boolean;
}

/** The revision a region keeps warm: its desired pods, and when it goes (null while the rollout runs). */
export interface WarmView {
  deploymentId: string;
  revision: number;
  replicas: number;
  until: number | null;
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
  warm: WarmView | null;
  /** Rolling environments: the weights the region's sentinels route by (empty: by instances). */
  weights: readonly RevisionWeight[];
}

export interface RolloutView {
  environment: EnvironmentContext;
  regions: RegionRolloutView[];
  /** Set when the environment has a progressive strategy. */
  progressive: ProgressiveView | null;
  /** The revision `krane rollback` pinned the environment to, or null. */
  pinned: { deploymentId: string; revision: number } | null;
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

  const routing = regionRoutingOf(env);
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
        warm: row?.warm_deployment_id === d.id,
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
      warm: warmOf(row, deployments, desired.get(region)),
      weights: env.progressive === null ? (routing.get(region)?.weights ?? []) : [],
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
  const pinned = deployments.find((d) => d.id === env.pinned_deployment_id);
  return {
    environment,
    regions: out,
    progressive,
    pinned: pinned === undefined ? null : { deploymentId: pinned.id, revision: Number(pinned.revision) },
  };
}

function warmOf(
  row: { warm_deployment_id: string | null; warm_until: number | null } | undefined,
  deployments: readonly DeploymentRow[],
  desired: ReadonlyMap<string, number> | undefined,
): WarmView | null {
  const d = deployments.find((x) => x.id === row?.warm_deployment_id);
  if (row === undefined || d === undefined) return null;
  return {
    deploymentId: d.id,
    revision: Number(d.revision),
    replicas: desired?.get(d.id) ?? 0,
    until: row.warm_until === null ? null : Number(row.warm_until),
  };
}

export interface ProgressiveView {
  spec: ProgressiveSpec;
  state: ProgressiveState;
  /** The routing each region's sentinels are told (empty before the first decision). */
  routing: Map<string, RegionRouting>;
  /** A command not yet acted on. */
  pendingCommand: string | null;
  /** Waves as the engine orders the environment's regions. */
  waves: string[][];
}

export async function progressiveView(
  db: Reader,
  environment: EnvironmentRow,
  regions: readonly string[],
): Promise<ProgressiveView | null> {
  const spec = specOf(environment);
  if (spec === null) return null;
  const row = await db
    .selectFrom("progressive_rollouts")
    .selectAll()
    .where("environment_id", "=", environment.id)
    .executeTakeFirst();
  return {
    spec,
    state: parseState(row?.state),
    routing: regionRoutingOf(environment),
    pendingCommand: row?.command ?? null,
    waves: wavesOf(spec, regions),
  };
}

// One rollout pass for one (environment, region) in one transaction: lock the region's rollout
// record, read the environment, its revisions in the region and their instance reports, run the
// engine, and write the new sizes through the outbox (setDesiredReplicas / removeFromRegion),
// the revision records, status, conditions and events. The sizes it starts from are the typed
// desired_objects.replicas of the region's revisions.
//
// Concurrency: the transaction first takes the environment row shared and then the rollout row
// with SELECT … FOR UPDATE on PostgreSQL (the dialect's lockRows), so passes of one
// (environment, region) from several ctrl replicas run one after the other, each on the state
// the previous one committed, and changes to the environment or its revisions never interleave
// with a pass. SQLite has a single writer, so its transactions are serial anyway. A row lock
// (rather than an advisory lock) is released by commit/rollback on every path and needs no key
// hashing.
import { planRollout, type Condition, type DeploymentStatus } from "../../rollout/index.js";
import type { DeploymentRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { desiredReplicasOf, removeFromRegion, setDesiredReplicas } from "../domain/deployments.js";
import { policyInRegion } from "../domain/autoscale.js";
import { syncEnvironmentObjects } from "../domain/environment-objects.js";
import { refreshSentinel } from "../domain/sentinels.js";
import { lockEnvironment } from "../domain/environments.js";
import { notify } from "../domain/notifications.js";
import {
  appendEvents,
  clearTarget,
  dropRevisionRecords,
  lockRolloutRow,
  putRevisionRecord,
  recordPass,
} from "../domain/rollouts.js";
import type { DeploymentContext } from "../payloads/deployment.js";
import { passNotice } from "./notices.js";
import {
  buildRolloutInput,
  holdScaleUp,
  nextAvailabilityAt,
  planWrites,
  specKey,
  type EnvironmentFacts,
  type RevisionFacts,
} from "./plan.js";

/** How soon a pass held back by an unapplied scale-down looks again without a report. */
const SCALE_DOWN_RECHECK_MS = 1000;

export interface PassResult {
  /** False when the environment or region is gone, or there is no deployment yet. */
  ran: boolean;
  changed: boolean;
  /** When the next pass must run without an event (unix ms), or null. */
  wakeAt: number | null;
}

const NOTHING: PassResult = { ran: false, changed: false, wakeAt: null };

/** Picks the target: the stored one, unless a newer deployment exists or it was deleted. */
export function chooseTarget(
  deployments: readonly Pick<DeploymentRow, "id" | "revision">[],
  stored: { targetId: string | null; seenRevision: number },
): { targetId: string; seenRevision: number } | null {
  let newest: Pick<DeploymentRow, "id" | "revision"> | undefined;
  for (const d of deployments) if (newest === undefined || Number(d.revision) > Number(newest.revision)) newest = d;
  if (newest === undefined) return null;
  const newestRev = Number(newest.revision);
  const storedExists = stored.targetId !== null && deployments.some((d) => d.id === stored.targetId);
  if (!storedExists || newestRev > stored.seenRevision) return { targetId: newest.id, seenRevision: newestRev };
  return { targetId: stored.targetId ?? newest.id, seenRevision: stored.seenRevision };
}

export async function runPass(store: Store, environmentId: string, region: string): Promise<PassResult> {
  return store.write(async (tx) => {
    // Shared: an environment update or a revision's deletion waits for this pass, and a pass
    // that starts after one sees it (see lockEnvironment).
    const environment = await lockEnvironment(tx, environmentId, "share");
    // Progressive strategies are decided by ./progressive.ts (the strategy changed since the driver looked).
    if (!environment || environment.progressive !== null) return NOTHING;
    const envRegion = await tx.trx
      .selectFrom("environment_regions")
      .select("replicas")
      .where("environment_id", "=", environmentId)
      .where("region", "=", region)
      .executeTakeFirst();
    if (!envRegion) return NOTHING;
    const row = await lockRolloutRow(tx, environmentId, region);
    const deployments = await tx.trx
      .selectFrom("deployments")
      .selectAll()
      .where("environment_id", "=", environmentId)
      .execute();
    const lastRevision = Number(environment.last_revision);
    const chosen = chooseTarget(deployments, {
      targetId: row.target_deployment_id,
      seenRevision: Number(row.target_seen_revision),
    });
    if (chosen === null) {
      await clearTarget(tx, environmentId, region, lastRevision);
      return NOTHING;
    }
    // Every deployment up to last_revision has now been seen: only a newer one retargets.
    const target = { targetId: chosen.targetId, seenRevision: Math.max(chosen.seenRevision, lastRevision) };

    const ids = deployments.map((d) => d.id);
    const records = await tx.trx
      .selectFrom("rollout_revisions")
      .selectAll()
      .where("environment_id", "=", environmentId)
      .where("region", "=", region)
      .execute();
    const desiredOf = (await desiredReplicasOf(tx.trx, ids, region)).get(region) ?? new Map<string, number>();
    const instances = await tx.trx
      .selectFrom("instances")
      .select(["deployment_id", "status", "ready_since"])
      .where("region", "=", region)
      .where("deployment_id", "in", ids)
      .execute();
    const recordOf = new Map(records.map((r) => [r.deployment_id, r]));

    const revisions: RevisionFacts[] = [];
    for (const d of deployments) {
      const rec = recordOf.get(d.id);
      const desiredReplicas = desiredOf.get(d.id);
      if (rec === undefined && desiredReplicas === undefined && d.id !== target.targetId) continue;
      let state: RevisionFacts["state"] = null;
      if (rec !== undefined) {
        state = {
          revision: rec.revision === null ? null : Number(rec.revision),
          replicas: desiredReplicas ?? 0,
          desiredReplicas: rec.desired_replicas,
          maxReplicas: rec.max_replicas,
        };
      } else if (desiredReplicas !== undefined && (desiredReplicas > 0 || d.id !== target.targetId)) {
        // Desired before the driver knew it (written by an older ctrl): its deployment revision.
        state = { revision: Number(d.revision), replicas: desiredReplicas, desiredReplicas: null, maxReplicas: null };
      }
      revisions.push({
        deploymentId: d.id,
        name: d.k8s_name,
        createdAtMs: Number(d.created_at),
        state,
        instances: instances
          .filter((i) => i.deployment_id === d.id)
          .map((i) => ({ status: i.status, readySince: Number(i.ready_since) })),
      });
    }

    const rollbackTo = row.rollback_to === null ? null : Number(row.rollback_to);
    const env: EnvironmentFacts = {
      name: environment.slug,
      replicas: envRegion.replicas,
      strategy: environment.strategy,
      maxSurge: environment.max_surge,
      maxUnavailable: environment.max_unavailable,
      minReadySeconds: environment.min_ready_seconds,
      progressDeadlineSeconds: environment.progress_deadline_seconds,
      revisionHistoryLimit: environment.revision_history_limit,
      paused: environment.paused === 1,
      targetDeploymentId: target.targetId,
      rollbackTo,
      status: JSON.parse(row.status) as DeploymentStatus,
      conditions: JSON.parse(row.conditions) as Condition[],
    };
    const now = tx.now;
    const out = planRollout(buildRolloutInput(env, revisions, now));
    const w = planWrites(env, revisions, out);
    // The agent's report of the scale-down runs the next pass; the wake is a backstop.
    if (holdScaleUp(revisions, w.revisions)) return { ran: true, changed: false, wakeAt: now + SCALE_DOWN_RECHECK_MS };

    const workspace = await tx.trx
      .selectFrom("workspaces")
      .selectAll()
      .where("id", "=", environment.workspace_id)
      .executeTakeFirstOrThrow();
    const project = await tx.trx
      .selectFrom("projects")
      .selectAll()
      .where("id", "=", environment.project_id)
      .executeTakeFirstOrThrow();
    const ctxOf = (id: string): DeploymentContext => {
      const deployment = deployments.find((d) => d.id === id);
      if (deployment === undefined) throw new Error(`deployment ${id} vanished during the pass`);
      return { workspace, project, environment, deployment };
    };
    for (const r of w.revisions) {
      if (r.putDesired) await setDesiredReplicas(tx, ctxOf(r.deploymentId), region, r.replicas);
      if (!r.recordChanged) continue;
      await putRevisionRecord(tx, {
        deploymentId: r.deploymentId,
        environmentId,
        region,
        revision: r.revision,
        desiredReplicas: r.desiredReplicas,
        maxReplicas: r.maxReplicas,
      });
    }
    for (const id of w.remove) {
      await removeFromRegion(tx, ctxOf(id), region);
      await dropRevisionRecords(tx, region, [id]);
    }
    // Records of deleted deployments.
    await dropRevisionRecords(
      tx,
      region,
      records.filter((r) => !ids.includes(r.deployment_id)).map((r) => r.deployment_id),
    );

    let wakeAt: number | null = null;
    if (!w.changed) {
      if (w.requeueAfterSeconds !== null) wakeAt = now + Math.max(200, w.requeueAfterSeconds * 1000);
      for (const r of revisions) {
        const at = nextAvailabilityAt(r.instances, env.minReadySeconds, now);
        if (at !== null && (wakeAt === null || at < wakeAt)) wakeAt = at;
      }
    }
    const observedSpec = specKey({ ...env, rollbackTo: w.clearRollback ? null : rollbackTo }, lastRevision);
    await recordPass(tx, environmentId, region, {
      targetDeploymentId: w.targetDeploymentId,
      targetSeenRevision: target.seenRevision,
      rollbackTo: w.clearRollback ? null : rollbackTo,
      status: w.status,
      conditions: w.conditions,
      observedSpec,
      requeueAt: wakeAt,
    });
    if (w.events.length > 0) await appendEvents(tx, environmentId, region, w.events);
    const rolled = deployments.find((d) => d.id === w.targetDeploymentId);
    const notice = rolled && passNotice(env, w.conditions, region, rolled);
    if (notice) await notify(tx, { ...notice, environmentId });
    // Cron jobs run the revision their region runs; a new target re-renders them.
    if (w.targetDeploymentId !== row.target_deployment_id) {
      await syncEnvironmentObjects(tx, environment, workspace);
      // The region's autoscaler resizes only the target by itself (src/autoscale/local.ts).
      if ((await policyInRegion(tx.trx, environment, region)) !== null) await refreshSentinel(tx, environment, region);
    }
    return { ran: true, changed: w.changed || target.targetId !== row.target_deployment_id, wakeAt };
  });
}

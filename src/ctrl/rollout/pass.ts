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
import type { DeploymentRow, EnvironmentRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { desiredReplicasOf, removeFromRegion, setDesiredReplicas } from "../domain/deployments.js";
import { policyInRegion } from "../domain/autoscale.js";
import { syncEnvironmentObjects } from "../domain/environment-objects.js";
import { refreshSentinel } from "../domain/sentinels.js";
import { lockEnvironment, setRouting } from "../domain/environments.js";
import { environmentContext } from "../domain/tenancy.js";
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
import { regionRoutingOf } from "../payloads/sentinel.js";
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
import { afterEngine, asEngineSees, regionWeights, stepWarm, type WarmState, type WarmStep } from "./warm.js";

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

/**
 * Picks the target: the pinned one while it exists (`krane rollback`), else the stored one,
 * unless a newer deployment exists or it was deleted.
 */
export function chooseTarget(
  deployments: readonly Pick<DeploymentRow, "id" | "revision">[],
  stored: { targetId: string | null; seenRevision: number },
  pinned: string | null = null,
): { targetId: string; seenRevision: number } | null {
  let newest: Pick<DeploymentRow, "id" | "revision"> | undefined;
  for (const d of deployments) if (newest === undefined || Number(d.revision) > Number(newest.revision)) newest = d;
  if (newest === undefined) return null;
  const newestRev = Number(newest.revision);
  if (pinned !== null && deployments.some((d) => d.id === pinned))
    return { targetId: pinned, seenRevision: Math.max(newestRev, stored.seenRevision) };
  const storedExists = stored.targetId !== null && deployments.some((d) => d.id === stored.targetId);
  if (!storedExists || newestRev > stored.seenRevision) return { targetId: newest.id, seenRevision: newestRev };
  return { targetId: stored.targetId ?? newest.id, seenRevision: stored.seenRevision };
}

/** Whether an environment keeps the previous revision warm (./warm.ts): its sentinels route by weights for it. */
export function keepsWarm(
  environment: Pick<
    EnvironmentRow,
    "strategy" | "progressive" | "sentinel_image" | "sentinel_replicas" | "warm_window_seconds" | "deleting_at"
  >,
): boolean {
  return (
    environment.strategy === "RollingUpdate" &&
    environment.progressive === null &&
    environment.sentinel_image !== null &&
    environment.sentinel_replicas > 0 &&
    environment.warm_window_seconds > 0 &&
    environment.deleting_at === null
  );
}

/** Whether a pass may write the environment's routing (then it holds the environment row exclusively). */
function mayRoute(environment: Parameters<typeof keepsWarm>[0] & Pick<EnvironmentRow, "routing_regions">): boolean {
  return environment.progressive === null && (environment.routing_regions !== null || keepsWarm(environment));
}

export async function runPass(store: Store, environmentId: string, region: string): Promise<PassResult> {
  return store.write(async (tx) => {
    // Shared: an environment update or a revision's deletion waits for this pass, and a pass
    // that starts after one sees it (see lockEnvironment). Exclusive when the pass may change the
    // routing, a column of the environment row that passes of other regions write too.
    const peek = await tx.trx.selectFrom("environments").selectAll().where("id", "=", environmentId).executeTakeFirst();
    const routes = peek !== undefined && mayRoute(peek);
    const environment = await lockEnvironment(tx, environmentId, routes ? "update" : "share");
    // Progressive strategies are decided by ./progressive.ts (the strategy changed since the driver looked).
    if (!environment || environment.progressive !== null) return NOTHING;
    // Changed between the look and the lock: again, with the lock it needs.
    if (mayRoute(environment) !== routes) return { ran: true, changed: true, wakeAt: null };
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
    const chosen = chooseTarget(
      deployments,
      { targetId: row.target_deployment_id, seenRevision: Number(row.target_seen_revision) },
      environment.pinned_deployment_id,
    );
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
    const byId = new Map(deployments.map((d) => [d.id, d]));

    // The warm slot first: what goes, what is held, what serves again (./warm.ts).
    const windowMs = environment.warm_window_seconds * 1000;
    const warmStep = stepWarm({
      eligible: keepsWarm(environment) && envRegion.replicas > 0,
      windowMs,
      now: tx.now,
      stored:
        row.warm_deployment_id === null
          ? null
          : {
              deploymentId: row.warm_deployment_id,
              replicas: Number(row.warm_replicas),
              until: row.warm_until === null ? null : Number(row.warm_until),
            },
      previousTarget: row.target_deployment_id,
      target: target.targetId,
      revisionOf: (id) => {
        const d = byId.get(id);
        return d === undefined ? undefined : Number(d.revision);
      },
      desiredOf: (id) => desiredOf.get(id),
      nameOf: (id) => byId.get(id)?.k8s_name ?? id,
    });
    // A revision let go is desired at the size the engine counted for it, before the engine runs.
    const shrunk: WarmStep["release"] = [];
    for (const r of warmStep.release)
      if (desiredOf.get(r.deploymentId) !== r.replicas) {
        desiredOf.set(r.deploymentId, r.replicas);
        shrunk.push(r);
      }
    let warm = warmStep.warm;

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

    // The held revision as the engine is shown it: its own size, as many of its pods.
    const engineRevisions = warm === null ? revisions : revisions.map((r) => asEngineSees(r, warm as WarmState));
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
    const out = planRollout(buildRolloutInput(env, engineRevisions, now));
    const w = planWrites(env, engineRevisions, out);
    // The agent's report of the scale-down runs the next pass; the wake is a backstop. A revision
    // let go above is often the scale-down waited for (a new target arrives while one is warm):
    // its size is written now, else nothing would ever shrink it. That pass lets it go again
    // with nothing left to write.
    if (holdScaleUp(engineRevisions, w.revisions)) {
      if (shrunk.length > 0) {
        const { workspace, project } = await environmentContext(tx.trx, environment);
        for (const r of shrunk) {
          const deployment = byId.get(r.deploymentId);
          if (deployment !== undefined)
            await setDesiredReplicas(tx, { workspace, project, environment, deployment }, region, r.replicas);
        }
        const released = warmStep.events.filter((e) => e.reason === "WarmRevisionReleased");
        if (released.length > 0) await appendEvents(tx, environmentId, region, released);
      }
      return { ran: true, changed: false, wakeAt: now + SCALE_DOWN_RECHECK_MS };
    }

    const { workspace, project } = await environmentContext(tx.trx, environment);
    const ctxOf = (id: string): DeploymentContext => {
      const deployment = deployments.find((d) => d.id === id);
      if (deployment === undefined) throw new Error(`deployment ${id} vanished during the pass`);
      return { workspace, project, environment, deployment };
    };
    for (const r of warmStep.release) await setDesiredReplicas(tx, ctxOf(r.deploymentId), region, r.replicas);
    let warmChanged = warmStep.release.length > 0 || warmStep.switchedTo !== null;
    for (const r of w.revisions) {
      if (warm !== null && r.deploymentId === warm.deploymentId) {
        // Its pods are kept: the engine's size is the held revision's own.
        const a = afterEngine(warm, r.replicas, desiredOf.get(r.deploymentId) ?? 0, now, windowMs);
        if (a.desire !== null) await setDesiredReplicas(tx, ctxOf(r.deploymentId), region, a.desire);
        if (JSON.stringify(a.warm) !== JSON.stringify(warm)) warmChanged = true;
        warm = a.warm;
      } else if (r.putDesired) await setDesiredReplicas(tx, ctxOf(r.deploymentId), region, r.replicas);
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
      // History cleanup never takes the held revision: it keeps its pods until let go.
      if (id === warm?.deploymentId) continue;
      await removeFromRegion(tx, ctxOf(id), region);
      await dropRevisionRecords(tx, region, [id]);
    }
    // Records of deleted deployments.
    await dropRevisionRecords(
      tx,
      region,
      records.filter((r) => !ids.includes(r.deployment_id)).map((r) => r.deployment_id),
    );

    // The region's routing: by weights while a revision is held or drained (./warm.ts). A paused
    // rollout holds it as it is, as it holds the sizes.
    let routed = false;
    if (!env.paused) {
      const sizeOf = new Map(w.revisions.map((r) => [r.deploymentId, r.replicas]));
      const weights = regionWeights({
        target: w.targetDeploymentId,
        replicas: envRegion.replicas,
        held: warm?.deploymentId ?? null,
        weightedNow: regionRoutingOf(environment).has(region),
        revisions: engineRevisions.map((r) => ({
          deploymentId: r.deploymentId,
          size: r.deploymentId === warm?.deploymentId ? warm.replicas : (sizeOf.get(r.deploymentId) ?? 0),
          counted: r.instances,
          instances: revisions.find((x) => x.deploymentId === r.deploymentId)?.instances ?? r.instances,
        })),
        minReadySeconds: env.minReadySeconds,
        now,
      });
      const routing = regionRoutingOf(environment);
      if (weights === null) routing.delete(region);
      else routing.set(region, { weights, preview: null });
      routed = (await setRouting(tx, project, environment, routing)) !== null;
    }

    let wakeAt: number | null = null;
    const changed = w.changed || warmChanged || routed || target.targetId !== row.target_deployment_id;
    if (!changed) {
      if (w.requeueAfterSeconds !== null) wakeAt = now + Math.max(200, w.requeueAfterSeconds * 1000);
      for (const r of revisions) {
        const at = nextAvailabilityAt(r.instances, env.minReadySeconds, now);
        if (at !== null && (wakeAt === null || at < wakeAt)) wakeAt = at;
      }
      // The warm revision goes at the end of its window, whoever runs the pass then.
      if (warm?.until != null && (wakeAt === null || warm.until < wakeAt)) wakeAt = warm.until;
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
      warm,
    });
    const events = [...warmStep.events, ...w.events];
    if (events.length > 0) await appendEvents(tx, environmentId, region, events);
    const rolled = deployments.find((d) => d.id === w.targetDeploymentId);
    const notice = rolled && passNotice(env, w.conditions, region, rolled);
    if (notice) await notify(tx, { ...notice, environmentId });
    // Cron jobs run the revision their region runs; a new target re-renders them.
    if (w.targetDeploymentId !== row.target_deployment_id) {
      await syncEnvironmentObjects(tx, environment, workspace);
      // The region's autoscaler resizes only the target by itself (src/autoscale/local.ts).
      if ((await policyInRegion(tx.trx, environment, region)) !== null) await refreshSentinel(tx, environment, region);
    }
    return { ran: true, changed, wakeAt };
  });
}

// The driver's pure core: turns what ctrl stores (environment policy, per-region rollout record,
// revisions with their instance reports) into one engine input, and the engine's output back
// into the writes of one pass. No I/O and no clock: `now` is an argument.
import type {
  Condition,
  DeploymentStatus,
  IntOrPercent,
  RevisionStatus,
  RolloutEvent,
  RolloutInput,
  RolloutOutput,
} from "../../rollout/index.js";
import { EMPTY_STATUS } from "../domain/rollouts.js";

export { EMPTY_STATUS };

/** An instance as reported by the region's agent. */
export interface InstanceFact {
  /** "pending" | "running" | "failed" | "terminating" | "unknown" */
  status: string;
  /** Unix ms the pod last became ready; 0 when it is not ready. */
  readySince: number;
}

/** What the region knows about one revision (a deployment of the environment). */
export interface RevisionFacts {
  deploymentId: string;
  /** The ReplicaSet name in Kubernetes; the engine's revision name. */
  name: string;
  createdAtMs: number;
  /** null: the revision is not in the region yet (the engine creates it if it is the target). */
  state: {
    revision: number | null;
    replicas: number;
    desiredReplicas: number | null;
    maxReplicas: number | null;
  } | null;
  instances: InstanceFact[];
}

export interface EnvironmentFacts {
  name: string;
  replicas: number;
  strategy: string;
  maxSurge: string;
  maxUnavailable: string;
  minReadySeconds: number;
  progressDeadlineSeconds: number | null;
  revisionHistoryLimit: number | null;
  paused: boolean;
  targetDeploymentId: string;
  rollbackTo: number | null;
  status: DeploymentStatus;
  conditions: Condition[];
}

/** Stored "25%" / "3" → the engine's IntOrPercent. */
export function intOrPercent(text: string): IntOrPercent {
  return /^\d+$/.test(text) ? Number(text) : text;
}

function isAvailable(i: InstanceFact, minReadySeconds: number, now: number): boolean {
  if (i.status !== "running") return false;
  // Without minReadySeconds a ready pod is available, even if the agent sent no ready time.
  return minReadySeconds === 0 || (i.readySince > 0 && i.readySince + minReadySeconds * 1000 <= now);
}

/**
 * A revision's pod counts as the engine wants them: replicas = non-terminal instances that are not
 * terminating, ready = running ones, available = running and ready for at least minReadySeconds,
 * terminating = the ones shutting down (which Recreate waits for).
 */
export function revisionStatus(
  instances: readonly InstanceFact[],
  minReadySeconds: number,
  now: number,
): Required<RevisionStatus> {
  let replicas = 0;
  let ready = 0;
  let available = 0;
  let terminating = 0;
  for (const i of instances) {
    if (i.status === "terminating") {
      terminating++;
      continue;
    }
    if (i.status === "failed") continue;
    replicas++;
    if (i.status === "running") ready++;
    if (isAvailable(i, minReadySeconds, now)) available++;
  }
  return { replicas, readyReplicas: ready, availableReplicas: available, terminatingReplicas: terminating };
}

/** The earliest time a ready instance becomes available (minReadySeconds), or null. */
export function nextAvailabilityAt(
  instances: readonly InstanceFact[],
  minReadySeconds: number,
  now: number,
): number | null {
  if (minReadySeconds === 0) return null;
  let next: number | null = null;
  for (const i of instances) {
    if (i.status !== "running" || i.readySince <= 0) continue;
    const at = i.readySince + minReadySeconds * 1000;
    if (at > now && (next === null || at < next)) next = at;
  }
  return next;
}

/**
 * A revision this region has no ReplicaSet for yet cannot have pods shutting down (the engine
 * refuses the combination); a late report of one is ignored rather than failing the pass.
 */
function withoutTerminatingBeforeRevision(revision: number | null, status: Required<RevisionStatus>): RevisionStatus {
  return revision === null ? { ...status, terminatingReplicas: 0 } : status;
}

export function buildRolloutInput(
  env: EnvironmentFacts,
  revisions: readonly RevisionFacts[],
  now: number,
): RolloutInput {
  const target = revisions.find((r) => r.deploymentId === env.targetDeploymentId);
  if (target === undefined) throw new Error(`target ${env.targetDeploymentId} is not among the revisions`);
  return {
    now: new Date(now).toISOString(),
    deployment: {
      name: env.name,
      replicas: env.replicas,
      strategy:
        env.strategy === "Recreate"
          ? { type: "Recreate" }
          : {
              type: "RollingUpdate",
              rollingUpdate: { maxSurge: intOrPercent(env.maxSurge), maxUnavailable: intOrPercent(env.maxUnavailable) },
            },
      minReadySeconds: env.minReadySeconds,
      progressDeadlineSeconds: env.progressDeadlineSeconds,
      revisionHistoryLimit: env.revisionHistoryLimit,
      paused: env.paused,
      target: target.name,
      rollbackTo: env.rollbackTo,
      status: env.status,
      conditions: env.conditions,
    },
    revisions: revisions.map((r) => ({
      name: r.name,
      revision: r.state?.revision ?? null,
      createdAt: new Date(r.createdAtMs).toISOString(),
      replicas: r.state?.replicas ?? 0,
      desiredReplicas: r.state?.desiredReplicas ?? null,
      maxReplicas: r.state?.maxReplicas ?? null,
      status: withoutTerminatingBeforeRevision(
        r.state?.revision ?? null,
        revisionStatus(r.instances, env.minReadySeconds, now),
      ),
    })),
  };
}

export interface RevisionWrite {
  deploymentId: string;
  revision: number | null;
  replicas: number;
  desiredReplicas: number | null;
  maxReplicas: number | null;
  /** The region's desired ApplyDeployment must be (re)written: size changed or newly created. */
  putDesired: boolean;
  /** The stored revision record changed. */
  recordChanged: boolean;
}

export interface PassWrites {
  targetDeploymentId: string;
  revisions: RevisionWrite[];
  /** Deployments removed from the region by revision-history cleanup. */
  remove: string[];
  status: DeploymentStatus;
  conditions: Condition[];
  events: RolloutEvent[];
  /** The pass consumed a pending rollback (any unpaused pass does). */
  clearRollback: boolean;
  /** Anything changed: the caller runs another pass (the engine's contract). */
  changed: boolean;
  requeueAfterSeconds: number | null;
}

function sameStatus(a: DeploymentStatus, b: DeploymentStatus): boolean {
  return (
    a.replicas === b.replicas &&
    a.updatedReplicas === b.updatedReplicas &&
    a.readyReplicas === b.readyReplicas &&
    a.availableReplicas === b.availableReplicas &&
    a.unavailableReplicas === b.unavailableReplicas
  );
}

function sameConditions(a: readonly Condition[], b: readonly Condition[]): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Maps the engine's output (by revision name) back to ctrl's writes (by deployment id). */
export function planWrites(env: EnvironmentFacts, revisions: readonly RevisionFacts[], out: RolloutOutput): PassWrites {
  const byName = new Map(revisions.map((r) => [r.name, r]));
  const idOf = (name: string): string => {
    const r = byName.get(name);
    if (r === undefined) throw new Error(`engine returned unknown revision ${name}`);
    return r.deploymentId;
  };
  const removed = new Set(out.delete);
  const writes: RevisionWrite[] = [];
  let changed = false;
  for (const o of out.revisions) {
    if (removed.has(o.name)) continue;
    const facts = byName.get(o.name);
    if (facts === undefined) throw new Error(`engine returned unknown revision ${o.name}`);
    const before = facts.state;
    const desiredReplicas = o.desiredReplicas ?? null;
    const maxReplicas = o.maxReplicas ?? null;
    // A revision that the engine did not create and that is not in the region stays out of it.
    if (before === null && o.revision === null && o.replicas === 0) continue;
    const putDesired = before === null || before.replicas !== o.replicas;
    const recordChanged =
      before === null ||
      before.revision !== o.revision ||
      before.replicas !== o.replicas ||
      before.desiredReplicas !== desiredReplicas ||
      before.maxReplicas !== maxReplicas;
    if (recordChanged) changed = true;
    writes.push({
      deploymentId: facts.deploymentId,
      revision: o.revision,
      replicas: o.replicas,
      desiredReplicas,
      maxReplicas,
      putDesired,
      recordChanged,
    });
  }
  const targetDeploymentId = idOf(out.target);
  if (targetDeploymentId !== env.targetDeploymentId) changed = true;
  if (removed.size > 0) changed = true;
  if (!sameStatus(out.status, env.status) || !sameConditions(out.conditions, env.conditions)) changed = true;
  const clearRollback = !env.paused && env.rollbackTo !== null;
  if (clearRollback) changed = true;
  return {
    targetDeploymentId,
    revisions: writes,
    remove: out.delete.map(idOf),
    status: out.status,
    conditions: out.conditions,
    events: out.events,
    clearRollback,
    changed,
    requeueAfterSeconds: out.requeueAfterSeconds,
  };
}

/**
 * The spec a pass works from, as one string: when the stored one differs from the current one
 * the latest change has not been observed yet (Kubernetes' generation vs observedGeneration).
 */
export function specKey(
  env: Omit<EnvironmentFacts, "status" | "conditions" | "targetDeploymentId" | "name">,
  lastRevision: number,
): string {
  return JSON.stringify([
    lastRevision,
    env.replicas,
    env.strategy,
    env.maxSurge,
    env.maxUnavailable,
    env.minReadySeconds,
    env.progressDeadlineSeconds,
    env.revisionHistoryLimit,
    env.paused,
    env.rollbackTo,
  ]);
}

export interface ProgressView {
  observed: boolean;
  complete: boolean;
  /** Progressing=False with ProgressDeadlineExceeded. */
  failed: boolean;
  message: string;
}

/** kubectl rollout status' reading of a Deployment, per region. */
export function rolloutProgress(
  replicas: number,
  status: DeploymentStatus,
  conditions: readonly Condition[],
  observed: boolean,
): ProgressView {
  if (!observed)
    return { observed, complete: false, failed: false, message: "waiting for the rollout spec to be observed" };
  const progressing = conditions.find((c) => c.type === "Progressing");
  if (progressing?.reason === "ProgressDeadlineExceeded") {
    return { observed, complete: false, failed: true, message: "exceeded its progress deadline" };
  }
  if (status.updatedReplicas < replicas) {
    return {
      observed,
      complete: false,
      failed: false,
      message: `${status.updatedReplicas} of ${replicas} new replicas have been updated`,
    };
  }
  if (status.replicas > status.updatedReplicas) {
    return {
      observed,
      complete: false,
      failed: false,
      message: `${status.replicas - status.updatedReplicas} old replicas are pending termination`,
    };
  }
  if (status.availableReplicas < status.updatedReplicas) {
    return {
      observed,
      complete: false,
      failed: false,
      message: `${status.availableReplicas} of ${status.updatedReplicas} updated replicas are available`,
    };
  }
  return { observed, complete: true, failed: false, message: "successfully rolled out" };
}

/**
 * True when the pass would grow some revision while another still runs more instances than it
 * is desired at: a scale-down the agent has not applied yet.
 *
 * The engine sizes revisions from their desired replicas, as Kubernetes' Deployment controller
 * sizes ReplicaSets from their specs. But the controller's writes land before its next sync,
 * while ctrl's reach the cluster later, through the agent, which applies different ReplicaSets
 * concurrently. Were a scale-up to go out while the scale-down it was sized against is still in
 * flight, the agent could apply it first, and the cluster would run more than replicas +
 * maxSurge for a while. So scale-ups wait until the agent's reports show the scale-down done
 * (the ReplicaSet controller marks the extra pods for deletion, and the agent reports them as
 * terminating).
 */
export function holdScaleUp(revisions: readonly RevisionFacts[], writes: readonly RevisionWrite[]): boolean {
  const before = new Map(revisions.map((r) => [r.deploymentId, r.state?.replicas ?? 0]));
  const growing = writes.some((w) => w.replicas > (before.get(w.deploymentId) ?? 0));
  if (!growing) return false;
  // Pods already shutting down are not counted: the scale-down marked them, which is all a
  // ReplicaSet's size says (a rolling update does not wait for them, as in Kubernetes).
  return revisions.some((r) => r.state !== null && replicaCount(r.instances) > r.state.replicas);
}

function replicaCount(instances: readonly InstanceFact[]): number {
  let n = 0;
  for (const i of instances) if (i.status !== "terminating") n++;
  return n;
}

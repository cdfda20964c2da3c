// Finding (or creating) the new ReplicaSet, keeping its revision the highest, and sizing it.
import { PROGRESSING, Reason, getCondition, newCondition, quote, setCondition } from "./conditions.js";
import { hasProgressDeadline, maxSurge, scaledValue } from "./fenceposts.js";
import type { Deployment, Pass, ReplicaSet } from "./model.js";
import { maxRevision, sumSpec } from "./replicasets.js";

/**
 * How big the new ReplicaSet may become now. Rolling: up to replicas + maxSurge pods in total and
 * never beyond replicas; if the total is already at the cap it keeps its size. Recreate: replicas.
 */
export function newRSNewReplicas(d: Deployment, allRSs: readonly ReplicaSet[], newRSReplicas: number): number {
  if (d.strategyType === "Recreate") return d.replicas;
  const surge = scaledValue(d.maxSurge, d.replicas, true);
  const current = sumSpec(allRSs);
  const maxTotal = d.replicas + surge;
  if (current >= maxTotal) return newRSReplicas;
  const scaleUp = Math.min(maxTotal - current, d.replicas - newRSReplicas);
  return newRSReplicas + scaleUp;
}

export interface ReplicaSetSplit {
  newRS: ReplicaSet | undefined;
  /** Every existing ReplicaSet except the new one, oldest first. */
  oldRSs: ReplicaSet[];
}

/**
 * Kubernetes' getAllReplicaSetsAndSyncRevision. The target's revision is raised to max(old)+1 when
 * it is not already above every old one (a rollback makes it the newest again). When the target
 * has no ReplicaSet yet it is created only if `create` is set.
 *
 * A pass may call this more than once (a scaling-event check, then the rollout). Kubernetes
 * reads the ReplicaSet as listed at the start of the sync every time, so in a pass that raises
 * the revision every call raises it again and returns early: neither the deployment's revision
 * nor the FoundNewReplicaSet condition is written until the next pass. Hence `listed.revision`.
 */
export function syncRevision(pass: Pass, create: boolean): ReplicaSetSplit {
  const d = pass.d;
  const target = pass.byCreation.find((rs) => rs.name === d.target);
  if (target === undefined) throw new Error(`target ${quote(d.target)} is not a revision`);
  const oldRSs = pass.byCreation.filter((rs) => rs !== target && rs.revision !== null);
  const newRevision = maxRevision(oldRSs) + 1;

  if (target.revision !== null) {
    if ((target.listed.revision ?? 0) < newRevision) {
      // Kubernetes writes the new revision and returns; the next pass notices the RS again.
      target.revision = newRevision;
      return { newRS: target, oldRSs };
    }
    if (hasProgressDeadline(d) && getCondition(pass.status.conditions, PROGRESSING) === undefined) {
      progressing(pass, Reason.foundNewReplicaSet, `Found new replica set ${quote(target.name)}`);
    }
    return { newRS: target, oldRSs };
  }

  if (!create) return { newRS: undefined, oldRSs };

  const count = newRSNewReplicas(d, oldRSs, 0);
  target.revision = newRevision;
  target.replicas = count;
  target.listed = { revision: newRevision, replicas: count };
  target.desiredReplicas = d.replicas;
  target.maxReplicas = d.replicas + maxSurge(d);
  if (count > 0) {
    pass.events.push({
      type: "Normal",
      reason: "ScalingReplicaSet",
      message: `Scaled up replica set ${target.name} from 0 to ${count}`,
    });
  }
  if (hasProgressDeadline(d)) {
    progressing(pass, Reason.newReplicaSetCreated, `Created new replica set ${quote(target.name)}`);
  }
  return { newRS: target, oldRSs };
}

/** Sets the pass's Progressing condition to True: the new ReplicaSet was found or created. */
function progressing(pass: Pass, reason: string, message: string): void {
  const cond = newCondition(PROGRESSING, "True", reason, message, pass.now);
  pass.status = { ...pass.status, conditions: setCondition(pass.status.conditions, cond) };
}

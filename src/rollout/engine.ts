// One pass of the Deployment controller's sync for one environment in one region.
import type { Deployment, Pass, ReplicaSet, WorkingCondition, WorkingStatus } from "./model.js";
import { scale } from "./proportional.js";
import { rolloutRecreate } from "./recreate.js";
import { byCreationTimestamp, filterActive } from "./replicasets.js";
import { rollback } from "./rollback.js";
import { rolloutRolling } from "./rolling.js";
import { cleanupDeployment } from "./history.js";
import { syncRevision } from "./newrs.js";
import { checkPausedConditions, syncDeploymentStatus } from "./status.js";
import { quote } from "./conditions.js";
import { MAX_INT32 } from "./fenceposts.js";
import { formatTime, parseTime } from "./time.js";
import type { Condition, RolloutInput, RolloutOutput } from "./types.js";

/**
 * Runs one pass. `input` must satisfy parseRolloutInput's rules (use it on untrusted JSON). The
 * input is not modified.
 */
export function planRollout(input: RolloutInput): RolloutOutput {
  const pass = startPass(input);
  syncDeployment(pass);
  return finishPass(pass);
}

/** Kubernetes' syncDeployment, minus the parts krane has no use for (selectors, deletion). */
function syncDeployment(pass: Pass): void {
  const d = pass.d;
  checkPausedConditions(pass);
  if (d.paused) return sync(pass);
  // A pending rollback is handled alone; the next pass rolls out to the new target.
  if (d.rollbackTo !== null) return rollback(pass, d.rollbackTo);
  if (isScalingEvent(pass)) return sync(pass);
  if (d.strategyType === "Recreate") return rolloutRecreate(pass);
  return rolloutRolling(pass);
}

/** Some active ReplicaSet was last sized for a different replica count. */
function isScalingEvent(pass: Pass): boolean {
  const { newRS, oldRSs } = syncRevision(pass, false);
  return filterActive([...oldRSs, newRS]).some(
    (rs) => rs.desiredReplicas !== null && rs.desiredReplicas !== pass.d.replicas,
  );
}

/** Scaling events and paused deployments: proportional scaling and cleanup, no rollout step. */
function sync(pass: Pass): void {
  const d = pass.d;
  const { newRS, oldRSs } = syncRevision(pass, false);
  scale(pass, newRS, oldRSs);
  if (d.paused && d.rollbackTo === null) cleanupDeployment(pass, oldRSs);
  const allRSs: ReplicaSet[] = newRS === undefined ? [...oldRSs] : [...oldRSs, newRS];
  syncDeploymentStatus(pass, allRSs, newRS);
}

function requireTime(text: string, field: string): number {
  const ms = parseTime(text);
  if (ms === null) throw new Error(`${field}: not an RFC 3339 date-time`);
  return ms;
}

function startPass(input: RolloutInput): Pass {
  const dep = input.deployment;
  const strategy = dep.strategy;
  const d: Deployment = {
    name: dep.name,
    replicas: dep.replicas,
    strategyType: strategy.type,
    maxSurge: strategy.type === "RollingUpdate" ? strategy.rollingUpdate.maxSurge : 0,
    maxUnavailable: strategy.type === "RollingUpdate" ? strategy.rollingUpdate.maxUnavailable : 0,
    progressDeadlineSeconds: dep.progressDeadlineSeconds,
    revisionHistoryLimit: dep.revisionHistoryLimit,
    paused: dep.paused,
    rollbackTo: dep.rollbackTo,
    target: dep.target,
  };
  const revisions: ReplicaSet[] = input.revisions.map((r, index) => ({
    name: r.name,
    index,
    createdAtMs: requireTime(r.createdAt, `revisions[${index}].createdAt`),
    revision: r.revision,
    replicas: r.replicas,
    listed: { revision: r.revision, replicas: r.replicas },
    desiredReplicas: r.desiredReplicas,
    maxReplicas: r.maxReplicas,
    status: {
      replicas: r.status.replicas,
      readyReplicas: r.status.readyReplicas,
      availableReplicas: r.status.availableReplicas,
      terminatingReplicas: r.status.terminatingReplicas ?? 0,
    },
  }));
  const conditions: WorkingCondition[] = dep.conditions.map((c, i) => ({
    type: c.type,
    status: c.status,
    reason: c.reason,
    message: c.message,
    lastUpdateMs: requireTime(c.lastUpdateTime, `deployment.conditions[${i}].lastUpdateTime`),
    lastTransitionMs: requireTime(c.lastTransitionTime, `deployment.conditions[${i}].lastTransitionTime`),
  }));
  const status: WorkingStatus = { ...dep.status, conditions };
  return {
    now: requireTime(input.now, "now"),
    d,
    byCreation: [...revisions].sort(byCreationTimestamp),
    status,
    events: [],
    deleted: [],
    requeueAfterSeconds: null,
  };
}

function finishPass(pass: Pass): RolloutOutput {
  const byIndex = [...pass.byCreation].sort((a, b) => a.index - b.index);
  // Validated inputs never lead here; a bug must not reach the cluster as a negative size.
  for (const rs of byIndex) {
    for (const n of [rs.replicas, rs.desiredReplicas ?? 0, rs.maxReplicas ?? 0]) {
      if (!Number.isSafeInteger(n) || n < 0 || n > MAX_INT32) {
        throw new Error(`rollout engine bug: revision ${quote(rs.name)} would get ${n} (outside 0 … ${MAX_INT32})`);
      }
    }
  }
  const { conditions, ...counts } = pass.status;
  return {
    target: pass.d.target,
    revisions: byIndex.map((rs) => ({
      name: rs.name,
      revision: rs.revision,
      replicas: rs.replicas,
      ...(rs.desiredReplicas !== null ? { desiredReplicas: rs.desiredReplicas } : {}),
      ...(rs.maxReplicas !== null ? { maxReplicas: rs.maxReplicas } : {}),
    })),
    delete: [...pass.deleted],
    status: counts,
    conditions: conditions.map((c): Condition => ({
      type: c.type,
      status: c.status,
      reason: c.reason,
      message: c.message,
      lastUpdateTime: formatTime(c.lastUpdateMs),
      lastTransitionTime: formatTime(c.lastTransitionMs),
    })),
    events: [...pass.events],
    requeueAfterSeconds: pass.requeueAfterSeconds,
  };
}

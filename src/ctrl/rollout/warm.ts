// The warm previous revision, pure: what a rolling pass does beyond Kubernetes so that a rollback
// within the warm window is a traffic switch (issue 44). No I/O and no clock: `now` is an input.
//
// When a region's target moves to a newer revision, the revision it leaves (the one serving) is
// held: its pods stay as they are, and the engine is shown it at a size of its own (`replicas`),
// which the engine scales down as it would the old ReplicaSet. Its pods beyond that size are
// outside the rollout: not counted in the engine's status, not scaled down, and given no traffic
// (the region's sentinels route by weights while a revision is held, each revision's weight
// what the engine counts of it). Once the engine has it at 0 the rollout has moved past it, and
// the window starts: the revision keeps its pods, with no traffic, until `until`. A rollback to
// it within the window makes it the target with every pod it has, so the engine finds it fully
// available and scales the other one down: the sentinels switch at once, no pod is created.
//
// One revision is held per region at a time: a rollout that starts while one is warm lets the
// warm one go and holds the revision it leaves; one that starts while the held one still serves
// (a rollout replaced mid-way) keeps it. A rollback (a target older than the one it leaves) holds
// nothing. Not held at all: Recreate, no sentinel, a window of 0, a progressive strategy, a region
// at 0 replicas.
import { safeWeights, type RevisionWeight } from "../../rollout/progressive/index.js";
import type { RolloutEvent } from "../../rollout/index.js";
import { failedPrecondition } from "../errors.js";
import { revisionStatus, type InstanceFact, type RevisionFacts } from "./plan.js";

export interface WarmState {
  deploymentId: string;
  /** The size the engine is shown (and last set) for it; its pods beyond it are kept outside the rollout. */
  replicas: number;
  /** When it is let go (unix ms); null while the rollout that left it is under way. */
  until: number | null;
}

export interface WarmInput {
  /** The environment keeps a previous revision warm here (see the header). */
  eligible: boolean;
  windowMs: number;
  now: number;
  stored: WarmState | null;
  /** The region's target before this pass (rollouts.target_deployment_id). */
  previousTarget: string | null;
  /** The target this pass rolls out to. */
  target: string;
  /** A deployment's revision number in the environment; undefined when it no longer exists. */
  revisionOf: (deploymentId: string) => number | undefined;
  /** A deployment's desired replicas in the region; undefined when it is not desired there. */
  desiredOf: (deploymentId: string) => number | undefined;
  /** A deployment's ReplicaSet name (for events). */
  nameOf: (deploymentId: string) => string;
}

export interface WarmStep {
  /** The revision held after this step, before the engine runs. */
  warm: WarmState | null;
  /** Revisions let go: the size to desire for each now (0, or what the engine last counted). */
  release: { deploymentId: string; replicas: number }[];
  /** The target is the revision that was held: it serves with every pod it kept. */
  switchedTo: string | null;
  events: RolloutEvent[];
}

/** Minutes for an event ("30m", "90s"). */
function span(ms: number): string {
  const s = Math.round(ms / 1000);
  return s % 60 === 0 ? `${s / 60}m` : `${s}s`;
}

/** The warm slot's changes at the start of a pass: what goes, what is held, what serves again. */
export function stepWarm(input: WarmInput): WarmStep {
  const events: RolloutEvent[] = [];
  const release: WarmStep["release"] = [];
  let warm = input.stored;
  let switchedTo: string | null = null;
  const letGo = (why: string): void => {
    if (warm === null) return;
    release.push({ deploymentId: warm.deploymentId, replicas: warm.replicas });
    const kept = input.desiredOf(warm.deploymentId) ?? 0;
    if (kept > warm.replicas)
      events.push({
        type: "Normal",
        reason: "WarmRevisionReleased",
        message: `${why}: scaled down replica set ${input.nameOf(warm.deploymentId)} from ${kept} to ${warm.replicas}`,
      });
    warm = null;
  };

  // Deleted, or no longer in the region: nothing is held.
  if (
    warm !== null &&
    (input.revisionOf(warm.deploymentId) === undefined || input.desiredOf(warm.deploymentId) === undefined)
  )
    warm = null;
  if (warm !== null && warm.deploymentId === input.target) {
    switchedTo = warm.deploymentId;
    events.push({
      type: "Normal",
      reason: "SwitchedToWarmRevision",
      message: `traffic switched to replica set ${input.nameOf(warm.deploymentId)} at once: its ${input.desiredOf(warm.deploymentId) ?? 0} pods were kept warm`,
    });
    warm = null;
  }
  if (warm !== null && !input.eligible) letGo("nothing is kept warm here any more");
  if (warm !== null && warm.until !== null && input.now >= warm.until)
    letGo(`warm window of ${span(input.windowMs)} passed`);

  const prev = input.previousTarget;
  const prevRevision = prev === null ? undefined : input.revisionOf(prev);
  const targetRevision = input.revisionOf(input.target);
  const kept = prev === null ? 0 : (input.desiredOf(prev) ?? 0);
  if (
    input.eligible &&
    prev !== null &&
    prev !== input.target &&
    prevRevision !== undefined &&
    targetRevision !== undefined &&
    targetRevision > prevRevision &&
    kept > 0 &&
    (warm === null || warm.replicas === 0)
  ) {
    if (warm !== null) letGo(`replica set ${input.nameOf(prev)} is the previous revision now`);
    warm = { deploymentId: prev, replicas: kept, until: null };
    events.push({
      type: "Normal",
      reason: "KeepingRevisionWarm",
      message: `replica set ${input.nameOf(prev)} keeps its ${kept} pods outside the rollout, for a rollback within ${span(input.windowMs)} of its end`,
    });
  }
  return { warm, release, switchedTo, events };
}

/** Instances the engine counts of a revision shown at `size`: available ones first, terminating ones apart. */
export function countedInstances(instances: readonly InstanceFact[], size: number): InstanceFact[] {
  const rank = (i: InstanceFact): number =>
    i.status === "running" ? 0 : i.status === "pending" || i.status === "unknown" ? 1 : 2;
  const live = instances
    .filter((i) => i.status !== "terminating")
    .sort((a, b) => rank(a) - rank(b) || (a.readySince || Infinity) - (b.readySince || Infinity));
  return [...live.slice(0, Math.max(0, size)), ...instances.filter((i) => i.status === "terminating")];
}

/** The held revision as the engine is shown it: at its own size, with only that many of its pods. */
export function asEngineSees(r: RevisionFacts, warm: WarmState): RevisionFacts {
  if (r.deploymentId !== warm.deploymentId || r.state === null) return r;
  return {
    ...r,
    state: { ...r.state, replicas: warm.replicas },
    instances: countedInstances(r.instances, warm.replicas),
  };
}

/**
 * After the engine: the held revision at the size the engine gave it. Its pods are kept, so the
 * size to desire changes only if the engine wants more of it than it runs (`desire`); the window
 * starts once the engine has it at 0.
 */
export function afterEngine(
  warm: WarmState,
  engineReplicas: number,
  desired: number,
  now: number,
  windowMs: number,
): { warm: WarmState; desire: number | null } {
  return {
    warm: {
      deploymentId: warm.deploymentId,
      replicas: engineReplicas,
      until: warm.until ?? (engineReplicas === 0 ? now + windowMs : null),
    },
    desire: engineReplicas > desired ? engineReplicas : null,
  };
}

export interface RoutedRevision {
  deploymentId: string;
  /** Its size after the pass, as the engine has it (the held revision's own size). */
  size: number;
  /** What the engine counts of it (the held revision: countedInstances). */
  counted: readonly InstanceFact[];
  /** Every instance it runs. */
  instances: readonly InstanceFact[];
}

/**
 * The weights a region's sentinels route by, or null for "every running instance an equal
 * share" (a Kubernetes Service, what a rolling update without a held revision uses). Weighted
 * while a revision is held, and afterwards while a revision other than the target still has
 * pods that are not terminating (so a revision let go or rolled back from gets nothing while it
 * scales down). Each revision's weight is what the engine counts of it available, capped at its
 * size; a target with all its replicas available takes everything.
 */
export function regionWeights(p: {
  target: string;
  replicas: number;
  held: string | null;
  weightedNow: boolean;
  revisions: readonly RoutedRevision[];
  minReadySeconds: number;
  now: number;
}): RevisionWeight[] | null {
  const others = p.revisions.some(
    (r) => r.deploymentId !== p.target && r.instances.some((i) => i.status !== "terminating"),
  );
  if (p.held === null && !(p.weightedNow && others)) return null;
  const available = (r: RoutedRevision): number =>
    revisionStatus(r.counted, p.minReadySeconds, p.now).availableReplicas;
  const target = p.revisions.find((r) => r.deploymentId === p.target);
  if (target !== undefined && p.replicas > 0 && available(target) >= p.replicas)
    return [{ deploymentId: p.target, weight: 100 }];
  const order = [...p.revisions].sort((a, b) =>
    a.deploymentId === p.target ? -1 : b.deploymentId === p.target ? 1 : a.deploymentId.localeCompare(b.deploymentId),
  );
  const ws = order
    .map((r) => ({ deploymentId: r.deploymentId, weight: Math.min(available(r), r.size) }))
    .filter((w) => w.weight > 0);
  if (ws.length === 0) return [{ deploymentId: p.target, weight: 100 }];
  return safeWeights(ws, () => 1).filter((w) => w.weight > 0);
}

export interface RollbackPlan {
  /** The revision the environment is pinned to. */
  deploymentId: string;
  revision: number;
  /** Every region with replicas keeps it warm: the next pass switches traffic, no pod is created. */
  instant: boolean;
  /** Regions with replicas that keep nothing warm to switch to: they roll out to it. */
  rollingRegions: string[];
}

/**
 * What `krane rollback` goes back to: the revision the regions keep warm (the one that served
 * before the current rollout), else the newest revision older than the current one. Regions at
 * 0 replicas switch nothing. With `instant`, a region that would have to roll out is an error.
 */
export function rollbackPlan(p: {
  environment: string;
  current: { id: string; revision: number } | null;
  deployments: readonly { id: string; revision: number }[];
  regions: readonly { region: string; replicas: number; warm: string | null }[];
  instant: boolean;
  windowSeconds: number;
  /** The environment keeps a previous revision warm at all (pass.ts keepsWarm). */
  keepsWarm: boolean;
}): RollbackPlan {
  const revisionOf = new Map(p.deployments.map((d) => [d.id, d.revision]));
  const current = p.current;
  if (current === null) throw failedPrecondition(`environment "${p.environment}" has no deployment to roll back`);
  // The warm revision most regions keep, the newer on a tie.
  const votes = new Map<string, number>();
  for (const r of p.regions) {
    const rev = r.warm === null ? undefined : revisionOf.get(r.warm);
    if (r.warm !== null && rev !== undefined && rev < current.revision) votes.set(r.warm, (votes.get(r.warm) ?? 0) + 1);
  }
  let to: { id: string; revision: number } | null = null;
  for (const [id, n] of votes) {
    const rev = revisionOf.get(id) ?? 0;
    const best = to === null ? 0 : (votes.get(to.id) ?? 0);
    if (to === null || n > best || (n === best && rev > to.revision)) to = { id, revision: rev };
  }
  if (to === null)
    for (const d of p.deployments)
      if (d.revision < current.revision && (to === null || d.revision > to.revision)) to = d;
  if (to === null)
    throw failedPrecondition(
      `environment "${p.environment}" has no revision before revision ${current.revision} to roll back to`,
    );
  const dest = to;
  const rollingRegions = p.regions.filter((r) => r.replicas > 0 && r.warm !== dest.id).map((r) => r.region);
  if (p.instant && rollingRegions.length > 0) {
    const where = rollingRegions.map((r) => `"${r}"`).join(", ");
    const why = !p.keepsWarm
      ? p.windowSeconds === 0
        ? `its warm window is 0 (set one with \`krane env update --warm-window\`)`
        : "only a RollingUpdate environment with a sentinel keeps the previous revision warm"
      : `a revision stays warm for ${span(p.windowSeconds * 1000)} after the rollout that replaced it`;
    throw failedPrecondition(
      `environment "${p.environment}" keeps nothing warm to roll back to in region ${where} (${why}): without --instant, rollback rolls out revision ${dest.revision} with new pods`,
    );
  }
  return { deploymentId: dest.id, revision: dest.revision, instant: rollingRegions.length === 0, rollingRegions };
}

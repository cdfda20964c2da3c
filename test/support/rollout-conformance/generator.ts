// Seeded random single-pass inputs for the rollout engine, for the differential test against the
// real Deployment controller. Each case belongs to a class that steers it at one part of the
// controller (rolling step, Recreate, proportional scaling, pause, history cleanup while paused,
// rollback, revision bump, progress deadline, history cleanup, int32 limits); within the class everything else is random
// too: strategy, surge/unavailable as ints and percentages, replica counts, several old
// revisions with their sizes and pod counts, stale or missing annotations, stored status and
// conditions. Inputs are always valid for `krane rollout plan`, except that the int32 class
// sometimes asks for replicas + maxSurge beyond int32, which the engine refuses. Terminating pods
// are part of the inputs although ctrl does not report them yet (see src/rollout/README.md).
import type {
  Condition,
  ConditionStatus,
  DeploymentStatus,
  IntOrPercent,
  RevisionInput,
  RolloutInput,
} from "../../../src/rollout/index.js";
import { Random } from "./random.js";

export const CLASSES = [
  "rolling",
  "recreate",
  "scaling",
  "paused",
  "paused-history",
  "rollback",
  "revision-bump",
  "progress",
  "history",
  "int32",
] as const;
export type CaseClass = (typeof CLASSES)[number];

export interface ConformanceCase {
  seed: number;
  index: number;
  class: CaseClass;
  input: RolloutInput;
}

export const MAX_INT32 = 2147483647;
export const GEN_NOW = "2026-01-01T00:00:00Z";
const NOW_MS = Date.parse(GEN_NOW);

function iso(ms: number): string {
  return new Date(ms).toISOString().replace(".000Z", "Z");
}

/** Kubernetes' GetScaledValueFromIntOrPercent, for sizing annotations the way a previous pass would. */
function scaled(v: IntOrPercent, total: number, roundUp: boolean): number {
  if (typeof v === "number") return v;
  const exact = (Number.parseInt(v, 10) * total) / 100;
  return roundUp ? Math.ceil(exact) : Math.floor(exact);
}

function clamp(n: number): number {
  return Math.max(0, Math.min(MAX_INT32, n));
}

/** Case `index` of the run with this seed; classes take turns. */
export function generateCase(seed: number, index: number): ConformanceCase {
  const cls = CLASSES[index % CLASSES.length] as CaseClass;
  return { seed, index, class: cls, input: build(Random.forCase(seed, index), cls) };
}

export function generateCases(seed: number, count: number): ConformanceCase[] {
  return Array.from({ length: count }, (_, i) => generateCase(seed, i));
}

function replicasFor(rng: Random, cls: CaseClass): number {
  if (cls === "int32") {
    return rng.weighted([
      [3, MAX_INT32 - rng.int(0, 3)],
      [2, 2 ** 30 + rng.int(-2, 2)],
      [2, 46341 + rng.int(-2, 2)],
      [3, rng.int(100_000, 2_000_000_000)],
    ]);
  }
  return rng.weighted([
    [1, 0],
    [5, rng.int(1, 3)],
    [8, rng.int(4, 12)],
    [4, rng.int(13, 100)],
    [1, rng.int(101, 2000)],
  ]);
}

function fencepost(rng: Random, replicas: number, cls: CaseClass, surge: boolean): IntOrPercent {
  // Near the int32 limit most surges overflow replicas + maxSurge (refused); keep most within it.
  if (cls === "int32" && surge && rng.chance(0.7))
    return rng.chance(0.5) ? rng.int(0, 3) : rng.int(0, MAX_INT32 - replicas);
  if (rng.chance(0.5)) {
    return `${rng.pick([0, 1, 5, 10, 20, 25, 30, 33, 34, 50, 66, 75, 99, 100, rng.int(0, 100)])}%`;
  }
  if (cls === "int32")
    return rng.weighted([
      [3, rng.int(0, 3)],
      [2, rng.int(0, MAX_INT32 - replicas)],
      [1, rng.int(0, MAX_INT32)],
    ]);
  return rng.weighted([
    [6, rng.int(0, 3)],
    [2, rng.int(0, replicas)],
    [1, rng.int(0, 10)],
  ]);
}

const NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789";

function revisionName(rng: Random, taken: Set<string>): string {
  for (;;) {
    let s = "web-";
    for (let i = 0; i < 5; i++) s += NAME_CHARS[rng.int(0, NAME_CHARS.length - 1)];
    if (!taken.has(s)) {
      taken.add(s);
      return s;
    }
  }
}

function podCounts(rng: Random, spec: number): RevisionInput["status"] {
  const replicas = clamp(
    rng.weighted([
      [6, spec],
      [2, rng.int(0, spec)],
      [2, spec + rng.int(1, 3)],
    ]),
  );
  const readyReplicas = rng.weighted([
    [6, replicas],
    [3, rng.int(0, replicas)],
  ]);
  const availableReplicas = rng.weighted([
    [6, readyReplicas],
    [3, rng.int(0, readyReplicas)],
  ]);
  return { replicas, readyReplicas, availableReplicas };
}

/** Splits `total` pods over `n` revisions at random (some get none). */
function split(rng: Random, total: number, n: number): number[] {
  const out = new Array<number>(n).fill(0);
  if (n === 0) return out;
  let left = total;
  for (let i = 0; i < n - 1 && left > 0; i++) {
    const take = rng.chance(0.3) ? 0 : rng.int(0, left);
    out[i] = take;
    left -= take;
  }
  out[n - 1] = (out[n - 1] ?? 0) + left;
  return rng.shuffle(out);
}

function build(rng: Random, cls: CaseClass): RolloutInput {
  // Paused cleanup: either nothing is active (the pass gives the newest revision every replica) or
  // everything drains to 0, with a small history limit, so cleanup meets revisions it just resized.
  const idle = cls === "paused-history" && rng.chance(0.5);
  const replicas = cls === "paused-history" && !idle && rng.chance(0.5) ? 0 : replicasFor(rng, cls);
  const recreate = cls === "recreate" || (!["rolling", "scaling", "int32"].includes(cls) && rng.chance(0.2));
  const maxSurge = fencepost(rng, replicas, cls, true);
  const maxUnavailable = fencepost(rng, replicas, cls, false);
  const surge = recreate ? 0 : scaled(maxSurge, replicas, true);
  const minReadySeconds = rng.weighted([
    [6, 0],
    [4, rng.int(1, 30)],
  ]);
  const progressDeadlineSeconds = rng.weighted<number | null>([
    [cls === "progress" ? 0 : 2, null],
    [1, MAX_INT32],
    [5, 600],
    [5, minReadySeconds + rng.int(1, 900)],
  ]);
  const revisionHistoryLimit = rng.weighted<number | null>([
    [1, null],
    [1, MAX_INT32],
    [cls === "history" || cls === "paused" ? 12 : cls === "paused-history" ? 1000 : 4, rng.int(0, 3)],
    [4, 10],
  ]);
  const paused = cls === "paused" || cls === "paused-history" || rng.chance(0.04);

  // Revisions in creation order; sometimes two share a creation time (the name breaks the tie).
  const nOld =
    cls === "history" || cls === "paused-history"
      ? rng.int(2, 8)
      : cls === "scaling" || cls === "rollback" || cls === "revision-bump"
        ? rng.int(1, 4)
        : rng.weighted([
            [1, 0],
            [5, 1],
            [3, 2],
            [2, rng.int(3, 5)],
          ]);
  const names = new Set<string>();
  let t = NOW_MS - rng.int(50, 500) * 3_600_000;
  const created: number[] = [];
  for (let i = 0; i <= nOld; i++) {
    if (i > 0 && !rng.chance(0.1)) t += rng.int(1, 36_000) * 1000;
    created.push(t);
  }
  const revs: RevisionInput[] = created.map((ms) => ({
    name: revisionName(rng, names),
    revision: null,
    createdAt: iso(ms),
    replicas: 0,
    desiredReplicas: null,
    maxReplicas: null,
    status: { replicas: 0, readyReplicas: 0, availableReplicas: 0 },
  }));

  // The target is usually the newest revision; after a rollback it is an older one.
  const rolledBack = cls === "revision-bump" || (nOld > 0 && rng.chance(0.25));
  const targetPos = rolledBack && nOld > 0 ? rng.int(0, nOld - 1) : nOld;
  const target = revs[targetPos] as RevisionInput;
  const targetExists =
    cls === "revision-bump" || cls === "history" || cls === "progress"
      ? rng.chance(0.92)
      : idle
        ? rng.chance(0.4)
        : rolledBack || rng.chance(0.5);

  // Revision numbers: increasing with creation (with gaps); a rolled-back target keeps its old, lower number.
  let n = rng.int(0, 3);
  for (const r of revs) {
    n += rng.chance(0.8) ? 1 : rng.int(2, 4);
    r.revision = n;
  }
  if (rolledBack && rng.chance(0.3)) {
    // …or it already went through one bump: its number is above every other.
    target.revision = n + rng.int(1, 3);
  }
  if (!targetExists) target.revision = null;
  for (const r of revs) if (r !== target && rng.chance(0.05)) r.revision = null;

  // Sizes: a finished rollout (history), or mid-rollout with the pods spread over revisions.
  const maxTotal = replicas + surge;
  const existing = revs.filter((r) => r.revision !== null);
  const olds = existing.filter((r) => r !== target);
  if (cls === "history" && target.revision !== null) {
    target.replicas = replicas;
    for (const r of olds) r.replicas = rng.chance(0.85) ? 0 : rng.int(0, 2);
  } else {
    if (target.revision !== null) {
      target.replicas = rng.weighted([
        [5, rng.int(0, replicas)],
        [3, replicas],
        [1, clamp(replicas + rng.int(1, 3))],
      ]);
    }
    const oldTotal = clamp(
      rng.weighted([
        [6, Math.max(0, maxTotal - target.replicas - rng.int(0, 2))],
        [2, rng.int(0, Math.max(0, maxTotal))],
        [1, maxTotal + rng.int(1, 5)],
      ]),
    );
    split(rng, oldTotal, olds.length).forEach((size, i) => {
      (olds[i] as RevisionInput).replicas = clamp(size);
    });
  }

  if (idle) for (const r of existing) r.replicas = 0;

  // Pod counts and the desired/max-replicas annotations a previous pass left.
  const previousReplicas = cls === "scaling" ? replicasFor(rng, "rolling") : replicas;
  for (const r of existing) {
    r.status = podCounts(rng, r.replicas);
    // Pods shutting down, above all of revisions being scaled down (Recreate waits for them).
    if (rng.chance(cls === "recreate" ? 0.35 : 0.1)) r.status.terminatingReplicas = rng.int(1, 3);
    if (cls === "paused-history" && r !== target && rng.chance(0.5))
      r.status = { replicas: 0, readyReplicas: 0, availableReplicas: 0 };
    const desired = rng.weighted<number | null>([
      [16, cls === "scaling" && r.replicas > 0 ? previousReplicas : replicas],
      [cls === "scaling" || cls === "paused" ? 4 : 1, replicasFor(rng, cls === "int32" ? "int32" : "rolling")],
      [1, null],
    ]);
    r.desiredReplicas = desired;
    if (desired !== null) {
      const max = desired + (recreate ? 0 : scaled(maxSurge, desired, true));
      r.maxReplicas = rng.weighted<number | null>([
        [16, max <= MAX_INT32 ? max : null],
        [1, null],
        [1, 0],
        [1, rng.int(1, 20)],
      ]);
    }
  }

  let rollbackTo: number | null = null;
  if (cls === "rollback" || rng.chance(0.03)) {
    const numbers = existing.map((r) => r.revision as number);
    rollbackTo = rng.weighted<number>([
      [3, 0],
      [5, numbers.length > 0 ? rng.pick(numbers) : 0],
      [1, Math.max(0, ...numbers) + rng.int(1, 5)],
    ]);
  }

  return {
    now: iso(NOW_MS + (rng.chance(0.1) ? rng.int(1, 999) : 0)),
    deployment: {
      name: "web",
      replicas,
      strategy: recreate
        ? { type: "Recreate" }
        : { type: "RollingUpdate", rollingUpdate: { maxSurge, maxUnavailable } },
      minReadySeconds,
      progressDeadlineSeconds,
      revisionHistoryLimit,
      paused,
      target: target.name,
      rollbackTo,
      status: storedStatus(rng, revs, target),
      conditions: conditions(rng, cls, progressDeadlineSeconds, target.name),
    },
    revisions: revs,
  };
}

/** What the previous pass stored: usually the status of these revisions, sometimes stale. */
function storedStatus(rng: Random, revs: readonly RevisionInput[], target: RevisionInput): DeploymentStatus {
  const sum = (f: (r: RevisionInput) => number): number => revs.reduce((s, r) => s + f(r), 0);
  const available = sum((r) => r.status.availableReplicas);
  const exact: DeploymentStatus = {
    replicas: sum((r) => r.status.replicas),
    updatedReplicas: target.status.replicas,
    readyReplicas: sum((r) => r.status.readyReplicas),
    availableReplicas: available,
    unavailableReplicas: Math.max(0, sum((r) => r.replicas) - available),
  };
  const bounded = (o: DeploymentStatus): DeploymentStatus => ({
    replicas: clamp(o.replicas),
    updatedReplicas: clamp(o.updatedReplicas),
    readyReplicas: clamp(o.readyReplicas),
    availableReplicas: clamp(o.availableReplicas),
    unavailableReplicas: clamp(o.unavailableReplicas),
  });
  return rng.weighted<DeploymentStatus>([
    [7, bounded(exact)],
    [
      2,
      bounded({
        ...exact,
        [rng.pick([
          "replicas",
          "updatedReplicas",
          "readyReplicas",
          "availableReplicas",
          "unavailableReplicas",
        ] as const)]: rng.int(0, 12),
      }),
    ],
    [1, { replicas: 0, updatedReplicas: 0, readyReplicas: 0, availableReplicas: 0, unavailableReplicas: 0 }],
  ]);
}

const PROGRESSING_REASONS: readonly (readonly [string, ConditionStatus])[] = [
  ["ReplicaSetUpdated", "True"],
  ["NewReplicaSetCreated", "True"],
  ["FoundNewReplicaSet", "True"],
  ["NewReplicaSetAvailable", "True"],
  ["ProgressDeadlineExceeded", "False"],
  ["DeploymentPaused", "Unknown"],
  ["DeploymentResumed", "Unknown"],
];

function conditions(rng: Random, cls: CaseClass, pds: number | null, target: string): Condition[] {
  const out: Condition[] = [];
  if (rng.chance(pds === null ? 0.15 : cls === "progress" ? 0.9 : 0.7)) {
    const [reason, usual] = rng.pick(PROGRESSING_REASONS);
    const status = rng.chance(0.9) ? usual : rng.pick<ConditionStatus>(["True", "False", "Unknown"]);
    const deadlineMs = (pds === null || pds === MAX_INT32 ? 600 : pds) * 1000;
    // Often right at the deadline's edges, where "timed out" and "requeue now" are decided.
    const ageMs = rng.weighted([
      [4, rng.int(0, 2 * deadlineMs)],
      [1, deadlineMs],
      [1, deadlineMs - 1000],
      [1, deadlineMs - rng.int(1, 999)],
      [1, deadlineMs + 1000],
      [1, 0],
    ]);
    const lastUpdate = NOW_MS - ageMs;
    const lastTransition = rng.chance(0.5) ? lastUpdate : lastUpdate - rng.int(0, 3600) * 1000;
    out.push({
      type: "Progressing",
      status,
      reason,
      message: `ReplicaSet "${target}" is progressing.`,
      lastUpdateTime: iso(lastUpdate),
      lastTransitionTime: iso(lastTransition),
    });
  }
  if (rng.chance(0.7)) {
    const ok = rng.chance(0.6);
    const at = iso(NOW_MS - rng.int(0, 7200) * 1000);
    out.push({
      type: "Available",
      status: ok ? "True" : "False",
      reason: ok ? "MinimumReplicasAvailable" : "MinimumReplicasUnavailable",
      message: ok ? "Deployment has minimum availability." : "Deployment does not have minimum availability.",
      lastUpdateTime: at,
      lastTransitionTime: at,
    });
  }
  if (rng.chance(0.03)) {
    const at = iso(NOW_MS - rng.int(0, 7200) * 1000);
    out.push({
      type: "ReplicaFailure",
      status: "True",
      reason: "FailedCreate",
      message: "quota",
      lastUpdateTime: at,
      lastTransitionTime: at,
    });
  }
  return rng.shuffle(out);
}

// Compares one pass of krane's engine with one sync of the real Deployment controller, field by
// field: target, each revision's number, size and desired/max-replicas annotations, deletions,
// status, conditions (status, reason, message, times), events and requeue. A difference is
// either explained by an entry of INTENDED (each one is listed, with its reason, under
// "Intended differences" in src/rollout/README.md) or it is a conformance failure.
import type { IntOrPercent, RolloutInput, RolloutOutput } from "../../../src/rollout/index.js";
import type { KubeResult } from "./harness.js";

export type KraneResult = { output: RolloutOutput } | { error: string };

export interface Difference {
  /** What differs, e.g. "revision.replicas", "status.unavailableReplicas", "condition.Progressing.reason". */
  kind: string;
  /** Which revision or condition, when the kind is per item. */
  where?: string;
  krane: unknown;
  kube: unknown;
}

const MAX_INT32 = 2147483647;

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Every difference between the two results; [] when they agree on everything compared. */
export function compareResults(krane: KraneResult, kube: KubeResult): Difference[] {
  const diffs: Difference[] = [];
  if ("output" in krane) diffs.push(...invalidOutput(krane.output));
  if (!("output" in krane) || !("output" in kube)) {
    const k = "output" in krane ? "ok" : krane.error;
    const c = "output" in kube ? "ok" : kube.error;
    if (k !== c) diffs.push({ kind: "error", krane: k, kube: c });
    return diffs;
  }
  const a = krane.output;
  const b = kube.output;
  if (b.syncError !== undefined) diffs.push({ kind: "syncError", krane: undefined, kube: b.syncError });
  if (a.target !== b.target) diffs.push({ kind: "target", krane: a.target, kube: b.target });
  if (!same(a.delete, b.delete)) diffs.push({ kind: "delete", krane: a.delete, kube: b.delete });

  const deleted = new Set([...a.delete, ...b.delete]);
  const kubeRevs = new Map(b.revisions.map((r) => [r.name, r]));
  for (const r of a.revisions) {
    if (deleted.has(r.name)) continue;
    const k = kubeRevs.get(r.name);
    for (const f of ["revision", "replicas", "desiredReplicas", "maxReplicas"] as const) {
      const x = r[f] ?? null;
      const y = k?.[f] ?? null;
      if (x !== y) diffs.push({ kind: `revision.${f}`, where: r.name, krane: x, kube: y });
    }
  }

  for (const f of [
    "replicas",
    "updatedReplicas",
    "readyReplicas",
    "availableReplicas",
    "unavailableReplicas",
  ] as const) {
    if (a.status[f] !== b.status[f]) diffs.push({ kind: `status.${f}`, krane: a.status[f], kube: b.status[f] });
  }

  const types = [...new Set([...a.conditions.map((c) => c.type), ...b.conditions.map((c) => c.type)])];
  for (const type of types) {
    const x = a.conditions.find((c) => c.type === type);
    const y = b.conditions.find((c) => c.type === type);
    if (x === undefined || y === undefined) {
      diffs.push({ kind: `condition.${type}`, krane: x ?? "absent", kube: y ?? "absent" });
      continue;
    }
    for (const f of ["status", "reason", "message", "lastUpdateTime", "lastTransitionTime"] as const) {
      if (x[f] !== y[f]) diffs.push({ kind: `condition.${type}.${f}`, krane: x[f], kube: y[f] });
    }
  }
  const order = (o: RolloutOutput): string[] => o.conditions.map((c) => c.type);
  if (diffs.every((d) => !d.kind.startsWith("condition.")) && !same(order(a), order(b))) {
    diffs.push({ kind: "condition.order", krane: order(a), kube: order(b) });
  }

  if (!same(a.events, b.events)) diffs.push({ kind: "events", krane: a.events, kube: b.events });
  const ra = a.requeueAfterSeconds;
  const rb = b.requeueAfterSeconds;
  if ((ra === null) !== (rb === null) || (ra !== null && rb !== null && Math.abs(ra - rb) > 1e-6)) {
    diffs.push({ kind: "requeueAfterSeconds", krane: ra, kube: rb });
  }
  return diffs;
}

/** krane must never print a replica count outside 0 … 2^31−1, whatever Kubernetes does. */
function invalidOutput(out: RolloutOutput): Difference[] {
  const bad: Difference[] = [];
  const ok = (n: number | undefined): boolean => n === undefined || (Number.isInteger(n) && n >= 0 && n <= MAX_INT32);
  for (const r of out.revisions) {
    if (!ok(r.replicas) || !ok(r.desiredReplicas) || !ok(r.maxReplicas)) {
      bad.push({ kind: "krane.invalid", where: r.name, krane: r, kube: undefined });
    }
  }
  return bad;
}

/**
 * A difference krane keeps on purpose. `applies` says whether an input is in its scope; there,
 * differences whose kind matches `kinds` are expected. Ids match src/rollout/README.md.
 */
export interface IntendedDifference {
  id: string;
  summary: string;
  kinds: RegExp;
  applies(input: RolloutInput, krane: KraneResult, kube: KubeResult): boolean;
}

/** Kubernetes' GetScaledValueFromIntOrPercent. */
function scaled(v: IntOrPercent, total: number, roundUp: boolean): number {
  if (typeof v === "number") return v;
  const exact = (Number.parseInt(v, 10) * total) / 100;
  return roundUp ? Math.ceil(exact) : Math.floor(exact);
}

/** replicas + maxSurge: the most pods a rolling update may run (Kubernetes' max-replicas). */
function maxPods(input: RolloutInput): number {
  const d = input.deployment;
  return d.strategy.type === "RollingUpdate"
    ? d.replicas + scaled(d.strategy.rollingUpdate.maxSurge, d.replicas, true)
    : d.replicas;
}

/**
 * True when some int32 sum or product the controller computes for this input passes 2^31−1
 * (Go wraps it around): Σ sizes or pod counts, replicas + maxSurge, a size × (replicas + maxSurge)
 * in proportional scaling, or the old-pod scale-down budget.
 */
export function int32Overflows(input: RolloutInput): boolean {
  const revs = input.revisions.filter((r) => r.revision !== null);
  const sum = (f: (r: (typeof revs)[number]) => number): number => revs.reduce((n, r) => n + f(r), 0);
  const max = maxPods(input);
  if (max > MAX_INT32) return true;
  if (
    [
      sum((r) => r.replicas),
      sum((r) => r.status.replicas),
      sum((r) => r.status.readyReplicas),
      sum((r) => r.status.availableReplicas),
    ].some((n) => n > MAX_INT32)
  )
    return true;
  if (revs.some((r) => r.replicas * max > MAX_INT32)) return true;
  const target = revs.find((r) => r.name === input.deployment.target);
  const newRSUnavailable = target === undefined ? 0 : target.replicas - target.status.availableReplicas;
  return Math.abs(sum((r) => r.replicas) - input.deployment.replicas - newRSUnavailable) > MAX_INT32;
}

export const INTENDED: readonly IntendedDifference[] = [
  {
    id: "paused-cleanup-keeps-scaled-up",
    summary: "a paused pass never deletes, in history cleanup, a revision it has just scaled up from 0",
    kinds: /^delete$/,
    applies(input, krane, kube) {
      if (!("output" in krane) || !("output" in kube) || !input.deployment.paused) return false;
      const k = krane.output;
      const extra = kube.output.delete.filter((n) => !k.delete.includes(n));
      const scaledUpFromZero = (name: string): boolean =>
        input.revisions.some((r) => r.name === name && r.replicas === 0) &&
        k.revisions.some((r) => r.name === name && r.replicas > 0);
      return (
        extra.length > 0 &&
        extra.every(scaledUpFromZero) &&
        same(
          kube.output.delete.filter((n) => !extra.includes(n)),
          k.delete,
        )
      );
    },
  },
  {
    id: "scaling-event-settles",
    summary:
      "a scaling event whose only active revision already has the new size rewrites its annotations, so the next pass rolls on",
    kinds: /^revision\.(desiredReplicas|maxReplicas)$/,
    applies(input, krane) {
      if (!("output" in krane)) return false;
      const active = input.revisions.filter((r) => r.revision !== null && r.replicas > 0);
      const only = active.length === 1 ? active[0] : undefined;
      return (
        only !== undefined &&
        only.replicas === input.deployment.replicas &&
        only.desiredReplicas !== null &&
        only.desiredReplicas !== input.deployment.replicas &&
        krane.output.revisions.some((r) => r.name === only.name && r.desiredReplicas === input.deployment.replicas)
      );
    },
  },
  {
    id: "int32-refused",
    summary: "krane refuses replicas + maxSurge beyond 2^31−1, where Kubernetes' sizes wrap around",
    kinds: /^error$/,
    applies: (input, krane) =>
      "error" in krane &&
      krane.error.startsWith("refused: deployment.strategy.rollingUpdate.maxSurge:") &&
      maxPods(input) > MAX_INT32,
  },
  {
    id: "int32-exact",
    summary: "krane computes exactly where the controller's int32 arithmetic wraps around",
    kinds: /^(?!krane\.invalid$)/,
    applies: (input) => int32Overflows(input),
  },
];

export interface Verdict {
  diffs: Difference[];
  /** Ids of the intended differences that explain this input's differences. */
  intended: string[];
  /** Differences nothing explains: conformance failures. */
  unexplained: Difference[];
}

export function judge(
  input: RolloutInput,
  krane: KraneResult,
  kube: KubeResult,
  intended: readonly IntendedDifference[] = INTENDED,
): Verdict {
  const diffs = compareResults(krane, kube);
  const scope = intended.filter((d) => d.applies(input, krane, kube));
  const used = new Set<string>();
  const unexplained: Difference[] = [];
  for (const diff of diffs) {
    const by = diff.kind === "krane.invalid" ? undefined : scope.find((d) => d.kinds.test(diff.kind));
    if (by === undefined) unexplained.push(diff);
    else used.add(by.id);
  }
  return { diffs, intended: [...used].sort(), unexplained };
}

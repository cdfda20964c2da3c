// The autoscaler's decision for one environment in one region: how many replicas the region should
// have. Pure (the clock is an input) so that it is tested on its own and run the same by the agent.
//
// One writer per number: the result is the region's desired replica count, nothing else. The
// rollout engine stays the only writer of each revision's size; this core only needs to know how
// the engine turns a region count into a revision's size (`Serving.sizeAt`), so that it can pick
// the smallest region count at which every revision serving traffic gets the instances its own
// load needs. Each revision is judged on its own measurements, never on an average across canary
// and stable: an idle stable never hides a hot canary, and a hot canary never drags a stable
// that has enough (a canary at 65 % only raises the region count as far as the canary needs).
//
// Stabilisation follows the HorizontalPodAutoscaler's behaviour: a raw recommendation is kept per
// decision; a higher count is taken only as far as every recommendation of the scale-up window
// asked, a lower one only as far as every recommendation of the scale-down window allowed; then
// the step limit and min/max apply. A request held at zero bypasses the windows: the region goes
// to at least one at once.
import type { AutoscalePolicy } from "../contracts/autoscaling.js";

/** One revision that serves (or may serve) traffic in the region. */
export interface Serving {
  readonly deploymentId: string;
  /** Requests in flight at the region's sentinels for this revision, averaged over the last window. */
  readonly inFlight: number;
  /** Average CPU use of its ready instances in percent of their request; null when not measured. */
  readonly cpuPercent: number | null;
  /** Its ready instances now (for CPU: the use is spread over these). */
  readonly ready: number;
  /**
   * The size the rollout engine gives this revision when the region has `replicas`: the identity
   * for a plain environment, the canary's share of its weight during a canary, … Monotone.
   */
  readonly sizeAt: (replicas: number) => number;
}

export interface RecommendInput {
  readonly policy: AutoscalePolicy;
  readonly nowMs: number;
  /** The region's desired replica count now (what the autoscaler or a person last set). */
  readonly current: number;
  readonly serving: readonly Serving[];
  /** Requests the region's sentinels hold for the environment because nothing is Ready. */
  readonly held: number;
  /** When a request last reached one of the region's sentinels for the environment; null: never seen. */
  readonly lastRequestMs: number | null;
}

/** A raw recommendation remembered for the stabilisation windows. */
export interface Recorded {
  readonly atMs: number;
  readonly replicas: number;
}

export interface Recommendation {
  readonly replicas: number;
  /** Why, in a sentence for `krane status`. */
  readonly reason: string;
  /** The history to pass to the next decision (bounded by the longer window). */
  readonly history: readonly Recorded[];
}

/** Instances a revision needs for its own load: by concurrency and by CPU, whichever asks more. */
export function revisionNeed(policy: AutoscalePolicy, s: Serving): number {
  let need = 0;
  if (policy.concurrencyTarget !== null && s.inFlight > 0) need = Math.ceil(s.inFlight / policy.concurrencyTarget);
  if (policy.cpuTargetPercent !== null && s.cpuPercent !== null && s.ready > 0)
    need = Math.max(need, Math.ceil((s.ready * s.cpuPercent) / policy.cpuTargetPercent));
  return need;
}

/**
 * The smallest region count in [lo, hi] at which `sizeAt` gives at least `need`; hi when even
 * that is not enough (binary search: sizeAt is monotone).
 */
export function smallestCovering(sizeAt: (r: number) => number, need: number, lo: number, hi: number): number {
  if (need <= 0) return lo;
  let a = lo;
  let b = hi;
  if (sizeAt(b) < need) return hi;
  while (a < b) {
    const m = Math.floor((a + b) / 2);
    if (sizeAt(m) >= need) b = m;
    else a = m + 1;
  }
  return a;
}

/** The raw recommendation before windows and steps, with the revision that drove it. */
function raw(input: RecommendInput, floor: number, hi: number): { replicas: number; reason: string } {
  let replicas = floor;
  let reason = `no load: the floor of ${floor}`;
  for (const s of input.serving) {
    const need = revisionNeed(input.policy, s);
    if (need === 0) continue;
    const r = smallestCovering(s.sizeAt, need, floor, hi);
    if (r > replicas || (r === replicas && reason.startsWith("no load"))) {
      replicas = r;
      const by =
        input.policy.concurrencyTarget !== null && Math.ceil(s.inFlight / input.policy.concurrencyTarget) === need
          ? `${round(s.inFlight)} in flight at ${input.policy.concurrencyTarget} per instance`
          : `cpu ${round(s.cpuPercent ?? 0)}% on ${s.ready} at a target of ${input.policy.cpuTargetPercent ?? 0}%`;
      const share = s.sizeAt(r) === r ? "" : ` (its share of the region is ${s.sizeAt(r)} of ${r})`;
      const capped = s.sizeAt(r) < need ? `; capped at max ${hi}` : "";
      reason = `revision ${s.deploymentId} needs ${need}: ${by}${share}${capped}`;
    }
  }
  return { replicas, reason };
}

/**
 * With a CPU target, a revision serving traffic whose CPU is not measured (no metrics API, or no
 * figure yet) says nothing about its load: as the HorizontalPodAutoscaler does when a metric is
 * missing, the region is then not scaled down on the other figures' word.
 */
function notBelowUnmeasured(
  input: RecommendInput,
  r: { replicas: number; reason: string },
): { replicas: number; reason: string } {
  if (input.policy.cpuTargetPercent === null || r.replicas >= input.current) return r;
  const unmeasured = input.serving.find((s) => s.cpuPercent === null && s.ready > 0);
  if (unmeasured === undefined) return r;
  return {
    replicas: input.current,
    reason: `cpu of revision ${unmeasured.deploymentId} not measured: not below ${input.current}`,
  };
}

function round(n: number): number {
  return Math.round(n * 10) / 10;
}

export function recommend(input: RecommendInput, history: readonly Recorded[]): Recommendation {
  const p = input.policy;
  const now = input.nowMs;
  const keepMs = Math.max(p.scaleUpWindowSeconds, p.scaleDownWindowSeconds) * 1000;
  const kept = history.filter((h) => h.atMs > now - keepMs && h.atMs <= now);
  const totalInFlight = input.serving.reduce((n, s) => n + s.inFlight, 0);
  const z = p.scaleToZero;

  // Idle long enough: the region sleeps. Any request (held or in flight) keeps it awake.
  if (z !== null && input.held === 0 && totalInFlight === 0) {
    const idleMs = input.lastRequestMs === null ? Infinity : now - input.lastRequestMs;
    if (idleMs >= z.idleSeconds * 1000) {
      const reason =
        input.lastRequestMs === null
          ? `no request seen, idle window ${z.idleSeconds}s: scaled to zero`
          : `no request for ${Math.floor(idleMs / 1000)}s (idle window ${z.idleSeconds}s): scaled to zero`;
      return { replicas: 0, reason, history: [...kept, { atMs: now, replicas: 0 }] };
    }
  }
  // Awake, the region keeps at least one instance (min is 0 only with scale-to-zero).
  const floor = Math.max(p.minReplicas, 1);
  const r = notBelowUnmeasured(input, raw(input, floor, p.maxReplicas));
  const next = [...kept, { atMs: now, replicas: r.replicas }];

  // A request waits at zero: instances now, whatever the windows say — as many as the held
  // requests need at the concurrency target (within max), at least one.
  if (input.current === 0) {
    const heldNeed =
      p.concurrencyTarget === null ? 1 : Math.min(p.maxReplicas, Math.ceil(input.held / p.concurrencyTarget));
    const wake = Math.max(r.replicas, 1, heldNeed);
    const why = input.held > 0 ? `${input.held} request(s) held at zero: waking` : `traffic at zero replicas: waking`;
    return { replicas: wake, reason: `${why}; ${r.reason}`, history: next };
  }

  const inWindow = (seconds: number): number[] =>
    next.filter((h) => h.atMs > now - seconds * 1000 || h.atMs === now).map((h) => h.replicas);
  const upTo = Math.min(...inWindow(p.scaleUpWindowSeconds));
  const downTo = Math.max(...inWindow(p.scaleDownWindowSeconds));
  let replicas = input.current;
  let reason = r.reason;
  if (upTo > input.current) {
    replicas = upTo;
    if (upTo < r.replicas) reason = `${r.reason}; up to ${upTo} only (scale-up window ${p.scaleUpWindowSeconds}s)`;
  } else if (downTo < input.current) {
    replicas = downTo;
    if (downTo > r.replicas)
      reason = `${r.reason}; down to ${downTo} only (scale-down window ${p.scaleDownWindowSeconds}s)`;
  } else if (r.replicas !== input.current) {
    const w =
      r.replicas > input.current
        ? `scale-up window ${p.scaleUpWindowSeconds}s`
        : `scale-down window ${p.scaleDownWindowSeconds}s`;
    reason = `${r.reason}; held at ${input.current} (${w})`;
  }
  if (p.maxStep !== null && Math.abs(replicas - input.current) > p.maxStep) {
    replicas = input.current + Math.sign(replicas - input.current) * p.maxStep;
    reason = `${reason}; limited to a step of ${p.maxStep}`;
  }
  const bounded = Math.min(p.maxReplicas, Math.max(floor, replicas));
  if (bounded !== replicas) reason = `${reason}; ${bounded === p.maxReplicas ? "at max" : "at min"} ${bounded}`;
  return { replicas: bounded, reason, history: next };
}

// Which instance gets the next request. The rules are pure functions (property-tested in
// test/unit/sentinel): the revision is drawn by its share, the instance within it by power of
// two choices on outstanding requests, and passive health ejects an instance that refuses or
// resets connections for a while that doubles with every ejection in a row, up to a cap.
//
//  - "instances" mode: a revision's share is its number of available instances, so every
//    instance gets the same share, as behind a Kubernetes Service during a rolling update.
//  - "weighted" mode: the policy's weights, renormalised over the revisions that have an
//    available instance; if none of those has weight, by instance count (never to nothing).
//  - Available = routable and not ejected. If every instance is ejected the balancer ignores
//    ejection (a "panic" mode, as Envoy has): a guess beats certain failure.
//
// The Balancer class is the small stateful shell around them: the current table, per-instance
// health and outstanding counts, with the candidate lists cached between changes.
import type { RoutingMode } from "../contracts/routing.js";
import type { Endpoint, RoutingTable } from "./table.js";

export interface HealthPolicy {
  /** Consecutive failures that eject an instance. */
  readonly failureThreshold: number;
  /** The first ejection's length; each ejection in a row doubles it, up to capMs. */
  readonly ejectBaseMs: number;
  readonly ejectCapMs: number;
}

export const DEFAULT_HEALTH_POLICY: HealthPolicy = { failureThreshold: 1, ejectBaseMs: 2_000, ejectCapMs: 30_000 };

export interface HealthState {
  /** Failures since the last success or ejection. */
  readonly failures: number;
  /** Ejections since the last success. */
  readonly ejections: number;
  /** Ejected while now < ejectedUntil. */
  readonly ejectedUntil: number;
}

export const HEALTHY: HealthState = { failures: 0, ejections: 0, ejectedUntil: 0 };

/**
 * How long an upstream stays ejected after its `ejections`-th ejection in a row: doubling from
 * the base, capped. Not src/retry's backoff: nothing is retried here — the balancer keeps
 * serving from the other upstreams and the ejection is a pure function of the health state
 * (no jitter: every sentinel replica judging the same upstream keeps it out equally long, and
 * the tests can say exactly when it comes back).
 */
export function ejectionMs(ejections: number, p: HealthPolicy): number {
  if (ejections <= 0) return 0;
  return Math.min(p.ejectCapMs, p.ejectBaseMs * 2 ** Math.min(ejections - 1, 30));
}

export function isEjected(s: HealthState, now: number): boolean {
  return now < s.ejectedUntil;
}

/** A failed connect or a reset. Failures while already ejected change nothing. */
export function afterFailure(s: HealthState, now: number, p: HealthPolicy): HealthState {
  if (isEjected(s, now)) return s;
  const failures = s.failures + 1;
  if (failures < p.failureThreshold) return { ...s, failures };
  const ejections = s.ejections + 1;
  return { failures: 0, ejections, ejectedUntil: now + ejectionMs(ejections, p) };
}

/** A response came back: the instance is healthy again. */
export function afterSuccess(s: HealthState): HealthState {
  return s.failures === 0 && s.ejections === 0 && s.ejectedUntil === 0 ? s : HEALTHY;
}

export interface RevisionCandidates {
  /** The policy weight, or null when the policy does not name the revision. */
  readonly weight: number | null;
  /** Instances available to take a request. */
  readonly available: number;
}

/** Each revision's share of new requests (they add up to 1, or all are 0 when none is available). */
export function revisionShares(mode: RoutingMode, revisions: readonly RevisionCandidates[]): number[] {
  const byCount = (): number[] => {
    const total = revisions.reduce((n, r) => n + r.available, 0);
    return revisions.map((r) => (total > 0 ? r.available / total : 0));
  };
  if (mode === "instances") return byCount();
  const weights = revisions.map((r) => (r.available > 0 ? (r.weight ?? 0) : 0));
  const sum = weights.reduce((a, b) => a + b, 0);
  if (sum <= 0) return byCount();
  return weights.map((w) => w / sum);
}

/** The index whose cumulative share range holds r (0 ≤ r < 1); -1 when all shares are 0. */
export function pickByShare(shares: readonly number[], r: number): number {
  let last = -1;
  let acc = 0;
  for (let i = 0; i < shares.length; i++) {
    const s = shares[i] ?? 0;
    if (s <= 0) continue;
    acc += s;
    last = i;
    if (r < acc) return i;
  }
  return last; // rounding: r just below 1 with shares adding up to 0.9999…
}

/**
 * Power of two choices: two distinct random candidates (from r1, r2 in [0, 1)), the one with
 * fewer outstanding requests wins; a tie goes to the first.
 */
export function powerOfTwo(n: number, load: (i: number) => number, r1: number, r2: number): number {
  if (n <= 0) return -1;
  if (n === 1) return 0;
  const i = firstChoice(n, r1);
  const j = secondChoice(n, i, r2);
  return load(j) < load(i) ? j : i;
}

/** The first candidate of power of two choices among n ≥ 2. */
export function firstChoice(n: number, r: number): number {
  return Math.min(n - 1, Math.floor(r * n));
}

/** The second candidate: uniform over the n - 1 others. */
export function secondChoice(n: number, first: number, r: number): number {
  const j = Math.min(n - 2, Math.floor(r * (n - 1)));
  return j >= first ? j + 1 : j;
}

/** An instance as the balancer tracks it (mutable: outstanding and health change per request). */
export class Instance {
  outstanding = 0;
  health: HealthState = HEALTHY;
  constructor(public endpoint: Endpoint) {}
  get key(): string {
    return this.endpoint.key;
  }
}

export interface RevisionView {
  readonly deploymentId: string;
  readonly weight: number | null;
  readonly instances: readonly Instance[];
}

export interface BalancerOptions {
  readonly health?: HealthPolicy;
  readonly random?: () => number;
  readonly now?: () => number;
}

export class Balancer {
  readonly health: HealthPolicy;
  readonly #random: () => number;
  readonly #now: () => number;
  #mode: RoutingMode = "instances";
  #preview: string | undefined;
  #revisions: RevisionView[] = [];
  #byKey = new Map<string, Instance>();
  // Cached candidates: valid until the table or an ejection changes, or an ejection ends.
  #available: Instance[][] = [];
  #shares: number[] = [];
  #validUntil = -Infinity;
  #dirty = true;

  constructor(opts: BalancerOptions = {}) {
    this.health = opts.health ?? DEFAULT_HEALTH_POLICY;
    this.#random = opts.random ?? Math.random;
    this.#now = opts.now ?? Date.now;
  }

  get mode(): RoutingMode {
    return this.#mode;
  }

  get revisions(): readonly RevisionView[] {
    return this.#revisions;
  }

  instance(key: string): Instance | undefined {
    return this.#byKey.get(key);
  }

  /** Installs a new table; instances that stay keep their health and load. Returns what left. */
  setTable(t: RoutingTable): { added: Instance[]; removed: Instance[] } {
    const next = new Map<string, Instance>();
    const added: Instance[] = [];
    const revisions: RevisionView[] = t.revisions.map((r) => ({
      deploymentId: r.deploymentId,
      weight: r.weight,
      instances: r.endpoints.map((ep) => {
        let inst = this.#byKey.get(ep.key);
        if (inst) inst.endpoint = ep;
        else added.push((inst = new Instance(ep)));
        next.set(ep.key, inst);
        return inst;
      }),
    }));
    const removed = [...this.#byKey.values()].filter((i) => !next.has(i.key));
    this.#byKey = next;
    this.#revisions = revisions;
    this.#mode = t.mode;
    this.#preview = t.preview;
    this.#dirty = true;
    return { added, removed };
  }

  /**
   * The instance for the next request, or undefined when the table has none. `preview`: the
   * request carries the preview header; with a preview revision in the table it goes there only
   * (undefined when that revision has no instance), else it is routed as any other.
   */
  pick(exclude?: ReadonlySet<string>, preview = false): Instance | undefined {
    if (preview && this.#preview !== undefined) return this.#pickPreview(this.#preview, exclude);
    const now = this.#now();
    if (this.#dirty || now >= this.#validUntil) this.#refresh(now);
    let available = this.#available;
    let shares = this.#shares;
    if (exclude && exclude.size > 0) {
      available = available.map((list) => list.filter((i) => !exclude.has(i.key)));
      if (available.every((l) => l.length === 0)) {
        available = this.#revisions.map((r) => r.instances.filter((i) => !exclude.has(i.key)));
      }
      shares = revisionShares(
        this.#mode,
        this.#revisions.map((r, idx) => ({ weight: r.weight, available: available[idx]?.length ?? 0 })),
      );
    }
    const idx = pickByShare(shares, this.#random());
    const list = idx >= 0 ? available[idx] : undefined;
    if (!list || list.length === 0) return undefined;
    return this.#twoChoices(list);
  }

  #pickPreview(deploymentId: string, exclude?: ReadonlySet<string>): Instance | undefined {
    const rev = this.#revisions.find((r) => r.deploymentId === deploymentId);
    if (rev === undefined) return undefined;
    const now = this.#now();
    const candidates = rev.instances.filter((i) => !exclude?.has(i.key));
    const healthy = candidates.filter((i) => !isEjected(i.health, now));
    const list = healthy.length > 0 ? healthy : candidates;
    if (list.length === 0) return undefined;
    return this.#twoChoices(list);
  }

  /**
   * Power of two choices over a non-empty list (no closure per request); always two draws, so
   * the random stream advances the same way whatever the list size.
   */
  #twoChoices(list: readonly Instance[]): Instance | undefined {
    const r1 = this.#random();
    const r2 = this.#random();
    const n = list.length;
    if (n === 1) return list[0];
    const i = firstChoice(n, r1);
    const a = list[i] as Instance;
    const b = list[secondChoice(n, i, r2)] as Instance;
    return b.outstanding < a.outstanding ? b : a;
  }

  /** Records a failed connect or reset; true when it ejected the instance. */
  failure(inst: Instance): boolean {
    const now = this.#now();
    const before = inst.health;
    inst.health = afterFailure(before, now, this.health);
    const ejected = !isEjected(before, now) && isEjected(inst.health, now);
    if (ejected) this.#dirty = true;
    return ejected;
  }

  success(inst: Instance): void {
    const h = inst.health;
    if (h === HEALTHY) return;
    if (isEjected(h, this.#now())) this.#dirty = true;
    inst.health = afterSuccess(h);
  }

  isEjected(inst: Instance): boolean {
    return isEjected(inst.health, this.#now());
  }

  /** Each revision's current share (0–1) and available count. */
  shares(): { deploymentId: string; share: number; available: number }[] {
    const now = this.#now();
    if (this.#dirty || now >= this.#validUntil) this.#refresh(now);
    return this.#revisions.map((r, i) => ({
      deploymentId: r.deploymentId,
      share: this.#shares[i] ?? 0,
      available: this.#available[i]?.length ?? 0,
    }));
  }

  #refresh(now: number): void {
    let validUntil = Infinity;
    let available = this.#revisions.map((r) =>
      r.instances.filter((i) => {
        if (!isEjected(i.health, now)) return true;
        validUntil = Math.min(validUntil, i.health.ejectedUntil);
        return false;
      }),
    );
    if (available.every((l) => l.length === 0)) {
      // Panic: everything is ejected (or nothing is routable); ejection is ignored.
      available = this.#revisions.map((r) => [...r.instances]);
    }
    this.#available = available;
    this.#shares = revisionShares(
      this.#mode,
      this.#revisions.map((r, i) => ({ weight: r.weight, available: available[i]?.length ?? 0 })),
    );
    this.#validUntil = validUntil;
    this.#dirty = false;
  }
}

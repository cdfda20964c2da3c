// Leader election on a coordination.k8s.io/v1 Lease, modelled on client-go's leaderelection
// (same lease fields and timing rules, so kubectl and other tools read it alike). Several agent replicas run per cluster; one leads and writes, the others keep
// their caches warm and take over when the leader's lease runs out.
//
//  - A candidate takes the lease when it has no holder, or when the lease record has not changed
//    for leaseDurationSeconds as measured on the candidate's own monotonic clock since it last saw
//    the record change. Nobody compares renewTime with its own wall clock, so clock offsets
//    between machines do not matter (rate differences must stay small).
//  - Every write is a PUT of the last record read with its resourceVersion: of two concurrent
//    writers one gets 409 Conflict and tries again on the next tick.
//  - The leader renews every retryPeriod; if it has not renewed for renewDeadline it stops
//    leading. Fencing: `isLeading()` is false as soon as the last successful renewal is older than
//    renewDeadline, by the monotonic clock — so a leader that stalled (GC pause, SIGSTOP, a lost
//    network) refuses its own writes before anybody else can have taken over
//    (renewDeadline < leaseDuration).
// The decision is a pure function (`decide`); the class only does the HTTP and the timing.
import type { KubeClient } from "./client.js";
import { KubeApiError, isNotFound } from "./client.js";
import { isRecord } from "./object.js";
import { LABEL_MANAGED_BY, MANAGED_BY } from "../contracts/labels.js";
import { sleep } from "../retry/backoff.js";

export interface ElectionTiming {
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
}

/**
 * 10 s / 7 s / 1 s. controller-runtime's 15 s / 10 s / 2 s measured a failover of p50 17.7 s,
 * p99 19.2 s after a SIGKILL (`npm run bench -- faults`): the lease, plus up to one retry period
 * before the follower sees the last renewal, plus one before it checks again. A 10 s lease brings
 * that under 15 s; a deposed leader still stops writing 3 s before anyone else may start. A
 * leader that shuts down (a rolling update) releases the lease, and the follower takes it at its
 * next check: retrying every second keeps that handover within about a second (one GET of the
 * Lease per replica a second).
 */
export const DEFAULT_TIMING: ElectionTiming = { leaseDurationMs: 10_000, renewDeadlineMs: 7_000, retryPeriodMs: 1_000 };

export function checkTiming(t: ElectionTiming): void {
  if (!(t.leaseDurationMs > t.renewDeadlineMs && t.renewDeadlineMs > 1.2 * t.retryPeriodMs && t.retryPeriodMs > 0)) {
    throw new Error("leader election needs leaseDuration > renewDeadline > 1.2 × retryPeriod > 0");
  }
}

/** The parts of a Lease's spec the election reads and writes. */
export interface LeaseRecord {
  readonly holderIdentity: string;
  readonly leaseDurationSeconds: number;
  readonly acquireTime: string;
  readonly renewTime: string;
  readonly leaseTransitions: number;
}

/** What a candidate remembers between ticks. */
export interface Observation {
  /** The last record seen (undefined: no Lease object yet). */
  readonly record: LeaseRecord | undefined;
  /** Monotonic ms when the record last changed, as seen here. */
  readonly observedAt: number;
}

export type Decision =
  | { readonly type: "wait" }
  | { readonly type: "create"; readonly record: LeaseRecord }
  | { readonly type: "update"; readonly record: LeaseRecord };

/** Pure: what a candidate does on a tick, given what it observed and the time. */
export function decide(identity: string, obs: Observation, now: number, wallNow: string, t: ElectionTiming): Decision {
  const durationSeconds = Math.ceil(t.leaseDurationMs / 1000);
  const r = obs.record;
  if (r === undefined) {
    return {
      type: "create",
      record: {
        holderIdentity: identity,
        leaseDurationSeconds: durationSeconds,
        acquireTime: wallNow,
        renewTime: wallNow,
        leaseTransitions: 0,
      },
    };
  }
  if (r.holderIdentity === identity) {
    // Renewal keeps acquireTime and the transition count.
    return { type: "update", record: { ...r, leaseDurationSeconds: durationSeconds, renewTime: wallNow } };
  }
  const expired = r.holderIdentity === "" || now - obs.observedAt >= Math.max(r.leaseDurationSeconds, 1) * 1000;
  if (!expired) return { type: "wait" };
  return {
    type: "update",
    record: {
      holderIdentity: identity,
      leaseDurationSeconds: durationSeconds,
      acquireTime: wallNow,
      renewTime: wallNow,
      leaseTransitions: r.leaseTransitions + 1,
    },
  };
}

/** Whether two records are the same (a change restarts the expiry clock). */
export function sameRecord(a: LeaseRecord | undefined, b: LeaseRecord | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return (
    a.holderIdentity === b.holderIdentity &&
    a.renewTime === b.renewTime &&
    a.acquireTime === b.acquireTime &&
    a.leaseTransitions === b.leaseTransitions &&
    a.leaseDurationSeconds === b.leaseDurationSeconds
  );
}

/** MicroTime as the API server parses it: exactly six fractional digits. */
export function microTime(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

function readRecord(spec: unknown): LeaseRecord {
  const s = isRecord(spec) ? spec : {};
  const str = (k: string): string => (typeof s[k] === "string" ? (s[k] as string) : "");
  const num = (k: string): number => (typeof s[k] === "number" ? (s[k] as number) : 0);
  return {
    holderIdentity: str("holderIdentity"),
    leaseDurationSeconds: num("leaseDurationSeconds"),
    acquireTime: str("acquireTime"),
    renewTime: str("renewTime"),
    leaseTransitions: num("leaseTransitions"),
  };
}

export interface LeaderElectorOptions {
  readonly kube: KubeClient;
  readonly namespace: string;
  readonly name: string;
  readonly identity: string;
  readonly timing?: ElectionTiming;
  readonly onStartedLeading: () => void;
  /** Awaited before the lease is given up at shutdown (guarded work must be finished first). */
  readonly onStoppedLeading: () => void | Promise<unknown>;
  readonly log: { info(o: object, m?: string): void; warn(o: object, m?: string): void };
  /** Monotonic clock (tests). */
  readonly now?: () => number;
}

export class LeaderElector {
  readonly #o: LeaderElectorOptions;
  readonly #t: ElectionTiming;
  readonly #now: () => number;
  #obs: Observation = { record: undefined, observedAt: 0 };
  #resourceVersion: string | undefined;
  #exists = false;
  #lastRenew: number | undefined;
  #leading = false;
  #paused = false;
  #transitions = 0;

  constructor(opts: LeaderElectorOptions) {
    this.#o = opts;
    this.#t = opts.timing ?? DEFAULT_TIMING;
    checkTiming(this.#t);
    this.#now = opts.now ?? (() => performance.now());
  }

  get identity(): string {
    return this.#o.identity;
  }

  /** True only while the last successful renewal is younger than renewDeadline. */
  isLeading(): boolean {
    return this.#leading && this.#lastRenew !== undefined && this.#now() - this.#lastRenew < this.#t.renewDeadlineMs;
  }

  /** The lease's transition count when this replica last took it (an epoch). */
  get transitions(): number {
    return this.#transitions;
  }

  /** Test hook: stop renewing (as a stalled process would) without giving the lease up. */
  pauseRenewals(paused: boolean): void {
    this.#paused = paused;
  }

  /** Runs until `signal` aborts; a leader that stops gives the lease up. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      // A tick is not cut short by the shutdown: a renewal aborted in flight may still have been
      // written, and the release would then carry a stale resourceVersion and be refused (the
      // followers then wait out the whole lease). Each request has its own deadline instead.
      if (!this.#paused) await this.#tick(AbortSignal.timeout(this.#t.renewDeadlineMs));
      if (this.#leading && !this.isLeading()) void this.#stop("renewal deadline passed");
      await sleep(this.#t.retryPeriodMs, signal);
    }
    if (this.#leading) {
      await this.#stop("shutting down");
      await this.#release();
    }
  }

  async #tick(signal: AbortSignal): Promise<void> {
    const path = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.#o.namespace)}/leases`;
    try {
      const got = await this.#o.kube
        .raw("GET", `${path}/${encodeURIComponent(this.#o.name)}`, undefined, signal)
        .catch((err: unknown) => {
          if (isNotFound(err)) return undefined;
          throw err;
        });
      const now = this.#now();
      if (got === undefined) {
        this.#exists = false;
        this.#resourceVersion = undefined;
        if (this.#obs.record !== undefined) this.#obs = { record: undefined, observedAt: now };
      } else {
        this.#exists = true;
        const meta = isRecord(got) && isRecord(got.metadata) ? got.metadata : {};
        this.#resourceVersion = typeof meta.resourceVersion === "string" ? meta.resourceVersion : undefined;
        const rec = readRecord(isRecord(got) ? got.spec : undefined);
        if (!sameRecord(rec, this.#obs.record)) this.#obs = { record: rec, observedAt: now };
      }
      const d = decide(
        this.#o.identity,
        this.#exists ? this.#obs : { record: undefined, observedAt: now },
        now,
        microTime(new Date()),
        this.#t,
      );
      if (d.type === "wait") {
        if (this.#leading) void this.#stop(`the lease is held by ${this.#obs.record?.holderIdentity ?? "?"}`);
        return;
      }
      const body = this.#lease(d.type === "update" ? this.#resourceVersion : undefined, d.record);
      const written =
        d.type === "create"
          ? await this.#o.kube.raw("POST", path, body, signal)
          : await this.#o.kube.raw("PUT", `${path}/${encodeURIComponent(this.#o.name)}`, body, signal);
      const wmeta = isRecord(written) && isRecord(written.metadata) ? written.metadata : {};
      this.#resourceVersion = typeof wmeta.resourceVersion === "string" ? wmeta.resourceVersion : undefined;
      this.#obs = { record: d.record, observedAt: this.#now() };
      this.#lastRenew = now;
      if (!this.#leading) {
        this.#leading = true;
        this.#transitions = d.record.leaseTransitions;
        this.#o.log.info(
          {
            lease: `${this.#o.namespace}/${this.#o.name}`,
            identity: this.#o.identity,
            transitions: d.record.leaseTransitions,
          },
          "became leader",
        );
        this.#o.onStartedLeading();
      }
    } catch (err) {
      // 409: someone else wrote first; anything else: try again next tick (the deadline decides).
      if (!(err instanceof KubeApiError && err.status === 409)) {
        this.#o.log.warn(
          { lease: `${this.#o.namespace}/${this.#o.name}`, err: err instanceof Error ? err.message : String(err) },
          "lease update failed",
        );
      }
    }
  }

  #stop(reason: string): Promise<unknown> {
    this.#leading = false;
    this.#o.log.warn(
      { lease: `${this.#o.namespace}/${this.#o.name}`, identity: this.#o.identity, reason },
      "stopped leading",
    );
    return Promise.resolve(this.#o.onStoppedLeading());
  }

  /**
   * The Lease this replica writes: `spec`, krane's managed-by label (a PUT replaces the whole
   * object, and the agent's admission fence refuses a write that drops it), and the
   * resourceVersion it replaces (undefined: a create).
   */
  #lease(resourceVersion: string | undefined, spec: LeaseRecord) {
    return {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: {
        name: this.#o.name,
        namespace: this.#o.namespace,
        ...(resourceVersion === undefined ? {} : { resourceVersion }),
        labels: { [LABEL_MANAGED_BY]: MANAGED_BY },
      },
      spec,
    };
  }

  /**
   * Gives the lease up (empty holder, 1 s) so a follower takes over at once. A refused release is
   * logged: the followers then wait out the whole lease.
   */
  async #release(): Promise<void> {
    const r = this.#obs.record;
    if (!r || r.holderIdentity !== this.#o.identity || this.#resourceVersion === undefined) return;
    const path = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.#o.namespace)}/leases/${encodeURIComponent(this.#o.name)}`;
    // Writes `rec` with an empty holder for 1 s over `resourceVersion`.
    const putReleased = (resourceVersion: string, rec: LeaseRecord) =>
      this.#o.kube.raw(
        "PUT",
        path,
        this.#lease(resourceVersion, {
          ...rec,
          holderIdentity: "",
          leaseDurationSeconds: 1,
          renewTime: microTime(new Date()),
        }),
        AbortSignal.timeout(5_000),
      );
    const lease = `${this.#o.namespace}/${this.#o.name}`;
    try {
      try {
        await putReleased(this.#resourceVersion, r);
      } catch (err) {
        // 409: the lease changed since it was last read (a renewal whose answer was lost). Read it
        // again and release it if this replica still holds it; anyone else's record is left alone.
        if (!(err instanceof KubeApiError && err.status === 409)) throw err;
        const got = await this.#o.kube.raw("GET", path, undefined, AbortSignal.timeout(5_000));
        const meta = isRecord(got) && isRecord(got.metadata) ? got.metadata : {};
        const now = readRecord(isRecord(got) ? got.spec : undefined);
        if (now.holderIdentity !== this.#o.identity || typeof meta.resourceVersion !== "string") return;
        await putReleased(meta.resourceVersion, now);
      }
      this.#o.log.info({ lease, identity: this.#o.identity }, "released the lease");
    } catch (err) {
      this.#o.log.warn(
        { lease, err: err instanceof Error ? err.message : String(err) },
        "could not release the lease: the followers wait until it expires",
      );
    }
  }
}

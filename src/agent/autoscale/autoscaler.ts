// The region's autoscaler: the agent's loop that acts on src/autoscale's decision. For every
// environment whose sentinel carries a policy (ApplySentinel.autoscale, with the region's count
// as ctrl holds it in autoscale_region), it reads what the sentinel kind's observer last read from
// the sentinel pods (/status: requests in flight per revision, the last request, requests held at
// zero), decides the region's count within the policy, and
//   - reports the decision to ctrl (ReportAutoscale), which records it, takes it as the region's
//     count and runs the rollout engine, the only writer of each revision's size;
//   - where the region is settled (src/autoscale/local.ts: the rolling target at the count,
//     every other revision at 0), resizes the target itself at once, exactly as the engine
//     would, so a region scales (and wakes from zero) while ctrl is down, and a cold start does
//     not wait for a round trip through ctrl.
// A request held at zero answers the agent's wake long-poll (./waker.ts), which decides for that
// environment at once instead of at the next tick.
//
// Reconciling with ctrl (no flapping, no fight):
//   - The agent's own count for a revision (an "override") is used when rendering its ReplicaSet
//     (deployments kind) only while ctrl's desired state for the environment keeps the same
//     target-only shape, and is dropped as soon as ctrl's desired size for the target equals it
//     (ctrl took the decision and the engine wrote the same size), or the shape changes (a rollout
//     began: ctrl is back and in charge), or the policy goes.
//   - The count a decision starts from is the agent's last decision until ctrl has taken it
//     (ctrl streams the time of the decision that set its count), then ctrl's. A decision ctrl
//     answers "recorded: false" (it holds a newer one, e.g. from another agent replica that led
//     before) is dropped and ctrl's count followed.
//   - People do not set an autoscaled region's count (ctrl refuses `krane scale` there), they set
//     its bounds; a new policy reaches the agent with the sentinel and bounds the next decision.
//   - An agent that restarts while ctrl is down starts from ctrl's last count (its overrides are
//     in memory) and decides again within one tick.
import { create } from "@bufbuild/protobuf";
import { Counter, type Registry } from "prom-client";
import { REGION_REPLICAS_MAX, policyFromWire, policyProblem } from "../../contracts/autoscaling.js";
import { regionLoad } from "../../autoscale/load.js";
import { settledTarget, type StreamedRegion, type StreamedRevision } from "../../autoscale/local.js";
import { recommend, type Recorded } from "../../autoscale/recommend.js";
import { servingOf, type RevisionLoad, type Shape } from "../../autoscale/sizing.js";
import {
  ApplyDeploymentSchema,
  type ApplyDeployment,
  type ApplySentinel,
  type ReportAutoscaleRequest,
  ReportAutoscaleRequestSchema,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { sleep } from "../../retry/backoff.js";
import type { KindContext } from "../runtime/builder.js";
import type { Logger } from "../../base/log.js";
import type { SentinelStatus } from "../../contracts/routing.js";
import { cpuPercent } from "../../autoscale/cpu.js";
import { PodCpuReader } from "./cpu.js";
import { SentinelWaker } from "./waker.js";

/** What the sentinel kind knows of its pods: their last status documents, and where to reach them. */
export interface SentinelPodsSource {
  /** The documents of a sentinel's pods as last read (undefined before the first read). */
  documents(key: string): Iterable<SentinelStatus> | undefined;
  /** A sentinel's serving pods and the host the agent dials for each. */
  pods(key: string): { name: string; host: string }[];
}

export interface AutoscalerOptions {
  readonly region: string;
  /** ReportAutoscale to ctrl. */
  readonly send: (req: ReportAutoscaleRequest, signal: AbortSignal) => Promise<{ recorded: boolean; replicas: number }>;
  /** Between decisions (default 2 s; the observer's reads of the sentinels set how fresh they are). */
  readonly intervalMs?: number;
  readonly registry?: Registry;
  /** The clock (tests). */
  readonly now?: () => number;
  /** Where CPU use comes from (default: the resource metrics API, read while a policy has a CPU target). */
  readonly cpu?: PodCpuReader;
}

/** A count the agent decided and ctrl may not have taken yet. */
interface Decision {
  readonly replicas: number;
  readonly reason: string;
  readonly decidedAtMs: number;
}

interface EnvironmentState {
  readonly environmentId: string;
  history: Recorded[];
  readonly firstSeenMs: number;
  /** The agent's last decision while ctrl has not taken it. */
  local: Decision | undefined;
  /** The target's size the agent applies itself: see the file comment. */
  override: { deploymentId: string; replicas: number } | undefined;
  /** The latest decision to report, and what was reported last. */
  pending: Decision | undefined;
  sending: boolean;
  reported: Decision | undefined;
}

/** A refreshed reason with the count unchanged is reported at most this often. */
const REASON_REPORT_MS = 30_000;
/** How stale the index of the deployment kind's desired states may be (one decision round reuses it). */
const INDEX_MS = 200;

export class RegionAutoscaler {
  readonly #o: AutoscalerOptions;
  readonly #now: () => number;
  readonly #envs = new Map<string, EnvironmentState>();
  /** Environment id → the sentinel key its state is kept by. */
  readonly #byEnvironment = new Map<string, string>();
  /** The deployment kind's desired states by environment, rebuilt at most every INDEX_MS. */
  #index: { atMs: number; byEnvironment: Map<string, ApplyDeployment[]> } | undefined;
  #sentinels: KindContext<ApplySentinel> | undefined;
  #source: SentinelPodsSource | undefined;
  #deployments: KindContext<ApplyDeployment> | undefined;
  readonly #cpu: PodCpuReader;
  readonly #decisions: Counter<"direction">;
  readonly #localResizes: Counter;
  #log: Logger | undefined;

  constructor(o: AutoscalerOptions) {
    this.#o = o;
    this.#now = o.now ?? Date.now;
    this.#cpu = o.cpu ?? new PodCpuReader({ region: o.region, now: this.#now });
    const r = o.registry ? [o.registry] : [];
    this.#decisions = new Counter({
      name: "krane_agent_autoscale_decisions_total",
      help: "Autoscaling decisions that changed an environment's count in this region, by direction (up, down, wake).",
      labelNames: ["direction"],
      registers: r,
    });
    this.#localResizes = new Counter({
      name: "krane_agent_autoscale_local_resizes_total",
      help: "Settled environments resized by the agent itself (as the rollout engine would), before or without ctrl.",
      registers: r,
    });
  }

  // ------------------------------------------------------------------ the deployment kind's side

  /** The deployment kind's observe hook: its desired states and re-rendering, while it runs. */
  async attachDeployments(ctx: KindContext<ApplyDeployment>, signal: AbortSignal): Promise<void> {
    this.#deployments = ctx;
    await new Promise<void>((resolve) => {
      if (signal.aborted) resolve();
      else signal.addEventListener("abort", () => resolve(), { once: true });
    });
    if (this.#deployments === ctx) this.#deployments = undefined;
  }

  /** The deployment as the deployment kind renders it: ctrl's, or with the agent's own size. */
  sized(d: ApplyDeployment): ApplyDeployment {
    const st = this.#envs.get(this.#byEnvironment.get(d.environmentId) ?? "");
    const o = st?.override;
    if (o === undefined || o.deploymentId !== d.deploymentId || o.replicas === d.replicas) return d;
    return create(ApplyDeploymentSchema, { ...d, replicas: o.replicas });
  }

  // ------------------------------------------------------------------ the sentinel kind's side

  /** The sentinel kind's observe hook: decides every interval, and at once on a wake. */
  async run(ctx: KindContext<ApplySentinel>, source: SentinelPodsSource, signal: AbortSignal): Promise<void> {
    this.#sentinels = ctx;
    this.#source = source;
    this.#log = ctx.log;
    const waker = new SentinelWaker({
      podsOf: (key) => source.pods(key),
      onWake: (key, held) => this.decide(key, held),
    });
    const wantsCpu = (): boolean => {
      for (const key of ctx.activeKeys()) if ((ctx.desiredOf(key)?.autoscale?.cpuTargetPercent ?? 0) > 0) return true;
      return false;
    };
    const cpu = this.#cpu.run(ctx.kube, wantsCpu, ctx.log, signal);
    try {
      while (!signal.aborted) {
        const active = new Set(ctx.activeKeys());
        for (const key of [...this.#envs.keys()]) {
          if (active.has(key) && ctx.desiredOf(key)?.autoscale !== undefined) continue;
          this.#forget(key);
        }
        const zero: string[] = [];
        for (const key of active) {
          const s = ctx.desiredOf(key);
          if (s?.autoscale === undefined) continue;
          if (s.autoscale.scaleToZero !== undefined) zero.push(key);
          this.decide(key);
        }
        waker.track(zero, signal);
        await sleep(this.#o.intervalMs ?? 2_000, signal);
      }
    } finally {
      waker.stop();
      await cpu;
      if (this.#sentinels === ctx) this.#sentinels = undefined;
    }
  }

  #forget(key: string): void {
    const st = this.#envs.get(key);
    this.#envs.delete(key);
    if (st === undefined) return;
    if (this.#byEnvironment.get(st.environmentId) === key) this.#byEnvironment.delete(st.environmentId);
    if (st.override) this.#deployments?.rerender(st.override.deploymentId);
  }

  /** The environment's revisions as ctrl last streamed them to this region. */
  #revisions(environmentId: string): {
    revisions: StreamedRevision[];
    numbers: Map<string, number>;
    cpuMillicores: Map<string, number>;
  } {
    const ctx = this.#deployments;
    const now = this.#now();
    if (ctx && (this.#index === undefined || now - this.#index.atMs > INDEX_MS)) {
      const byEnvironment = new Map<string, ApplyDeployment[]>();
      for (const key of ctx.activeKeys()) {
        const d = ctx.desiredOf(key);
        if (d === undefined) continue;
        const list = byEnvironment.get(d.environmentId);
        if (list) list.push(d);
        else byEnvironment.set(d.environmentId, [d]);
      }
      this.#index = { atMs: now, byEnvironment };
    }
    const list = this.#index?.byEnvironment.get(environmentId) ?? [];
    return {
      revisions: list.map((d) => ({ deploymentId: d.deploymentId, replicas: d.replicas })),
      numbers: new Map(list.map((d) => [d.deploymentId, Number(d.revision)])),
      cpuMillicores: new Map(list.map((d) => [d.deploymentId, Number(d.cpuMillicores)])),
    };
  }

  /**
   * One decision for one environment now (`wokenHeld`: a wake long-poll said requests are held).
   * Synchronous; its report to ctrl goes out in the background.
   */
  decide(key: string, wokenHeld = 0): void {
    const ctx = this.#sentinels;
    const s = ctx?.desiredOf(key);
    const wire = s?.autoscale;
    const streamed = s?.autoscaleRegion;
    if (!ctx || !s || wire === undefined || streamed === undefined || this.#deployments === undefined) return;
    const policy = policyFromWire(wire);
    if (policyProblem(policy, REGION_REPLICAS_MAX) !== null) return;
    const now = this.#now();
    let st = this.#envs.get(key);
    if (!st) {
      st = {
        environmentId: s.environmentId,
        history: [],
        firstSeenMs: now,
        local: undefined,
        override: undefined,
        pending: undefined,
        sending: false,
        reported: undefined,
      };
      this.#envs.set(key, st);
      this.#byEnvironment.set(s.environmentId, key);
    }
    const region: StreamedRegion = { replicas: streamed.replicas, targetDeploymentId: streamed.targetDeploymentId };
    const { revisions, numbers, cpuMillicores } = this.#revisions(s.environmentId);
    this.#settleOverride(st, revisions, region);
    // ctrl took the agent's decision (or one after it): its count is the one to start from.
    if (st.local !== undefined && st.local.decidedAtMs <= Number(streamed.decidedAtUnixMs)) st.local = undefined;
    const current = st.local?.replicas ?? region.replicas;

    const pods = [...(this.#source?.documents(key) ?? [])];
    const load = regionLoad(pods);
    const held = Math.max(
      wokenHeld,
      pods.reduce((n, p) => n + (p.held ?? 0), 0),
    );
    // Without measurements (no pod answered, or a sentinel that does not measure) the count stays,
    // unless requests are held at zero.
    if (load === null && held === 0) return;
    // Each revision's CPU on its own pods, over the CPU each of its instances is given.
    const loads: readonly RevisionLoad[] = (load?.loads ?? []).map((l) =>
      policy.cpuTargetPercent === null
        ? l
        : { ...l, cpuPercent: cpuPercent(this.#cpu.use(l.deploymentId), cpuMillicores.get(l.deploymentId) ?? 0) },
    );
    // Idle counts from when this agent began watching at the earliest, so a restart (which loses
    // what the sentinels saw before it) never puts a region to sleep early; a region asleep stays so.
    const seen = load?.lastRequestMs ?? null;
    const lastRequestMs = current === 0 ? seen : Math.max(seen ?? 0, st.firstSeenMs);
    if (st.history.length === 0) st.history = [{ atMs: now, replicas: current }];
    const rec = recommend(
      {
        policy,
        nowMs: now,
        current,
        serving: servingOf(shapeOf(s, numbers, streamed.scaleDownStable), loads),
        held,
        lastRequestMs,
      },
      st.history,
    );
    st.history = [...rec.history];
    if (rec.replicas !== current) {
      const d: Decision = { replicas: rec.replicas, reason: rec.reason, decidedAtMs: now };
      st.local = d;
      this.#decisions.inc({ direction: current === 0 ? "wake" : rec.replicas > current ? "up" : "down" });
      this.#log?.info(
        { environmentId: s.environmentId, from: current, to: rec.replicas, reason: rec.reason },
        "autoscaling decision",
      );
      this.#resizeLocally(st, revisions, region, rec.replicas);
      this.#report(key, s.environmentId, d);
      return;
    }
    const last = st.reported;
    if (last === undefined || (last.reason !== rec.reason && now - last.decidedAtMs >= REASON_REPORT_MS))
      this.#report(key, s.environmentId, { replicas: current, reason: rec.reason, decidedAtMs: now });
  }

  /** Drops the agent's own size once ctrl's matches it or the region left the settled shape. */
  #settleOverride(st: EnvironmentState, revisions: readonly StreamedRevision[], region: StreamedRegion): void {
    const o = st.override;
    if (o === undefined) return;
    const target = revisions.find((r) => r.deploymentId === o.deploymentId);
    const sameShape =
      region.targetDeploymentId === o.deploymentId &&
      target !== undefined &&
      revisions.every((r) => r.deploymentId === o.deploymentId || r.replicas === 0);
    if (sameShape && target.replicas !== o.replicas) return;
    st.override = undefined;
    this.#deployments?.rerender(o.deploymentId);
  }

  /** The engine's own sizes for a settled region, applied now (see src/autoscale/local.ts). */
  #resizeLocally(
    st: EnvironmentState,
    revisions: readonly StreamedRevision[],
    region: StreamedRegion,
    replicas: number,
  ): void {
    // Settled as ctrl streamed it, or still in the shape the agent's own earlier size left it in.
    const target = st.override?.deploymentId ?? settledTarget(revisions, region);
    if (target === null) return;
    const desired = revisions.find((r) => r.deploymentId === target)?.replicas;
    st.override = desired === replicas ? undefined : { deploymentId: target, replicas };
    this.#localResizes.inc();
    this.#deployments?.rerender(target);
  }

  #report(key: string, environmentId: string, d: Decision): void {
    const st = this.#envs.get(key);
    if (!st) return;
    st.pending = d;
    if (st.sending) return;
    st.sending = true;
    void this.#send(key, environmentId, st).finally(() => {
      st.sending = false;
    });
  }

  /** Sends the newest pending decision until ctrl answers; a newer one replaces a failing one. */
  async #send(key: string, environmentId: string, st: EnvironmentState): Promise<void> {
    let attempt = 0;
    while (st.pending !== undefined && this.#envs.get(key) === st) {
      const d = st.pending;
      try {
        const res = await this.#o.send(
          create(ReportAutoscaleRequestSchema, {
            region: this.#o.region,
            environmentId,
            replicas: d.replicas,
            reason: d.reason.slice(0, 500),
            decidedAtUnixMs: BigInt(d.decidedAtMs),
          }),
          AbortSignal.timeout(5_000),
        );
        attempt = 0;
        if (st.pending === d) st.pending = undefined;
        st.reported = d;
        if (!res.recorded && st.local === d) {
          // ctrl holds a newer decision: follow its count, and its sizes.
          st.local = undefined;
          const o = st.override;
          if (o !== undefined && o.replicas === d.replicas) {
            st.override = undefined;
            this.#deployments?.rerender(o.deploymentId);
          }
          this.#log?.warn({ environmentId, replicas: res.replicas }, "ctrl holds a newer autoscaling decision");
        }
      } catch (err) {
        // ctrl down or refusing: the decision stands locally; try again (the newest) with backoff.
        this.#log?.debug(
          { environmentId, err: err instanceof Error ? err.message : String(err) },
          "autoscale report failed",
        );
        attempt++;
        await sleep(Math.min(10_000, 250 * 2 ** Math.min(attempt, 6)));
      }
    }
  }
}

/** How the rollout engine sizes the environment's revisions in the region, as far as routing shows. */
export function shapeOf(s: ApplySentinel, numbers: ReadonlyMap<string, number>, scaleDownStable: boolean): Shape {
  const r = s.routing;
  if (r === undefined || r.mode !== "weighted") return { kind: "pool" };
  const weighted = r.revisions.filter((w) => w.weight > 0);
  if (r.previewDeploymentId !== "") {
    const active = weighted.find((w) => w.deploymentId !== r.previewDeploymentId) ?? weighted[0];
    return active === undefined ? { kind: "pool" } : { kind: "blue-green", active: active.deploymentId };
  }
  if (weighted.length < 2) return { kind: "pool" };
  // The newer revision is the canary.
  const sorted = [...weighted].sort((a, b) => (numbers.get(b.deploymentId) ?? 0) - (numbers.get(a.deploymentId) ?? 0));
  const canary = sorted[0];
  const stable = sorted[1];
  if (canary === undefined || stable === undefined) return { kind: "pool" };
  return {
    kind: "canary",
    canary: canary.deploymentId,
    stable: stable.deploymentId,
    weight: canary.weight,
    scaleDownStable,
  };
}

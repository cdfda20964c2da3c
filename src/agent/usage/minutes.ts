// What the region's instances used, per minute: the pure core of the usage reader (./reader.ts).
// Each round gives the instances as the pod cache shows them (their revision, restart count and
// creation time) and the resource metrics API's figures (CPU and memory per pod, when it
// answered). The figures are added into the round's minute; a restart is counted in the minute it
// is first seen. The agent sends the minutes not yet acknowledged (the current one included, so
// the figures are fresh), and ctrl keeps per instance and minute the report with the most
// readings: sending a minute again, or out of order, never counts anything twice.
import { LABEL_DEPLOYMENT_ID, LABEL_ENVIRONMENT_ID } from "../../contracts/labels.js";
import { podUsage } from "../../autoscale/cpu.js";

export const MINUTE_MS = 60_000;
/** Minutes kept for sending at most (older ones are dropped: ctrl is unreachable that long). */
export const MAX_PENDING_MINUTES = 10;
/** Instances per minute in one report (ctrl refuses more). */
export const MAX_INSTANCES_PER_MINUTE = 2_000;

/** One instance in a round, from the pod cache. */
export interface InstanceSeen {
  readonly environmentId: string;
  readonly deploymentId: string;
  /** The pod's name. */
  readonly instance: string;
  /** Its containers' restart counts added up. */
  readonly restartCount: number;
}

/** A pod's use as the metrics API read it. */
export interface PodUse {
  readonly cpuMillicores: number;
  readonly memoryBytes: number;
}

export interface InstanceMinute {
  readonly environmentId: string;
  readonly deploymentId: string;
  readonly instance: string;
  cpuMillicoresSum: number;
  memoryBytesSum: number;
  readings: number;
  restarts: number;
}

export interface Minute {
  readonly minuteMs: number;
  readonly instances: Map<string, InstanceMinute>;
}

interface PodMetricsLike {
  readonly metadata?: { readonly name?: unknown; readonly namespace?: unknown };
  readonly containers?: unknown;
}

/**
 * Each pod's use from PodMetrics items (a list's `items`), by "namespace/name". A pod whose
 * figures are not all quantities is left out (never counted as idle).
 */
export function useByPod(items: readonly unknown[]): Map<string, PodUse> {
  const out = new Map<string, PodUse>();
  for (const raw of items) {
    const pod = raw as PodMetricsLike;
    const name = pod.metadata?.name;
    const ns = pod.metadata?.namespace;
    const cpu = podUsage(pod.containers, "cpu");
    const memory = podUsage(pod.containers, "memory");
    if (typeof name !== "string" || typeof ns !== "string" || cpu === undefined || memory === undefined) continue;
    out.set(`${ns}/${name}`, { cpuMillicores: cpu, memoryBytes: memory / 1000 });
  }
  return out;
}

interface PodLike {
  readonly metadata: {
    readonly name?: string;
    readonly namespace?: string;
    readonly labels?: Readonly<Record<string, string>>;
  };
  readonly status?: unknown;
}

/** The pod as an instance of a revision, or undefined when it is not one of krane's instances. */
export function instanceOf(pod: PodLike): (InstanceSeen & { readonly key: string }) | undefined {
  const env = pod.metadata.labels?.[LABEL_ENVIRONMENT_ID];
  const dep = pod.metadata.labels?.[LABEL_DEPLOYMENT_ID];
  const name = pod.metadata.name;
  if (!env || !dep || !name) return undefined;
  const status = (typeof pod.status === "object" && pod.status !== null ? pod.status : {}) as {
    containerStatuses?: unknown;
  };
  let restartCount = 0;
  if (Array.isArray(status.containerStatuses))
    for (const c of status.containerStatuses as { restartCount?: unknown }[])
      if (typeof c.restartCount === "number" && c.restartCount > 0) restartCount += c.restartCount;
  return {
    key: `${pod.metadata.namespace ?? ""}/${name}`,
    environmentId: env,
    deploymentId: dep,
    instance: name,
    restartCount,
  };
}

/**
 * The minutes of one reader. The pods of its first round may have restarted while no reader
 * counted (before the agent started, or under another leader): their counts then are the
 * baseline. A pod first seen in a later round is new, and all its restarts count.
 */
export class UsageMinutes {
  /** Restart counts as last seen, by pod key (forgotten when the pod is gone). */
  readonly #restarts = new Map<string, number>();
  readonly #minutes = new Map<number, Minute>();
  #baselined = false;

  /**
   * One round at `atMs`: the instances seen (with their pod keys) and the pods' use (`use`
   * undefined when the metrics API gave nothing this round: restarts are still counted).
   */
  observe(
    atMs: number,
    instances: readonly (InstanceSeen & { readonly key: string })[],
    use: ReadonlyMap<string, PodUse> | undefined,
  ): void {
    const minuteMs = atMs - (atMs % MINUTE_MS);
    let minute = this.#minutes.get(minuteMs);
    if (!minute) {
      minute = { minuteMs, instances: new Map() };
      this.#minutes.set(minuteMs, minute);
    }
    const seen = new Set<string>();
    for (const i of instances) {
      seen.add(i.key);
      const before = this.#restarts.get(i.key);
      const restarts =
        before === undefined ? (this.#baselined ? i.restartCount : 0) : Math.max(0, i.restartCount - before);
      this.#restarts.set(i.key, i.restartCount);
      const u = use?.get(i.key);
      if (restarts === 0 && u === undefined) continue;
      let m = minute.instances.get(i.key);
      if (!m) {
        if (minute.instances.size >= MAX_INSTANCES_PER_MINUTE) continue;
        m = {
          environmentId: i.environmentId,
          deploymentId: i.deploymentId,
          instance: i.instance,
          cpuMillicoresSum: 0,
          memoryBytesSum: 0,
          readings: 0,
          restarts: 0,
        };
        minute.instances.set(i.key, m);
      }
      m.restarts += restarts;
      if (u) {
        m.cpuMillicoresSum += u.cpuMillicores;
        m.memoryBytesSum += u.memoryBytes;
        m.readings += 1;
      }
    }
    for (const key of this.#restarts.keys()) if (!seen.has(key)) this.#restarts.delete(key);
    this.#baselined = true;
    // Bounded: ctrl unreachable for long loses the oldest minutes, never the agent's memory.
    const keys = [...this.#minutes.keys()].sort((a, b) => a - b);
    for (const k of keys.slice(0, Math.max(0, keys.length - MAX_PENDING_MINUTES))) this.#minutes.delete(k);
  }

  /** The minutes to send, oldest first (empty ones left out). */
  pending(): Minute[] {
    return [...this.#minutes.values()].filter((m) => m.instances.size > 0).sort((a, b) => a.minuteMs - b.minuteMs);
  }

  /** ctrl stored what was sent at `atMs`: the minutes that had ended by then are done. */
  acknowledged(atMs: number): void {
    const current = atMs - (atMs % MINUTE_MS);
    for (const k of this.#minutes.keys()) if (k < current) this.#minutes.delete(k);
  }
}

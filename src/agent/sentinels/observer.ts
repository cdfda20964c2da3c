// What the sentinel kind learns from the sentinels themselves: every few seconds it reads each
// running sentinel pod's status document (GET /status on the ops port, src/contracts/routing.ts)
// and keeps, per sentinel, the routing policy version its pods serve (the lowest: a region routes
// by a policy only once every pod does) and the document of each pod. A change requeues the
// sentinel, whose status report then carries it to ctrl.
//
// On a real cluster the agent reaches the pods at their IPs; the local cluster serves pod IPs
// at another address on this machine (`--pod-address-map`, src/contracts/address-map.ts).
import { LABEL_SENTINEL_ID } from "../../contracts/labels.js";
import { SENTINEL_OPS_PORT, SENTINEL_STATUS_PATH, type SentinelStatus } from "../../contracts/routing.js";
import { mapAddress, type AddressMapping } from "../../contracts/address-map.js";
import { isRecord, type KubeObject } from "../../kube/object.js";
import { resources } from "../../kube/resources.js";
import { sleep } from "../../retry/backoff.js";
import type { ApplySentinel } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { labelIndex, type KindContext } from "../runtime/builder.js";
import { forEachLimit } from "../runtime/limit.js";

export interface ObserverOptions {
  /** How often the pods are read (default 5 s). */
  readonly intervalMs?: number;
  /** Per request (default 2 s). */
  readonly timeoutMs?: number;
  /** Local cluster only: where pod IPs are served on this machine. */
  readonly addressMap?: AddressMapping;
}

/** What the pods of one sentinel said, as of the last read. */
export interface SentinelObservation {
  /** The lowest routing policy version among the pods that answered (0: none answered). */
  readonly servedVersion: number;
  /** Pods that answered, and their documents. */
  readonly pods: ReadonlyMap<string, SentinelStatus>;
}

/** The IP of a pod that serves now (running, not being deleted). */
export function podIp(pod: KubeObject): string | undefined {
  const status = isRecord(pod.status) ? pod.status : {};
  return !pod.metadata.deletionTimestamp &&
    status.phase === "Running" &&
    typeof status.podIP === "string" &&
    status.podIP !== ""
    ? status.podIP
    : undefined;
}

function isStatus(v: unknown): v is SentinelStatus {
  return (
    isRecord(v) &&
    typeof v.routingVersion === "number" &&
    typeof v.environmentId === "string" &&
    Array.isArray(v.revisions)
  );
}

/** Pure: the observation of a sentinel from its pods' documents. */
export function summarize(pods: ReadonlyMap<string, SentinelStatus>): SentinelObservation {
  let served = 0;
  for (const s of pods.values()) served = served === 0 ? s.routingVersion : Math.min(served, s.routingVersion);
  return { servedVersion: served, pods };
}

/**
 * The pods of a sentinel that serve now (running, with an IP, not being deleted), and the address
 * the agent dials for each: the one way the agent finds sentinel pods (the observer reads their
 * status, the measurement collector their metrics).
 */
export function sentinelPods(
  ctx: KindContext<ApplySentinel>,
  key: string,
  addressMap: AddressMapping | undefined,
): { name: string; host: string; createdMs: number | undefined }[] {
  const out: { name: string; host: string; createdMs: number | undefined }[] = [];
  for (const pod of ctx.informer(resources.pods).byIndex(labelIndex(LABEL_SENTINEL_ID), key)) {
    const ip = podIp(pod);
    const created = Date.parse(pod.metadata.creationTimestamp ?? "");
    if (ip !== undefined)
      out.push({
        name: pod.metadata.name ?? "",
        host: addressMap ? mapAddress(ip, addressMap) : ip,
        createdMs: Number.isFinite(created) ? created : undefined,
      });
  }
  return out;
}

/** Sentinel pods read at once, across the region. */
export const READ_PARALLEL = 16;

export class SentinelObserver {
  readonly #o: ObserverOptions;
  readonly #seen = new Map<string, SentinelObservation>();

  constructor(opts: ObserverOptions = {}) {
    this.#o = opts;
  }

  /** The last observation of a sentinel (undefined before its pods were first read). */
  get(key: string): SentinelObservation | undefined {
    return this.#seen.get(key);
  }

  /** Reads every active sentinel's pods until `signal` aborts, READ_PARALLEL at a time. */
  async run(ctx: KindContext<ApplySentinel>, signal: AbortSignal, requeue: (key: string) => void): Promise<void> {
    const every = this.#o.intervalMs ?? 5_000;
    while (!signal.aborted) {
      const active = new Set(ctx.activeKeys());
      for (const key of [...this.#seen.keys()]) if (!active.has(key)) this.#seen.delete(key);
      const docs = new Map([...active].map((key) => [key, new Map<string, SentinelStatus>()]));
      const reads = [...active].flatMap((key) =>
        sentinelPods(ctx, key, this.#o.addressMap).map((pod) => ({ key, pod })),
      );
      await forEachLimit(reads, READ_PARALLEL, async ({ key, pod }) => {
        const doc = await this.#read(pod.host, signal);
        if (doc) docs.get(key)?.set(pod.name, doc);
      });
      if (signal.aborted) return;
      for (const [key, d] of docs) {
        const next = summarize(d);
        const prev = this.#seen.get(key);
        this.#seen.set(key, next);
        if ((prev?.servedVersion ?? 0) !== next.servedVersion) requeue(key);
      }
      await sleep(every, signal);
    }
  }

  async #read(host: string, signal: AbortSignal): Promise<SentinelStatus | undefined> {
    // No listener of its own on the long-lived `signal` (a region reads many pods at once).
    const timeout = AbortSignal.any([signal, AbortSignal.timeout(this.#o.timeoutMs ?? 2_000)]);
    try {
      const res = await fetch(`http://${host}:${SENTINEL_OPS_PORT}${SENTINEL_STATUS_PATH}`, { signal: timeout });
      if (!res.ok) return undefined;
      const body: unknown = await res.json();
      return isStatus(body) ? body : undefined;
    } catch {
      // Not answering (starting, stopping, unreachable): it serves no known version.
      return undefined;
    }
  }
}

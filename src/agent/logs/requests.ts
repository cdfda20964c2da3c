// One request-view request on the agent (`krane requests -f`): the records of the environment's
// sentinel pods in this region (GET /requests on each pod's ops port, src/sentinel/tap.ts), read
// every POLL_MS and pushed to ctrl on the log channel's PushLogs, as request entries. The
// sentinels record only while asked, so this session is what turns them on, and its end (the
// reader left: ctrl answers `cancelled`) turns them off within REQUESTS_IDLE_MS.
//
// Bounded twice: each pod keeps at most REQUESTS_PER_SECOND a second, and the session pushes at
// most that many a second for the whole region; what either leaves out is said in a DROPPED
// marker with its count.
import { create } from "@bufbuild/protobuf";
import { LogEntrySchema, LogMarkerKind, type AgentLogRequest, type LogEntry } from "../../gen/krane/ctrl/v1/logs_pb.js";
import { SENTINEL_NAMESPACE } from "../../contracts/cluster.js";
import { COMPONENT, LABEL_ENVIRONMENT_ID, managedSelector } from "../../contracts/labels.js";
import { msToNs } from "../../contracts/logs.js";
import { mapAddress, type AddressMapping } from "../../contracts/address-map.js";
import { SENTINEL_OPS_PORT } from "../../contracts/routing.js";
import {
  REQUESTS_PER_SECOND,
  SENTINEL_REQUESTS_PATH,
  type SentinelRequestRecord,
  type SentinelRequests,
} from "../../contracts/request-view.js";
import type { KubeClient } from "../../kube/client.js";
import { isRecord } from "../../kube/object.js";
import { resources } from "../../kube/resources.js";
import { sleep } from "../../retry/backoff.js";
import type { Logger } from "../../base/log.js";
import { podIp } from "../sentinels/observer.js";
import type { PushRequest } from "./session.js";

export interface RequestSessionDeps {
  readonly kube: KubeClient;
  readonly region: string;
  push(req: PushRequest): Promise<{ cancelled: boolean }>;
  readonly log: Logger;
  readonly addressMap?: AddressMapping;
  /** How often the pods are asked (ms; default POLL_MS). */
  readonly pollMs?: number;
}

export const POLL_MS = 500;
/** The pods are listed again this often (a scale-up, a new pod). */
const LIST_MS = 5_000;
/** Pushes that fail in a row before the session is given up. */
const PUSH_ATTEMPTS = 3;

function isRequests(v: unknown): v is SentinelRequests {
  return isRecord(v) && typeof v.seq === "number" && typeof v.skipped === "number" && Array.isArray(v.records);
}

/** Pure: a pod's record as a LogEntry (fields of a foreign shape are left empty). */
export function requestEntry(r: SentinelRequestRecord): LogEntry {
  const str = (v: unknown): string => (typeof v === "string" ? v.slice(0, 512) : "");
  const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : 0);
  return create(LogEntrySchema, {
    timeUnixNano: msToNs(num(r.timeMs)),
    instance: str(r.instance),
    deploymentId: str(r.deploymentId),
    entry: {
      case: "request",
      value: {
        method: str(r.method).slice(0, 16),
        path: str(r.path),
        status: Math.min(Math.trunc(num(r.status)), 999),
        latencyMs: num(r.latencyMs),
        policy: str(r.policy),
        client: str(r.client),
        key: str(r.key),
        openMs: num(r.openMs),
      },
    },
  });
}

interface Pod {
  host: string;
  after: number;
  /** The pod's skipped count when first read (what was skipped before is not this reader's). */
  skipped: number | undefined;
}

export class RequestSession {
  readonly #d: RequestSessionDeps;
  readonly #req: AgentLogRequest;
  readonly #stop = new AbortController();
  readonly #pods = new Map<string, Pod>();
  readonly done: Promise<void>;

  constructor(d: RequestSessionDeps, req: AgentLogRequest) {
    this.#d = d;
    this.#req = req;
    this.done = this.#run().catch((err: unknown) => {
      d.log.debug({ err: err instanceof Error ? err.message : String(err) }, "request view ended");
    });
  }

  get id(): string {
    return this.#req.requestId;
  }

  stop(): void {
    this.#stop.abort();
  }

  async #list(): Promise<void> {
    const { items } = await this.#d.kube.list(resources.pods, {
      namespace: SENTINEL_NAMESPACE,
      labelSelector: `${managedSelector(COMPONENT.sentinel, this.#d.region)},${LABEL_ENVIRONMENT_ID}=${this.#req.environmentId}`,
      signal: this.#stop.signal,
    });
    const seen = new Set<string>();
    for (const pod of items) {
      const ip = podIp(pod);
      const name = pod.metadata.name ?? "";
      if (ip === undefined) continue;
      seen.add(name);
      if (!this.#pods.has(name))
        this.#pods.set(name, { host: mapAddress(ip, this.#d.addressMap), after: 0, skipped: undefined });
    }
    for (const name of [...this.#pods.keys()]) if (!seen.has(name)) this.#pods.delete(name);
  }

  async #read(pod: Pod): Promise<{ records: readonly SentinelRequestRecord[]; skipped: number }> {
    const signal = AbortSignal.any([this.#stop.signal, AbortSignal.timeout(2_000)]);
    try {
      const res = await fetch(`http://${pod.host}:${SENTINEL_OPS_PORT}${SENTINEL_REQUESTS_PATH}?after=${pod.after}`, {
        signal,
      });
      const body: unknown = res.ok ? await res.json() : undefined;
      if (!isRequests(body)) return { records: [], skipped: 0 };
      // A pod that restarted counts from 0 again.
      if (body.seq < pod.after) pod.after = 0;
      const skipped = pod.skipped === undefined ? 0 : Math.max(0, body.skipped - pod.skipped);
      pod.skipped = body.skipped;
      pod.after = body.seq;
      return { records: body.records.slice(0, REQUESTS_PER_SECOND * 4), skipped };
    } catch {
      // Starting, stopping or unreachable: asked again next round.
      return { records: [], skipped: 0 };
    }
  }

  async #run(): Promise<void> {
    const signal = this.#stop.signal;
    const every = this.#d.pollMs ?? POLL_MS;
    let listedAt = 0;
    let failures = 0;
    let second = 0;
    let inSecond = 0;
    while (!signal.aborted) {
      if (Date.now() - listedAt >= LIST_MS) {
        await this.#list().catch((err: unknown) => {
          if (!signal.aborted)
            this.#d.log.debug({ err: err instanceof Error ? err.message : String(err) }, "sentinel pods not listed");
        });
        listedAt = Date.now();
      }
      const reads = await Promise.all([...this.#pods.values()].map((p) => this.#read(p)));
      if (signal.aborted) return;
      const entries: LogEntry[] = [];
      let dropped = 0;
      const records = reads.flatMap((r) => r.records).sort((a, b) => a.timeMs - b.timeMs);
      for (const r of records) {
        const s = Math.floor(r.timeMs / 1000);
        if (s !== second) {
          second = s;
          inSecond = 0;
        }
        if (inSecond >= REQUESTS_PER_SECOND) dropped++;
        else {
          inSecond++;
          entries.push(requestEntry(r));
        }
      }
      for (const r of reads) dropped += r.skipped;
      if (dropped > 0)
        entries.push(
          create(LogEntrySchema, {
            timeUnixNano: msToNs(Date.now()),
            entry: {
              case: "marker",
              value: {
                kind: LogMarkerKind.DROPPED,
                dropped: BigInt(dropped),
                message: `requests not shown (at most ${REQUESTS_PER_SECOND} a second are)`,
              },
            },
          }),
        );
      try {
        // An empty push too: ctrl hears the session is alive, and answers whether anyone still watches.
        const r = await this.#d.push({ region: this.#d.region, requestId: this.#req.requestId, entries });
        failures = 0;
        if (r.cancelled) return;
      } catch (err) {
        if (++failures >= PUSH_ATTEMPTS) throw err;
      }
      await sleep(every, signal);
    }
  }
}

// The log requests of this ctrl process: the agents' channels connected here (per region), the
// readers (StreamLogs calls) served here, and every request any replica published (bus.ts), so a
// push is accepted only for a live request of the pushing agent's own region.
//
//   reader ── request(region) ──▶ bus "r" ──▶ every replica ──▶ its channels of that region ──▶ agent
//   agent ── PushLogs ──▶ the replica it is connected to ──▶ the reader here, or bus "p" ──▶ the
//                                                                 replica that has the reader
//
// A request lives while its reader's replica publishes keepalives ("k", every keepaliveMs); a
// replica forgets a request not kept alive for forgetAfterMs (its reader's replica died), and
// answers the agent's next push `cancelled`. A reader that leaves publishes "c" at once.
//
// Each replica that hands a request to agents says which clusters it asked ("a", the clusters
// whose channels are open to it), so the reader knows every cluster of the region that will
// answer and waits for each, even one that answers after the others finished. The "a" goes out
// before the agents even hear the request, so it reaches the reader before any of their lines.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  AgentLogRequestSchema,
  LogChannelMessageSchema,
  PushLogsRequestSchema,
  type AgentLogRequest,
  type LogChannelMessage,
  type LogEntry,
  type PushLogsRequest,
} from "../../gen/krane/ctrl/v1/logs_pb.js";
import { MAX_PAYLOAD, type LogBus } from "./bus.js";

export interface LogHubOptions {
  readonly keepaliveMs?: number;
  readonly forgetAfterMs?: number;
  /** Messages a channel may have waiting before it is closed (an agent that does not read). */
  readonly channelBacklog?: number;
}

export type PushListener = (clusterId: string, push: PushLogsRequest) => void;
/** Told of clusters (ids) whose agents were handed the request. */
export type AskedListener = (clusterIds: readonly string[]) => void;

interface Known {
  readonly region: string;
  seenAt: number;
  /** The last numbered push taken here, per cluster (a push sent again is taken once). */
  seq?: Map<string, bigint>;
}

/** One agent's open channel: the messages ctrl has for it, in order. */
export class ChannelQueue {
  readonly region: string;
  /** The cluster whose agent holds the channel. */
  readonly clusterId: string;
  #items: LogChannelMessage[] = [];
  #wake: (() => void) | undefined;
  #closed = false;
  readonly #backlog: number;
  readonly #onClose: () => void;

  constructor(region: string, clusterId: string, backlog: number, onClose: () => void) {
    this.region = region;
    this.clusterId = clusterId;
    this.#backlog = backlog;
    this.#onClose = onClose;
  }

  get closed(): boolean {
    return this.#closed;
  }

  send(m: LogChannelMessage): void {
    if (this.#closed) return;
    if (this.#items.length >= this.#backlog) {
      // An agent this far behind is not reading: it reconnects and hears new requests again.
      this.close();
      return;
    }
    this.#items.push(m);
    this.#wake?.();
  }

  /** The next message, or undefined after `waitMs` of quiet, when closed or aborted. */
  async next(waitMs: number, signal: AbortSignal): Promise<LogChannelMessage | undefined> {
    if (this.#items.length === 0 && !this.#closed && !signal.aborted) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(t);
          signal.removeEventListener("abort", done);
          this.#wake = undefined;
          resolve();
        };
        const t = setTimeout(done, waitMs);
        signal.addEventListener("abort", done, { once: true });
        this.#wake = done;
      });
    }
    return this.#items.shift();
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#wake?.();
    this.#onClose();
  }
}

export class LogHub {
  readonly #bus: LogBus;
  readonly #keepaliveMs: number;
  readonly #forgetAfterMs: number;
  readonly #backlog: number;
  readonly #channels = new Map<string, Set<ChannelQueue>>();
  readonly #readers = new Map<string, { region: string; listener: PushListener; asked?: AskedListener }>();
  readonly #known = new Map<string, Known>();
  #unsubscribe: (() => void) | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(bus: LogBus, o: LogHubOptions = {}) {
    this.#bus = bus;
    this.#keepaliveMs = o.keepaliveMs ?? 5_000;
    this.#forgetAfterMs = o.forgetAfterMs ?? 3 * this.#keepaliveMs;
    this.#backlog = o.channelBacklog ?? 1_000;
  }

  start(): void {
    this.#unsubscribe ??= this.#bus.subscribe((p) => this.#onBus(p));
    this.#timer ??= setInterval(() => this.#tick(), this.#keepaliveMs);
    this.#timer.unref();
  }

  close(): void {
    this.#unsubscribe?.();
    if (this.#timer) clearInterval(this.#timer);
    for (const set of this.#channels.values()) for (const c of set) c.close();
  }

  /** Agent channels connected to this process. */
  get channels(): number {
    let n = 0;
    for (const s of this.#channels.values()) n += s.size;
    return n;
  }

  /** An agent's channel (of cluster `clusterId`): requests of its region are sent to it while it is open. */
  channel(region: string, clusterId: string): ChannelQueue {
    let set = this.#channels.get(region);
    if (!set) this.#channels.set(region, (set = new Set()));
    const s = set;
    const q: ChannelQueue = new ChannelQueue(region, clusterId, this.#backlog, () => {
      s.delete(q);
      if (s.size === 0) this.#channels.delete(region);
    });
    s.add(q);
    return q;
  }

  /**
   * Asks the region's agents (on any replica) for logs; the returned function cancels. `asked`
   * hears which clusters' agents were handed the request.
   */
  request(region: string, req: AgentLogRequest, listener: PushListener, asked?: AskedListener): () => void {
    const id = req.requestId;
    this.#readers.set(id, { region, listener, asked });
    this.#known.set(id, { region, seenAt: Date.now() });
    this.#bus.publish(`r|${region}|${Buffer.from(toBinary(AgentLogRequestSchema, req)).toString("base64")}`);
    return () => {
      if (!this.#readers.delete(id)) return;
      this.#bus.publish(`c|${region}|${id}`);
    };
  }

  /**
   * A batch from an agent of `region`. False (cancelled) when no live request of that region has
   * this id: the reader left, its replica died, or the agent asks for what is not its region's.
   */
  push(region: string, clusterId: string, push: PushLogsRequest): boolean {
    const known = this.#known.get(push.requestId);
    if (!known || known.region !== region) return false;
    if (push.seq > 0n) {
      known.seq ??= new Map();
      // Taken already (its answer was lost, and the agent sent it again): answered, not taken twice.
      if (push.seq <= (known.seq.get(clusterId) ?? 0n)) return true;
      known.seq.set(clusterId, push.seq);
    }
    const reader = this.#readers.get(push.requestId);
    if (reader) {
      reader.listener(clusterId, push);
      return true;
    }
    for (const part of splitPush(push)) {
      this.#bus.publish(`p|${clusterId}|${Buffer.from(toBinary(PushLogsRequestSchema, part)).toString("base64")}`);
    }
    return true;
  }

  #onBus(payload: string): void {
    const kind = payload.slice(0, 2);
    const rest = payload.slice(2);
    const bar = rest.indexOf("|");
    if (bar < 0) return;
    const head = rest.slice(0, bar);
    const body = rest.slice(bar + 1);
    try {
      switch (kind) {
        case "r|": {
          const req = fromBinary(AgentLogRequestSchema, Buffer.from(body, "base64"));
          this.#known.set(req.requestId, { region: head, seenAt: Date.now() });
          const clusters = this.#toChannels(
            head,
            create(LogChannelMessageSchema, { message: { case: "request", value: req } }),
          );
          // Cluster ids are short (ids of krane's own), so one message holds every one of a region.
          if (clusters.length > 0) this.#bus.publish(`a|${req.requestId}|${clusters.join(",")}`);
          break;
        }
        case "a|": {
          const ids = body.split(",").filter((c) => c !== "");
          if (ids.length > 0) this.#readers.get(head)?.asked?.(ids);
          break;
        }
        case "k|":
          for (const id of body.split(",")) {
            const k = this.#known.get(id);
            if (k) k.seenAt = Date.now();
          }
          break;
        case "c|":
          this.#known.delete(body);
          this.#toChannels(
            head,
            create(LogChannelMessageSchema, { message: { case: "cancelRequestId", value: body } }),
          );
          break;
        case "p|": {
          const push = fromBinary(PushLogsRequestSchema, Buffer.from(body, "base64"));
          this.#readers.get(push.requestId)?.listener(head, push);
          break;
        }
      }
    } catch {
      // Not a message of this version: ignored.
    }
  }

  /** Sends to the region's channels here; the clusters whose channels took it. */
  #toChannels(region: string, m: LogChannelMessage): string[] {
    const clusters: string[] = [];
    for (const c of this.#channels.get(region) ?? []) {
      c.send(m);
      if (!c.closed) clusters.push(c.clusterId);
    }
    return clusters;
  }

  #tick(): void {
    const now = Date.now();
    const byRegion = new Map<string, string[]>();
    for (const [id, r] of this.#readers) {
      const ids = byRegion.get(r.region) ?? [];
      ids.push(id);
      byRegion.set(r.region, ids);
    }
    for (const [region, ids] of byRegion) {
      // Keepalives in messages under the payload limit.
      let batch: string[] = [];
      let len = 0;
      for (const id of ids) {
        if (len + id.length + 1 > MAX_PAYLOAD - 200) {
          this.#bus.publish(`k|${region}|${batch.join(",")}`);
          batch = [];
          len = 0;
        }
        batch.push(id);
        len += id.length + 1;
      }
      if (batch.length > 0) this.#bus.publish(`k|${region}|${batch.join(",")}`);
    }
    for (const [id, k] of this.#known)
      if (!this.#readers.has(id) && now - k.seenAt > this.#forgetAfterMs) this.#known.delete(id);
  }
}

/** A push in parts whose encoding fits a bus message (base64 of at most ~5,700 bytes). */
export function splitPush(push: PushLogsRequest): PushLogsRequest[] {
  const limit = Math.floor(((MAX_PAYLOAD - 100) * 3) / 4) - 200;
  const parts: PushLogsRequest[] = [];
  let entries: LogEntry[] = [];
  let size = 0;
  const flush = (last: boolean): void => {
    parts.push(
      create(PushLogsRequestSchema, {
        region: push.region,
        requestId: push.requestId,
        entries,
        done: last ? push.done : false,
        error: last ? push.error : "",
      }),
    );
    entries = [];
    size = 0;
  };
  for (const e of push.entries) {
    const n = entrySize(e);
    if (entries.length > 0 && size + n > limit) flush(false);
    entries.push(e);
    size += n;
  }
  flush(true);
  return parts;
}

function entrySize(e: LogEntry): number {
  return Buffer.byteLength(entryText(e)) + e.instance.length + e.deploymentId.length + e.region.length + 40;
}

function entryText(e: LogEntry): string {
  switch (e.entry.case) {
    case "line":
      return e.entry.value;
    case "marker":
      return e.entry.value.message;
    case "request": {
      const r = e.entry.value;
      return r.method + r.path + r.policy + r.client + r.key;
    }
    default:
      return "";
  }
}

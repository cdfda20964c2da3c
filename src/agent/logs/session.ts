// One log request on the agent: the environment's pods in one namespace (optionally some
// revisions, or one pod), each one's `pods/log` read with the kubelet's timestamps, and the lines
// pushed to ctrl in batches. Following, a watch on the pods lets new instances join (a rollout, a
// scale-up; a restarted container too) and a log that ends leaves with a marker.
//
// Each container is read twice, once per stream (stdout, stderr), so every line says which it
// came from, where the cluster allows it (streams.ts: the PodLogsQuerySplitStreams feature gate,
// found out by asking) and the read has no tail (the API server takes no tailLines with a
// stream); otherwise once, both merged, the stream unknown.
//
// The agent does as little as it can per line: what pods/log gives it goes on as bytes, cut only
// at the last newline of each chunk (lines.ts), and ctrl splits the lines and reads their times
// (the chunk form of PushLogs). Only for a ctrl that predates the chunk form does the agent split
// and parse the lines itself, at push time.
//
// Reading never waits on ctrl: data goes into a bounded OutBuffer and the push loop drains it;
// what does not fit is dropped and replaced by a "dropped" marker. Pushes are sequential and at
// most one per PUSH_INTERVAL_MS while data keeps coming (each push costs the same whatever it
// carries, so fewer, bigger pushes cost less per line, for at most that much more delay), so a
// slow ctrl means bigger batches, then drops, never a stalled API server stream. An empty push
// every HEARTBEAT_MS tells ctrl this agent still serves the request; ctrl answering `cancelled`
// (the reader left) or not answering at all ends it.
import { setMaxListeners } from "node:events";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type {
  AgentLogRequest,
  LogChunkSchema,
  LogEntrySchema,
  LogMarkerSchema,
  PushLogsRequestSchema,
} from "../../gen/krane/ctrl/v1/logs_pb.js";
import { LogMarkerKind, LogStream } from "../../gen/krane/ctrl/v1/logs_pb.js";
import {
  COMPONENT,
  isWorkspaceNamespace,
  LABEL_COMPONENT,
  LABEL_DEPLOYMENT_ID,
  LABEL_ENVIRONMENT_ID,
  regionSelector,
} from "../../contracts/labels.js";
import { forEachStampedLine, msToNs } from "../../contracts/logs.js";
import { isGone, type KubeClient } from "../../kube/client.js";
import { isRecord, type KubeObject } from "../../kube/object.js";
import { resources } from "../../kube/resources.js";
import { CONTAINER_NAME } from "../deployments/render.js";
import type { Logger } from "../../base/log.js";
import { sleep } from "../../retry/backoff.js";
import { DEFAULT_BUFFER, OutBuffer, type BufferLimits, type LogStreamName, type OutEntry } from "./buffer.js";
import { lastLineNs, LineChunker, linesAfter } from "./lines.js";
import { appContainer, isStandIn, runningContainer } from "./pods.js";
import { refusedByApiServer, refusesStreams, StreamSupport } from "./streams.js";

export type PushRequest = MessageInitShape<typeof PushLogsRequestSchema>;

export interface LogSessionDeps {
  readonly kube: KubeClient;
  readonly region: string;
  /** Sends a batch to ctrl; answers whether the request was cancelled. Throws when ctrl is unreachable. */
  push(req: PushRequest): Promise<{ cancelled: boolean }>;
  readonly log: Logger;
  readonly buffer?: BufferLimits;
  /** What the cluster said of split streams (shared by the agent's sessions; default: this session's own). */
  readonly streams?: StreamSupport;
  /** Empty pushes while quiet, so ctrl knows the request is served (default 2 s). */
  readonly heartbeatMs?: number;
  /** While data keeps coming, pushes start at most this often (ms; default PUSH_INTERVAL_MS). */
  readonly pushIntervalMs?: number;
  readonly now?: () => number;
}

export const HEARTBEAT_MS = 2_000;
/**
 * While data keeps coming, a push starts at most this long after the one before. A push costs
 * the agent (and ctrl) about the same whether it carries 10 lines or 10,000; pushing as soon as
 * the last one returned made a push every few milliseconds, most of the agent's CPU per line.
 */
export const PUSH_INTERVAL_MS = 50;
/**
 * A batch carries at most about this much data: all the buffer holds, short of ctrl's 4 MiB
 * request limit. On a busy machine a round trip can take seconds; a batch capped lower relayed
 * less per round trip than 20 busy instances write, and the buffer grew until it dropped.
 */
const BATCH_BYTES = 3 * 1024 * 1024;
/** Data pushed at once without waiting for the interval (a burst: the next push is due anyway). */
const EAGER_BYTES = 1024 * 1024;
/** Pushes that fail in a row before the request is given up (ctrl gone: its reader is gone too). */
const PUSH_ATTEMPTS = 3;
/** A push slower than this is logged (a sign of a starved agent or ctrl). */
const SLOW_PUSH_MS = 2_000;
/** A followed log that breaks is read again at most this many times in a row without a line. */
const REOPEN_ATTEMPTS = 5;

/** The marker of a stand-in pod (isStandIn). */
export const STAND_IN =
  "no log: this instance is a stand-in on a simulated (KWOK) node, which runs no container; real nodes have logs";

const MARKER_KINDS = {
  joined: LogMarkerKind.JOINED,
  left: LogMarkerKind.LEFT,
  dropped: LogMarkerKind.DROPPED,
  error: LogMarkerKind.ERROR,
} as const;

/** How one read of a container's log ended. */
type ReadEnd =
  | { kind: "done" | "stopped" | "left" }
  | { kind: "error"; message: string }
  /** A split read the cluster refused, before any line. */
  | { kind: "refused"; apiServer: boolean };

const STREAMS: readonly LogStreamName[] = ["Stdout", "Stderr"];

interface Reader {
  containerId: string;
  abort: AbortController;
  done: Promise<void>;
}

export class LogSession {
  readonly #d: LogSessionDeps;
  readonly #req: AgentLogRequest;
  readonly #buffer: OutBuffer;
  readonly #stop = new AbortController();
  readonly #streams: StreamSupport;
  /** The reader of each pod (the container it reads); kept after it ended, so a log is read once. */
  readonly #readers = new Map<string, Reader>();
  /** Stand-in pods seen (each said once). */
  readonly #standIns = new Set<string>();
  #wake: (() => void) | undefined;
  #finished = false;
  #error = "";
  /** Settles when the session ended. */
  readonly done: Promise<void>;

  constructor(d: LogSessionDeps, req: AgentLogRequest) {
    this.#d = d;
    this.#req = req;
    this.#buffer = new OutBuffer(d.buffer ?? DEFAULT_BUFFER);
    this.#streams = d.streams ?? new StreamSupport();
    // One listener per pod read (each reader stops with the session): no cap on instances.
    setMaxListeners(0, this.#stop.signal);
    this.done = this.#run();
  }

  get id(): string {
    return this.#req.requestId;
  }

  /** Lines dropped so far (the buffer was full). */
  get dropped(): number {
    return this.#buffer.dropped;
  }

  stop(): void {
    this.#stop.abort();
    this.#wake?.();
  }

  #now(): number {
    return (this.#d.now ?? Date.now)();
  }

  #emit(e: OutEntry): void {
    this.#buffer.push(e);
    this.#wake?.();
  }

  #marker(pod: KubeObject, kind: "joined" | "left" | "error", message = ""): void {
    this.#emit({
      instance: pod.metadata.name ?? "",
      deploymentId: pod.metadata.labels?.[LABEL_DEPLOYMENT_ID] ?? "",
      ns: msToNs(this.#now()),
      marker: { kind, dropped: 0, message },
    });
  }

  async #run(): Promise<void> {
    const pushing = this.#pushLoop();
    try {
      await this.#read();
    } catch (err) {
      if (!this.#stop.signal.aborted) this.#error = err instanceof Error ? err.message : String(err);
    }
    this.#finished = true;
    this.#wake?.();
    await pushing;
    this.#stop.abort();
  }

  #selector(): string {
    const parts = [
      regionSelector(this.#d.region),
      `${LABEL_COMPONENT}=${COMPONENT.deployment}`,
      `${LABEL_ENVIRONMENT_ID}=${this.#req.environmentId}`,
    ];
    if (this.#req.deploymentIds.length > 0)
      parts.push(`${LABEL_DEPLOYMENT_ID} in (${this.#req.deploymentIds.join(",")})`);
    return parts.join(",");
  }

  async #read(): Promise<void> {
    const signal = this.#stop.signal;
    const ns = this.#req.k8sNamespace;
    // The agent reads logs in workspace namespaces only: RBAC grants pods/log cluster-wide (it
    // cannot narrow a read to labelled namespaces), so the agent itself keeps to them.
    const namespace = await this.#d.kube.get(resources.namespaces, undefined, ns, signal);
    if (!namespace || !isWorkspaceNamespace(namespace.metadata.labels))
      throw new Error(`namespace ${ns} is not a workspace namespace of this cluster`);
    const selector = this.#selector();
    for (;;) {
      const { items, resourceVersion } = await this.#d.kube.list(resources.pods, {
        namespace: ns,
        labelSelector: selector,
        signal,
      });
      for (const pod of items) this.#consider(pod);
      const asked = this.#req.instance;
      if (asked !== "" && !this.#readers.has(asked) && !this.#standIns.has(asked) && !this.#req.follow)
        // Said rather than answered with silence: the reader learns why nothing came.
        this.#emit({
          instance: asked,
          deploymentId: "",
          ns: msToNs(this.#now()),
          marker: {
            kind: "error",
            dropped: 0,
            message: this.#req.previous
              ? "no previous container to read (it has not restarted, or the kubelet is replacing it right now)"
              : "this instance has no started container to read in this region",
          },
        });
      if (!this.#req.follow) {
        await Promise.all([...this.#readers.values()].map((r) => r.done));
        return;
      }
      try {
        await this.#d.kube.watch(
          resources.pods,
          { namespace: ns, labelSelector: selector, resourceVersion, timeoutSeconds: 300 },
          (type, obj) => {
            if ((type === "ADDED" || type === "MODIFIED") && isPod(obj)) this.#consider(obj);
          },
          signal,
        );
      } catch (err) {
        if (signal.aborted) return;
        if (!isGone(err)) throw err;
      }
      if (signal.aborted) return;
    }
  }

  /** Starts reading a pod's container when there is one to read and it is not read yet. */
  #consider(pod: KubeObject): void {
    const name = pod.metadata.name ?? "";
    if (this.#req.instance !== "" && name !== this.#req.instance) return;
    const c = appContainer(pod, CONTAINER_NAME, this.#req.previous);
    if (!c) {
      // Said rather than answered with silence: a stand-in has no log, and never will.
      if (isStandIn(pod, CONTAINER_NAME) && !this.#standIns.has(name)) {
        this.#standIns.add(name);
        this.#marker(pod, "error", STAND_IN);
      }
      return;
    }
    const existing = this.#readers.get(name);
    if (existing && existing.containerId === c.id) return;
    // A new container of a pod already read (a restart) is read from its start.
    const fresh = existing !== undefined;
    const abort = new AbortController();
    const stop = (): void => abort.abort();
    this.#stop.signal.addEventListener("abort", stop, { once: true });
    const reader: Reader = { containerId: c.id, abort, done: Promise.resolve() };
    reader.done = this.#readContainer(pod, c.id, fresh, abort.signal).finally(() =>
      this.#stop.signal.removeEventListener("abort", stop),
    );
    this.#readers.set(name, reader);
  }

  /** Reads a container's log, split by stream where the cluster allows, with its markers. */
  async #readContainer(pod: KubeObject, containerId: string, fresh: boolean, signal: AbortSignal): Promise<void> {
    const r = this.#req;
    if (r.follow) this.#marker(pod, "joined");
    const node = isRecord(pod.spec) && typeof pod.spec.nodeName === "string" ? pod.spec.nodeName : "";
    let ends: ReadEnd[] | undefined;
    if (r.tailLines === undefined && this.#streams.split(node)) {
      ends = await Promise.all(STREAMS.map((s) => this.#readPod(pod, containerId, fresh, signal, s)));
      const refused = ends.find((e) => e.kind === "refused");
      if (refused?.kind === "refused") {
        this.#streams.refused(node, refused.apiServer);
        this.#d.log.info(
          { node, apiServer: refused.apiServer },
          "log streams cannot be read apart here; reading them merged",
        );
        // Both refuse alike (the same API server and kubelet): nothing was read yet.
        ends = undefined;
      }
    }
    ends ??= [await this.#readPod(pod, containerId, fresh, signal, undefined)];
    if (signal.aborted) return;
    const error = ends.find((e) => e.kind === "error");
    if (error?.kind === "error") this.#marker(pod, "error", error.message);
    else if (ends.some((e) => e.kind === "left")) this.#marker(pod, "left");
  }

  /** Reads one stream of a container's log (`stream` undefined: both, merged). */
  async #readPod(
    pod: KubeObject,
    containerId: string,
    fresh: boolean,
    signal: AbortSignal,
    stream: LogStreamName | undefined,
  ): Promise<ReadEnd> {
    const name = pod.metadata.name ?? "";
    const namespace = pod.metadata.namespace ?? this.#req.k8sNamespace;
    const deploymentId = pod.metadata.labels?.[LABEL_DEPLOYMENT_ID] ?? "";
    const r = this.#req;
    const since = r.sinceUnixMs > 0n && !fresh;
    const path = `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}/log`;
    let query: Record<string, string | number | boolean | undefined> = {
      container: CONTAINER_NAME,
      timestamps: true,
      follow: r.follow && !r.previous ? true : undefined,
      previous: r.previous ? true : undefined,
      // The API server takes whole seconds; the lines before the exact time are dropped by ctrl
      // (or, for a ctrl that takes no chunks, when the lines are split at push time).
      sinceTime: since ? new Date(Math.floor(Number(r.sinceUnixMs) / 1000) * 1000).toISOString() : undefined,
      tailLines: r.tailLines !== undefined && !fresh ? r.tailLines : undefined,
      stream,
    };
    /**
     * The last lines passed on: their last line's time is read only when the stream is opened
     * again, not for every chunk (a chunk is about a line: reading its time was a fifth of the
     * agent's work).
     */
    let lastData: Buffer | undefined;
    /** After a reopened stream: its lines up to this time were passed on already. */
    let skipUpTo: bigint | undefined;
    /** Passes lines on; whether there were new ones. */
    const emit = (data: Buffer | undefined): boolean => {
      if (data && skipUpTo !== undefined) {
        data = linesAfter(data, skipUpTo);
        if (data) skipUpTo = undefined;
      }
      if (!data) return false;
      lastData = data;
      this.#emit({ instance: name, deploymentId, ns: 0n, data, stream });
      return true;
    };
    for (let broken = 0; ;) {
      const lines = new LineChunker();
      let heard = false;
      let failure = "";
      try {
        await this.#d.kube.streamBytes(path, query, (chunk) => (heard = emit(lines.feed(chunk)) || heard), signal);
      } catch (err) {
        if (signal.aborted) return { kind: "stopped" };
        if (stream !== undefined && lastData === undefined && !heard && refusesStreams(err))
          return { kind: "refused", apiServer: refusedByApiServer(err) };
        failure = err instanceof Error ? err.message : String(err);
        if (!r.follow) return { kind: "error", message: `cannot read the log: ${failure}` };
      }
      if (!r.follow) emit(lines.end());
      if (!r.follow) return { kind: "done" };
      if (signal.aborted) return { kind: "stopped" };
      // A followed log ends when its container stops, but also when the connection to the API
      // server (or the API server's to the kubelet) breaks: an API server restarting or being
      // replaced. While the same container still runs, its log is read again from the last line
      // passed on (from that second; what was passed on already is skipped).
      broken = heard ? 1 : broken + 1;
      this.#d.log.debug(
        { request: this.id, pod: name, stream, failure, broken },
        "log stream ended; reading it again if it runs",
      );
      // Unsure (the API server does not answer yet): tried again, within the attempts.
      const givenUp = broken > REOPEN_ATTEMPTS;
      const running = givenUp ? "no" : await this.#stillRunning(namespace, name, containerId, signal);
      if (running === "no") {
        if (signal.aborted) return { kind: "stopped" };
        emit(lines.end());
        // A container that is gone has left, however its stream ended: a stream cut while the
        // kubelet stops a container is the usual end of a rolling update, not an error. Only a
        // stream given up on while the container may still run is one.
        return givenUp && failure !== ""
          ? { kind: "error", message: `cannot read the log: ${failure}` }
          : { kind: "left" };
      }
      await sleep(Math.min(5_000, 250 * 2 ** (broken - 1)), signal);
      if (signal.aborted) return { kind: "stopped" };
      const lastNs = lastData === undefined ? undefined : lastLineNs(lastData);
      if (lastNs !== undefined) {
        const second = lastNs / 1_000_000_000n;
        query = { ...query, tailLines: undefined, sinceTime: new Date(Number(second) * 1000).toISOString() };
        skipUpTo = lastNs;
      }
    }
  }

  /** Whether the pod's app container `containerId` is still running ("unsure" when the API server does not say). */
  async #stillRunning(
    namespace: string,
    name: string,
    containerId: string,
    signal: AbortSignal,
  ): Promise<"yes" | "no" | "unsure"> {
    try {
      const pod = await this.#d.kube.get(resources.pods, namespace, name, signal);
      return pod !== undefined && runningContainer(pod, CONTAINER_NAME) === containerId ? "yes" : "no";
    } catch {
      return "unsure";
    }
  }

  async #pushLoop(): Promise<void> {
    const heartbeat = this.#d.heartbeatMs ?? HEARTBEAT_MS;
    const interval = this.#d.pushIntervalMs ?? PUSH_INTERVAL_MS;
    let failures = 0;
    // The first push goes out at once, empty if need be: ctrl hears that the request is served
    // before the pods are even listed.
    let first = true;
    let lastPush = 0;
    let seq = 0n;
    let pending: PushRequest | undefined;
    for (;;) {
      if (!first && !pending && !this.#finished && !this.#stop.signal.aborted) {
        // Quiet: wait for data (or the heartbeat). Data: wait out the interval since the last
        // push, unless a burst already filled a batch.
        const empty = this.#buffer.size === 0;
        const wait = empty ? heartbeat : interval - (this.#now() - lastPush);
        if (wait > 0 && (empty || this.#buffer.bytes < EAGER_BYTES)) await this.#sleep(wait, empty);
      }
      first = false;
      // Stopped (the agent stopping, or ctrl cancelled): no last push. A request that ends
      // because the agent stops must not look finished to ctrl, whose reader then resumes.
      if (this.#stop.signal.aborted) return;
      // A push that failed goes again as it was (same number: ctrl takes it once) before any
      // newer data, so nothing is lost to a lost answer and the order holds.
      if (!pending) {
        const batch = this.#buffer.take(BATCH_BYTES);
        const last = this.#finished && this.#buffer.size === 0;
        pending = {
          region: this.#d.region,
          requestId: this.#req.requestId,
          ...(this.#req.chunks
            ? { chunks: batch.map(toChunk) }
            : { entries: lineEntries(batch, msToNs(Number(this.#req.sinceUnixMs))) }),
          done: last,
          error: last ? this.#error : "",
          seq: ++seq,
        };
      }
      const last = pending.done === true;
      lastPush = this.#now();
      try {
        const res = await this.#d.push(pending);
        const took = this.#now() - lastPush;
        if (took > SLOW_PUSH_MS)
          this.#d.log.info({ request: this.id, ms: took, seq: String(pending.seq) }, "slow log push to ctrl");
        pending = undefined;
        failures = 0;
        if (res.cancelled) {
          this.stop();
          return;
        }
      } catch (err) {
        // Given up after a few: ctrl is gone (its reader with it) or does not answer at all, and
        // ctrl ends a request whose agent stopped answering.
        if (++failures >= PUSH_ATTEMPTS) {
          this.#d.log.debug(
            { request: this.id, err: err instanceof Error ? err.message : String(err) },
            "log push failed; request given up",
          );
          this.stop();
          return;
        }
        await new Promise((r) => setTimeout(r, 200 * failures));
        continue;
      }
      if (last) return;
    }
  }

  /**
   * Sleeps `ms`, or until woken: by new data when `untilData` (the buffer was empty), by a
   * burst that fills a batch, by the end of the session or a stop.
   */
  async #sleep(ms: number, untilData: boolean): Promise<void> {
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      this.#wake = () => {
        if (!untilData && !this.#finished && !this.#stop.signal.aborted && this.#buffer.bytes < EAGER_BYTES) return;
        clearTimeout(t);
        resolve();
      };
    });
    this.#wake = undefined;
  }
}

/** A batch as one entry per line from `sinceNs` on, for a ctrl that takes no chunks (an older ctrl). */
export function lineEntries(batch: readonly OutEntry[], sinceNs: bigint): MessageInitShape<typeof LogEntrySchema>[] {
  const out: MessageInitShape<typeof LogEntrySchema>[] = [];
  for (const e of batch) {
    if (e.data !== undefined)
      forEachStampedLine(e.data, sinceNs, (ns, text) =>
        out.push({
          timeUnixNano: ns,
          instance: e.instance,
          deploymentId: e.deploymentId,
          entry: { case: "line", value: text },
          stream: streamOf(e),
        }),
      );
    else out.push({ timeUnixNano: e.ns, instance: e.instance, deploymentId: e.deploymentId, entry: markerOf(e) });
  }
  return out;
}

function markerOf(e: OutEntry): { case: "marker"; value: MessageInitShape<typeof LogMarkerSchema> } {
  return {
    case: "marker",
    value: {
      kind: MARKER_KINDS[e.marker?.kind ?? "error"],
      dropped: BigInt(e.marker?.dropped ?? 0),
      message: e.marker?.message ?? "",
    },
  };
}

function toChunk(e: OutEntry): MessageInitShape<typeof LogChunkSchema> {
  return e.data !== undefined
    ? {
        instance: e.instance,
        deploymentId: e.deploymentId,
        content: { case: "lines", value: e.data },
        stream: streamOf(e),
      }
    : {
        instance: e.instance,
        deploymentId: e.deploymentId,
        content: { case: "marker", value: markerOf(e).value },
        markerTimeUnixNano: e.ns,
      };
}

function streamOf(e: OutEntry): LogStream {
  return e.stream === "Stdout" ? LogStream.STDOUT : e.stream === "Stderr" ? LogStream.STDERR : LogStream.UNSPECIFIED;
}

function isPod(o: unknown): o is KubeObject {
  return typeof o === "object" && o !== null && "metadata" in o;
}

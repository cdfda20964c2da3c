// One log request on the agent: the environment's pods in one namespace (optionally some
// revisions, or one pod), each one's `pods/log` read with the kubelet's timestamps, and the lines
// pushed to ctrl in batches. Following, a watch on the pods lets new instances join (a rollout, a
// scale-up; a restarted container too) and a log that ends leaves with a marker.
//
// Reading never waits on ctrl: lines go into a bounded OutBuffer and the push loop drains it;
// what does not fit is dropped and replaced by a "dropped" marker. Pushes are sequential, so a
// slow ctrl means bigger batches, then drops, never a stalled API server stream. An empty push
// every HEARTBEAT_MS tells ctrl this agent still serves the request; ctrl answering `cancelled`
// (the reader left) or not answering at all ends it.
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { AgentLogRequest, PushLogsRequestSchema } from "../../gen/krane/ctrl/v1/logs_pb.js";
import { LogMarkerKind } from "../../gen/krane/ctrl/v1/logs_pb.js";
import {
  COMPONENT,
  isWorkspaceNamespace,
  LABEL_COMPONENT,
  LABEL_DEPLOYMENT_ID,
  LABEL_ENVIRONMENT_ID,
  regionSelector,
} from "../../contracts/labels.js";
import { cutLine, msToNs, parseStampedLine } from "../../contracts/logs.js";
import { isGone, type KubeClient, takeLines } from "../../kube/client.js";
import type { KubeObject } from "../../kube/object.js";
import { resources } from "../../kube/resources.js";
import { CONTAINER_NAME } from "../deployments/render.js";
import type { Logger } from "../runtime/log.js";
import { DEFAULT_BUFFER, OutBuffer, type BufferLimits, type OutEntry } from "./buffer.js";
import { appContainer } from "./pods.js";

export type PushRequest = MessageInitShape<typeof PushLogsRequestSchema>;

export interface LogSessionDeps {
  readonly kube: KubeClient;
  readonly region: string;
  /** Sends a batch to ctrl; answers whether the request was cancelled. Throws when ctrl is unreachable. */
  push(req: PushRequest): Promise<{ cancelled: boolean }>;
  readonly log: Logger;
  readonly buffer?: BufferLimits;
  /** Empty pushes while quiet, so ctrl knows the request is served (default 2 s). */
  readonly heartbeatMs?: number;
  readonly now?: () => number;
}

export const HEARTBEAT_MS = 2_000;
/**
 * A batch carries at most this many entries, about this much text: all the buffer holds, short of
 * ctrl's 4 MiB request limit. The push loop sends one batch per round trip, and on a busy machine a
 * round trip can take seconds (the agent reads its pods' logs in bursts that hold the event loop);
 * a batch capped at 2,000 entries then relayed at most 2,000 lines per round trip, below what 20
 * busy instances write, and the buffer grew until it dropped.
 */
const BATCH_ENTRIES = DEFAULT_BUFFER.maxEntries;
const BATCH_BYTES = 1536 * 1024;
/** Pushes that fail in a row before the request is given up (ctrl gone: its reader is gone too). */
const PUSH_ATTEMPTS = 3;

const MARKER_KINDS = {
  joined: LogMarkerKind.JOINED,
  left: LogMarkerKind.LEFT,
  dropped: LogMarkerKind.DROPPED,
  error: LogMarkerKind.ERROR,
} as const;

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
  /** The reader of each pod (the container it reads); kept after it ended, so a log is read once. */
  readonly #readers = new Map<string, Reader>();
  #wake: (() => void) | undefined;
  #finished = false;
  #error = "";
  /** Settles when the session ended. */
  readonly done: Promise<void>;

  constructor(d: LogSessionDeps, req: AgentLogRequest) {
    this.#d = d;
    this.#req = req;
    this.#buffer = new OutBuffer(d.buffer ?? DEFAULT_BUFFER);
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
      if (asked !== "" && !this.#readers.has(asked) && !this.#req.follow)
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
    if (!c) return;
    const existing = this.#readers.get(name);
    if (existing && existing.containerId === c.id) return;
    // A new container of a pod already read (a restart) is read from its start.
    const fresh = existing !== undefined;
    const abort = new AbortController();
    const stop = (): void => abort.abort();
    this.#stop.signal.addEventListener("abort", stop, { once: true });
    const reader: Reader = { containerId: c.id, abort, done: Promise.resolve() };
    reader.done = this.#readPod(pod, fresh, abort.signal).finally(() =>
      this.#stop.signal.removeEventListener("abort", stop),
    );
    this.#readers.set(name, reader);
  }

  async #readPod(pod: KubeObject, fresh: boolean, signal: AbortSignal): Promise<void> {
    const name = pod.metadata.name ?? "";
    const deploymentId = pod.metadata.labels?.[LABEL_DEPLOYMENT_ID] ?? "";
    const r = this.#req;
    const sinceNs = r.sinceUnixMs > 0n && !fresh ? msToNs(Number(r.sinceUnixMs)) : 0n;
    const query: Record<string, string | number | boolean | undefined> = {
      container: CONTAINER_NAME,
      timestamps: true,
      follow: r.follow && !r.previous ? true : undefined,
      previous: r.previous ? true : undefined,
      // The API server takes whole seconds; the lines before the exact time are dropped below.
      sinceTime: sinceNs > 0n ? new Date(Math.floor(Number(r.sinceUnixMs) / 1000) * 1000).toISOString() : undefined,
      tailLines: r.tailLines !== undefined && !fresh ? r.tailLines : undefined,
    };
    if (r.follow) this.#marker(pod, "joined");
    let rest = "";
    const onLine = (raw: string): boolean => {
      const p = parseStampedLine(raw);
      if (!p) return true;
      if (p.ns < sinceNs) return true;
      this.#emit({ instance: name, deploymentId, ns: p.ns, line: cutLine(p.text) });
      return true;
    };
    try {
      await this.#d.kube.streamText(
        `/api/v1/namespaces/${encodeURIComponent(pod.metadata.namespace ?? r.k8sNamespace)}/pods/${encodeURIComponent(name)}/log`,
        query,
        (chunk) => {
          rest = takeLines(rest === "" ? chunk : rest + chunk, onLine);
        },
        signal,
      );
      if (rest !== "") onLine(rest);
      if (r.follow && !signal.aborted) this.#marker(pod, "left");
    } catch (err) {
      if (signal.aborted) return;
      const msg = err instanceof Error ? err.message : String(err);
      this.#marker(pod, "error", `cannot read the log: ${msg}`);
    }
  }

  async #pushLoop(): Promise<void> {
    const heartbeat = this.#d.heartbeatMs ?? HEARTBEAT_MS;
    let failures = 0;
    // The first push goes out at once, empty if need be: ctrl hears that the request is served
    // before the pods are even listed.
    let first = true;
    for (;;) {
      if (!first && this.#buffer.size === 0 && !this.#finished && !this.#stop.signal.aborted) {
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, heartbeat);
          this.#wake = () => {
            clearTimeout(t);
            resolve();
          };
        });
        this.#wake = undefined;
      }
      first = false;
      // Stopped (the agent stopping, or ctrl cancelled): no last push. A request that ends
      // because the agent stops must not look finished to ctrl, whose reader then resumes.
      if (this.#stop.signal.aborted) return;
      const batch = this.#buffer.take(BATCH_ENTRIES, BATCH_BYTES);
      const last = this.#finished && this.#buffer.size === 0;
      try {
        const res = await this.#d.push({
          region: this.#d.region,
          requestId: this.#req.requestId,
          entries: batch.map((e) => ({
            timeUnixNano: e.ns,
            instance: e.instance,
            deploymentId: e.deploymentId,
            entry:
              e.line !== undefined
                ? { case: "line" as const, value: e.line }
                : {
                    case: "marker" as const,
                    value: {
                      kind: MARKER_KINDS[e.marker?.kind ?? "error"],
                      dropped: BigInt(e.marker?.dropped ?? 0),
                      message: e.marker?.message ?? "",
                    },
                  },
          })),
          done: last,
          error: last ? this.#error : "",
        });
        failures = 0;
        if (res.cancelled) {
          this.stop();
          return;
        }
      } catch (err) {
        // The batch is lost with the push; a reader still there sees a gap in time, and ctrl ends
        // a request whose agent stopped answering.
        if (++failures >= PUSH_ATTEMPTS) {
          this.#d.log.debug(
            { request: this.id, err: err instanceof Error ? err.message : String(err) },
            "log push failed; request given up",
          );
          this.stop();
          return;
        }
        await new Promise((r) => setTimeout(r, 200 * failures));
      }
      if (last) return;
    }
  }
}

function isPod(o: unknown): o is KubeObject {
  return typeof o === "object" && o !== null && "metadata" in o;
}

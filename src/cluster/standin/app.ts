// The stand-in for a user pod (test and dev harness): a small HTTP server on the pod's port at
// the pod's local address, answering with who answered (pod, revision, image) and misbehaving
// on request so tests can exercise the data plane:
//  - per pod, through annotations (live: the stand-in watches pods):
//      standin.krane.dev/mode: serve | refuse (nothing listens: connection refused)
//                              | reset (connections are reset at once) | hang (never answers)
//      standin.krane.dev/status, standin.krane.dev/latency-ms: every answer's status and delay
//      standin.krane.dev/error-rate: the fraction (0–1) of answers that are 500 instead, at random
//      standin.krane.dev/termination-delay-ms: how long the "process" keeps serving after the
//                              pod is deleted (a graceful shutdown), default its grace period, at most 1 s
//  - per request, through the query: ?status=503&latency=200&bytes=N&chunks=K&interval=ms;
//    /echo streams the request body back; an Upgrade becomes a WebSocket that echoes.
// One listener per local address and port; if a new pod gets the IP of a pod still in its
// termination delay, the newest pod answers.
import * as http from "node:http";
import type { Socket } from "node:net";
import { WebSocketServer } from "ws";
import type { Logger } from "../../base/log.js";
import { answer, upgrade, type PodIdentity, type ServedPod } from "../workload/answer.js";

export type { StandinAnswer } from "../workload/answer.js";

export const STANDIN_ANNOTATION = {
  mode: "standin.krane.dev/mode",
  status: "standin.krane.dev/status",
  latencyMs: "standin.krane.dev/latency-ms",
  errorRate: "standin.krane.dev/error-rate",
  terminationDelayMs: "standin.krane.dev/termination-delay-ms",
} as const;

export type StandinMode = "serve" | "refuse" | "reset" | "hang";

export interface AppPod extends PodIdentity {
  readonly uid: string;
  /** Where this machine serves it. */
  readonly localIp: string;
  /** Newer pods win a shared address. */
  readonly createdAt: number;
  readonly mode: StandinMode;
  readonly status: number;
  readonly latencyMs: number;
  /** Fraction (0–1) of answers that are 500 instead of `status` (a failing canary, for rollout analysis tests). */
  readonly errorRate?: number;
}

function served(pod: AppPod): ServedPod {
  return { ...pod, hang: pod.mode === "hang" };
}

interface Listener {
  readonly key: string;
  readonly server: http.Server;
  readonly wss: WebSocketServer;
  readonly sockets: Set<Socket>;
  owner: AppPod;
  listening: Promise<void>;
}

export class AppListeners {
  readonly #log: Logger;
  readonly #listeners = new Map<string, Listener>();

  constructor(log: Logger) {
    this.#log = log;
  }

  get size(): number {
    return this.#listeners.size;
  }

  /** Makes the listeners match `pods` (the pods that serve now). */
  async set(pods: readonly AppPod[]): Promise<void> {
    const owners = new Map<string, AppPod>();
    for (const p of pods) {
      if (p.mode === "refuse") continue;
      const key = `${p.localIp}:${p.port}`;
      const cur = owners.get(key);
      if (!cur || p.createdAt > cur.createdAt || (p.createdAt === cur.createdAt && p.uid > cur.uid)) owners.set(key, p);
    }
    const work: Promise<void>[] = [];
    for (const [key, l] of this.#listeners) {
      if (!owners.has(key)) work.push(this.#close(l));
    }
    for (const [key, pod] of owners) {
      const l = this.#listeners.get(key);
      if (l) {
        l.owner = pod;
        if (pod.mode === "reset") for (const s of l.sockets) s.resetAndDestroy();
      } else {
        work.push(this.#open(key, pod));
      }
    }
    await Promise.all(work);
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.#listeners.values()].map((l) => this.#close(l)));
  }

  async #open(key: string, pod: AppPod): Promise<void> {
    const sockets = new Set<Socket>();
    const wss = new WebSocketServer({ noServer: true });
    const server = http.createServer({ keepAliveTimeout: 5_000 });
    const l: Listener = { key, server, wss, sockets, owner: pod, listening: Promise.resolve() };
    server.on("connection", (s: Socket) => {
      if (l.owner.mode === "reset") {
        s.resetAndDestroy();
        return;
      }
      sockets.add(s);
      s.once("close", () => sockets.delete(s));
    });
    server.on("request", (req, res) => answer(served(l.owner), req, res));
    server.on("upgrade", (req: http.IncomingMessage, socket: Socket, head: Buffer) => {
      if (l.owner.mode !== "serve") return;
      upgrade(wss, served(l.owner), req, socket, head);
    });
    this.#listeners.set(key, l);
    l.listening = new Promise<void>((resolve) => {
      const attempt = (tries: number): void => {
        server.once("error", (err: NodeJS.ErrnoException) => {
          if (this.#listeners.get(key) !== l) return resolve();
          if (err.code === "EADDRINUSE" && tries < 100) {
            setTimeout(() => attempt(tries + 1), 100);
            return;
          }
          this.#log.error({ address: key, pod: pod.name, err: err.message }, "stand-in could not listen");
          this.#listeners.delete(key);
          resolve();
        });
        server.listen(pod.port, pod.localIp, () => resolve());
      };
      attempt(0);
    });
    await l.listening;
  }

  async #close(l: Listener): Promise<void> {
    if (this.#listeners.get(l.key) === l) this.#listeners.delete(l.key);
    await l.listening;
    // The pod's process is gone: its connections go with it.
    const closed = new Promise<void>((resolve) => l.server.close(() => resolve()));
    l.server.closeAllConnections();
    for (const s of l.sockets) s.destroy();
    for (const c of l.wss.clients) c.terminate();
    l.wss.close();
    if (!l.server.listening) return;
    await closed;
  }
}

// The hello app: the test workload that runs as a real container on real nodes (the image
// `krane.local/hello`, scripts/build-image.sh --hello), where KWOK clusters use the pod stand-in.
// It answers like the stand-in (./answer.ts: pod, revision, image; status, latency, streamed
// bodies, /echo, WebSockets) and misbehaves on request:
//
//   environment (per revision, e.g. `krane deploy --env`)   HELLO_STATUS, HELLO_LATENCY_MS,
//     HELLO_ERROR_RATE, HELLO_MODE (serve | refuse | reset | hang), HELLO_SHUTDOWN_DELAY_MS,
//     HELLO_SHUTDOWN (graceful | ignore), HELLO_READY_DELAY_MS, HELLO_UNREADY_AFTER_MS
//   live, per pod: POST /_hello/control with a JSON object of the same settings
//     (status, latencyMs, errorRate, mode, shutdownDelayMs, shutdown, readyDelayMs,
//     unreadyAfterMs, ready); GET shows them
//
// GET /healthz is its readiness (503 before HELLO_READY_DELAY_MS, from HELLO_UNREADY_AFTER_MS
// after the start on — a readiness probe that starts failing, said once in the log —, after
// SIGTERM or `ready: false`). SIGTERM: readiness turns 503, it keeps serving for shutdownDelayMs (the time the pod
// takes to leave the routing tables), then stops listening, lets in-flight requests finish and
// exits; with `shutdown: ignore` it ignores SIGTERM (the kubelet kills it after the grace
// period). GET /_hello/kernel tells which kernel it runs on (os.release(), /proc/version).
import * as http from "node:http";
import type { Socket } from "node:net";
import { networkInterfaces, release, version } from "node:os";
import { readFileSync } from "node:fs";
import { WebSocketServer } from "ws";
import { answer, upgrade, type PodIdentity, type ServedPod } from "./answer.js";

export type HelloMode = "serve" | "refuse" | "reset" | "hang";

export interface HelloSettings {
  readonly status: number;
  readonly latencyMs: number;
  readonly errorRate: number;
  readonly mode: HelloMode;
  readonly shutdownDelayMs: number;
  readonly shutdown: "graceful" | "ignore";
  readonly readyDelayMs: number;
  /** Readiness fails from this long after the start on (0: never). */
  readonly unreadyAfterMs: number;
}

/**
 * What listens on the app's port when it is not the app's own HTTP/1.1 server: the gRPC mode's
 * listener (./hello-grpc.ts), which hands the app its HTTP/1.1 connections. Both idempotent.
 */
export interface HelloListener {
  /** Listens on the port (again, after refuse); nothing when listening already. */
  listen(): Promise<void>;
  /**
   * Stops accepting and closes the HTTP/2 sessions gracefully (calls in flight finish);
   * resolves once no connection is left. Nothing when not listening.
   */
  close(): Promise<void>;
  /** Drops the connections it serves itself (refuse: they go with the "process"). */
  drop(): void;
}

const MODES: readonly HelloMode[] = ["serve", "refuse", "reset", "hang"];
export const DEFAULT_SETTINGS: HelloSettings = {
  status: 200,
  latencyMs: 0,
  errorRate: 0,
  mode: "serve",
  shutdownDelayMs: 2000,
  shutdown: "graceful",
  readyDelayMs: 0,
  unreadyAfterMs: 0,
};

function int(value: unknown, min: number, max: number, what: string): number {
  const n = typeof value === "string" && value.trim() !== "" ? Number(value) : value;
  if (typeof n !== "number" || !Number.isInteger(n) || n < min || n > max)
    throw new Error(`${what}: an integer from ${min} to ${max}, got ${JSON.stringify(value)}`);
  return n;
}

/** Applies a patch of settings (from the environment or a control request); throws naming the bad field. */
export function patchSettings(base: HelloSettings, patch: Record<string, unknown>): HelloSettings {
  const out: { -readonly [K in keyof HelloSettings]: HelloSettings[K] } = { ...base };
  for (const [key, value] of Object.entries(patch)) {
    if (value === undefined) continue;
    switch (key) {
      case "status":
        out.status = int(value, 200, 599, key);
        break;
      case "latencyMs":
        out.latencyMs = int(value, 0, 600_000, key);
        break;
      case "shutdownDelayMs":
        out.shutdownDelayMs = int(value, 0, 3_600_000, key);
        break;
      case "readyDelayMs":
        out.readyDelayMs = int(value, 0, 3_600_000, key);
        break;
      case "unreadyAfterMs":
        out.unreadyAfterMs = int(value, 0, 3_600_000, key);
        break;
      case "errorRate": {
        const n = typeof value === "string" ? Number(value) : value;
        if (typeof n !== "number" || !(n >= 0 && n <= 1))
          throw new Error(`errorRate: a number from 0 to 1, got ${JSON.stringify(value)}`);
        out.errorRate = n;
        break;
      }
      case "mode":
        if (!MODES.includes(value as HelloMode))
          throw new Error(`mode: one of ${MODES.join(", ")}, got ${JSON.stringify(value)}`);
        out.mode = value as HelloMode;
        break;
      case "shutdown":
        if (value !== "graceful" && value !== "ignore")
          throw new Error(`shutdown: graceful or ignore, got ${JSON.stringify(value)}`);
        out.shutdown = value;
        break;
      case "ready":
        break;
      default:
        throw new Error(`unknown setting ${JSON.stringify(key)}`);
    }
  }
  return out;
}

export function settingsFromEnv(env: NodeJS.ProcessEnv): HelloSettings {
  return patchSettings(DEFAULT_SETTINGS, {
    status: env.HELLO_STATUS,
    latencyMs: env.HELLO_LATENCY_MS,
    errorRate: env.HELLO_ERROR_RATE,
    mode: env.HELLO_MODE,
    shutdownDelayMs: env.HELLO_SHUTDOWN_DELAY_MS,
    shutdown: env.HELLO_SHUTDOWN,
    readyDelayMs: env.HELLO_READY_DELAY_MS,
    unreadyAfterMs: env.HELLO_UNREADY_AFTER_MS,
  });
}

/** The pod's own IPv4 address (its network namespace has one interface besides loopback). */
export function ownAddress(): string {
  for (const list of Object.values(networkInterfaces()))
    for (const a of list ?? []) if (a.family === "IPv4" && !a.internal) return a.address;
  return "";
}

/** Who this container is, from what the agent's pod template and the image give it. */
export function identityFromEnv(env: NodeJS.ProcessEnv, port: number): PodIdentity {
  return {
    name: env.KRANE_INSTANCE_ID ?? env.HOSTNAME ?? "",
    namespace: env.HELLO_NAMESPACE ?? "",
    revision: env.KRANE_REVISION ?? env.HELLO_REVISION ?? "",
    image: env.HELLO_IMAGE ?? "",
    node: env.HELLO_NODE ?? "",
    podIp: ownAddress(),
    port,
  };
}

export class HelloApp {
  readonly #id: PodIdentity;
  #settings: HelloSettings;
  readonly #server: http.Server;
  readonly #wss = new WebSocketServer({ noServer: true });
  readonly #sockets = new Set<Socket>();
  readonly #startedAt = Date.now();
  #ready = true;
  /** The log said readiness fails from now on (unreadyAfterMs). */
  #saidUnready = false;
  #terminating = false;
  #listening = false;
  /** Set in gRPC mode: the port is that listener's, never the app's own server's. */
  #listener: HelloListener | undefined;
  readonly #host: string;
  readonly #log: (o: Record<string, unknown>) => void;

  constructor(
    id: PodIdentity,
    settings: HelloSettings,
    opts: { host?: string; log?: (o: Record<string, unknown>) => void } = {},
  ) {
    this.#id = id;
    this.#settings = settings;
    this.#host = opts.host ?? "0.0.0.0";
    this.#log = opts.log ?? (() => {});
    this.#server = http.createServer({ keepAliveTimeout: 5_000 });
    this.#server.on("connection", (s: Socket) => {
      if (this.#settings.mode === "reset") {
        s.resetAndDestroy();
        return;
      }
      this.#sockets.add(s);
      s.once("close", () => this.#sockets.delete(s));
    });
    this.#server.on("request", (req, res) => this.#request(req, res));
    this.#server.on("upgrade", (req: http.IncomingMessage, socket: Socket, head: Buffer) => {
      if (this.#settings.mode !== "serve") return;
      upgrade(this.#wss, this.#served(), req, socket, head);
    });
  }

  get settings(): HelloSettings {
    return this.#settings;
  }

  /** Listens on the port (unless the mode is refuse). */
  /** Answers a request that arrived elsewhere (the gRPC mode's HTTP/2 requests that are not gRPC). */
  handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.#request(req, res);
  }

  /** Serves a connection accepted elsewhere (the gRPC mode's listener, ./hello-grpc.ts) in HTTP/1.1. */
  serveConnection(socket: Socket): void {
    this.#server.emit("connection", socket);
  }

  /**
   * The port is `listener`'s (the gRPC mode's): control requests that change the mode open and
   * close it, and the app's own server never listens (it would find the port taken).
   */
  listenThrough(listener: HelloListener): void {
    this.#listener = listener;
  }

  async start(): Promise<void> {
    if (this.#settings.mode !== "refuse") await this.#listen();
  }

  #listen(): Promise<void> {
    if (this.#listener) return this.#listener.listen();
    if (this.#listening) return Promise.resolve();
    this.#listening = true;
    return new Promise((resolve, reject) => {
      this.#server.once("error", reject);
      this.#server.listen(this.#id.port, this.#host, () => {
        this.#server.off("error", reject);
        resolve();
      });
    });
  }

  #stopListening(): Promise<void> {
    if (this.#listener) return this.#listener.close();
    if (!this.#listening) return Promise.resolve();
    this.#listening = false;
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }

  #served(): ServedPod {
    const s = this.#settings;
    return { ...this.#id, status: s.status, latencyMs: s.latencyMs, errorRate: s.errorRate, hang: s.mode === "hang" };
  }

  #readyNow(): boolean {
    const age = Date.now() - this.#startedAt;
    const after = this.#settings.unreadyAfterMs;
    if (after > 0 && age >= after && !this.#saidUnready) {
      this.#saidUnready = true;
      this.#log({ msg: "readiness failing from now on", unreadyAfterMs: after });
    }
    return this.#ready && !this.#terminating && age >= this.#settings.readyDelayMs && (after === 0 || age < after);
  }

  /** Applies a control request's settings; the mode takes effect at once. */
  async control(patch: Record<string, unknown>): Promise<HelloSettings> {
    const next = patchSettings(this.#settings, patch);
    if (typeof patch.ready === "boolean") this.#ready = patch.ready;
    else if (patch.ready !== undefined) throw new Error(`ready: true or false, got ${JSON.stringify(patch.ready)}`);
    this.#settings = next;
    if (next.mode === "refuse") {
      // Nothing listens (connection refused); open connections go with the "process".
      // Closing resolves once no connection is left, so they go first.
      const closed = this.#stopListening();
      for (const s of this.#sockets) s.destroy();
      this.#listener?.drop();
      await closed;
    } else if (!this.#terminating) {
      await this.#listen();
      if (next.mode === "reset") for (const s of this.#sockets) s.resetAndDestroy();
    }
    this.#log({ msg: "settings changed", settings: next, ready: this.#ready });
    return next;
  }

  #json(res: http.ServerResponse, status: number, body: unknown): void {
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
    res.end(text);
  }

  #request(req: http.IncomingMessage, res: http.ServerResponse): void {
    if (this.#terminating) res.setHeader("connection", "close");
    const path = (req.url ?? "/").split("?")[0];
    if (path === "/healthz") {
      const ready = this.#readyNow();
      this.#json(res, ready ? 200 : 503, { ready, terminating: this.#terminating });
      return;
    }
    if (path === "/_hello/kernel") {
      let procVersion = "";
      try {
        procVersion = readFileSync("/proc/version", "utf8").trim();
      } catch {
        // not readable
      }
      this.#json(res, 200, { release: release(), version: version(), procVersion });
      return;
    }
    if (path === "/_hello/control") {
      if (req.method === "GET") {
        this.#json(res, 200, { ...this.#settings, ready: this.#readyNow() });
        return;
      }
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        let patch: unknown;
        try {
          patch = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");
        } catch {
          this.#json(res, 400, { error: "the body is not JSON" });
          return;
        }
        if (typeof patch !== "object" || patch === null || Array.isArray(patch)) {
          this.#json(res, 400, { error: "the body must be a JSON object of settings" });
          return;
        }
        // Answered before a mode change closes the listener or the connections.
        let next: HelloSettings;
        try {
          next = patchSettings(this.#settings, patch as Record<string, unknown>);
        } catch (err) {
          this.#json(res, 400, { error: err instanceof Error ? err.message : String(err) });
          return;
        }
        this.#json(res, 200, next);
        res.once("finish", () => void this.control(patch as Record<string, unknown>));
      });
      return;
    }
    answer(this.#served(), req, res);
  }

  /**
   * SIGTERM: not ready at once, keeps serving for shutdownDelayMs, then stops listening and
   * resolves once in-flight requests are done (or after `drainMs`).
   */
  async terminate(drainMs = 30_000): Promise<void> {
    if (this.#settings.shutdown === "ignore") {
      this.#log({ msg: "SIGTERM ignored (shutdown: ignore)" });
      return new Promise(() => {});
    }
    if (this.#terminating) return;
    this.#terminating = true;
    this.#log({ msg: "terminating", shutdownDelayMs: this.#settings.shutdownDelayMs });
    await new Promise((r) => setTimeout(r, this.#settings.shutdownDelayMs));
    const closed = this.#stopListening();
    this.#server.closeIdleConnections();
    for (const c of this.#wss.clients) c.close(1001, "shutting down");
    await Promise.race([closed, new Promise((r) => setTimeout(r, drainMs))]);
    this.#log({ msg: "terminated" });
  }

  /** Stops at once (tests). */
  async close(): Promise<void> {
    this.#terminating = true;
    const closed = this.#stopListening();
    this.#server.closeAllConnections();
    // In gRPC mode the app's server never listened, so it tracks no connection: its own list does.
    for (const s of this.#sockets) s.destroy();
    this.#listener?.drop();
    for (const c of this.#wss.clients) c.terminate();
    this.#wss.close();
    await closed;
  }
}

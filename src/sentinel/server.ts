// The proxy port: Node's HTTP/1.1 server listens; each new connection is first sniffed, and one
// that opens with the HTTP/2 connection preface (h2c with prior knowledge, as gRPC clients do) is
// handed to Node's HTTP/2 server instead. Guards against malformed and slow clients live here:
//  - headers must arrive within headerTimeoutMs (slowloris), and fit in maxHeaderBytes (431);
//  - a parse error gets a 400 (or 408/431) and the connection closed; nothing reaches an instance;
//  - idle keep-alive and idle sockets are closed after their timeouts.
// drain() is the SIGTERM path: stop accepting, tell keep-alive clients to go (Connection: close,
// HTTP/2 GOAWAY), let in-flight requests finish until the deadline, then close what is left. An
// idle HTTP/1.1 keep-alive connection is closed only once it has stayed idle for a while: a client
// may be sending its next request on it at the very moment the sentinel closes it, and that
// request is then lost without an answer (the client sees the connection closed, the sentinel
// never sees the request). A client that keeps using a connection gets Connection: close on its
// next answer and closes it itself.
import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";
import type { AddressInfo } from "node:net";
import type { Logger } from "../base/log.js";
import type { SentinelMetrics } from "./metrics.js";
import { Proxy } from "./proxy.js";
import type { RequestPath } from "./request-path.js";
import type { ProxyShell, ShellOptions } from "./shell.js";
import type { Endpoint } from "./table.js";
import { Upstreams } from "./upstreams.js";
import { UpgradeRelay } from "./websocket.js";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

/**
 * While draining, an HTTP/1.1 connection idle this long is closed. A busy client reuses its
 * connections far more often (and then gets Connection: close); one this idle is unlikely to pick
 * exactly this one for its next request.
 */
export const DRAIN_IDLE_MS = 2_000;

export interface ServerOptions {
  readonly path: RequestPath;
  readonly proxy: Proxy;
  readonly upgrades: UpgradeRelay;
  readonly metrics: SentinelMetrics;
  readonly log: Logger;
  readonly headerTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly idleTimeoutMs: number;
  readonly maxHeaderBytes: number;
}

/** "h2" when the bytes so far are the HTTP/2 preface, "h1" when they cannot be, undefined when undecided. */
export function sniffProtocol(buf: Buffer): "h1" | "h2" | undefined {
  const n = Math.min(buf.length, PREFACE.length);
  if (buf.subarray(0, n).equals(PREFACE.subarray(0, n))) return n === PREFACE.length ? "h2" : undefined;
  return "h1";
}

const CLIENT_ERROR_STATUS: Record<string, [number, string]> = {
  HPE_HEADER_OVERFLOW: [431, "Request Header Fields Too Large"],
  ERR_HTTP_REQUEST_TIMEOUT: [408, "Request Timeout"],
  HPE_HEADERS_TIMEOUT: [408, "Request Timeout"],
};

export class ProxyServer {
  readonly #o: ServerOptions;
  readonly #h1: http.Server;
  readonly #h2: http2.Http2Server;
  readonly #sockets = new Set<net.Socket>();
  readonly #sessions = new Set<http2.ServerHttp2Session>();
  /** Connections HTTP/2 or an Upgrade took over: not HTTP/1.1 keep-alive any more. */
  readonly #takenOver = new WeakSet<net.Socket>();
  /** HTTP/1.1 connections with a request being answered. */
  readonly #answering = new Set<net.Socket>();

  constructor(o: ServerOptions) {
    this.#o = o;
    this.#h1 = http.createServer({
      maxHeaderSize: o.maxHeaderBytes,
      headersTimeout: o.headerTimeoutMs,
      // Whole-request limit off: uploads and long responses may take long; idle sockets are
      // closed by the idle timeout instead, and the upstream side has its own timeouts.
      requestTimeout: 0,
      keepAliveTimeout: o.keepAliveTimeoutMs,
      // Check the header timeout often, not every 30 s (Node's default).
      connectionsCheckingInterval: Math.min(1000, o.headerTimeoutMs),
      noDelay: true,
    });
    this.#h1.timeout = o.idleTimeoutMs;
    this.#h1.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => {
      // While draining every answer says Connection: close, the sentinel's own answers too.
      if (o.path.draining) res.shouldKeepAlive = false;
      const socket = req.socket;
      this.#answering.add(socket);
      res.once("close", () => this.#answering.delete(socket));
      o.proxy.handle(req, res);
    });
    this.#h1.on("upgrade", (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
      this.#takenOver.add(socket);
      o.upgrades.handle(req, socket, head);
    });
    this.#h1.on("clientError", (err: NodeJS.ErrnoException, socket: net.Socket) => this.#clientError(err, socket));
    this.#h2 = http2.createServer({
      maxHeaderListPairs: 256,
      settings: { maxHeaderListSize: o.maxHeaderBytes, maxConcurrentStreams: 256 },
      maxSessionMemory: 32,
    });
    this.#h2.setTimeout(o.idleTimeoutMs);
    this.#h2.on("request", o.proxy.handle);
    this.#h2.on("session", (s: http2.ServerHttp2Session) => {
      this.#sessions.add(s);
      s.once("close", () => this.#sessions.delete(s));
      s.on("error", () => s.destroy());
    });
    this.#h2.on("sessionError", () => o.metrics.clientErrors.inc({ reason: "h2-session" }));
    // Node's own connection handler runs only after the sniffing decided HTTP/1.1.
    const h1Connection = this.#h1.listeners("connection")[0] as (socket: net.Socket) => void;
    this.#h1.removeAllListeners("connection");
    this.#h1.on("connection", (socket: net.Socket) => this.#accept(socket, () => h1Connection.call(this.#h1, socket)));
  }

  listen(port: number, host: string | undefined): Promise<AddressInfo> {
    return new Promise((resolve, reject) => {
      this.#h1.once("error", reject);
      this.#h1.listen({ port, host, backlog: 2048 }, () => {
        this.#h1.off("error", reject);
        resolve(this.#h1.address() as AddressInfo);
      });
    });
  }

  get connections(): number {
    return this.#sockets.size;
  }

  #accept(socket: net.Socket, asHttp1: () => void): void {
    this.#sockets.add(socket);
    socket.once("close", () => this.#sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    let buf: Buffer = Buffer.alloc(0);
    // Slowloris before the first request line: the same limit as for headers.
    const timer = setTimeout(() => {
      this.#o.metrics.clientErrors.inc({ reason: "timeout-before-request" });
      socket.destroy();
    }, this.#o.headerTimeoutMs);
    const onData = (chunk: Buffer): void => {
      buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
      const proto = sniffProtocol(buf);
      if (proto === undefined) return;
      clearTimeout(timer);
      socket.off("data", onData);
      socket.off("close", onClose);
      socket.pause();
      socket.unshift(buf);
      if (proto === "h2") {
        // The session reads what is buffered on the next tick, then takes the socket over.
        this.#takenOver.add(socket);
        this.#h2.emit("connection", socket);
      } else {
        asHttp1();
        socket.resume();
      }
    };
    const onClose = (): void => clearTimeout(timer);
    socket.on("data", onData);
    socket.once("close", onClose);
  }

  #clientError(err: NodeJS.ErrnoException, socket: net.Socket): void {
    const code = err.code ?? "";
    this.#o.metrics.clientErrors.inc({ reason: code.startsWith("HPE_") || code.startsWith("ERR_") ? code : "other" });
    const inResponse =
      (socket as net.Socket & { _httpMessage?: http.ServerResponse })._httpMessage?.headersSent ?? false;
    if (code === "ECONNRESET" || !socket.writable || inResponse) {
      socket.destroy();
      return;
    }
    const [status, text] = CLIENT_ERROR_STATUS[code] ?? [400, "Bad Request"];
    const body = `krane sentinel: ${text.toLowerCase()}\n`;
    socket.end(
      `HTTP/1.1 ${status} ${text}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${body.length}\r\n` +
        `x-krane-sentinel-error: ${status === 400 ? "bad-request" : status === 431 ? "headers-too-large" : "request-timeout"}\r\nconnection: close\r\n\r\n${body}`,
    );
    // A client that never reads must not hold the socket.
    setTimeout(() => socket.destroy(), 1000).unref();
  }

  /** Stops accepting, lets in-flight work finish until `deadline` (ms since epoch), closes the rest. */
  async drain(deadline: number): Promise<void> {
    const proxy = this.#o.path;
    proxy.draining = true;
    // Stop accepting only: http.Server#close would also close every idle keep-alive connection
    // at once, racing the requests clients are sending on them.
    const closed = new Promise<void>((resolve) => net.Server.prototype.close.call(this.#h1, () => resolve()));
    for (const s of this.#sessions) s.close();
    // Seen idle since: a connection that answered a request in between closes itself (Connection: close).
    const idleSince = new Map<net.Socket, number>();
    while (Date.now() < deadline && (this.#sockets.size > 0 || proxy.inFlight > 0 || this.#o.upgrades.open.size > 0)) {
      const now = Date.now();
      for (const socket of this.#sockets) {
        if (this.#takenOver.has(socket)) continue;
        if (this.#answering.has(socket)) {
          idleSince.delete(socket);
          continue;
        }
        const since = idleSince.get(socket);
        if (since === undefined) idleSince.set(socket, now);
        else if (now - since >= DRAIN_IDLE_MS) socket.destroy();
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    // Stops Node's header-timeout checks too; the listener is already closed.
    this.#h1.close(() => undefined);
    this.#h1.closeAllConnections();
    this.#o.upgrades.closeAll();
    for (const s of this.#sessions) s.destroy();
    for (const s of this.#sockets) s.destroy();
    await closed;
  }

  /** Closes everything at once. */
  async close(): Promise<void> {
    await this.drain(0);
  }
}

/** The Node.js shell: undici pools per instance, the request path, the Upgrade relay, the listener. */
export function createNodeShell(o: ShellOptions): ProxyShell {
  const s = o.settings;
  const upstreams = new Upstreams({
    connectTimeoutMs: s.connectTimeoutMs,
    onGone: (ep, inFlight) =>
      o.log.warn(
        { instance: ep.key, pod: ep.pod, revision: ep.deploymentId, inFlight },
        "instance left the routing table and does not answer any more: its requests in flight are cut",
      ),
  });
  const proxy = new Proxy({
    path: o.path,
    upstreams,
    log: o.log,
    upstreamTimeoutMs: s.upstreamTimeoutMs,
    bodyIdleTimeoutMs: s.bodyIdleTimeoutMs,
  });
  const upgrades = new UpgradeRelay({
    balancer: o.balancer,
    metrics: o.metrics,
    log: o.log,
    upstreamTimeoutMs: s.upstreamTimeoutMs,
    hasTable: o.hasTable,
    auth: o.auth,
    policies: o.policies,
    tap: o.path.o.tap,
  });
  const server = new ProxyServer({
    path: o.path,
    proxy,
    upgrades,
    metrics: o.metrics,
    log: o.log,
    headerTimeoutMs: s.headerTimeoutMs,
    keepAliveTimeoutMs: s.keepAliveTimeoutMs,
    idleTimeoutMs: s.idleTimeoutMs,
    maxHeaderBytes: s.maxHeaderBytes,
  });
  return {
    runtime: "node",
    listen: (port, host) => server.listen(port, host),
    release: (eps: readonly Endpoint[]) => upstreams.release(eps),
    drain: async (deadline) => {
      await server.drain(deadline);
      await upstreams.closeAll(false);
    },
    close: async () => {
      await server.close();
      await upstreams.closeAll(true);
    },
  };
}

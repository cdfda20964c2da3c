// The API port as a part of ctrl (a Runnable, ../../base/lifecycle.ts): the listener (./listener.ts)
// with its HTTP/2 sessions kept alive by PINGs, and the drain when ctrl stops: in-flight unary
// calls (and so their writes) finish first, then watch streams end cleanly (agents reconnect
// elsewhere with their cursor), then whatever is left is cut.
import type * as http from "node:http";
import type * as http2 from "node:http2";
import type { Socket } from "node:net";
import type { Runnable } from "../../base/lifecycle.js";
import { HTTP2_CONNECTION_WINDOW } from "../../contracts/http2.js";
import { CTRL_VERSION_HEADER } from "../../contracts/version.js";
import type { InflightTracker } from "./interceptors.js";
import { createApiListener } from "./listener.js";
import { listen, urlOf, type ListenAddress } from "./listen.js";
import type { NodeRequest, NodeResponse } from "./rpc-handler.js";

export interface ApiServerOptions {
  readonly listen: ListenAddress;
  readonly tls?: { certFile: string; keyFile: string };
  readonly handler: (req: NodeRequest, res: NodeResponse) => void;
  /** Every answer names ctrl's build in CTRL_VERSION_HEADER. */
  readonly build: string;
  /** HTTP/2 PING interval on every session; a missed answer closes the session (ms). */
  readonly pingIntervalMs: number;
  /** Calls in flight get this long when stopping, then open streams as long again (ms). */
  readonly graceMs: number;
  readonly inflight: InflightTracker;
  /** Aborted when the drain reaches the streams: watch streams end cleanly. */
  readonly streamsStop: AbortController;
  /** Aborted once every connection is gone: what is still running for a call stops. */
  readonly adapterStop: AbortController;
}

export class ApiServer implements Runnable {
  readonly name = "api listener";
  readonly #o: ApiServerOptions;
  readonly #listener;
  readonly #sessions = new Set<http2.ServerHttp2Session>();
  // Raw sockets too: a destroyed session whose peer stopped reading can leave its socket
  // half-closed, and the server only reports closed once every socket is gone.
  readonly #sockets = new Set<Socket>();
  #url = "";

  constructor(o: ApiServerOptions) {
    this.#o = o;
    // Headers set here merge into the ones Connect writes.
    const withVersion = (
      req: http.IncomingMessage | http2.Http2ServerRequest,
      res: http.ServerResponse | http2.Http2ServerResponse,
    ): void => {
      res.setHeader(CTRL_VERSION_HEADER, o.build);
      o.handler(req, res);
    };
    // HTTP/2 (h2c or TLS) for agents and gRPC, HTTP/1.1 for browsers and curl, on one port.
    this.#listener = createApiListener(withVersion, { tls: o.tls });
    this.#listener.server.on("connection", (socket: Socket) => {
      this.#sockets.add(socket);
      socket.on("close", () => this.#sockets.delete(socket));
    });
    this.#listener.h2.on("session", (session: http2.ServerHttp2Session) => this.#keepAlive(session));
    this.#listener.h2.on("sessionError", () => undefined);
  }

  /** Aborted once the server has stopped; every call in flight holds one listener on it. */
  get stopped(): AbortSignal {
    return this.#o.adapterStop.signal;
  }

  /** The base URL, e.g. http://127.0.0.1:7070 (once started). */
  get url(): string {
    return this.#url;
  }

  async start(): Promise<void> {
    const addr = await listen(this.#listener.server, this.#o.listen);
    this.#url = urlOf(this.#o.tls ? "https" : "http", this.#o.listen.host, addr.port);
  }

  #keepAlive(session: http2.ServerHttp2Session): void {
    this.#sessions.add(session);
    // Wide receive windows (contracts/http2.ts): an agent's batch of log lines arrives in one go.
    try {
      session.setLocalWindowSize(HTTP2_CONNECTION_WINDOW);
    } catch {
      // A session already closing: nothing to widen.
    }
    // A peer that does not answer a PING within the interval is gone; closing its session ends
    // its streams and frees their resources.
    let waiting = false;
    const timer = setInterval(() => {
      if (waiting) {
        session.destroy();
        return;
      }
      waiting = true;
      try {
        session.ping((err) => {
          waiting = false;
          if (err) session.destroy();
        });
      } catch {
        session.destroy();
      }
    }, this.#o.pingIntervalMs);
    timer.unref();
    session.on("close", () => {
      clearInterval(timer);
      this.#sessions.delete(session);
    });
    session.on("error", () => undefined);
  }

  async stop(step: (name: string) => void): Promise<void> {
    const { server } = this.#listener;
    const grace = this.#o.graceMs;
    const closed = new Promise<void>((r) => server.close(() => r()));
    // In-flight unary calls (and their transactions) finish first.
    step("calls in flight");
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.#o.inflight.idle(), new Promise((r) => (timer = setTimeout(r, grace)))]);
    clearTimeout(timer);
    this.#o.streamsStop.abort();
    // GOAWAY: open streams may finish; after the grace period whatever is left is cut.
    for (const s of this.#sessions) s.close();
    this.#listener.closeIdleHttp1();
    step("open streams");
    await Promise.race([closed, new Promise<void>((r) => (timer = setTimeout(r, grace)))]);
    clearTimeout(timer);
    for (const s of this.#sessions) s.destroy();
    for (const s of this.#sockets) s.destroy();
    step("connections");
    await closed;
    this.#o.adapterStop.abort();
  }
}

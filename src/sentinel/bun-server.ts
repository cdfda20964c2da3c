// The proxy port on Bun: Bun.serve (HTTP/1.1, and h2c with prior knowledge through its
// `http2` option) around the runtime-neutral request path (./request-path.ts), with Bun's fetch
// to the instances (keep-alive pooling per origin is fetch's own). Loaded only when `krane
// sentinel` runs under Bun (./shell.ts).
//
//  - Bodies stream both ways: the client's body is fetch's request body; the instance's answer
//    is relayed chunk by chunk through a direct stream, which also tells when the answer ended
//    (latency, in flight), when it broke (the client's response is cut short) and when the
//    client left (the upstream read is cancelled).
//  - Timeouts: no response headers within upstreamTimeoutMs → 504; a pause longer than
//    bodyIdleTimeoutMs inside an answer cuts it short. fetch has no separate connect timeout, so
//    an instance that never accepts counts as a timeout, not as a failed connect.
//  - WebSocket: the instance's handshake is done first with Bun's WebSocket client; on success
//    the client is upgraded and messages are relayed both ways (frames, not bytes). An Upgrade
//    to any other protocol is proxied as a plain request without its Upgrade header.
//  - What Bun.serve does not let a shell do, and the Node shell (./server.ts) does: a deadline
//    for the request head (slowloris), counting the requests Bun's parser refuses (it answers
//    400/431 itself), relaying an instance's refusal of a WebSocket handshake as it came (the
//    client gets a 502 naming the instance's status), and passing other Upgrades through.
import type { AddressInfo } from "node:net";
import { PREVIEW_HEADER } from "../contracts/routing.js";
import { downstreamHeaders, type HeaderValue } from "./headers.js";
import { REQUEST_ID_HEADER } from "../contracts/headers.js";
import { statusClass } from "./metrics.js";
import type { OwnAnswer, Trip } from "./request-path.js";
import type { ProxyShell, ShellOptions } from "./shell.js";
import { originOf } from "./upstreams.js";

// ---------------------------------------------------------------- the parts of Bun's API used

interface BunSocketAddress {
  readonly address: string;
  readonly port: number;
}

interface BunServer {
  readonly port: number | undefined;
  readonly hostname: string | undefined;
  readonly pendingWebSockets: number;
  stop(closeActiveConnections?: boolean): Promise<void>;
  requestIP(req: Request): BunSocketAddress | null;
  upgrade(req: Request, options: { headers?: Record<string, string>; data: Relay }): boolean;
}

interface BunServerWebSocket {
  readonly data: Relay;
  send(message: string | ArrayBufferView | ArrayBuffer): number;
  close(code?: number, reason?: string): void;
}

interface BunServeOptions {
  readonly hostname?: string;
  readonly port: number;
  readonly http2: boolean;
  readonly idleTimeout: number;
  readonly maxRequestBodySize: number;
  readonly development: boolean;
  fetch(req: Request, server: BunServer): Response | undefined | Promise<Response | undefined>;
  error(err: Error): Response;
  readonly websocket: {
    readonly maxPayloadLength: number;
    open(ws: BunServerWebSocket): void;
    message(ws: BunServerWebSocket, message: string | Uint8Array): void;
    close(ws: BunServerWebSocket, code: number, reason: string): void;
  };
}

interface DirectController {
  write(chunk: Uint8Array): number | Promise<number>;
  flush(): number | Promise<number>;
  close(err?: unknown): void;
}

interface BunGlobal {
  serve(options: BunServeOptions): BunServer;
}

/** WebSocket with Bun's client options (headers on the handshake). */
type BunWebSocketConstructor = new (
  url: string,
  options: { headers: Record<string, string>; protocols: string[] },
) => WebSocket;

function bun(): BunGlobal {
  const b = (globalThis as { Bun?: BunGlobal }).Bun;
  if (!b) throw new Error("the Bun shell needs the Bun runtime");
  return b;
}

/** A ReadableStream Bun writes to the client as the source produces it (`type: "direct"`). */
function directStream(source: {
  pull(c: DirectController): Promise<void>;
  cancel(reason: unknown): void;
}): ReadableStream<Uint8Array> {
  const Ctor = ReadableStream as unknown as new (source: object) => ReadableStream<Uint8Array>;
  return new Ctor({ type: "direct", pull: source.pull, cancel: source.cancel });
}

/** An error carrying the code ./errors.ts classifies failures by. */
function codedError(message: string, code: string): Error {
  return Object.assign(new Error(message), { code });
}

const NO_BODY_STATUS = new Set([204, 205, 304]);

function response(a: OwnAnswer, draining: boolean): Response {
  const headers = draining || a.closeConnection ? { ...a.headers, connection: "close" } : a.headers;
  return new Response(a.body, { status: a.status, headers });
}

/** One WebSocket relayed: the client side (Bun.serve) and the instance side (a client WebSocket). */
interface Relay {
  readonly upstream: WebSocket;
  readonly trip: Trip;
  client: BunServerWebSocket | undefined;
  /** Messages the instance sent before the client side opened. */
  readonly early: (string | Uint8Array)[];
}

export class BunProxyServer implements ProxyShell {
  readonly runtime = "bun";
  readonly #o: ShellOptions;
  #server: BunServer | undefined;
  readonly #relays = new Set<Relay>();

  constructor(o: ShellOptions) {
    this.#o = o;
  }

  listen(port: number, host: string | undefined): Promise<AddressInfo> {
    const s = this.#o.settings;
    const server = bun().serve({
      ...(host !== undefined ? { hostname: host } : {}),
      port,
      http2: true,
      // Seconds (Bun's limit is 255); the keep-alive idle time, which bounds an idle socket too.
      idleTimeout: Math.min(255, Math.max(1, Math.ceil(s.keepAliveTimeoutMs / 1000))),
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
      development: false,
      fetch: (req, srv) => this.#handle(req, srv),
      error: (err) => {
        this.#o.log.warn({ err: err.message }, "request failed in the Bun shell");
        return new Response("krane sentinel: internal error\n", { status: 500 });
      },
      websocket: {
        maxPayloadLength: 64 << 20,
        open: (ws) => this.#opened(ws),
        message: (ws, m) => ws.data.upstream.send(m),
        close: (ws, code, reason) => this.#closed(ws.data, code, reason),
      },
    });
    this.#server = server;
    return Promise.resolve({ address: server.hostname ?? "", family: "", port: server.port ?? port });
  }

  release(): void {
    // fetch pools connections per origin and closes idle ones itself.
  }

  async drain(deadline: number): Promise<void> {
    const path = this.#o.path;
    path.draining = true;
    // Stops accepting; idle keep-alive connections close now, busy ones after their answer.
    const stopped = this.#server?.stop(false);
    while (Date.now() < deadline && (path.inFlight > 0 || this.#relays.size > 0)) {
      await new Promise((r) => setTimeout(r, 20));
    }
    for (const r of this.#relays) r.upstream.close(1001, "sentinel draining");
    await this.#server?.stop(true);
    await stopped;
  }

  async close(): Promise<void> {
    this.#o.path.draining = true;
    for (const r of this.#relays) r.upstream.close(1001, "sentinel stopping");
    await this.#server?.stop(true);
  }

  async #handle(req: Request, server: BunServer): Promise<Response | undefined> {
    const started = performance.now();
    const url = req.url;
    // Bun gives an absolute URL; the path is what follows the authority.
    const slash = url.indexOf("/", url.indexOf("//") + 2);
    const target = slash < 0 ? "/" : url.slice(slash);
    const path = this.#o.path;
    const probe = path.probe(target);
    if (probe) return response(probe, false);
    const h = req.headers;
    const raw: string[] = [];
    h.forEach((v, k) => {
      raw.push(k, v);
    });
    const trip = path.begin(
      {
        method: req.method,
        target,
        host: h.get("host") ?? undefined,
        // Bun's parser refuses an HTTP/1.1 request without Host itself.
        hostRequired: false,
        rawHeaders: raw,
        clientAddress: server.requestIP(req)?.address ?? "",
        hasBody: req.body !== null,
        requestId: h.get(REQUEST_ID_HEADER) ?? undefined,
        preview: h.get(PREVIEW_HEADER) ?? undefined,
        authorization: h.get("authorization") ?? undefined,
      },
      started,
    );
    if (trip.refused) return response(trip.refused, path.draining);
    let auth = trip.authorize();
    if (auth instanceof Promise) auth = await auth;
    if (auth) return response(auth, path.draining);
    if (h.get("upgrade")?.toLowerCase() === "websocket") return this.#webSocket(req, server, trip);
    return this.#forward(req, trip);
  }

  async #forward(req: Request, trip: Trip): Promise<Response> {
    const o = this.#o;
    for (;;) {
      const inst = trip.next();
      if (!inst) {
        const w = trip.waitForInstance();
        if (!(w instanceof Promise)) return response(w, o.path.draining);
        // Held at zero instances; the client leaving ends the hold.
        const gone = (): void => trip.finish("aborted");
        req.signal.addEventListener("abort", gone, { once: true });
        const r = await w;
        req.signal.removeEventListener("abort", gone);
        if (r === "retry") continue;
        return response(r, o.path.draining);
      }
      const ac = new AbortController();
      const headersTimer = setTimeout(
        () => ac.abort(codedError("no answer in time", "UND_ERR_HEADERS_TIMEOUT")),
        o.settings.upstreamTimeoutMs,
      );
      const onClientGone = (): void => ac.abort(codedError("client closed the connection", "UND_ERR_ABORTED"));
      req.signal.addEventListener("abort", onClientGone, { once: true });
      let up: Response;
      try {
        up = await fetch(`${originOf(inst.endpoint)}${trip.path}`, {
          method: trip.method,
          headers: pairs(trip.headers),
          body: trip.hasBody ? req.body : null,
          redirect: "manual",
          signal: ac.signal,
          // Bun: pass the answer's bytes as they came (no decoding of Content-Encoding).
          decompress: false,
        } as RequestInit);
      } catch (err) {
        clearTimeout(headersTimer);
        req.signal.removeEventListener("abort", onClientGone);
        if (req.signal.aborted) {
          trip.finish("aborted");
          return new Response(null, { status: 499 });
        }
        const next = trip.failed(err, req.bodyUsed);
        if (next === "retry") continue;
        return response(trip.answer(next.cause, next.closeConnection), o.path.draining);
      }
      clearTimeout(headersTimer);
      req.signal.removeEventListener("abort", onClientGone);
      trip.succeeded();
      return this.#answer(trip, up);
    }
  }

  /** The instance's answer, relayed as it streams in. */
  #answer(trip: Trip, up: Response): Response {
    const o = this.#o;
    const status = up.status;
    const source: Record<string, HeaderValue> = {};
    up.headers.forEach((v, k) => {
      if (k !== "set-cookie") source[k] = v;
    });
    const cookies = up.headers.getSetCookie();
    if (cookies.length > 0) source["set-cookie"] = cookies;
    const headers = downstreamHeaders(source, trip.requestId);
    if (o.path.draining) headers.connection = "close";
    const init = { status, statusText: up.statusText, headers: toHeaders(headers) };
    const body = up.body;
    if (body === null || trip.method === "HEAD" || NO_BODY_STATUS.has(status)) {
      void body?.cancel();
      trip.finish(statusClass(status), status);
      return new Response(null, init);
    }
    const reader = body.getReader();
    const code = statusClass(status);
    let over = false;
    const idle = setTimeout(
      () => {
        void reader.cancel(codedError("the instance's answer paused too long", "UND_ERR_BODY_TIMEOUT"));
      },
      o.settings.bodyIdleTimeoutMs || 2 ** 31 - 1,
    );
    const end = (result: string): void => {
      if (over) return;
      over = true;
      clearTimeout(idle);
      trip.finish(result, result === "aborted" ? 0 : status);
    };
    return new Response(
      directStream({
        pull: async (c) => {
          try {
            for (;;) {
              const { done, value } = await reader.read();
              if (done || over) break;
              idle.refresh();
              const w = c.write(value);
              if (typeof w !== "number") await w;
              const f = c.flush();
              if (typeof f !== "number") await f;
            }
            if (over) return;
            end(code);
            c.close();
          } catch (err) {
            // The answer broke after it began: all that can be done is to cut it short.
            o.log.debug({ err: String(err), requestId: trip.requestId }, "upstream failed mid-response");
            end("aborted");
            c.close(err);
          }
        },
        cancel: () => {
          // The client left before the end.
          end("aborted");
          void reader.cancel();
        },
      }),
      init,
    );
  }

  async #webSocket(req: Request, server: BunServer, trip: Trip): Promise<Response | undefined> {
    const o = this.#o;
    const protocols = (req.headers.get("sec-websocket-protocol") ?? "")
      .split(",")
      .map((p) => p.trim())
      .filter((p) => p !== "");
    // The client's own handshake fields stay with the client; Bun's WebSocket makes its own.
    const headers: Record<string, string> = {};
    for (let i = 0; i < trip.headers.length; i += 2) {
      const k = trip.headers[i] ?? "";
      if (!k.toLowerCase().startsWith("sec-websocket-")) headers[k] = trip.headers[i + 1] ?? "";
    }
    const Ws = WebSocket as unknown as BunWebSocketConstructor;
    for (;;) {
      const inst = trip.next();
      if (!inst) return response(trip.noInstance(), o.path.draining);
      const upstream = new Ws(`${originOf(inst.endpoint).replace(/^http/, "ws")}${trip.path}`, { headers, protocols });
      upstream.binaryType = "arraybuffer";
      const early: (string | Uint8Array)[] = [];
      const failure = await new Promise<string | undefined>((resolve) => {
        const timer = setTimeout(() => {
          upstream.close();
          resolve("no answer in time");
        }, o.settings.upstreamTimeoutMs);
        upstream.onopen = () => {
          clearTimeout(timer);
          resolve(undefined);
        };
        upstream.onerror = (e) => {
          clearTimeout(timer);
          resolve((e as Event & { message?: string }).message ?? "handshake failed");
        };
        upstream.onmessage = (m: { data: unknown }) => early.push(message(m.data));
      });
      if (failure !== undefined) {
        // "Expected 101 status code: 403": the instance answered, and refused.
        const refused = /Expected 101 status code: (\d{3})/.exec(failure);
        const err = refused
          ? codedError(`the instance refused the handshake (${refused[1]})`, "KRANE_WS_REFUSED")
          : failure === "no answer in time"
            ? codedError(failure, "UND_ERR_HEADERS_TIMEOUT")
            : codedError(failure, "ECONNREFUSED");
        const next = trip.failed(err, false);
        if (next === "retry") continue;
        return response(trip.answer(next.cause, next.closeConnection), o.path.draining);
      }
      trip.succeeded();
      const relay: Relay = { upstream, trip, client: undefined, early };
      const accepted = upstream.protocol !== "" ? { "sec-websocket-protocol": upstream.protocol } : undefined;
      const upgraded = server.upgrade(req, {
        data: relay,
        headers: { ...accepted, [REQUEST_ID_HEADER]: trip.requestId },
      });
      if (!upgraded) {
        upstream.close(1011, "client upgrade failed");
        return response(trip.answer("bad-request", true), o.path.draining);
      }
      this.#relays.add(relay);
      o.metrics.webSockets.inc();
      // A handshake is counted as answered (1xx), as on Node; the trip no longer waits.
      trip.finish("1xx", 101);
      return undefined;
    }
  }

  #opened(ws: BunServerWebSocket): void {
    const relay = ws.data;
    relay.client = ws;
    for (const m of relay.early) ws.send(m);
    relay.early.length = 0;
    relay.upstream.onmessage = (m: { data: unknown }) => ws.send(message(m.data));
    relay.upstream.onclose = (e) => ws.close(closeCode(e.code), e.reason);
    relay.upstream.onerror = () => ws.close(1011, "upstream error");
  }

  #closed(relay: Relay, code: number, reason: string): void {
    if (!this.#relays.delete(relay)) return;
    this.#o.metrics.webSockets.dec();
    if (relay.upstream.readyState <= 1) relay.upstream.close(closeCode(code), reason);
  }
}

/** A close code that may be sent on the wire (1005/1006/1015 are reserved for reporting). */
function closeCode(code: number): number {
  return code === 1005 || code === 1006 || code === 1015 || code < 1000 || code >= 5000 ? 1000 : code;
}

/** A WebSocket message as received with binaryType "arraybuffer". */
function message(data: unknown): string | Uint8Array {
  if (typeof data === "string") return data;
  return data instanceof ArrayBuffer ? new Uint8Array(data) : new Uint8Array(0);
}

function pairs(flat: readonly string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i < flat.length; i += 2) out.push([flat[i] ?? "", flat[i + 1] ?? ""]);
  return out;
}

function toHeaders(h: Record<string, string | string[]>): Headers {
  const out = new Headers();
  for (const k in h) {
    const v = h[k];
    if (Array.isArray(v)) for (const x of v) out.append(k, x);
    else if (v !== undefined) out.set(k, v);
  }
  return out;
}

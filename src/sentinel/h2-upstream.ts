// HTTP/2 to an instance that speaks it (`krane deploy --protocol h2c|grpc`: the slice port's
// appProtocol kubernetes.io/h2c): one node:http2 client session per instance, h2c with prior
// knowledge, every request a stream on it. It drives the same handler undici's dispatch API
// drives (onRequestStart, onResponseStart, onResponseData, onResponseEnd, onResponseError), so
// ./proxy.ts streams HTTP/1.1 and HTTP/2 instances alike.
//
// Not undici's own h2c client (undici 7.30.2 has one): when its reader is paused (backpressure
// from a slow client) as the instance's trailers arrive, it ends the response there, dropping the
// body bytes still buffered and so cutting a gRPC stream short without anyone noticing.
//
//  - Connect: the session must be up within the connect timeout; a refused, unreachable or slow
//    connect fails every request waiting on it as a failed connect (retried elsewhere by the
//    request path like an HTTP/1.1 one), and the next request dials again.
//  - Request body: read from the client only once the stream is open (a failed connect leaves it
//    unread, so a retry can still send it), and streamed while the answer streams back (gRPC's
//    bidirectional calls).
//  - Answer: headers within the upstream timeout, then the body with the idle timeout between
//    chunks; trailers are handed over once the whole body was read, whatever pauses happened.
//  - A stream reset or a session lost before the answer's headers is a reset; a GOAWAY or a
//    session at its last stream id makes the next request open a new session.
import * as http2 from "node:http2";
import type { IncomingHttpHeaders } from "node:http";
import type { Readable } from "node:stream";
import type { Dispatcher } from "undici";

export interface H2DispatchOptions {
  readonly method: string;
  readonly path: string;
  /** Flat [name, value, …]; connection-specific headers already dropped (./headers.ts). */
  readonly headers: readonly string[];
  readonly body: Readable | null;
  /** Time to the answer's headers. */
  readonly headersTimeout: number;
  /** Idle time between body chunks once the answer began. */
  readonly bodyTimeout: number;
}

/** An upstream failure with the code ./errors.ts classifies by. */
export class UpstreamError extends Error {
  readonly code: string;
  constructor(code: string, message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.code = code;
  }
}

const { NGHTTP2_CANCEL } = http2.constants;
const SESSION_IDLE_MS = 30_000;

/** Headers an HTTP/2 request must not carry (./headers.ts drops the rest of the hop-by-hop ones). */
const NOT_ON_H2 = new Set(["host", "connection", "keep-alive", "transfer-encoding", "upgrade", "te"]);

/** The flat upstream headers as an HTTP/2 request's header object. */
export function h2RequestHeaders(o: H2DispatchOptions, authority: string): http2.OutgoingHttpHeaders {
  const out: http2.OutgoingHttpHeaders = {
    ":method": o.method,
    ":path": o.path,
    ":scheme": "http",
    ":authority": authority,
  };
  const raw = o.headers;
  let host: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = (raw[i] ?? "").toLowerCase();
    const value = raw[i + 1] ?? "";
    if (name === "host") host ??= value;
    if (NOT_ON_H2.has(name) || name.charCodeAt(0) === 58 /* ':' */) continue;
    const prev = out[name];
    if (prev === undefined) out[name] = value;
    else if (name === "cookie") out[name] = `${String(prev)}; ${value}`;
    else out[name] = Array.isArray(prev) ? [...(prev as string[]), value] : [String(prev), value];
  }
  if (host !== undefined) out[":authority"] = host;
  // The sentinel reads trailers and passes them on (gRPC servers want to know).
  out.te = "trailers";
  return out;
}

function responseHeaders(h: http2.IncomingHttpHeaders): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const k in h) if (k.charCodeAt(0) !== 58 /* ':' */) out[k] = h[k];
  return out;
}

/** One request on a stream, and the controller ./proxy.ts pauses, resumes and aborts it with. */
class H2Request implements Dispatcher.DispatchController {
  readonly #handler: Dispatcher.DispatchHandler;
  readonly #o: H2DispatchOptions;
  /** The upstream's requests not settled yet (this one leaves it when it settles). */
  readonly #active: Set<H2Request>;
  #stream: http2.ClientHttp2Stream | undefined;
  #aborted = false;
  #reason: Error | null = null;
  #paused = false;
  #settled = false;
  #responded = false;
  #trailers: IncomingHttpHeaders = {};
  #timer: NodeJS.Timeout | undefined;

  constructor(o: H2DispatchOptions, handler: Dispatcher.DispatchHandler, active: Set<H2Request>) {
    this.#o = o;
    this.#handler = handler;
    this.#active = active;
    active.add(this);
  }

  get aborted(): boolean {
    return this.#aborted;
  }
  get paused(): boolean {
    return this.#paused;
  }
  get reason(): Error | null {
    return this.#reason;
  }
  get settled(): boolean {
    return this.#settled;
  }

  abort(reason: Error): void {
    if (this.#settled) return;
    this.#aborted = true;
    this.#reason = reason;
    this.fail(reason);
  }

  pause(): void {
    this.#paused = true;
    this.#stream?.pause();
  }

  resume(): void {
    this.#paused = false;
    this.#stream?.resume();
  }

  /** Ends the request with an error (once); the stream is cancelled if still open. */
  fail(err: Error): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#active.delete(this);
    clearTimeout(this.#timer);
    const s = this.#stream;
    if (s) {
      if (this.#o.body) this.#o.body.unpipe(s);
      if (!s.destroyed) s.close(NGHTTP2_CANCEL);
    }
    this.#handler.onResponseError?.(this, err);
  }

  /** Opens the stream on a connected session and wires both directions. */
  start(session: http2.ClientHttp2Session, authority: string): void {
    const o = this.#o;
    let s: http2.ClientHttp2Stream;
    try {
      s = session.request(h2RequestHeaders(o, authority), { endStream: o.body === null });
    } catch (err) {
      // Out of stream ids, or the session went away in between: nothing was sent.
      this.fail(new UpstreamError("ECONNRESET", `HTTP/2 stream could not be opened: ${String(err)}`, err));
      return;
    }
    this.#stream = s;
    this.#timer = setTimeout(
      () => this.fail(new UpstreamError("UND_ERR_HEADERS_TIMEOUT", "no response headers from the instance in time")),
      o.headersTimeout,
    );
    s.on("response", (headers) => {
      const status = Number(headers[":status"]);
      if (status < 200 || this.#settled) return;
      clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#responded = true;
      if (o.bodyTimeout > 0)
        s.setTimeout(o.bodyTimeout, () =>
          this.fail(new UpstreamError("UND_ERR_BODY_TIMEOUT", "the instance's answer stalled")),
        );
      this.#handler.onResponseStart?.(this, status, responseHeaders(headers));
    });
    s.on("data", (chunk: Buffer) => {
      if (!this.#settled) this.#handler.onResponseData?.(this, chunk);
    });
    s.on("trailers", (t: http2.IncomingHttpHeaders) => {
      this.#trailers = responseHeaders(t);
    });
    s.on("end", () => {
      if (this.#settled) return;
      if (!this.#responded) {
        this.fail(new UpstreamError("ECONNRESET", "the instance ended the stream without an answer"));
        return;
      }
      this.#settled = true;
      this.#active.delete(this);
      clearTimeout(this.#timer);
      if (o.body) o.body.unpipe(s);
      this.#handler.onResponseEnd?.(this, this.#trailers);
    });
    s.on("error", (err: Error) => {
      this.fail(this.#responded ? err : new UpstreamError("ECONNRESET", err.message, err));
    });
    s.on("close", () => {
      if (this.#settled) return;
      this.fail(new UpstreamError("ECONNRESET", `the instance reset the stream (code ${s.rstCode ?? "none"})`));
    });
    if (this.#paused) s.pause();
    const body = o.body;
    if (body) {
      body.once("error", (err: Error) => this.fail(new UpstreamError("UND_ERR_ABORTED", err.message, err)));
      body.pipe(s);
    }
  }
}

export interface H2UpstreamOptions {
  readonly connectTimeoutMs: number;
}

/** The HTTP/2 session to one instance, dialled on first use and again after it was lost. */
export class H2Upstream {
  readonly #origin: string;
  readonly #authority: string;
  readonly #o: H2UpstreamOptions;
  #session: http2.ClientHttp2Session | undefined;
  #connected = false;
  #waiting: H2Request[] = [];
  /** Requests dispatched and not settled (waiting for the session or on a stream). */
  readonly #active = new Set<H2Request>();
  #closing = false;

  constructor(origin: string, o: H2UpstreamOptions) {
    this.#origin = origin;
    this.#authority = new URL(origin).host;
    this.#o = o;
  }

  /** Requests dispatched and not settled yet. */
  get inFlight(): number {
    return this.#active.size;
  }

  dispatch(o: H2DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    const req = new H2Request(o, handler, this.#active);
    handler.onRequestStart?.(req, {});
    if (req.aborted) return true;
    if (this.#closing) {
      req.fail(new UpstreamError("UND_ERR_CLOSED", "the instance left the routing table"));
      return true;
    }
    const s = this.#session;
    if (s && this.#connected && !s.closed && !s.destroyed) {
      req.start(s, this.#authority);
      return true;
    }
    this.#waiting.push(req);
    if (!s || s.closed || s.destroyed) this.#connect();
    return true;
  }

  #connect(): void {
    this.#connected = false;
    const s = http2.connect(this.#origin, { peerMaxConcurrentStreams: 1000 });
    this.#session = s;
    const timer = setTimeout(() => {
      s.destroy(new UpstreamError("UND_ERR_CONNECT_TIMEOUT", `connect timeout after ${this.#o.connectTimeoutMs} ms`));
    }, this.#o.connectTimeoutMs);
    s.once("connect", () => {
      clearTimeout(timer);
      if (this.#session !== s) return;
      this.#connected = true;
      const waiting = this.#waiting;
      this.#waiting = [];
      for (const r of waiting) if (!r.settled) r.start(s, this.#authority);
    });
    s.on("error", (err: Error) => {
      clearTimeout(timer);
      if (this.#session === s && !this.#connected) this.#failWaiting(err);
    });
    s.once("close", () => {
      clearTimeout(timer);
      if (this.#session !== s) return;
      this.#session = undefined;
      if (!this.#connected) this.#failWaiting(new UpstreamError("ECONNRESET", "the instance closed the connection"));
      this.#connected = false;
    });
    // Idle that long (no frame either way): closed gracefully, as HTTP/1.1 keep-alive connections
    // are, so a session to an instance that vanished without a FIN is not kept for ever.
    s.setTimeout(SESSION_IDLE_MS, () => s.close());
    // A GOAWAY: streams already open finish; the next request dials a new session.
    s.once("goaway", () => {
      if (this.#session === s) this.#session = undefined;
    });
  }

  #failWaiting(err: Error): void {
    const waiting = this.#waiting;
    this.#waiting = [];
    // A failed connect keeps its errno code (ECONNREFUSED, …) or the connect timeout's.
    const code = (err as { code?: unknown }).code;
    const e =
      typeof code === "string" && code !== "ERR_HTTP2_ERROR"
        ? err
        : new UpstreamError("ECONNRESET", `HTTP/2 connection failed: ${err.message}`, err);
    for (const r of waiting) r.fail(e);
  }

  /** Graceful: no new requests; open streams finish, then the session closes. */
  async close(): Promise<void> {
    this.#closing = true;
    const s = this.#session;
    this.#failWaiting(new UpstreamError("UND_ERR_CLOSED", "the instance left the routing table"));
    if (!s || s.destroyed) return;
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  /** At once: every request not settled fails with `reason`, then the session goes. */
  async destroy(reason: Error = new UpstreamError("UND_ERR_CLOSED", "the sentinel is closing")): Promise<void> {
    this.#closing = true;
    this.#waiting = [];
    for (const r of [...this.#active]) r.fail(reason);
    this.#session?.destroy();
  }
}

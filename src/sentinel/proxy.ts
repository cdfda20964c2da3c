// The request path: one client request (HTTP/1.1 or HTTP/2) → pick an instance → stream the
// request to it through undici → stream the answer back, never buffering a body.
//
//  - Backpressure both ways: undici reads the request body as the instance takes it; a slow
//    client pauses the upstream read (pause on a false write(), resume on 'drain').
//  - An attempt that could not connect (nothing was sent) is retried once on another instance
//    when the method is idempotent and the body was not touched; a reset before the answer is
//    retried only for idempotent requests without a body. Both count against the instance's
//    passive health.
//  - Every answer the sentinel makes itself is short, names its cause, and is never a hang: no
//    table → 503, no instance → 503, connect failures → 502, reset → 502, no headers in time → 504.
//    Once the instance's answer has begun, a failure can only cut the response short.
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { constants as h2constants, type Http2ServerRequest, type Http2ServerResponse } from "node:http2";
import type { Dispatcher } from "undici";
import { PREVIEW_HEADER, PREVIEW_HEADER_VALUE, SENTINEL_LIVE_PATH, SENTINEL_READY_PATH } from "../contracts/routing.js";
import { authAnswer, type AuthDecision, type EdgeAuth } from "./auth.js";
import type { Logger } from "../agent/runtime/log.js";
import type { Balancer, Instance } from "./balancer.js";
import {
  causeOf,
  classifyUpstreamError,
  countsAgainstInstance,
  errorAnswer,
  ERROR_HEADER,
  type ProxyErrorCause,
  type UpstreamFailure,
} from "./errors.js";
import {
  downstreamHeaders,
  http1HasNoBody,
  isIdempotent,
  isSaneRequestId,
  isValidHost,
  REQUEST_ID_HEADER,
  upstreamHeaders,
  type HeaderValue,
} from "./headers.js";
import { NO_REVISION, statusClass, type SentinelMetrics } from "./metrics.js";
import type { Upstreams } from "./upstreams.js";

export type ClientRequest = IncomingMessage | Http2ServerRequest;
export type ClientResponse = ServerResponse | Http2ServerResponse;

export interface ProxyOptions {
  readonly balancer: Balancer;
  readonly upstreams: Upstreams;
  readonly metrics: SentinelMetrics;
  readonly log: Logger;
  /** Time to the instance's response headers (then 504) and idle time between body chunks. */
  readonly upstreamTimeoutMs: number;
  readonly bodyIdleTimeoutMs: number;
  /** True once a routing table is in force. */
  readonly hasTable: () => boolean;
  /** True while the probe paths should answer "ready". */
  readonly isReady: () => boolean;
  /** API authentication at the edge (./auth.ts); checked before an instance is picked. */
  readonly auth?: EdgeAuth;
}

const kExchange = Symbol("exchange");
type TaggedResponse = ClientResponse & { [kExchange]?: Exchange };

/** One shared 'close' listener for every response (no closure per request). */
function onResponseClose(this: TaggedResponse): void {
  this[kExchange]?.clientClosed();
}

function isHttp2(req: ClientRequest): req is Http2ServerRequest {
  return (req as Http2ServerRequest).stream !== undefined;
}

function first(v: HeaderValue): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** Ends a response that has already begun, so the client sees it cut short rather than complete. */
export function abortResponse(res: ClientResponse): void {
  if ((res as Http2ServerResponse).stream !== undefined) {
    const stream = (res as Http2ServerResponse).stream;
    if (!stream.destroyed) stream.close(h2constants.NGHTTP2_INTERNAL_ERROR);
  } else {
    (res as ServerResponse).destroy();
  }
}

/** Writes one of the sentinel's own answers (or cuts the response if it already began). */
export function sendAnswer(
  res: ClientResponse,
  cause: ProxyErrorCause,
  requestId: string | undefined,
  closeConnection = false,
): void {
  if (res.headersSent) {
    abortResponse(res);
    return;
  }
  const { status, body } = errorAnswer(cause);
  const headers: Record<string, string> = {
    "content-type": "text/plain; charset=utf-8",
    "content-length": String(Buffer.byteLength(body)),
    "cache-control": "no-store",
    [ERROR_HEADER]: cause,
  };
  if (requestId) headers[REQUEST_ID_HEADER] = requestId;
  if (closeConnection && !(res as Http2ServerResponse).stream) (res as ServerResponse).shouldKeepAlive = false;
  res.writeHead(status, headers);
  res.end(body);
}

export class Proxy {
  readonly #o: ProxyOptions;
  inFlight = 0;
  /** Set when draining: HTTP/1.1 answers say Connection: close. */
  draining = false;

  constructor(o: ProxyOptions) {
    this.#o = o;
  }

  readonly handle = (req: ClientRequest, res: ClientResponse): void => {
    const started = performance.now();
    const h2 = isHttp2(req);
    const path = req.url ?? "";
    if (path === SENTINEL_LIVE_PATH || path === SENTINEL_READY_PATH) {
      this.#probe(path, res);
      return;
    }
    const ex = new Exchange(this, this.#o, req, res, h2, started);
    ex.start();
  };

  #probe(path: string, res: ClientResponse): void {
    const ok = path === SENTINEL_LIVE_PATH || this.#o.isReady();
    const body = ok ? "ok\n" : "not ready\n";
    res.writeHead(ok ? 200 : 503, {
      "content-type": "text/plain",
      "content-length": String(body.length),
      "cache-control": "no-store",
    });
    res.end(body);
  }
}

/** One client request and its (at most two) upstream attempts. */
class Exchange implements Dispatcher.DispatchHandler {
  readonly #proxy: Proxy;
  readonly #o: ProxyOptions;
  readonly #req: ClientRequest;
  readonly #res: ClientResponse;
  readonly #h2: boolean;
  readonly #started: number;
  #requestId = "";
  #path = "";
  #headers: string[] = [];
  #hasBody = false;
  #inst: Instance | undefined;
  #tried: Set<string> | undefined;
  /** The request asks for the blue-green preview revision (PREVIEW_HEADER). */
  #preview = false;
  #controller: Dispatcher.DispatchController | undefined;
  #responded = false;
  #done = false;
  #clientGone = false;
  #revision = NO_REVISION;
  #lastFailure: UpstreamFailure | undefined;
  #counted = false;
  #finished = false;
  /** Body bytes still to come when the length is known (-1: unknown). */
  #remaining = -1;
  #ended = false;

  constructor(proxy: Proxy, o: ProxyOptions, req: ClientRequest, res: ClientResponse, h2: boolean, started: number) {
    this.#proxy = proxy;
    this.#o = o;
    this.#req = req;
    this.#res = res;
    this.#h2 = h2;
    this.#started = started;
  }

  start(): void {
    const req = this.#req;
    const res = this.#res;
    this.#proxy.inFlight++;
    (res as TaggedResponse)[kExchange] = this;
    res.once("close", onResponseClose);
    const hdrs = req.headers as Record<string, HeaderValue>;
    const incomingId = first(hdrs[REQUEST_ID_HEADER]);
    this.#requestId = isSaneRequestId(incomingId) ? incomingId : randomUUID();
    this.#preview = first(hdrs[PREVIEW_HEADER]) === PREVIEW_HEADER_VALUE;

    const host = this.#h2 ? (first(hdrs[":authority"]) ?? first(hdrs.host)) : first(hdrs.host);
    if (host === undefined ? !this.#h2 && req.httpVersion !== "1.0" : !isValidHost(host)) {
      this.#o.metrics.clientErrors.inc({ reason: "invalid-host" });
      this.#answer("invalid-host", true);
      return;
    }
    let path = req.url ?? "";
    if (path.charCodeAt(0) !== 47 /* '/' */) {
      // Absolute-form (RFC 9112 §3.2.2) is allowed; anything else ("*", authority-form) is not proxied.
      const abs = /^https?:\/\/[^/?#]*([^#]*)$/i.exec(path);
      if (!abs) {
        this.#o.metrics.clientErrors.inc({ reason: "request-target" });
        this.#answer("bad-request", true);
        return;
      }
      path = abs[1] || "/";
      if (path.charCodeAt(0) !== 47) path = `/${path}`;
    }
    this.#path = path;
    if (!this.#o.hasTable()) {
      this.#answer("not-ready");
      return;
    }
    const socket = req.socket;
    this.#headers = upstreamHeaders(req.rawHeaders, {
      clientAddress: socket?.remoteAddress ?? "",
      proto: "http",
      host,
      requestId: this.#requestId,
    });
    this.#hasBody = this.#h2 ? !(req as Http2ServerRequest).stream.endAfterHeaders : !http1HasNoBody(hdrs);
    const auth = this.#o.auth;
    if (auth?.active) {
      const decision = auth.check(req.method ?? "GET", host ?? "", path, first(hdrs.authorization));
      if (decision instanceof Promise) {
        decision.then(
          (d) => this.#authorized(d),
          () =>
            this.#authorized({
              type: "deny",
              status: 401,
              error: "invalid_token",
              description: "the token could not be verified",
            }),
        );
        return;
      }
      if (decision.type === "deny") {
        this.#refuse(decision);
        return;
      }
    }
    this.#attempt();
  }

  #authorized(d: AuthDecision): void {
    if (this.#done || this.#clientGone) return;
    if (d.type === "deny") this.#refuse(d);
    else this.#attempt();
  }

  /** The edge's own refusal (401/403/400); the instance never sees the request. */
  #refuse(d: Extract<AuthDecision, { type: "deny" }>): void {
    this.#done = true;
    const a = authAnswer(d);
    const headers: Record<string, string> = {
      ...a.headers,
      [ERROR_HEADER]: d.status === 401 ? "unauthorized" : d.status === 403 ? "forbidden" : "bad-request",
    };
    if (this.#requestId) headers[REQUEST_ID_HEADER] = this.#requestId;
    this.#o.metrics.authRefusals.inc({ status: String(d.status) });
    this.#res.writeHead(a.status, headers);
    this.#res.end(a.body);
    this.#finish(statusClass(a.status));
  }

  #attempt(): void {
    const inst = this.#o.balancer.pick(this.#tried, this.#preview);
    if (!inst) {
      this.#answer(this.#lastFailure ? causeOf(this.#lastFailure) : "no-instance");
      return;
    }
    this.#inst = inst;
    this.#revision = inst.endpoint.deploymentId;
    this.#controller = undefined;
    this.#counted = true;
    inst.outstanding++;
    const pool = this.#o.upstreams.pool(inst.endpoint);
    try {
      pool.dispatch(
        {
          method: this.#req.method ?? "GET",
          path: this.#path,
          headers: this.#headers,
          body: this.#hasBody ? this.#req : null,
          headersTimeout: this.#o.upstreamTimeoutMs,
          bodyTimeout: this.#o.bodyIdleTimeoutMs,
          // HTTP/1.1 to the instance; undici may reuse the connection.
          reset: false,
        },
        this,
      );
    } catch (err) {
      this.onResponseError(undefined, err instanceof Error ? err : new Error(String(err)));
    }
  }

  /** The response closed: normally after it ended; before that, the client went away. */
  clientClosed(): void {
    (this.#res as TaggedResponse)[kExchange] = undefined;
    if (!this.#done) {
      this.#clientGone = true;
      this.#controller?.abort(new Error("client closed the connection"));
      this.#finish("aborted");
    }
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.#clientGone) controller.abort(new Error("client closed the connection"));
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, HeaderValue>,
  ): void {
    if (statusCode < 200) return; // 1xx informational: the final answer follows.
    const inst = this.#inst;
    if (inst) this.#o.balancer.success(inst);
    this.#responded = true;
    const cl = headers["content-length"];
    this.#remaining = typeof cl === "string" && this.#req.method !== "HEAD" ? Number(cl) : -1;
    const res = this.#res;
    if (this.#clientGone || res.destroyed) {
      controller.abort(new Error("client closed the connection"));
      return;
    }
    if (this.#proxy.draining && !this.#h2) (res as ServerResponse).shouldKeepAlive = false;
    try {
      res.writeHead(statusCode, downstreamHeaders(headers, this.#requestId));
    } catch (err) {
      // A header Node refuses to send (invalid characters from the instance): 502.
      this.#o.log.debug({ err: String(err) }, "invalid response headers from instance");
      controller.abort(err instanceof Error ? err : new Error(String(err)));
      return;
    }
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    const res = this.#res;
    if (this.#remaining > 0 && chunk.length === this.#remaining) {
      // The last bytes of a response of known length: one write that also ends it.
      this.#remaining = 0;
      this.#ended = true;
      res.end(chunk);
      return;
    }
    if (this.#remaining > 0) this.#remaining -= chunk.length;
    const ok = this.#h2 ? (res as Http2ServerResponse).write(chunk) : (res as ServerResponse).write(chunk);
    if (!ok && !controller.paused) {
      controller.pause();
      res.once("drain", () => controller.resume());
    }
  }

  onResponseEnd(_controller: Dispatcher.DispatchController, trailers: Record<string, HeaderValue>): void {
    this.#release();
    const res = this.#res;
    if (!this.#h2 && Object.keys(trailers).length > 0) res.addTrailers(downstreamTrailers(trailers));
    this.#done = true;
    if (!this.#ended) res.end();
    this.#finish(statusClass(res.statusCode));
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, err: Error): void {
    this.#release();
    if (this.#done) return;
    const failure = classifyUpstreamError(err);
    const inst = this.#inst;
    const m = this.#o.metrics;
    if (this.#responded) {
      // The answer began; all that can be done is to cut it short.
      this.#o.log.debug({ err: err.message, requestId: this.#requestId }, "upstream failed mid-response");
      this.#done = true;
      abortResponse(this.#res);
      this.#finish("aborted");
      return;
    }
    if (this.#clientGone) return;
    if (inst && countsAgainstInstance(failure)) {
      if (failure === "connect") m.upstreamConnectErrors.inc({ revision: this.#revision });
      else m.upstreamResets.inc({ revision: this.#revision });
      if (this.#o.balancer.failure(inst)) {
        m.ejections.inc({ revision: this.#revision });
        this.#o.log.warn(
          { instance: inst.key, pod: inst.endpoint.pod, revision: this.#revision, failure, err: err.message },
          "instance ejected",
        );
      }
    }
    this.#lastFailure = failure;
    if (this.#canRetry(failure)) {
      (this.#tried ??= new Set()).add(inst?.key ?? "");
      m.retries.inc({ revision: this.#revision });
      this.#attempt();
      return;
    }
    this.#o.log.debug({ err: err.message, failure, requestId: this.#requestId }, "upstream attempt failed");
    this.#answer(causeOf(failure), failure === "client");
  }

  /** The sentinel's own answer ends the exchange. */
  #answer(cause: ProxyErrorCause, closeConnection = false): void {
    this.#done = true;
    sendAnswer(this.#res, cause, this.#requestId, closeConnection);
    this.#finish(this.#res.headersSent ? statusClass(this.#res.statusCode) : "aborted");
  }

  #canRetry(failure: UpstreamFailure): boolean {
    if (this.#tried !== undefined) return false; // once
    if (!isIdempotent(this.#req.method ?? "GET")) return false;
    if (failure === "connect") return !this.#hasBody || !(this.#req.readableDidRead || this.#req.destroyed);
    if (failure === "reset") return !this.#hasBody;
    return false;
  }

  /** The current attempt no longer counts as outstanding on its instance. */
  #release(): void {
    if (this.#counted && this.#inst) this.#inst.outstanding--;
    this.#counted = false;
  }

  #finish(code: string): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#proxy.inFlight--;
    this.#o.metrics.stats.record(this.#revision, code, (performance.now() - this.#started) / 1000);
  }
}

function downstreamTrailers(t: Record<string, HeaderValue>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k in t) {
    const v = t[k];
    if (v !== undefined) out[k] = Array.isArray(v) ? v.join(", ") : v;
  }
  return out;
}

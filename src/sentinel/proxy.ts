// The request path on Node.js: one client request (HTTP/1.1 or HTTP/2, from ./server.ts) → a
// Trip of ./request-path.ts (admission, instance choice, retries, accounting) → the request
// streamed to the instance through undici's dispatch API → the answer streamed back, never
// buffering a body.
//
//  - Backpressure both ways: undici reads the request body as the instance takes it; a slow
//    client pauses the upstream read (pause on a false write(), resume on 'drain').
//  - Timeouts: undici's per-request headersTimeout (then 504) and bodyTimeout (idle time inside
//    the answer), and the pool's connect timeout (./upstreams.ts), which counts as a failed
//    connect.
//  - An instance that left the routing table and stopped answering has its requests cut
//    (./upstreams.ts): they arrive here as an error like any other.
//  - Once the instance's answer has begun, a failure can only cut the response short.
//  - Instances that speak HTTP/2 (the slice's appProtocol kubernetes.io/h2c) get the same
//    handler through ./h2-upstream.ts; their trailers reach HTTP/2 clients (gRPC's status) as
//    well as HTTP/1.1 chunked ones, and a "trailers-only" gRPC answer (grpc-status in the only
//    header block) stays one. The sentinel's own answers to gRPC requests are trailers-only
//    answers with grpc-status and grpc-message (./grpc.ts), never a text body.
import type { IncomingMessage, ServerResponse } from "node:http";
import { constants as h2constants, type Http2ServerRequest, type Http2ServerResponse } from "node:http2";
import type { Dispatcher } from "undici";
import { PREVIEW_HEADER } from "../contracts/routing.js";
import type { Logger } from "../base/log.js";
import { ERROR_HEADER } from "./errors.js";
import { grpcAnswerHeaders, isGrpcRequest } from "./grpc.js";
import type { H2DispatchOptions } from "./h2-upstream.js";
import { downstreamHeaders, http1HasNoBody, type HeaderValue } from "./headers.js";
import { REQUEST_ID_HEADER } from "../contracts/headers.js";
import { statusClass } from "./metrics.js";
import type { OwnAnswer, RequestPath, Trip } from "./request-path.js";
import type { Upstreams } from "./upstreams.js";

export type ClientRequest = IncomingMessage | Http2ServerRequest;
export type ClientResponse = ServerResponse | Http2ServerResponse;

export interface ProxyOptions {
  readonly path: RequestPath;
  readonly upstreams: Upstreams;
  readonly log: Logger;
  /** Time to the instance's response headers (then 504) and idle time between body chunks. */
  readonly upstreamTimeoutMs: number;
  readonly bodyIdleTimeoutMs: number;
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

/** Writes one of the sentinel's own answers; false when the response had begun and was cut short instead. */
export function writeAnswer(res: ClientResponse, a: OwnAnswer): boolean {
  if (res.headersSent) {
    abortResponse(res);
    return false;
  }
  if (a.closeConnection && !(res as Http2ServerResponse).stream) (res as ServerResponse).shouldKeepAlive = false;
  res.writeHead(a.status, a.headers);
  res.end(a.body);
  return true;
}

/** One of the sentinel's own answers to a gRPC request: trailers-only, grpc-status and grpc-message. */
export function writeGrpcAnswer(res: ClientResponse, a: OwnAnswer): boolean {
  if (res.headersSent) {
    abortResponse(res);
    return false;
  }
  const headers = grpcAnswerHeaders(a.status, a.headers, a.body, a.headers[ERROR_HEADER]);
  respondTrailersOnly(res, headers);
  return true;
}

/** HTTP 200 whose only header block ends the stream (HTTP/2), or an empty HTTP/1.1 answer (gRPC-Web). */
function respondTrailersOnly(res: ClientResponse, headers: Record<string, string | string[]>): void {
  const stream = (res as Http2ServerResponse).stream;
  if (stream !== undefined) {
    if (!stream.destroyed) stream.respond({ ...headers, ":status": 200 }, { endStream: true });
    return;
  }
  res.writeHead(200, { ...headers, "content-length": "0" });
  res.end();
}

export class Proxy {
  readonly #o: ProxyOptions;

  constructor(o: ProxyOptions) {
    this.#o = o;
  }

  get inFlight(): number {
    return this.#o.path.inFlight;
  }

  readonly handle = (req: ClientRequest, res: ClientResponse): void => {
    const started = performance.now();
    const target = req.url ?? "";
    const probe = this.#o.path.probe(target);
    if (probe) {
      writeAnswer(res, probe);
      return;
    }
    const h2 = isHttp2(req);
    const hdrs = req.headers as Record<string, HeaderValue>;
    const trip = this.#o.path.begin(
      {
        method: req.method ?? "GET",
        target,
        host: h2 ? (first(hdrs[":authority"]) ?? first(hdrs.host)) : first(hdrs.host),
        hostRequired: !h2 && req.httpVersion !== "1.0",
        rawHeaders: req.rawHeaders,
        clientAddress: req.socket?.remoteAddress ?? "",
        hasBody: h2 ? !(req as Http2ServerRequest).stream.endAfterHeaders : !http1HasNoBody(hdrs),
        requestId: first(hdrs[REQUEST_ID_HEADER]),
        preview: first(hdrs[PREVIEW_HEADER]),
        authorization: first(hdrs.authorization),
      },
      started,
    );
    new Exchange(this.#o, trip, req, res, h2).start();
  };
}

/** The Node.js side of one Trip: the client's request and response, and undici's dispatch handler. */
class Exchange implements Dispatcher.DispatchHandler {
  readonly #o: ProxyOptions;
  readonly #trip: Trip;
  readonly #req: ClientRequest;
  readonly #res: ClientResponse;
  readonly #h2: boolean;
  /** The client speaks gRPC: the sentinel's own answers are gRPC statuses. */
  readonly #grpc: boolean;
  /** An instance's trailers-only gRPC answer to an HTTP/2 client, held until it ends. */
  #heldHeaders: Record<string, string | string[]> | undefined;
  #controller: Dispatcher.DispatchController | undefined;
  #responded = false;
  #done = false;
  #clientGone = false;
  /** Body bytes still to come when the length is known (-1: unknown). */
  #remaining = -1;
  #ended = false;

  constructor(o: ProxyOptions, trip: Trip, req: ClientRequest, res: ClientResponse, h2: boolean) {
    this.#o = o;
    this.#trip = trip;
    this.#req = req;
    this.#res = res;
    this.#h2 = h2;
    const ct = req.headers["content-type"];
    this.#grpc = isGrpcRequest(Array.isArray(ct) ? ct[0] : ct);
  }

  start(): void {
    const res = this.#res;
    (res as TaggedResponse)[kExchange] = this;
    res.once("close", onResponseClose);
    const trip = this.#trip;
    if (trip.refused) {
      this.#send(trip.refused);
      return;
    }
    const auth = trip.authorize();
    if (auth instanceof Promise) {
      void auth.then((a) => {
        if (this.#done || this.#clientGone) return;
        if (a) this.#send(a);
        else this.#attempt();
      });
      return;
    }
    if (auth) this.#send(auth);
    else this.#attempt();
  }

  readonly #attemptFailed = (err: unknown): void => {
    this.onResponseError(undefined, err instanceof Error ? err : new Error(String(err)));
  };

  /** Writes an answer the trip has already counted. */
  #send(a: OwnAnswer): void {
    this.#done = true;
    this.#write(a);
  }

  #write(a: OwnAnswer): void {
    if (this.#grpc) writeGrpcAnswer(this.#res, a);
    else writeAnswer(this.#res, a);
  }

  #attempt(): void {
    const trip = this.#trip;
    const inst = trip.next();
    if (!inst) {
      const w = trip.waitForInstance();
      if (!(w instanceof Promise)) {
        this.#answer(() => w);
        return;
      }
      // Held at zero instances: go on once one is routable, else answer.
      void w.then((r) => {
        if (this.#done || this.#clientGone) return;
        if (r === "retry") this.#attempt();
        else this.#answer(() => r);
      });
      return;
    }
    this.#controller = undefined;
    try {
      // The same request whichever protocol the instance speaks.
      const request = {
        method: trip.method,
        path: trip.path,
        headers: trip.headers,
        body: trip.hasBody ? this.#req : null,
        headersTimeout: this.#o.upstreamTimeoutMs,
        bodyTimeout: this.#o.bodyIdleTimeoutMs,
      } satisfies H2DispatchOptions;
      if (inst.endpoint.protocol === "h2c") this.#o.upstreams.h2(inst.endpoint).dispatch(request, this);
      // HTTP/1.1 to the instance; undici may reuse the connection.
      else this.#o.upstreams.pool(inst.endpoint).dispatch({ ...request, reset: false }, this);
    } catch (err) {
      this.#attemptFailed(err);
    }
  }

  /** The response closed: normally after it ended; before that, the client went away. */
  clientClosed(): void {
    (this.#res as TaggedResponse)[kExchange] = undefined;
    if (!this.#done) {
      this.#clientGone = true;
      this.#controller?.abort(new Error("client closed the connection"));
      this.#trip.finish("aborted");
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
    this.#trip.succeeded();
    this.#responded = true;
    const cl = headers["content-length"];
    this.#remaining = typeof cl === "string" && this.#trip.method !== "HEAD" ? Number(cl) : -1;
    const res = this.#res;
    if (this.#clientGone || res.destroyed) {
      controller.abort(new Error("client closed the connection"));
      return;
    }
    if (this.#o.path.draining && !this.#h2) (res as ServerResponse).shouldKeepAlive = false;
    const out = downstreamHeaders(headers, this.#trip.requestId);
    if (this.#h2 && statusCode === 200 && headers["grpc-status"] !== undefined) {
      // gRPC's trailers-only answer: it must stay one header block that ends the stream.
      this.#heldHeaders = out;
      return;
    }
    try {
      res.writeHead(statusCode, out);
    } catch (err) {
      // A header Node refuses to send (invalid characters from the instance): 502.
      this.#o.log.debug({ err: String(err) }, "invalid response headers from instance");
      controller.abort(err instanceof Error ? err : new Error(String(err)));
      return;
    }
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    const res = this.#res;
    if (this.#heldHeaders !== undefined) {
      // Not trailers-only after all: a body follows.
      res.writeHead(200, this.#heldHeaders);
      this.#heldHeaders = undefined;
    }
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
    this.#trip.release();
    const res = this.#res;
    this.#done = true;
    if (this.#heldHeaders !== undefined) {
      respondTrailersOnly(res, { ...this.#heldHeaders, ...downstreamTrailers(trailers) });
      this.#heldHeaders = undefined;
      this.#trip.finish(statusClass(200), 200);
      return;
    }
    if (Object.keys(trailers).length > 0) res.addTrailers(downstreamTrailers(trailers));
    if (!this.#ended) res.end();
    this.#trip.finish(statusClass(res.statusCode), res.statusCode);
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, err: Error): void {
    this.#trip.release();
    if (this.#done) return;
    if (this.#responded) {
      // The answer began; all that can be done is to cut it short.
      this.#o.log.debug({ err: err.message, requestId: this.#trip.requestId }, "upstream failed mid-response");
      this.#done = true;
      abortResponse(this.#res);
      this.#trip.finish("aborted");
      return;
    }
    if (this.#clientGone) return;
    const next = this.#trip.failed(err, this.#req.readableDidRead || this.#req.destroyed);
    if (next === "retry") {
      this.#attempt();
      return;
    }
    this.#answer(() => this.#trip.answer(next.cause, next.closeConnection));
  }

  /** The sentinel's own answer ends the exchange (cut short instead when the response had begun). */
  #answer(make: () => OwnAnswer): void {
    this.#done = true;
    if (this.#res.headersSent) {
      abortResponse(this.#res);
      this.#trip.finish("aborted");
      return;
    }
    this.#write(make());
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

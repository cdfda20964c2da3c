// The request path every server shell shares, whatever the runtime under it (./proxy.ts: Node's
// http/http2 servers and undici; ./bun-server.ts: Bun.serve and fetch). A shell turns a client
// request into a RequestHead, asks RequestPath for a Trip, and then only moves bytes: the Trip
// decides everything else.
//
//  - Admission: Host (or :authority) and request-target checked, probe paths answered, the
//    request id kept or made, the environment's edge policies (./policies.ts), forwarding headers
//    built (./headers.ts), API authentication at the edge (./auth.ts), 503 while no routing table
//    is in force.
//  - Attempts: an instance is picked by the balancer (revision shares, power of two choices,
//    ejection, the blue-green preview header). A failed connect delivered nothing, so it is
//    retried once elsewhere for any method, as long as the body was not read (undici, the h2c
//    upstream and Bun's fetch read it only once connected, so it never is: it streams to the
//    next instance as it would have to the first, nothing buffered). A reset before the answer,
//    or an instance that left the table and went silent (./upstreams.ts), may have delivered the
//    request: retried only for idempotent requests without a body. Failed connects and resets
//    count against the instance's passive health.
//  - Accounting: requests in flight (drain waits for them), requests and latency per revision
//    (./metrics.ts), ejections, retries and refusals.
// Every answer the sentinel makes itself is an OwnAnswer: short, naming its cause, never a hang.
import { randomUUID } from "node:crypto";
import { PREVIEW_HEADER_VALUE, SENTINEL_LIVE_PATH, SENTINEL_READY_PATH } from "../contracts/routing.js";
import type { Logger } from "../base/log.js";
import { authAnswer, type AuthDecision, type EdgeAuth } from "./auth.js";
import { refusalAnswer, withPolicyHeaders, type EdgePolicies } from "./policies.js";
import type { EdgeRequest } from "../contracts/edge-policy.js";
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
import { isIdempotent, isSaneRequestId, isValidHost, upstreamHeaders } from "./headers.js";
import { REQUEST_ID_HEADER } from "../contracts/headers.js";
import { RETRY_AFTER_SECONDS, type Held, type HeldRequests } from "./hold.js";
import { NO_REVISION } from "../contracts/routing.js";
import { requestViewPath } from "../contracts/request-view.js";
import { instanceKey, statusClass, type SentinelMetrics } from "./metrics.js";
import type { RequestTap } from "./tap.js";

export interface RequestPathOptions {
  readonly balancer: Balancer;
  readonly metrics: SentinelMetrics;
  readonly log: Logger;
  /** True once a routing table is in force. */
  readonly hasTable: () => boolean;
  /** True while the probe paths should answer "ready". */
  readonly isReady: () => boolean;
  /** API authentication at the edge; checked before an instance is picked. */
  readonly auth?: EdgeAuth;
  /** Scale to zero: requests held while no instance is routable (./hold.ts). */
  readonly held?: HeldRequests;
  /** The environment's edge policies, checked at admission before authentication (./policies.ts). */
  readonly policies?: EdgePolicies;
  /** The live request view (./tap.ts): records finished requests while someone watches. */
  readonly tap?: RequestTap;
}

/** What a shell knows of a client request once its head has arrived. */
export interface RequestHead {
  readonly method: string;
  /** The request-target as sent: origin-form ("/p?q") or absolute-form ("http://h/p"). */
  readonly target: string;
  /** Host, or :authority for HTTP/2. */
  readonly host: string | undefined;
  /** HTTP/1.1: a request without Host is malformed (HTTP/1.0 and HTTP/2 may omit it). */
  readonly hostRequired: boolean;
  /** The client's headers as a flat [name, value, …] list (pseudo-headers are skipped). */
  readonly rawHeaders: readonly string[];
  readonly clientAddress: string;
  readonly hasBody: boolean;
  /** The values of X-Request-Id, the preview header and Authorization. */
  readonly requestId: string | undefined;
  readonly preview: string | undefined;
  readonly authorization: string | undefined;
}

/** One of the sentinel's own answers. */
export interface OwnAnswer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
  /** HTTP/1.1: close the connection after it (the request could not be framed safely). */
  readonly closeConnection: boolean;
}

/** The answer for a cause, with the request id when there is one. */
export function ownAnswer(cause: ProxyErrorCause, requestId: string | undefined, closeConnection = false): OwnAnswer {
  const { status, body } = errorAnswer(cause);
  const headers: Record<string, string> = {
    "content-type": "text/plain; charset=utf-8",
    "content-length": String(Buffer.byteLength(body)),
    "cache-control": "no-store",
    [ERROR_HEADER]: cause,
  };
  if (requestId) headers[REQUEST_ID_HEADER] = requestId;
  // The environment is starting: the client may come back shortly.
  if (cause === "held-full" || cause === "held-timeout") headers["retry-after"] = String(RETRY_AFTER_SECONDS);
  return { status, headers, body, closeConnection };
}

/** The origin-form path of a request-target, or undefined when it is neither origin- nor absolute-form. */
export function originPath(target: string): string | undefined {
  if (target.charCodeAt(0) === 47 /* '/' */) return target;
  // Absolute-form (RFC 9112 §3.2.2) is allowed; anything else ("*", authority-form) is not proxied.
  const abs = /^https?:\/\/[^/?#]*([^#]*)$/i.exec(target);
  if (!abs) return undefined;
  const path = abs[1] || "/";
  return path.charCodeAt(0) === 47 ? path : `/${path}`;
}

export class RequestPath {
  readonly o: RequestPathOptions;
  /** Requests admitted and not yet finished (drain waits for them). */
  inFlight = 0;
  /** Set when draining: HTTP/1.1 answers say Connection: close. */
  draining = false;
  /**
   * When the last request began (the request's own performance.now() start, so the hot path
   * reads no extra clock); NaN before the first one.
   */
  lastStarted = Number.NaN;

  constructor(o: RequestPathOptions) {
    this.o = o;
  }

  /** The answer of a probe path on the proxy port, or undefined for any other path. */
  probe(target: string): OwnAnswer | undefined {
    if (target !== SENTINEL_LIVE_PATH && target !== SENTINEL_READY_PATH) return undefined;
    const ok = target === SENTINEL_LIVE_PATH || this.o.isReady();
    const body = ok ? "ok\n" : "not ready\n";
    return {
      status: ok ? 200 : 503,
      headers: { "content-type": "text/plain", "content-length": String(body.length), "cache-control": "no-store" },
      body,
      closeConnection: false,
    };
  }

  /** Admits a request: a Trip counted in flight until finish(). */
  begin(head: RequestHead, started = performance.now()): Trip {
    return new Trip(this, head, started);
  }
}

/** One client request and its (at most two) upstream attempts. */
export class Trip {
  readonly #path: RequestPath;
  readonly #o: RequestPathOptions;
  readonly #started: number;
  readonly method: string;
  readonly requestId: string;
  readonly hasBody: boolean;
  readonly #preview: boolean;
  readonly #authorization: string | undefined;
  readonly #host: string | undefined;
  /** The sentinel's own answer when the request was refused at admission. */
  readonly refused: OwnAnswer | undefined;
  /** Origin-form path sent upstream ("" when refused). */
  readonly path: string = "";
  /** Upstream request headers, flat. */
  readonly headers: string[] = [];
  instance: Instance | undefined;
  revision = NO_REVISION;
  #tried: Set<string> | undefined;
  #counted = false;
  #lastFailure: UpstreamFailure | undefined;
  #finished = false;
  #held: Held | undefined;
  /** What the policies saw, kept when some wait for authentication. */
  #edge: EdgeRequest | undefined;
  /** What the policies saw (the request view reads the API key's name from it). */
  #seen: EdgeRequest | undefined;
  /** The policy that refused the request. */
  #refusedBy = "";
  readonly #target: string;
  readonly #client: string;

  constructor(path: RequestPath, head: RequestHead, started: number) {
    this.#path = path;
    this.#o = path.o;
    this.#started = started;
    path.inFlight++;
    path.lastStarted = started;
    this.method = head.method;
    this.hasBody = head.hasBody;
    this.requestId = isSaneRequestId(head.requestId) ? head.requestId : randomUUID();
    this.#preview = head.preview === PREVIEW_HEADER_VALUE;
    this.#authorization = head.authorization;
    this.#host = head.host;
    this.#target = head.target;
    this.#client = head.clientAddress;
    const host = head.host;
    if (host === undefined ? head.hostRequired : !isValidHost(host)) {
      this.#o.metrics.clientErrors.inc({ reason: "invalid-host" });
      this.refused = this.answer("invalid-host", true);
      return;
    }
    const p = originPath(head.target);
    if (p === undefined) {
      this.#o.metrics.clientErrors.inc({ reason: "request-target" });
      this.refused = this.answer("bad-request", true);
      return;
    }
    this.path = p;
    if (!this.#o.hasTable()) {
      this.refused = this.answer("not-ready");
      return;
    }
    const policies = this.#o.policies;
    let forward: string[] | undefined;
    if (policies?.active) {
      forward = [];
      const edge: EdgeRequest = {
        method: head.method,
        path: p,
        peer: head.clientAddress,
        rawHeaders: head.rawHeaders,
        hasBody: head.hasBody,
        forward,
      };
      if (policies.afterAuth) this.#edge = edge;
      this.#seen = edge;
      const refusal = policies.check(edge);
      if (refusal) {
        // A body left unread is not read at all: the connection closes after the answer.
        const a = refusalAnswer(refusal, this.requestId, head.hasBody);
        this.#refusedBy = refusal.policy;
        this.finish(statusClass(a.status), a.status);
        this.refused = a;
        return;
      }
    }
    this.headers = upstreamHeaders(withPolicyHeaders(head.rawHeaders, policies, forward), {
      clientAddress: head.clientAddress,
      proto: "http",
      host,
      requestId: this.requestId,
    });
  }

  /**
   * API authentication: undefined when the request may go on, else the refusal (already
   * counted and finished). Asynchronous only when a token has to be verified.
   */
  authorize(): OwnAnswer | undefined | Promise<OwnAnswer | undefined> {
    const auth = this.#o.auth;
    if (!auth?.active) return this.#authenticated(undefined);
    const decision = auth.check(this.method, this.#host ?? "", this.path, this.#authorization);
    if (decision instanceof Promise)
      return decision.then(
        (d) => this.#decided(d),
        () =>
          this.#decided({
            type: "deny",
            status: 401,
            error: "invalid_token",
            description: "the token could not be verified",
          }),
      );
    return this.#decided(decision);
  }

  /** The policies that wait for the verified subject (a rate limit by JWT subject). */
  #authenticated(subject: string | undefined): OwnAnswer | undefined {
    const edge = this.#edge;
    if (edge === undefined) return undefined;
    const refusal = this.#o.policies?.checkAuthenticated(edge, subject);
    if (!refusal) return undefined;
    const a = refusalAnswer(refusal, this.requestId, this.hasBody);
    this.#refusedBy = refusal.policy;
    this.finish(statusClass(a.status), a.status);
    return a;
  }

  #decided(d: AuthDecision): OwnAnswer | undefined {
    if (d.type === "pass") return this.#authenticated(d.subject);
    const a = authAnswer(d);
    const headers: Record<string, string> = {
      ...a.headers,
      [ERROR_HEADER]: d.status === 401 ? "unauthorized" : d.status === 403 ? "forbidden" : "bad-request",
    };
    headers[REQUEST_ID_HEADER] = this.requestId;
    this.#o.metrics.authRefusals.inc({ status: String(d.status) });
    this.finish(statusClass(a.status), a.status);
    return { status: a.status, headers, body: a.body, closeConnection: false };
  }

  /** The instance for the next attempt (counted as outstanding on it), or undefined: see noInstance(). */
  next(): Instance | undefined {
    const inst = this.#o.balancer.pick(this.#tried, this.#preview);
    this.instance = inst;
    if (!inst) return undefined;
    this.revision = inst.endpoint.deploymentId;
    this.#counted = true;
    inst.outstanding++;
    return inst;
  }

  /** The answer when next() found no instance (finished). */
  noInstance(): OwnAnswer {
    return this.answer(this.#lastFailure ? causeOf(this.#lastFailure) : "no-instance");
  }

  /**
   * When next() found no instance: the answer now (finished), or, while the environment scales to
   * zero, a hold that resolves "retry" once an instance is routable (call next() again) or to the
   * answer when it timed out (finished). Only a first attempt is held: a request whose instance
   * failed is answered as before.
   */
  waitForInstance(): OwnAnswer | Promise<"retry" | OwnAnswer> {
    const held = this.#o.held;
    if (held === undefined || this.#tried !== undefined || this.#lastFailure !== undefined) return this.noInstance();
    const h = held.hold();
    if (h === undefined) return this.noInstance();
    if (h === "full") return this.answer("held-full");
    this.#held = h;
    return h.promise.then((routable) => {
      this.#held = undefined;
      return routable ? "retry" : this.answer("held-timeout");
    });
  }

  /** The instance's answer began: it is healthy. */
  succeeded(): void {
    const inst = this.instance;
    if (inst) this.#o.balancer.success(inst);
  }

  /**
   * The current attempt failed before the instance's answer began. `bodyRead`: the request body
   * was (partly) consumed, so the request cannot be sent again. Returns "retry" when another
   * attempt should follow, else the cause to answer with.
   */
  failed(err: unknown, bodyRead: boolean): "retry" | { cause: ProxyErrorCause; closeConnection: boolean } {
    this.release();
    const failure = classifyUpstreamError(err);
    const inst = this.instance;
    const m = this.#o.metrics;
    if (inst && countsAgainstInstance(failure)) {
      if (failure === "connect") m.upstreamConnectErrors.inc({ revision: this.revision });
      else m.upstreamResets.inc({ revision: this.revision });
      if (this.#o.balancer.failure(inst)) {
        m.ejections.inc({ revision: this.revision });
        this.#o.log.warn(
          {
            instance: inst.key,
            pod: inst.endpoint.pod,
            revision: this.revision,
            failure,
            err: err instanceof Error ? err.message : String(err),
          },
          "instance ejected",
        );
      }
    }
    this.#lastFailure = failure;
    if (this.#canRetry(failure, bodyRead)) {
      (this.#tried ??= new Set()).add(inst?.key ?? "");
      m.retries.inc({ revision: this.revision });
      return "retry";
    }
    this.#o.log.debug(
      { err: err instanceof Error ? err.message : String(err), failure, requestId: this.requestId },
      "upstream attempt failed",
    );
    return { cause: causeOf(failure), closeConnection: failure === "client" };
  }

  #canRetry(failure: UpstreamFailure, bodyRead: boolean): boolean {
    if (this.#tried !== undefined) return false; // once
    // Nothing reached the instance: safe for any method while the body can still be sent whole.
    if (failure === "connect") return !this.hasBody || !bodyRead;
    // The request may have arrived: only what may be repeated, and only without a body to replay.
    if (failure === "reset" || failure === "gone") return isIdempotent(this.method) && !this.hasBody;
    return false;
  }

  /** The current attempt no longer counts as outstanding on its instance. */
  release(): void {
    if (this.#counted && this.instance) this.instance.outstanding--;
    this.#counted = false;
  }

  /** The sentinel's own answer for `cause`; the trip is finished with its status class. */
  answer(cause: ProxyErrorCause, closeConnection = false): OwnAnswer {
    const a = ownAnswer(cause, this.requestId, closeConnection);
    this.finish(statusClass(a.status), a.status);
    return a;
  }

  /**
   * Ends the trip: out of flight, counted by revision and status class ("aborted": cut short);
   * `status` is the answer's (0 when cut short), for the request view.
   */
  finish(code: string, status = 0): void {
    if (this.#finished) return;
    this.#finished = true;
    // The client left while its request was held.
    this.#held?.cancel();
    this.release();
    this.#path.inFlight--;
    const seconds = (performance.now() - this.#started) / 1000;
    this.#o.metrics.stats.record(this.revision, code, seconds);
    // The instance of the last attempt answered, or its failure is the answer.
    const pod = this.instance?.endpoint.pod;
    if (pod !== undefined) this.#o.metrics.instanceStats.record(instanceKey(this.revision, pod), code, seconds);
    const tap = this.#o.tap;
    const now = tap?.active ? Date.now() : 0;
    if (tap?.admit(now))
      tap.keep({
        timeMs: now,
        method: this.method,
        path: requestViewPath(this.path === "" ? this.#target : this.path),
        status,
        latencyMs: seconds * 1000,
        deploymentId: this.revision === NO_REVISION ? "" : this.revision,
        instance: pod ?? "",
        policy: this.#refusedBy,
        client: this.#client,
        key: this.#seen?.keyName ?? "",
      });
  }

  get finished(): boolean {
    return this.#finished;
  }
}

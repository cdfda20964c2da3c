// WebSocket (and any other HTTP/1.1 Upgrade) through the sentinel. undici's upgrade() turns an
// instance's non-101 answer into an error (traffic §1), so the handshake goes through node:http's
// client, which reports both outcomes: a 101 is relayed and the two sockets are piped together
// (bytes, not frames: the proxy never parses WebSocket traffic); any other answer is relayed as
// it came and the connection closed. Instance choice, health and retry follow the same rules as
// plain requests (a handshake is a GET, so a failed connect is retried once elsewhere).
// The live request view (./tap.ts) gets one record per handshake when it is answered (the 101 with
// the revision and instance, or the refusal with the deciding policy), its latency the time to
// that answer, and, for a 101, a second record when the connection closes, with how long it was
// open (a record is handed out as soon as the agent asks, so the first cannot be completed later).
import { request as httpRequest, type IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { Logger } from "../base/log.js";
import { authAnswer, type AuthDecision, type EdgeAuth } from "./auth.js";
import { refusalAnswer, withPolicyHeaders, type EdgePolicies } from "./policies.js";
import type { EdgeRequest, Refusal } from "../contracts/edge-policy.js";
import type { Balancer, Instance } from "./balancer.js";
import { causeOf, classifyUpstreamError, countsAgainstInstance, errorAnswer, ERROR_HEADER } from "./errors.js";
import type { ProxyErrorCause, UpstreamFailure } from "./errors.js";
import { isSaneRequestId, isValidHost, upstreamHeaders } from "./headers.js";
import { REQUEST_ID_HEADER } from "../contracts/headers.js";
import { PREVIEW_HEADER, PREVIEW_HEADER_VALUE } from "../contracts/routing.js";
import { NO_REVISION } from "../contracts/routing.js";
import { instanceKey, type SentinelMetrics } from "./metrics.js";
import { randomUUID } from "node:crypto";
import { requestViewPath } from "../contracts/request-view.js";
import type { RequestTap } from "./tap.js";

export interface UpgradeOptions {
  readonly balancer: Balancer;
  readonly metrics: SentinelMetrics;
  readonly log: Logger;
  /** No 101 or answer within this (connect included): 504. */
  readonly upstreamTimeoutMs: number;
  readonly hasTable: () => boolean;
  /** API authentication at the edge, checked before an instance is dialled. */
  readonly auth?: EdgeAuth;
  /** The environment's edge policies: an upgrade they refuse is answered, never relayed. */
  readonly policies?: EdgePolicies;
  /** The live request view: each handshake's answer is a record while someone watches. */
  readonly tap?: RequestTap;
}

/** One handshake's records in the request view (each kept only while someone watches). */
interface ViewNotes {
  /** The answer, once: its status (0: the client left), who answered or refused. */
  answered(status: number, inst?: Instance, policy?: string): void;
  /** The upgraded connection closed: a second record with how long it was open. */
  closed(inst: Instance): void;
}

const STATUS_TEXT: Record<number, string> = {
  400: "Bad Request",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout",
};

/** Writes one of the sentinel's own answers on a raw socket and closes it; returns its status. */
export function writeRawAnswer(socket: Duplex, cause: ProxyErrorCause, requestId?: string): number {
  const { status, body } = errorAnswer(cause);
  if (socket.destroyed || !socket.writable) {
    socket.destroy();
    return status;
  }
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? "Error"}`,
    "content-type: text/plain; charset=utf-8",
    `content-length: ${Buffer.byteLength(body)}`,
    `${ERROR_HEADER}: ${cause}`,
    ...(requestId ? [`${REQUEST_ID_HEADER}: ${requestId}`] : []),
    "connection: close",
  ];
  socket.end(`${lines.join("\r\n")}\r\n\r\n${body}`);
  return status;
}

function headLines(res: IncomingMessage, skip: (name: string) => boolean): string {
  let out = "";
  const raw = res.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] ?? "";
    if (skip(name.toLowerCase())) continue;
    out += `${name}: ${raw[i + 1] ?? ""}\r\n`;
  }
  return out;
}

export class UpgradeRelay {
  readonly #o: UpgradeOptions;
  /** Client sockets of open upgraded connections (closed at the end of a drain). */
  readonly open = new Set<Duplex>();

  constructor(o: UpgradeOptions) {
    this.#o = o;
  }

  /** The request view's notes for one handshake. */
  #noter(req: IncomingMessage, edge: EdgeRequest): ViewNotes {
    const tap = this.#o.tap;
    const started = performance.now();
    let answeredAt = Number.NaN;
    const record = (status: number, inst: Instance | undefined, policy: string, openMs?: number): void =>
      tap?.record({
        timeMs: Date.now(),
        method: edge.method,
        path: requestViewPath(req.url ?? ""),
        status,
        latencyMs: answeredAt - started,
        deploymentId: inst?.endpoint.deploymentId ?? "",
        instance: inst?.endpoint.pod ?? "",
        policy,
        client: edge.peer,
        key: edge.keyName ?? "",
        ...(openMs === undefined ? {} : { openMs }),
      });
    return {
      answered: (status, inst, policy = "") => {
        if (!Number.isNaN(answeredAt)) return;
        answeredAt = performance.now();
        record(status, inst, policy);
      },
      closed: (inst) => record(101, inst, "", performance.now() - answeredAt),
    };
  }

  readonly handle = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    socket.on("error", () => socket.destroy());
    const incoming = req.headers[REQUEST_ID_HEADER];
    const requestId = isSaneRequestId(typeof incoming === "string" ? incoming : undefined)
      ? (incoming as string)
      : randomUUID();
    const forward: string[] = [];
    const edge: EdgeRequest = {
      method: req.method ?? "GET",
      path: req.url ?? "/",
      peer: req.socket.remoteAddress ?? "",
      rawHeaders: req.rawHeaders,
      hasBody: false,
      forward,
    };
    const note = this.#noter(req, edge);
    const host = req.headers.host;
    if (host === undefined || !isValidHost(host) || (req.url ?? "").charCodeAt(0) !== 47) {
      this.#o.metrics.clientErrors.inc({ reason: "invalid-upgrade" });
      note.answered(
        writeRawAnswer(socket, host === undefined || !isValidHost(host) ? "invalid-host" : "bad-request", requestId),
      );
      return;
    }
    if (!this.#o.hasTable()) {
      note.answered(writeRawAnswer(socket, "not-ready", requestId));
      return;
    }
    const refuse = (refusal: Refusal): void => {
      const a = refusalAnswer(refusal, requestId, true);
      note.answered(a.status, undefined, refusal.policy);
      const lines = [`HTTP/1.1 ${a.status} Refused`, ...Object.entries(a.headers).map(([k, v]) => `${k}: ${v}`)];
      socket.end(`${lines.join("\r\n")}\r\nconnection: close\r\n\r\n${a.body}`);
    };
    const refusal = this.#o.policies?.active ? this.#o.policies.check(edge) : undefined;
    if (refusal) return refuse(refusal);
    const headers = upstreamHeaders(withPolicyHeaders(req.rawHeaders, this.#o.policies, forward), {
      clientAddress: req.socket.remoteAddress ?? "",
      proto: "http",
      host,
      requestId,
    });
    headers.push("connection", "upgrade", "upgrade", String(req.headers.upgrade ?? "websocket"));
    const go = (d: AuthDecision): void => {
      if (d.type === "pass") {
        const late = this.#o.policies?.checkAuthenticated(edge, d.subject);
        if (late) return refuse(late);
        this.#attempt(req, socket, head, headers, requestId, note, undefined);
        return;
      }
      // Refused at the edge, like a plain request (./auth.ts).
      this.#o.metrics.authRefusals.inc({ status: String(d.status) });
      const a = authAnswer(d);
      note.answered(a.status);
      const lines = [
        `HTTP/1.1 ${a.status} ${a.status === 401 ? "Unauthorized" : a.status === 403 ? "Forbidden" : "Bad Request"}`,
        ...Object.entries(a.headers).map(([k, v]) => `${k}: ${v}`),
        "connection: close",
      ];
      socket.end(`${lines.join("\r\n")}\r\n\r\n${a.body}`);
    };
    const auth = this.#o.auth;
    if (!auth?.active) return go({ type: "pass" });
    const decision = auth.check(req.method ?? "GET", host, req.url ?? "/", req.headers.authorization);
    if (decision instanceof Promise)
      decision.then(go, () =>
        go({ type: "deny", status: 401, error: "invalid_token", description: "the token could not be verified" }),
      );
    else go(decision);
  };

  #attempt(
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    headers: string[],
    requestId: string,
    note: ViewNotes,
    tried: Set<string> | undefined,
  ): void {
    // Blue-green preview: an upgrade carrying the preview header goes to the preview revision too.
    const inst = this.#o.balancer.pick(tried, req.headers[PREVIEW_HEADER] === PREVIEW_HEADER_VALUE);
    if (!inst) {
      this.#count(NO_REVISION, "5xx");
      note.answered(writeRawAnswer(socket, tried ? "all-instances-failing" : "no-instance", requestId));
      return;
    }
    const revision = inst.endpoint.deploymentId;
    inst.outstanding++;
    let settled = false;
    const settle = (): boolean => {
      if (settled) return false;
      settled = true;
      inst.outstanding--;
      return true;
    };
    const up = httpRequest({
      host: inst.endpoint.dialHost,
      port: inst.endpoint.port,
      method: req.method,
      path: req.url,
      headers,
      setHost: false,
      agent: false,
    });
    const onClientGone = (): void => {
      if (!settle()) return;
      note.answered(0, inst);
      up.destroy();
    };
    socket.once("close", onClientGone);
    up.setTimeout(this.#o.upstreamTimeoutMs, () =>
      up.destroy(Object.assign(new Error("no answer in time"), { code: "UND_ERR_HEADERS_TIMEOUT" })),
    );
    up.on("upgrade", (res, upSocket, upHead) => {
      socket.off("close", onClientGone);
      if (!settle()) {
        upSocket.destroy();
        return;
      }
      this.#o.balancer.success(inst);
      up.setTimeout(0);
      this.#count(revision, "1xx", inst.endpoint.pod);
      note.answered(101, inst);
      const hop = (n: string): boolean => n === "transfer-encoding" || n === "content-length";
      socket.write(`HTTP/1.1 101 ${res.statusMessage || "Switching Protocols"}\r\n${headLines(res, hop)}\r\n`);
      if (upHead.length > 0) socket.write(upHead);
      if (head.length > 0) upSocket.write(head);
      this.#pipe(socket, upSocket, () => note.closed(inst));
    });
    up.on("response", (res) => {
      socket.off("close", onClientGone);
      if (!settle()) {
        res.destroy();
        return;
      }
      this.#o.balancer.success(inst);
      const status = res.statusCode ?? 502;
      this.#count(revision, `${Math.floor(status / 100)}xx`, inst.endpoint.pod);
      note.answered(status, inst);
      // The connection closes after the body, so no framing headers are needed.
      const skip = (n: string): boolean =>
        n === "connection" || n === "transfer-encoding" || n === "content-length" || n === "keep-alive";
      socket.write(`HTTP/1.1 ${status} ${res.statusMessage ?? ""}\r\n${headLines(res, skip)}connection: close\r\n\r\n`);
      res.pipe(socket);
      res.on("error", () => socket.destroy());
    });
    up.on("error", (err) => {
      socket.off("close", onClientGone);
      if (!settle()) return;
      const failure: UpstreamFailure = classifyUpstreamError(err);
      if (countsAgainstInstance(failure)) {
        if (failure === "connect") this.#o.metrics.upstreamConnectErrors.inc({ revision });
        else this.#o.metrics.upstreamResets.inc({ revision });
        if (this.#o.balancer.failure(inst)) this.#o.metrics.ejections.inc({ revision });
      }
      if (failure === "connect" && !tried && !socket.destroyed) {
        this.#o.metrics.retries.inc({ revision });
        this.#attempt(req, socket, head, headers, requestId, note, new Set([inst.key]));
        return;
      }
      this.#count(revision, "5xx", inst.endpoint.pod);
      note.answered(writeRawAnswer(socket, causeOf(failure), requestId), inst);
    });
    up.end();
  }

  #pipe(client: Duplex, upstream: Duplex, onClose: () => void): void {
    this.open.add(client);
    this.#o.metrics.webSockets.inc();
    for (const s of [client, upstream]) {
      const sock = s as Duplex & { setNoDelay?: (v: boolean) => void; setTimeout?: (ms: number) => void };
      sock.setNoDelay?.(true);
      sock.setTimeout?.(0);
    }
    let closed = false;
    const close = (): void => {
      if (closed) return;
      closed = true;
      this.open.delete(client);
      this.#o.metrics.webSockets.dec();
      client.destroy();
      upstream.destroy();
      onClose();
    };
    client.on("close", close);
    upstream.on("close", close);
    upstream.on("error", close);
    client.on("error", close);
    client.pipe(upstream);
    upstream.pipe(client);
  }

  #count(revision: string, code: string, pod?: string): void {
    this.#o.metrics.stats.record(revision, code, 0);
    if (pod !== undefined) this.#o.metrics.instanceStats.record(instanceKey(revision, pod), code, 0);
  }

  closeAll(): void {
    for (const s of this.open) s.destroy();
  }
}

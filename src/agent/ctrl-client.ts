// The agent's connection to ctrl: one HTTP/2 session (Connect's Http2SessionManager) shared by
// every kind's stream and call, with the bearer token on each request.
//
// Bounds, so a dead or silent ctrl is noticed:
//  - HTTP/2 PING (the session manager's pingIntervalMs / pingTimeoutMs): while streams are open,
//    a session that received nothing for `pingIntervalMs` is pinged, and destroyed (failing
//    every stream on it) when the answer does not come within `pingTimeoutMs`. Bookmarks count as
//    data, so a healthy quiet link costs no PING. Idle sessions are not pinged (pingIdleConnection
//    off: an agent always has streams open); a request on a session idle for longer than the
//    interval is preceded by a PING (the manager's "verifying").
//  - A connection that never completes (a blackholed SYN, a TLS handshake that never ends) has
//    no timeout of its own in node:http2; `dropIfConnecting()`, called when a stream was not
//    accepted in time, gives it up so the next attempt dials afresh.
//  - Unary calls carry a deadline: their own (reports, point reads, heartbeats), else
//    `defaultTimeoutMs`. Streams opt out with `timeoutMs: 0` (runtime/stream.ts) and are bounded
//    by their keepalive instead.
//
// Every session that carried a request is guarded (`guardSession`), against two ways the session
// manager can end the process: it destroys a session whose PING timed out with an error, which
// node:http2 emits only once the socket has closed, and if a call opened the next session
// meanwhile the manager has already removed its own 'error' listener from the old one; and its
// keepalive timer can fire between a session's destruction and the manager's cleanup, when
// node:http2's ping() throws rather than failing its callback.
import type * as http2 from "node:http2";
import { Code, ConnectError, createClient, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { ClusterService } from "../gen/krane/ctrl/v1/cluster_pb.js";
import type { ClusterClient } from "./runtime/kind.js";

export interface CtrlConnectionOptions {
  /** A PING is sent after this long without data from ctrl (default 10 s). */
  readonly pingIntervalMs?: number;
  /** A PING unanswered this long closes the session (default 5 s). */
  readonly pingTimeoutMs?: number;
  /** Deadline of a unary call that sets none (default 10 s). */
  readonly defaultTimeoutMs?: number;
}

export const DEFAULT_PING_INTERVAL_MS = 10_000;
export const DEFAULT_PING_TIMEOUT_MS = 5_000;

export interface CtrlConnection {
  readonly client: ClusterClient;
  /** The same session for ctrl's other agent-facing services (the log channel). */
  readonly transport: Transport;
  /** The session's state as Connect's manager sees it ("connecting", "open", "idle", …). */
  state(): string;
  /** Gives up a connection attempt that has not completed (the next call dials again). */
  dropIfConnecting(): boolean;
  /** Closes the connection and every stream on it (the agent stopping). */
  close(): void;
}

export function createCtrlConnection(url: string, token: string, o: CtrlConnectionOptions = {}): CtrlConnection {
  const bearer: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
  const session = new Http2SessionManager(url, {
    pingIntervalMs: o.pingIntervalMs ?? DEFAULT_PING_INTERVAL_MS,
    pingTimeoutMs: o.pingTimeoutMs ?? DEFAULT_PING_TIMEOUT_MS,
    pingIdleConnection: false,
    idleConnectionTimeoutMs: 15 * 60_000,
  });
  const guarded = new WeakSet<http2.Http2Session>();
  // After a dropped connection attempt, calls wait for the drop to settle (see dropIfConnecting).
  let settling: Promise<void> | undefined;
  const sessionManager = {
    authority: session.authority,
    async request(
      method: string,
      path: string,
      headers: http2.OutgoingHttpHeaders,
      options: Omit<http2.ClientSessionRequestOptions, "signal">,
    ): Promise<http2.ClientHttp2Stream> {
      if (settling) await settling;
      const stream = await session.request(method, path, headers, options);
      const s = stream.session;
      if (s && !guarded.has(s)) {
        guarded.add(s);
        guardSession(s);
      }
      return stream;
    },
    notifyResponseByteRead: (stream: http2.ClientHttp2Stream): void => session.notifyResponseByteRead(stream),
  };
  const transport = createConnectTransport({
    baseUrl: url,
    httpVersion: "2",
    sessionManager,
    interceptors: [bearer],
    defaultTimeoutMs: o.defaultTimeoutMs ?? 10_000,
  });
  return {
    client: createClient(ClusterService, transport),
    transport,
    state: () => session.state(),
    dropIfConnecting() {
      if (session.state() !== "connecting") return false;
      session.abort(new ConnectError("the connection to ctrl did not complete in time", Code.Unavailable));
      // The aborted attempt's own failure reaches the manager a microtask later and sets its
      // state again: a connection dialed before that would be lost to the manager (and its
      // errors to any listener). Calls made meanwhile wait until it has.
      settling ??= new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
        settling = undefined;
      });
      return true;
    },
    close() {
      session.abort();
    },
  };
}

/**
 * Keeps a session's late failures from ending the process: an 'error' listener for good, and a
 * ping() that answers false (no PING sent) on a session already closed or destroyed.
 */
export function guardSession(session: http2.Http2Session): void {
  session.on("error", () => undefined);
  const ping = session.ping.bind(session) as (...args: unknown[]) => boolean;
  Object.defineProperty(session, "ping", {
    configurable: true,
    value: (...args: unknown[]): boolean => (session.destroyed || session.closed ? false : ping(...args)),
  });
}

/** A ClusterService client on a connection of its own (tests, benches). */
export function createCtrlClient(url: string, token: string, o: CtrlConnectionOptions = {}): ClusterClient {
  return createCtrlConnection(url, token, o).client;
}

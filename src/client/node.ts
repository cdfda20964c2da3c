// ctrl's public API from Node: Connect over HTTP/2 with the caller's bearer token and wide
// receive windows (src/contracts/http2.ts), so a busy `krane logs -f` stream is not held to a round
// trip per 64 KiB. The CLI adds its own interceptors (idempotency keys, outage retries); `krane dev`
// and scripts take the clients as they are.
import type * as http2 from "node:http2";
import type { Interceptor, Transport } from "@connectrpc/connect";
import { createConnectTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { HTTP2_CONNECTION_WINDOW, HTTP2_STREAM_WINDOW } from "../contracts/http2.js";
import { apiClients, type ApiClients } from "./services.js";

export type { ApiClients };

export interface NodeTransportOptions {
  readonly baseUrl: string;
  /** The bearer token, or how to get it before each call (a sign-in session's, refreshed). */
  readonly token: string | (() => Promise<string>);
  /** Outermost first; the bearer token is set innermost. */
  readonly interceptors?: readonly Interceptor[];
  /** Each unary call's deadline (ms). */
  readonly timeoutMs?: number;
}

export function nodeTransport(o: NodeTransportOptions): Transport {
  const token = o.token;
  const bearer: Interceptor = (next) => async (req) => {
    req.header.set("authorization", `Bearer ${typeof token === "string" ? token : await token()}`);
    return next(req);
  };
  return createConnectTransport({
    baseUrl: o.baseUrl,
    httpVersion: "2",
    sessionManager: wideWindowSessions(o.baseUrl),
    interceptors: [...(o.interceptors ?? []), bearer],
    defaultTimeoutMs: o.timeoutMs ?? 30_000,
  });
}

/** Every public service's client, for `krane dev` and scripts. */
export function createApiClients(baseUrl: string, token: string, timeoutMs = 15_000): ApiClients {
  return apiClients(nodeTransport({ baseUrl, token, timeoutMs }));
}

/**
 * Connect's HTTP/2 session manager with wide receive windows: the stream's window is set when the
 * connection opens, the connection's on its first request.
 */
function wideWindowSessions(baseUrl: string): {
  authority: string;
  request(
    method: string,
    path: string,
    headers: http2.OutgoingHttpHeaders,
    options: Omit<http2.ClientSessionRequestOptions, "signal">,
  ): Promise<http2.ClientHttp2Stream>;
  notifyResponseByteRead(stream: http2.ClientHttp2Stream): void;
} {
  const manager = new Http2SessionManager(baseUrl, undefined, { settings: { initialWindowSize: HTTP2_STREAM_WINDOW } });
  const widened = new WeakSet<http2.Http2Session>();
  return {
    authority: manager.authority,
    async request(method, path, headers, options) {
      const stream = await manager.request(method, path, headers, options);
      const session = stream.session;
      if (session && !widened.has(session)) {
        widened.add(session);
        try {
          session.setLocalWindowSize(HTTP2_CONNECTION_WINDOW);
        } catch {
          // A session already closing: nothing to widen.
        }
      }
      return stream;
    },
    notifyResponseByteRead: (stream) => manager.notifyResponseByteRead(stream),
  };
}

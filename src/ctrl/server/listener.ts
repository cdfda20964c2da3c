// The API port's listener: HTTP/2 for agents and gRPC, HTTP/1.1 for browsers and curl, on one port.
//
// Under TLS, ALPN picks the protocol (Node's secure HTTP/2 server with allowHTTP1). Without TLS
// there is no ALPN: a browser never speaks h2c to a plain-http origin, and curl's default is
// HTTP/1.1, while agents and gRPC clients open with the HTTP/2 connection preface ("prior
// knowledge"). So each plain connection is read until it either starts with the preface or
// cannot, and is then handed to the HTTP/2 or the HTTP/1.1 server with the bytes read so far put
// back. Both servers run the same request handler.
import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";
import { readFileSync } from "node:fs";
import { HTTP2_STREAM_WINDOW } from "../../contracts/http2.js";

type Handler = (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => void;

/** The first bytes every HTTP/2 connection with prior knowledge sends (RFC 9113, 3.4). */
const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

/** Which server a connection's first bytes belong to; undefined: too few bytes to tell yet. */
export function sniffProtocol(first: Uint8Array): "h2" | "http1" | undefined {
  const n = Math.min(first.byteLength, PREFACE.byteLength);
  const matches = Buffer.from(first.buffer, first.byteOffset, n).equals(PREFACE.subarray(0, n));
  if (!matches) return "http1";
  return n === PREFACE.byteLength ? "h2" : undefined;
}

export interface ApiListener {
  /** The server that listens (a net.Server without TLS, the secure HTTP/2 server with it). */
  readonly server: net.Server;
  /** HTTP/2 sessions are reported by this server's "session" event. */
  readonly h2: http2.Http2Server | http2.Http2SecureServer;
  /** Plain HTTP/1.1 (absent under TLS, where the secure HTTP/2 server answers HTTP/1.1 itself). */
  readonly http1: http.Server | undefined;
  /** Ends the HTTP/1.1 connections that are idle; the ones mid-request end after their answer. */
  closeIdleHttp1(): void;
}

export interface ApiListenerOptions {
  tls?: { certFile: string; keyFile: string };
  /** A connection that has not said which protocol it speaks within this time is closed (ms). */
  sniffTimeoutMs?: number;
}

export function createApiListener(handler: Handler, opts: ApiListenerOptions = {}): ApiListener {
  if (opts.tls) {
    const h2 = http2.createSecureServer(
      {
        cert: readFileSync(opts.tls.certFile),
        key: readFileSync(opts.tls.keyFile),
        allowHTTP1: true,
        // Wide receive windows (contracts/http2.ts): an agent's batch of log lines arrives in one go.
        settings: { initialWindowSize: HTTP2_STREAM_WINDOW },
      },
      handler,
    );
    return { server: h2, h2, http1: undefined, closeIdleHttp1: () => undefined };
  }
  const h2 = http2.createServer({ settings: { initialWindowSize: HTTP2_STREAM_WINDOW } }, handler);
  // Slow or idle browsers must not hold requests open forever; a watch stream over HTTP/1.1
  // (server streaming) has no overall limit, only the header deadline.
  const http1 = http.createServer({ requestTimeout: 0, headersTimeout: 30_000, keepAliveTimeout: 5_000 }, handler);
  const sniffTimeout = opts.sniffTimeoutMs ?? 30_000;
  const server = net.createServer((socket) => {
    let read: Buffer = Buffer.alloc(0);
    const timer = setTimeout(() => socket.destroy(), sniffTimeout);
    timer.unref();
    const onData = (chunk: Buffer): void => {
      read = read.byteLength === 0 ? chunk : Buffer.concat([read, chunk]);
      const protocol = sniffProtocol(read);
      if (protocol === undefined) return;
      clearTimeout(timer);
      socket.off("data", onData);
      socket.off("end", onEnd);
      socket.pause();
      socket.unshift(read);
      if (protocol === "h2") {
        // The session reads what is buffered on the socket itself (on the next tick); resuming
        // the socket here would drop those bytes.
        h2.emit("connection", socket);
      } else {
        http1.emit("connection", socket);
        socket.resume();
      }
    };
    const onEnd = (): void => {
      clearTimeout(timer);
      socket.destroy();
    };
    socket.on("data", onData);
    socket.on("end", onEnd);
    socket.on("error", () => undefined);
  });
  return {
    server,
    h2,
    http1,
    closeIdleHttp1: () => {
      http1.closeIdleConnections();
    },
  };
}

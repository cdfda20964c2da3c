// An HTTP/2 (h2c) proxy between a Connect/gRPC client and ctrl that breaks single streams, which
// a TCP proxy cannot do without taking the whole connection down: a stream reset (RST_STREAM)
// before it is forwarded, or after exactly N bytes of its answer's body (a cut at any byte of any
// frame of a watch), a slow answer, or the whole session closed (GOAWAY). Plain node:http2 on
// both sides (no proxy library speaks HTTP/2 to an upstream); each client session gets its own
// upstream session, so connection-level behaviour (pings, flow control) stays end to end in
// spirit. It counts the streams it forwarded per path.
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";

export type StreamFault =
  /** Reset before anything is forwarded. */
  | { readonly kind: "drop" }
  /** Forwarded; the answer's body is cut (RST_STREAM) after this many bytes. */
  | { readonly kind: "cut"; readonly afterBytes: number }
  /** Forwarded after a pause. */
  | { readonly kind: "delay"; readonly ms: number }
  /** The client's whole session is closed (GOAWAY then close). */
  | { readonly kind: "goaway" };

export interface H2ProxyOptions {
  /** ctrl's URL, e.g. http://127.0.0.1:7070. */
  readonly target: string;
  readonly fault?: (stream: { path: string; n: number }) => StreamFault | undefined;
}

const HOP = new Set([
  ":path",
  ":method",
  ":authority",
  ":scheme",
  ":status",
  "connection",
  "keep-alive",
  "transfer-encoding",
  "upgrade",
  "http2-settings",
]);

export class H2FaultProxy {
  fault: H2ProxyOptions["fault"];
  /** Streams seen, by path. */
  readonly streams = new Map<string, number>();
  /** Answer body bytes forwarded, by path and stream number (1 = the path's first stream). */
  readonly forwarded = new Map<string, number[]>();
  readonly #server: http2.Http2Server;
  readonly #sessions = new Set<http2.ServerHttp2Session>();

  private constructor(opts: H2ProxyOptions) {
    this.fault = opts.fault;
    this.#server = http2.createServer();
    this.#server.on("session", (session: http2.ServerHttp2Session) => {
      this.#sessions.add(session);
      const upstream = http2.connect(opts.target);
      upstream.on("error", () => session.destroy());
      upstream.on("close", () => session.destroy());
      session.on("close", () => {
        this.#sessions.delete(session);
        upstream.destroy();
      });
      session.on("error", () => undefined);
      session.on("stream", (stream, headers) => void this.#forward(session, upstream, stream, headers));
    });
  }

  static async start(opts: H2ProxyOptions): Promise<H2FaultProxy> {
    const p = new H2FaultProxy(opts);
    await new Promise<void>((resolve) => p.#server.listen(0, "127.0.0.1", () => resolve()));
    return p;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /** Closes every client session (as a load balancer restarting would). */
  closeSessions(): void {
    for (const s of this.#sessions) s.destroy();
  }

  async close(): Promise<void> {
    this.closeSessions();
    await new Promise<void>((r) => this.#server.close(() => r()));
  }

  async #forward(
    session: http2.ServerHttp2Session,
    upstream: http2.ClientHttp2Session,
    stream: http2.ServerHttp2Stream,
    headers: http2.IncomingHttpHeaders,
  ): Promise<void> {
    const path = String(headers[":path"] ?? "/");
    const n = (this.streams.get(path) ?? 0) + 1;
    this.streams.set(path, n);
    let counts = this.forwarded.get(path);
    if (!counts) this.forwarded.set(path, (counts = []));
    const byStream = counts;
    byStream[n - 1] = 0;
    stream.on("error", () => undefined);
    const fault = this.fault?.({ path, n });
    if (fault?.kind === "drop") {
      stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
      return;
    }
    if (fault?.kind === "goaway") {
      session.goaway(http2.constants.NGHTTP2_NO_ERROR);
      session.destroy();
      return;
    }
    if (fault?.kind === "delay") await new Promise((r) => setTimeout(r, fault.ms));
    if (stream.destroyed || upstream.destroyed) return;
    const out: http2.OutgoingHttpHeaders = { ":method": headers[":method"], ":path": path };
    for (const [k, v] of Object.entries(headers)) if (!HOP.has(k) && v !== undefined) out[k] = v;
    const up = upstream.request(out, { endStream: false });
    up.on("error", () => stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR));
    stream.pipe(up);
    stream.on("close", () => {
      if (!up.destroyed) up.close(http2.constants.NGHTTP2_CANCEL);
    });
    up.on("response", (h) => {
      const back: http2.OutgoingHttpHeaders = { ":status": h[":status"] };
      for (const [k, v] of Object.entries(h)) if (!HOP.has(k) && v !== undefined) back[k] = v;
      if (stream.destroyed) return;
      stream.respond(back, { waitForTrailers: true });
      let sent = 0;
      up.on("data", (chunk: Buffer) => {
        if (stream.destroyed) return;
        if (fault?.kind === "cut" && sent + chunk.length >= fault.afterBytes) {
          const room = fault.afterBytes - sent;
          sent = fault.afterBytes;
          const cut = (): void => {
            stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
            up.close(http2.constants.NGHTTP2_CANCEL);
          };
          byStream[n - 1] = sent;
          if (room > 0) stream.write(chunk.subarray(0, room), cut);
          else cut();
          return;
        }
        sent += chunk.length;
        byStream[n - 1] = sent;
        stream.write(chunk);
      });
      let trailers: http2.OutgoingHttpHeaders = {};
      up.on("trailers", (t) => {
        trailers = {};
        for (const [k, v] of Object.entries(t))
          if (!HOP.has(k) && (typeof v === "string" || Array.isArray(v))) trailers[k] = v as string | string[];
      });
      stream.on("wantTrailers", () => stream.sendTrailers(trailers));
      up.on("end", () => {
        if (!stream.destroyed && !(fault?.kind === "cut" && sent >= fault.afterBytes)) stream.end();
      });
    });
  }
}

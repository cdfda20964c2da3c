// An HTTP proxy in front of a real kube-apiserver that injects the API server's own kinds of
// failure, request by request: 5xx, 429 with Retry-After (as API Priority and Fairness answers),
// connections reset before the answer or in the middle of a watch, watches that go silent,
// "410 Gone" on a watch resume (HTTP 200 then one ERROR event with a Status 410 Expired, exactly
// as kube-apiserver's cache answers a too-old resourceVersion), and slow answers. TCP-level
// proxies cannot do these (they live inside HTTP), so this one terminates HTTP/1.1 on plain
// loopback (the client's kubeconfig points at it) and forwards each request with undici to the
// API server over TLS, the client's credentials untouched. It records every request it saw, with
// the fault it got, which also makes it an audit log of a client's writes from outside it.
import * as http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { Agent, request } from "undici";

export type KubeFault =
  | { readonly kind: "status"; readonly status: number; readonly retryAfterSeconds?: number }
  /** The connection is reset before any answer. */
  | { readonly kind: "reset" }
  /** Forwarded after a pause. */
  | { readonly kind: "delay"; readonly ms: number }
  /** Forwarded, and the connection reset after this many bytes of the answer's body. */
  | { readonly kind: "cut"; readonly afterBytes: number }
  /** Forwarded, then the body stops flowing while the connection stays open. */
  | { readonly kind: "silent"; readonly afterBytes: number }
  /** A watch answered 200 with one ERROR event: 410 Expired. */
  | { readonly kind: "gone" };

export interface SeenRequest {
  readonly at: number;
  readonly method: string;
  readonly path: string;
  readonly watch: boolean;
  readonly fault: KubeFault | undefined;
  /** The API server's status (undefined when the fault answered instead). */
  status?: number;
}

export interface KubeProxyOptions {
  /** The API server, e.g. https://127.0.0.1:6443, and its CA. */
  readonly server: string;
  readonly ca: string;
  /** Decides each request's fault (none: forwarded as is). */
  readonly fault?: (req: { method: string; path: string; watch: boolean; write: boolean }) => KubeFault | undefined;
}

const WRITE = new Set(["POST", "PUT", "PATCH", "DELETE"]);

export class KubeFaultProxy {
  readonly seen: SeenRequest[] = [];
  fault: KubeProxyOptions["fault"];
  readonly #o: KubeProxyOptions;
  readonly #server: http.Server;
  readonly #upstream: Agent;
  readonly #sockets = new Set<Socket>();

  private constructor(opts: KubeProxyOptions) {
    this.#o = opts;
    this.fault = opts.fault;
    this.#upstream = new Agent({ connect: { ca: opts.ca }, bodyTimeout: 0, headersTimeout: 60_000 });
    this.#server = http.createServer((req, res) => void this.#handle(req, res));
    this.#server.on("connection", (s: Socket) => {
      this.#sockets.add(s);
      s.on("close", () => this.#sockets.delete(s));
    });
  }

  static async start(opts: KubeProxyOptions): Promise<KubeFaultProxy> {
    const p = new KubeFaultProxy(opts);
    await new Promise<void>((resolve) => p.#server.listen(0, "127.0.0.1", () => resolve()));
    return p;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /** Writes (POST, PUT, PATCH, DELETE) seen since `since`, Leases included or not. */
  writes(since = 0, opts: { leases?: boolean } = {}): SeenRequest[] {
    return this.seen.filter(
      (r) => r.at >= since && WRITE.has(r.method) && (opts.leases || !r.path.includes("/leases")),
    );
  }

  /** Resets every connection clients have open (watches included). */
  resetAll(): void {
    for (const s of this.#sockets) s.resetAndDestroy();
  }

  async close(): Promise<void> {
    this.resetAll();
    await new Promise<void>((r) => this.#server.close(() => r()));
    await this.#upstream.close();
  }

  async #handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = req.url ?? "/";
    const method = req.method ?? "GET";
    const watch = /[?&]watch=(true|1)\b/.test(path);
    const fault = this.fault?.({ method, path, watch, write: WRITE.has(method) });
    const seen: SeenRequest = { at: Date.now(), method, path, watch, fault };
    this.seen.push(seen);
    const socket = req.socket;
    // A request cut off mid-body (a reset client, or the upstream request aborted while undici
    // still reads this body) errors the body stream: expected here, never an uncaught error.
    req.on("error", () => undefined);
    try {
      if (fault?.kind === "reset") {
        socket.resetAndDestroy();
        return;
      }
      if (fault?.kind === "status") {
        const body = JSON.stringify({
          kind: "Status",
          apiVersion: "v1",
          status: "Failure",
          message: `injected ${fault.status}`,
          reason: fault.status === 429 ? "TooManyRequests" : "InternalError",
          code: fault.status,
        });
        const headers: Record<string, string> = { "content-type": "application/json" };
        if (fault.retryAfterSeconds !== undefined) headers["retry-after"] = String(fault.retryAfterSeconds);
        await drain(req);
        res.writeHead(fault.status, headers).end(body);
        return;
      }
      if (fault?.kind === "gone" && watch) {
        await drain(req);
        const status = {
          type: "ERROR",
          object: {
            kind: "Status",
            apiVersion: "v1",
            status: "Failure",
            message: "too old resource version",
            reason: "Expired",
            code: 410,
          },
        };
        res.writeHead(200, { "content-type": "application/json" }).end(`${JSON.stringify(status)}\n`);
        return;
      }
      if (fault?.kind === "delay") await new Promise((r) => setTimeout(r, fault.ms));
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers))
        if (typeof v === "string" && !["host", "connection", "keep-alive", "transfer-encoding"].includes(k))
          headers[k] = v;
      const ac = new AbortController();
      // The answer's close (not the socket's: keep-alive sockets serve many requests).
      res.once("close", () => ac.abort());
      res.on("error", () => undefined);
      const hasBody = WRITE.has(method);
      const up = await request(`${this.#o.server}${path}`, {
        method: method as "GET",
        headers,
        body: hasBody ? req : undefined,
        dispatcher: this.#upstream,
        signal: ac.signal,
      });
      // Cutting or silencing an answer aborts its upstream body mid-read: that error is expected.
      up.body.on("error", () => undefined);
      seen.status = up.statusCode;
      const out: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(up.headers))
        if (v !== undefined && !["connection", "keep-alive", "transfer-encoding", "content-length"].includes(k))
          out[k] = v;
      res.writeHead(up.statusCode, out);
      res.flushHeaders();
      let sent = 0;
      for await (const chunk of up.body as AsyncIterable<Buffer>) {
        if (fault?.kind === "cut" || fault?.kind === "silent") {
          const room = fault.afterBytes - sent;
          if (room <= 0 || chunk.length >= room) {
            if (room > 0) res.write(chunk.subarray(0, room));
            if (fault.kind === "cut") {
              socket.resetAndDestroy();
            } else {
              // Silent: keep the connection open, send nothing more, until the client gives up.
              await new Promise<void>((r) => res.once("close", () => r()));
            }
            ac.abort();
            return;
          }
        }
        sent += chunk.length;
        res.write(chunk);
      }
      res.end();
    } catch {
      if (!socket.destroyed) socket.resetAndDestroy();
    }
  }
}

async function drain(req: http.IncomingMessage): Promise<void> {
  for await (const _ of req) void _;
}

/** A small seeded generator, so a run's faults can be replayed. */
export function seededRandom(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4294967296;
  };
}

/**
 * Faults at a rate: each request, with probability `rate`, gets one of the API server's kinds of
 * failure (chosen evenly) — 500, 503, 429 with Retry-After 1, a reset, a slow answer, a watch cut
 * early, a silent watch, or 410 on a watch that resumes from a resourceVersion.
 */
export function randomFaults(rate: number, seed: number): NonNullable<KubeProxyOptions["fault"]> {
  const rnd = seededRandom(seed);
  return ({ watch, path }) => {
    if (rnd() >= rate) return undefined;
    const resumes = /[?&]resourceVersion=[^&0]/.test(path);
    const choices: KubeFault[] = watch
      ? [
          { kind: "cut", afterBytes: Math.floor(rnd() * 4096) },
          { kind: "silent", afterBytes: Math.floor(rnd() * 2048) },
          { kind: "status", status: 503 },
          ...(resumes ? [{ kind: "gone" } as const] : []),
        ]
      : [
          { kind: "status", status: 500 },
          { kind: "status", status: 503 },
          { kind: "status", status: 429, retryAfterSeconds: 1 },
          { kind: "reset" },
          { kind: "delay", ms: 300 + Math.floor(rnd() * 700) },
        ];
    return choices[Math.floor(rnd() * choices.length)];
  };
}

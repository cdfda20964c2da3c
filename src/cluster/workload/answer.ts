// What a test workload answers, shared by the pod stand-in (../standin/app.ts: many KWOK pods
// served from one process on this machine) and the hello app (./hello.ts: one real container
// per pod on a real node): who answered (pod, revision, image), misbehaving on request —
// `?status=503&latency=200`, `?bytes=N&chunks=K&interval=ms`, `?cpu=ms` (busy for that long
// before answering: CPU use that follows the load), `/echo` streams the body back,
// an Upgrade becomes a WebSocket that sends the identity and then echoes.
import type * as http from "node:http";
import type { Socket } from "node:net";
import type { WebSocketServer } from "ws";

/** Who a pod is (its answers say so). */
export interface PodIdentity {
  readonly name: string;
  readonly namespace: string;
  readonly revision: string;
  readonly image: string;
  readonly node: string;
  readonly podIp: string;
  readonly port: number;
}

/** Who serves, and how it behaves now. */
export interface ServedPod extends PodIdentity {
  /** Every answer's status (a query's `status` wins). */
  readonly status: number;
  readonly latencyMs: number;
  /** Fraction (0–1) of answers that are 500 instead of `status` (a failing canary). */
  readonly errorRate?: number;
  /** true: accept requests and never answer. */
  readonly hang?: boolean;
}

/** What a test workload answers (JSON): who it is (`pod`: its name) and what it received. */
export interface StandinAnswer extends Omit<PodIdentity, "name"> {
  readonly pod: string;
  readonly method: string;
  readonly path: string;
  readonly host: string | null;
  readonly requestId: string | null;
  readonly forwardedFor: string | null;
  readonly forwardedProto: string | null;
  readonly forwardedHost: string | null;
  readonly bodyBytes: number;
}

function header(req: http.IncomingMessage, name: string): string | null {
  const v = req.headers[name];
  return v === undefined ? null : Array.isArray(v) ? v.join(", ") : v;
}

export function intParam(v: string | null, min: number, max: number): number | undefined {
  if (v === null) return undefined;
  const n = Number(v);
  return Number.isInteger(n) && n >= min && n <= max ? n : undefined;
}

export function identity(pod: ServedPod, req: http.IncomingMessage, bodyBytes: number): StandinAnswer {
  return {
    pod: pod.name,
    namespace: pod.namespace,
    revision: pod.revision,
    image: pod.image,
    node: pod.node,
    podIp: pod.podIp,
    port: pod.port,
    method: req.method ?? "",
    path: req.url ?? "",
    host: header(req, "host"),
    requestId: header(req, "x-request-id"),
    forwardedFor: header(req, "x-forwarded-for"),
    forwardedProto: header(req, "x-forwarded-proto"),
    forwardedHost: header(req, "x-forwarded-host"),
    bodyBytes,
  };
}

/** Answers one request as `pod` (read when the request arrives; the owner may change later). */
export function answer(pod: ServedPod, req: http.IncomingMessage, res: http.ServerResponse): void {
  if (pod.hang) return;
  const url = new URL(req.url ?? "/", "http://workload");
  const q = url.searchParams;
  if (url.pathname === "/echo") {
    res.writeHead(200, { "content-type": "application/octet-stream", "x-standin-pod": pod.name });
    req.pipe(res);
    return;
  }
  const failing = (pod.errorRate ?? 0) > 0 && Math.random() < (pod.errorRate ?? 0);
  const status = failing ? 500 : (intParam(q.get("status"), 200, 599) ?? pod.status);
  const latency = intParam(q.get("latency"), 0, 600_000) ?? pod.latencyMs;
  const cpuMs = intParam(q.get("cpu"), 0, 10_000) ?? 0;
  let bodyBytes = 0;
  req.on("data", (c: Buffer) => (bodyBytes += c.length));
  req.on("end", () => {
    const respond = (): void => {
      if (res.destroyed) return;
      const bytes = intParam(q.get("bytes"), 0, 1 << 30);
      if (bytes !== undefined) {
        stream(
          res,
          status,
          pod,
          bytes,
          intParam(q.get("chunks"), 1, 100_000) ?? 1,
          intParam(q.get("interval"), 0, 60_000) ?? 0,
        );
        return;
      }
      const body = JSON.stringify(identity(pod, req, bodyBytes));
      res.writeHead(status, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body),
        "x-standin-pod": pod.name,
      });
      res.end(body);
    };
    if (cpuMs > 0) busy(cpuMs);
    if (latency > 0) setTimeout(respond, latency);
    else respond();
  });
}

/** Keeps the CPU busy for `ms` (the process does nothing else meanwhile, as a CPU-bound handler). */
function busy(ms: number): void {
  const end = performance.now() + ms;
  let x = 0;
  while (performance.now() < end) for (let i = 0; i < 10_000; i++) x = (x * 31 + i) % 1_000_003;
  if (x === -1) throw new Error("unreachable");
}

/** An Upgrade: a WebSocket that sends the identity, then echoes. */
export function upgrade(
  wss: WebSocketServer,
  pod: ServedPod,
  req: http.IncomingMessage,
  socket: Socket,
  head: Buffer,
): void {
  wss.handleUpgrade(req, socket, head, (ws) => {
    ws.send(JSON.stringify(identity(pod, req, 0)));
    ws.on("message", (data, isBinary) => ws.send(data, { binary: isBinary }));
  });
}

/** `bytes` in `chunks` pieces, `interval` ms apart, without a content-length (chunked). */
function stream(
  res: http.ServerResponse,
  status: number,
  pod: ServedPod,
  bytes: number,
  chunks: number,
  interval: number,
): void {
  res.writeHead(status, { "content-type": "application/octet-stream", "x-standin-pod": pod.name });
  const per = Math.floor(bytes / chunks);
  let sent = 0;
  let i = 0;
  const next = (): void => {
    if (res.destroyed) return;
    if (i >= chunks) {
      res.end();
      return;
    }
    const n = i === chunks - 1 ? bytes - sent : per;
    sent += n;
    i++;
    const ok = res.write(Buffer.alloc(n, 120));
    const go = (): void => void (interval > 0 ? setTimeout(next, interval) : setImmediate(next));
    if (ok) go();
    else res.once("drain", go);
  };
  next();
}

// The hello app's gRPC mode (HELLO_PROTOCOL=grpc): the test workload of apps deployed with
// `krane deploy --protocol grpc`. One port: a connection that opens with the HTTP/2 preface
// (h2c with prior knowledge) gets krane.hello.v1.HelloService in the gRPC protocol only
// (connect-node): a unary call that may take long (deadlines), a server stream and a
// bidirectional stream, each answer naming the pod that gave it. Any other connection is handed
// to the HTTP/1.1 hello app (answers, /healthz, WebSockets), so one instance shows every kind of
// traffic a sentinel relays to an h2c instance.
import * as http2 from "node:http2";
import * as net from "node:net";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import { ConnectError, type Code, type ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter, type ConnectNodeAdapterOptions } from "@connectrpc/connect-node";

export type NodeHandlerFn = NonNullable<ConnectNodeAdapterOptions["fallback"]>;
import {
  CountResponseSchema,
  EchoResponseSchema,
  HelloService,
  SayResponseSchema,
} from "../../gen/krane/hello/v1/hello_pb.js";
import type * as http from "node:http";
import type { PodIdentity } from "./answer.js";
import type { HelloApp, HelloListener } from "./hello.js";

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason instanceof Error ? signal.reason : new Error("aborted"));
      return;
    }
    const t = setTimeout(resolve, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(t);
        reject(signal.reason instanceof Error ? signal.reason : new Error("aborted"));
      },
      { once: true },
    );
  });
}

function routes(id: PodIdentity): (router: ConnectRouter) => void {
  return (router) =>
    router.service(HelloService, {
      async say(req, ctx) {
        if (req.delayMs > 0) await sleep(Math.min(req.delayMs, 600_000), ctx.signal);
        if (req.failCode !== 0) throw new ConnectError(req.text, req.failCode as Code);
        return create(SayResponseSchema, {
          text: req.text,
          pod: id.name,
          revision: id.revision,
          // HTTP/2 carries it as :authority (no Host header), HTTP/1.1 as Host: both end up in the URL.
          authority: new URL(ctx.url).host,
          requestId: ctx.requestHeader.get("x-request-id") ?? "",
        });
      },
      async *count(req, ctx) {
        const n = Math.min(req.count, 100_000);
        const padding = new Uint8Array(Math.min(req.bytes, 4 * 1024 * 1024));
        for (let i = 1; i <= n; i++) {
          if (i > 1 && req.intervalMs > 0) await sleep(Math.min(req.intervalMs, 60_000), ctx.signal);
          yield create(CountResponseSchema, { n: i, pod: id.name, padding });
        }
      },
      async *echo(reqs) {
        let n = 0;
        for await (const r of reqs) yield create(EchoResponseSchema, { text: r.text, n: ++n, pod: id.name });
      },
    });
}

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

/** The gRPC server of the hello app; close() lets calls in flight finish. */
export class HelloGrpc {
  readonly #listener: net.Server;
  readonly #h2: http2.Http2Server;
  readonly #sessions = new Set<http2.ServerHttp2Session>();
  #listening = false;
  #port = 0;
  #host: string | undefined;
  /** The port as the app's control requests open and close it (refuse, then serve). */
  readonly asListener: HelloListener = {
    listen: () => this.#open(),
    close: () => this.#stop(),
    drop: () => {
      for (const s of this.#sessions) s.destroy();
    },
  };

  /**
   * `http1`: takes the connections that do not open with the HTTP/2 preface; `fallback`: the
   * HTTP/2 requests that are not gRPC calls.
   */
  constructor(id: PodIdentity, http1: (socket: net.Socket) => void, fallback: NodeHandlerFn) {
    this.#h2 = http2.createServer(
      connectNodeAdapter({ routes: routes(id), grpc: true, connect: false, grpcWeb: false, fallback }),
    );
    this.#h2.on("session", (s) => {
      this.#sessions.add(s);
      s.once("close", () => this.#sessions.delete(s));
    });
    this.#listener = net.createServer({ noDelay: true }, (socket) => {
      let buf = Buffer.alloc(0);
      const onData = (chunk: Buffer): void => {
        buf = Buffer.concat([buf, chunk]);
        const n = Math.min(buf.length, PREFACE.length);
        const h2 = buf.subarray(0, n).equals(PREFACE.subarray(0, n));
        if (h2 && n < PREFACE.length) return;
        socket.off("data", onData);
        socket.pause();
        socket.unshift(buf);
        if (h2) this.#h2.emit("connection", socket);
        else {
          http1(socket);
          socket.resume();
        }
      };
      socket.on("data", onData);
      socket.on("error", () => socket.destroy());
    });
  }

  async listen(port: number, host?: string): Promise<AddressInfo> {
    this.#port = port;
    this.#host = host;
    await this.#open();
    return this.#listener.address() as AddressInfo;
  }

  async #open(): Promise<void> {
    if (this.#listening) return;
    this.#listening = true;
    await new Promise<void>((resolve, reject) => {
      this.#listener.once("error", reject);
      this.#listener.listen(this.#port, this.#host, () => {
        this.#listener.off("error", reject);
        resolve();
      });
    });
    // Port 0: the one it got, so listening again (after refuse) takes the same port.
    this.#port = (this.#listener.address() as AddressInfo).port;
  }

  /** Stops accepting; HTTP/2 sessions are closed gracefully (calls in flight finish). */
  async #stop(): Promise<void> {
    if (!this.#listening) return;
    this.#listening = false;
    // Resolves once every connection it accepted has closed.
    const done = new Promise<void>((resolve) => this.#listener.close(() => resolve()));
    for (const s of this.#sessions) s.close();
    await done;
  }

  async close(): Promise<void> {
    await this.#stop();
  }
}

/** The gRPC mode around an HTTP/1.1 hello app: its other connections and non-gRPC HTTP/2 requests go to `app`. */
export function helloGrpcBeside(id: PodIdentity, app: HelloApp): HelloGrpc {
  const grpc = new HelloGrpc(
    id,
    (socket) => app.serveConnection(socket),
    // Node's HTTP/2 compatibility API answers like HTTP/1.1's for what the hello app does.
    (req, res) => app.handle(req as unknown as http.IncomingMessage, res as unknown as http.ServerResponse),
  );
  // The port is this listener's: the app's own server must never try to take it too.
  app.listenThrough(grpc.asListener);
  return grpc;
}

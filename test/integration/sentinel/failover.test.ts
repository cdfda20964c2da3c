// What the sentinel does when an instance fails under a request, over real sockets and without
// Kubernetes: the Node shell (src/sentinel/server.ts) with a balancer whose table the test sets,
// and each table change handed to the shell as src/sentinel/sentinel.ts does (what left the
// table is released). Instances are real HTTP/1.1 and h2c servers on loopback.
//  - A refused connection delivered nothing: any method is tried again on another instance, with
//    its body (streamed, not buffered) delivered there intact.
//  - An instance that left the routing table and answers nothing any more (its process frozen,
//    new connections unanswered: as a pod whose sandbox died without a reset) does not hold its
//    requests until the upstream timeout: they end with a 502 naming the cause, or move to
//    another instance when that is safe (idempotent, no body, nothing of the answer sent).
//  - An instance that left the table and still answers (a pod draining, its listener closed)
//    finishes its requests: leaving the table alone never cuts them.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import { Pool } from "undici";
import { Registry } from "prom-client";
import { silentLogger } from "../../../src/base/log.js";
import { EdgeAuth } from "../../../src/sentinel/auth.js";
import { Balancer } from "../../../src/sentinel/balancer.js";
import { resolveSentinelSettings } from "../../../src/sentinel/config.js";
import { ERROR_HEADER } from "../../../src/sentinel/errors.js";
import { createSentinelMetrics, type SentinelMetrics } from "../../../src/sentinel/metrics.js";
import { RequestPath } from "../../../src/sentinel/request-path.js";
import { createNodeShell } from "../../../src/sentinel/server.js";
import type { ProxyShell } from "../../../src/sentinel/shell.js";
import type { Endpoint, UpstreamProtocol } from "../../../src/sentinel/table.js";

/** Long, so that a request ending on its own is not this timeout at work. */
const UPSTREAM_TIMEOUT_MS = 60_000;
/** How long the test waits for an answer before calling the request stuck (well under the above). */
const STUCK_MS = 20_000;

type Protocol = UpstreamProtocol;

interface Upstream {
  readonly name: string;
  readonly port: number;
  readonly protocol: Protocol;
  /** Requests that reached it: "METHOD path". */
  readonly seen: string[];
  /** Stops accepting; open connections stay (a pod draining). */
  stopListening(): void;
  close(): Promise<void>;
}

/**
 * A real instance: `/echo` answers the request body back; anything else a short text after
 * `?latency=` ms. Every answer names the instance (x-served-by).
 */
async function upstream(name: string, protocol: Protocol): Promise<Upstream> {
  const seen: string[] = [];
  const handler = (
    req: http.IncomingMessage | http2.Http2ServerRequest,
    res: http.ServerResponse | http2.Http2ServerResponse,
  ): void => {
    seen.push(`${req.method} ${req.url}`);
    const url = new URL(req.url ?? "/", "http://x");
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = url.pathname === "/echo" ? Buffer.concat(chunks) : Buffer.from(`${name}\n`);
      setTimeout(
        () => {
          res.writeHead(200, { "content-type": "application/octet-stream", "x-served-by": name });
          res.end(body);
        },
        Number(url.searchParams.get("latency") ?? 0),
      );
    });
  };
  const sockets = new Set<net.Socket>();
  const server: net.Server = protocol === "h2c" ? http2.createServer(handler) : http.createServer(handler);
  server.on("connection", (s: net.Socket) => {
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    name,
    port: (server.address() as AddressInfo).port,
    protocol,
    seen,
    stopListening: () => void server.close(),
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

/** A port nothing listens on (connection refused). */
async function refusedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

function endpoint(name: string, port: number, protocol: Protocol): Endpoint {
  // The key orders the instances (a < b < …), which the balancer's fixed draws rely on.
  const address = `10.0.0.${name.charCodeAt(0) - 96}`;
  return {
    key: `${address}:${port}`,
    address,
    port,
    dialHost: "127.0.0.1",
    deploymentId: "dep-f",
    pod: name,
    protocol,
  };
}

interface Sentinel {
  readonly pool: Pool;
  readonly port: number;
  readonly metrics: SentinelMetrics;
  /** Requests outstanding on an instance (picked and not finished). */
  outstanding(ep: Endpoint): number;
  /** Installs a table of these instances, as the sentinel does with a new routing table. */
  route(eps: Endpoint[]): void;
  close(): Promise<void>;
}

async function startSentinel(): Promise<Sentinel> {
  const { settings, problems } = resolveSentinelSettings(
    {
      environmentId: "env_f",
      region: "local",
      upstreamTimeoutMs: String(UPSTREAM_TIMEOUT_MS),
      connectTimeoutMs: "1000",
    },
    {},
  );
  assert.ok(settings, problems.join("; "));
  // Draws of 0: power of two choices takes the first instance of the table while loads are even,
  // and an instance is never ejected, so every request tries the first instance first.
  const balancer = new Balancer({
    random: () => 0,
    health: { failureThreshold: Number.MAX_SAFE_INTEGER, ejectBaseMs: 1, ejectCapMs: 1 },
  });
  const metrics = createSentinelMetrics(() => [], new Registry(), false);
  const auth = new EdgeAuth();
  const path = new RequestPath({
    balancer,
    metrics,
    log: silentLogger,
    hasTable: () => true,
    isReady: () => true,
    auth,
  });
  const shell: ProxyShell = createNodeShell({
    path,
    balancer,
    metrics,
    log: silentLogger,
    auth,
    settings,
    hasTable: () => true,
  });
  const address = await shell.listen(0, "127.0.0.1");
  const pool = new Pool(`http://127.0.0.1:${address.port}`, { connections: 16 });
  return {
    pool,
    port: address.port,
    metrics,
    outstanding: (ep) => balancer.instance(ep.key)?.outstanding ?? 0,
    route: (eps) => {
      const { removed } = balancer.setTable({
        version: 1,
        mode: "instances",
        revisions: [{ deploymentId: "dep-f", weight: null, endpoints: eps }],
      });
      shell.release(removed.map((i) => i.endpoint));
    },
    close: async () => {
      await pool.close();
      await shell.close();
    },
  };
}

interface Answer {
  readonly status: number;
  readonly servedBy: string | undefined;
  readonly cause: string | undefined;
  readonly body: Buffer;
}

async function send(s: Sentinel, method: string, path: string, body?: Buffer | (() => Readable)): Promise<Answer> {
  const res = await s.pool.request({
    method,
    path,
    headers: { host: "shop.example.com" },
    body: typeof body === "function" ? body() : body,
    headersTimeout: UPSTREAM_TIMEOUT_MS * 2,
    bodyTimeout: UPSTREAM_TIMEOUT_MS * 2,
  });
  const out = Buffer.from(await res.body.arrayBuffer());
  const served = res.headers["x-served-by"];
  const cause = res.headers[ERROR_HEADER];
  return {
    status: res.statusCode,
    servedBy: typeof served === "string" ? served : undefined,
    cause: typeof cause === "string" ? cause : undefined,
    body: out,
  };
}

/** The same over HTTP/2 with prior knowledge (a gRPC client's way), the body written in pieces. */
async function sendH2(s: Sentinel, method: string, path: string, body: Buffer): Promise<Answer> {
  const session = http2.connect(`http://127.0.0.1:${s.port}`);
  try {
    const req = session.request({ ":method": method, ":path": path, ":authority": "shop.example.com" });
    for (let o = 0; o < body.length; o += 16 * 1024) req.write(body.subarray(o, o + 16 * 1024));
    req.end();
    const headers = await new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
      req.once("response", resolve);
      req.once("error", reject);
    });
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const served = headers["x-served-by"];
    const cause = headers[ERROR_HEADER];
    return {
      status: Number(headers[":status"]),
      servedBy: typeof served === "string" ? served : undefined,
      cause: typeof cause === "string" ? cause : undefined,
      body: Buffer.concat(chunks),
    };
  } finally {
    session.close();
  }
}

/** The answer, or a failure naming the request if none came within STUCK_MS. */
async function within<T>(what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const stuck = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new Error(
            `${what}: no answer ${STUCK_MS} ms after its instance left the table (upstream timeout ${UPSTREAM_TIMEOUT_MS} ms)`,
          ),
        ),
      STUCK_MS,
    );
  });
  try {
    return await Promise.race([p, stuck]);
  } finally {
    clearTimeout(timer);
  }
}

async function metricSum(m: SentinelMetrics, name: "retries" | "upstreamConnectErrors"): Promise<number> {
  return (await m[name].get()).values.reduce((n, v) => n + v.value, 0);
}

const sha = (b: Buffer): string => createHash("sha256").update(b).digest("hex");

/** `total` bytes in `chunk`-byte pieces, as a stream (sent chunked: no length known up front). */
function streamed(total: number, chunk: number, seed: number): { bytes: Buffer; stream: () => Readable } {
  const bytes = Buffer.alloc(total);
  for (let i = 0; i < total; i++) bytes[i] = (i * 31 + seed) & 0xff;
  return {
    bytes,
    stream: () =>
      Readable.from(
        (function* () {
          for (let o = 0; o < total; o += chunk) yield bytes.subarray(o, Math.min(total, o + chunk));
        })(),
      ),
  };
}

describe("a refused connection is tried on another instance, whatever the method", () => {
  let s: Sentinel;
  const servers: Upstream[] = [];
  before(async () => {
    s = await startSentinel();
  });
  after(async () => {
    await s.close();
    for (const u of servers) await u.close();
  });

  for (const protocol of ["http1", "h2c"] as const) {
    it(`${protocol}: POST, PATCH and PUT with bodies of known and unknown length reach the other instance intact`, async () => {
      const good = await upstream("b", protocol);
      servers.push(good);
      // "a" refuses and is always tried first.
      s.route([endpoint("a", await refusedPort(), protocol), endpoint("b", good.port, protocol)]);
      const retriesBefore = await metricSum(s.metrics, "retries");
      const small = Buffer.from(JSON.stringify({ order: 42, items: ["book"] }));
      const big = streamed(1 << 20, 16 * 1024, 7);
      const cases: [string, Buffer, Buffer | (() => Readable)][] = [
        ["POST", small, small],
        ["POST", big.bytes, big.stream],
        ["PATCH", small, small],
        ["PUT", big.bytes, big.stream],
      ];
      for (const [method, expected, body] of cases) {
        const a = await send(s, method, "/echo", body);
        assert.equal(a.status, 200, `${method} ${expected.length} bytes: ${a.cause ?? a.body.toString().slice(0, 80)}`);
        assert.equal(a.servedBy, "b");
        assert.equal(a.body.length, expected.length, `${method}: every byte arrived`);
        assert.equal(sha(a.body), sha(expected), `${method}: the body arrived intact`);
      }
      // A client speaking HTTP/2 to the sentinel: its request body is a stream of the session.
      const h2 = await sendH2(s, "POST", "/echo", big.bytes);
      assert.equal(h2.status, 200, h2.cause);
      assert.equal(h2.servedBy, "b");
      assert.equal(sha(h2.body), sha(big.bytes), "HTTP/2 client: the body arrived intact");
      const methods = [...cases.map((c) => c[0]), "POST"];
      assert.equal(
        (await metricSum(s.metrics, "retries")) - retriesBefore,
        methods.length,
        "each request was refused by a first, then tried again",
      );
      assert.deepEqual(
        good.seen.filter((x) => x.endsWith("/echo")).map((x) => x.split(" ")[0]),
        methods,
        "each request reached the other instance exactly once",
      );
    });
  }

  it("when every instance refuses, a POST is answered 502 all-instances-failing (tried twice, no more)", async () => {
    s.route([endpoint("a", await refusedPort(), "http1"), endpoint("b", await refusedPort(), "http1")]);
    const connectBefore = await metricSum(s.metrics, "upstreamConnectErrors");
    const a = await send(s, "POST", "/echo", Buffer.from("x"));
    assert.equal(a.status, 502);
    assert.equal(a.cause, "all-instances-failing");
    assert.equal((await metricSum(s.metrics, "upstreamConnectErrors")) - connectBefore, 2);
  });
});

/**
 * An instance that stops answering altogether, as a pod whose sandbox died (no reset, no FIN):
 * a child process that accepts a few connections, then is frozen (SIGSTOP) with its accept
 * queue full, so its open connections get no answer and new connections get no SYN-ACK.
 */
class SilentInstance {
  readonly #child: ChildProcess;
  readonly ports: { http1: number; h2c: number };
  readonly #fillers: net.Socket[] = [];

  private constructor(child: ChildProcess, ports: { http1: number; h2c: number }) {
    this.#child = child;
    this.ports = ports;
  }

  static async start(): Promise<SilentInstance> {
    // Backlog 1: once frozen, two connections fill its accept queue and further SYNs are dropped.
    const script = `
      const http = require("node:http"), http2 = require("node:http2");
      const answer = (req, res) => { req.resume(); req.on("end", () => setTimeout(() => { res.writeHead(200, { "x-served-by": "silent" }); res.end("warm"); }, 200)); };
      const h1 = http.createServer(answer), h2 = http2.createServer(answer);
      let n = 0;
      const up = () => { if (++n === 2) process.stdout.write(JSON.stringify({ http1: h1.address().port, h2c: h2.address().port }) + "\\n"); };
      h1.listen({ port: 0, host: "127.0.0.1", backlog: 1 }, up);
      h2.listen({ port: 0, host: "127.0.0.1", backlog: 1 }, up);`;
    const child = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] });
    const line = await new Promise<string>((resolve, reject) => {
      let out = "";
      child.stdout?.setEncoding("utf8").on("data", (c: string) => {
        out += c;
        if (out.includes("\n")) resolve(out.trim());
      });
      child.once("exit", (code) => reject(new Error(`the silent instance exited (${code})`)));
    });
    return new SilentInstance(child, JSON.parse(line) as { http1: number; h2c: number });
  }

  /** Frozen: nothing it holds is answered, and connecting to it hangs. */
  async freeze(): Promise<void> {
    this.#child.kill("SIGSTOP");
    for (const port of [this.ports.http1, this.ports.h2c]) {
      // Connections queue until its accept queue is full; the first that hangs shows it is.
      for (let i = 0; ; i++) {
        assert.ok(i < 16, "the accept queue never filled up");
        const s = net.connect(port, "127.0.0.1");
        this.#fillers.push(s);
        s.on("error", () => undefined);
        const connected = await new Promise<boolean>((resolve) => {
          // A dropped SYN is sent again after 1 s; an answer already here is read before this resolves.
          const t = setTimeout(() => setImmediate(() => resolve(false)), 1000);
          s.once("connect", () => {
            clearTimeout(t);
            resolve(true);
          });
        });
        if (!connected) break;
      }
    }
  }

  close(): void {
    for (const s of this.#fillers) s.destroy();
    this.#child.kill("SIGKILL");
  }
}

describe("an instance that left the routing table", () => {
  let s: Sentinel;
  before(async () => {
    s = await startSentinel();
  });
  after(async () => {
    await s.close();
  });

  for (const protocol of ["http1", "h2c"] as const) {
    it(`${protocol}: and answers nothing any more: its requests end at once (502 instance-gone), a GET moves to another instance`, async () => {
      const silent = await SilentInstance.start();
      const other = await upstream("b", protocol);
      try {
        const gone = endpoint("a", silent.ports[protocol], protocol);
        s.route([gone]);
        // Connections to it first, kept alive for the requests below (two: one per request).
        const warm = await Promise.all([send(s, "GET", "/warm"), send(s, "GET", "/warm")]);
        assert.deepEqual(
          warm.map((w) => w.servedBy),
          ["silent", "silent"],
        );
        await silent.freeze();
        const post = send(s, "POST", "/echo", Buffer.from("an order"));
        const get = send(s, "GET", "/report");
        // Both are on their way to the frozen instance when it leaves the table.
        const deadline = Date.now() + 10_000;
        while (s.outstanding(gone) < 2) {
          assert.ok(Date.now() < deadline, "the requests never went to the instance");
          await new Promise((r) => setTimeout(r, 5));
        }
        s.route([endpoint("b", other.port, protocol)]);
        const [p, g] = await within("POST and GET", Promise.all([post, get]));
        assert.equal(p.status, 502, p.body.toString());
        assert.equal(p.cause, "instance-gone", "a POST may have arrived: answered, naming why");
        assert.match(p.body.toString(), /left the routing table/);
        assert.equal(g.status, 200, g.cause);
        assert.equal(g.servedBy, "b", "a GET with nothing answered yet moves to another instance");
        assert.deepEqual(other.seen, ["GET /report"], "the POST was not sent again");
      } finally {
        silent.close();
        await other.close();
      }
    });
  }

  it("and still answers (draining, its listener closed): its requests finish, bodies intact", async () => {
    const draining = await upstream("a", "http1");
    const other = await upstream("b", "http1");
    try {
      s.route([endpoint("a", draining.port, "http1")]);
      const body = streamed(256 * 1024, 8 * 1024, 3);
      const post = send(s, "POST", "/echo?latency=2500", body.stream);
      const get = send(s, "GET", "/slow?latency=2500");
      const deadline = Date.now() + 10_000;
      while (draining.seen.length < 2) {
        assert.ok(Date.now() < deadline, "the requests never reached the instance");
        await new Promise((r) => setTimeout(r, 10));
      }
      // The pod is going away: it left the table and stopped listening, and finishes what it has.
      draining.stopListening();
      s.route([endpoint("b", other.port, "http1")]);
      const [p, g] = await within("POST and GET", Promise.all([post, get]));
      assert.equal(p.status, 200, p.cause);
      assert.equal(p.servedBy, "a");
      assert.equal(sha(p.body), sha(body.bytes));
      assert.equal(g.status, 200, g.cause);
      assert.equal(g.servedBy, "a");
      assert.deepEqual(other.seen, [], "nothing was sent again elsewhere");
    } finally {
      await draining.close();
      await other.close();
    }
  });
});

// The sentinel's HTTP/2 upstreams over real sockets, without Kubernetes: the Node shell
// (src/sentinel/server.ts) routes by a table built from an EndpointSlice whose port says
// appProtocol kubernetes.io/h2c (src/sentinel/table.ts) to the hello app's gRPC mode (a real
// connect-node gRPC server on h2c, HTTP/1.1 beside it), and a standard gRPC client
// (connect-node's gRPC transport over HTTP/2) calls through it. The same calls against a
// container on a real node, through the whole of krane, are in test/integration/grpc.test.ts.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import * as http from "node:http";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { Registry } from "prom-client";
import { WebSocket } from "ws";
import { silentLogger } from "../../../src/base/log.js";
import { LABEL_DEPLOYMENT_ID } from "../../../src/contracts/labels.js";
import { APP_PROTOCOL_H2C } from "../../../src/contracts/protocols.js";
import { defaultRoutingPolicy, ROUTING_PORT_NAME } from "../../../src/contracts/routing.js";
import { EchoRequestSchema, HelloService } from "../../../src/gen/krane/hello/v1/hello_pb.js";
import { helloGrpcBeside, type HelloGrpc } from "../../../src/cluster/workload/hello-grpc.js";
import { DEFAULT_SETTINGS, HelloApp } from "../../../src/cluster/workload/hello.js";
import { EdgeAuth } from "../../../src/sentinel/auth.js";
import { Balancer } from "../../../src/sentinel/balancer.js";
import { resolveSentinelSettings } from "../../../src/sentinel/config.js";
import { createSentinelMetrics } from "../../../src/sentinel/metrics.js";
import { RequestPath } from "../../../src/sentinel/request-path.js";
import { createNodeShell } from "../../../src/sentinel/server.js";
import type { ProxyShell } from "../../../src/sentinel/shell.js";
import { buildTable } from "../../../src/sentinel/table.js";
import type { KubeObject } from "../../../src/kube/object.js";

const UPSTREAM_TIMEOUT_MS = 1_500;
let app: HelloApp;
let grpc: HelloGrpc;
let appPort: number;
let shell: ProxyShell;
let sentinel: AddressInfo;
let balancer: Balancer;
let client: Client<typeof HelloService>;

function slice(port: number, appProtocol: string | undefined): KubeObject {
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: { name: "s", namespace: "sentinel", labels: { [LABEL_DEPLOYMENT_ID]: "dep-g" } },
    addressType: "IPv4",
    ports: [{ name: ROUTING_PORT_NAME, port, protocol: "TCP", ...(appProtocol ? { appProtocol } : {}) }],
    endpoints: [{ addresses: ["127.0.0.1"], conditions: { ready: true }, targetRef: { name: "grpc-0" } }],
  } as KubeObject;
}

function route(port: number, appProtocol: string | undefined = APP_PROTOCOL_H2C): void {
  const { table, problems } = buildTable([slice(port, appProtocol)], defaultRoutingPolicy("env_g"));
  assert.deepEqual(problems, []);
  balancer.setTable(table);
}

before(async () => {
  const id = {
    name: "grpc-0",
    namespace: "ns",
    revision: "dep-g",
    image: "hello",
    node: "n",
    podIp: "127.0.0.1",
    port: 0,
  };
  app = new HelloApp(id, DEFAULT_SETTINGS, { host: "127.0.0.1" });
  grpc = helloGrpcBeside(id, app);
  appPort = (await grpc.listen(0, "127.0.0.1")).port;
  const { settings, problems } = resolveSentinelSettings(
    {
      environmentId: "env_g",
      region: "local",
      upstreamTimeoutMs: String(UPSTREAM_TIMEOUT_MS),
      connectTimeoutMs: "1000",
    },
    {},
  );
  assert.ok(settings, problems.join("; "));
  balancer = new Balancer();
  route(appPort);
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
  shell = createNodeShell({ path, balancer, metrics, log: silentLogger, auth, settings, hasTable: () => true });
  sentinel = await shell.listen(0, "127.0.0.1");
  client = createClient(HelloService, createGrpcTransport({ baseUrl: `http://127.0.0.1:${sentinel.port}` }));
});

after(async () => {
  await shell.close();
  await grpc.close();
});

test("a unary call reaches the h2c instance through the sentinel, with the sentinel's forwarding headers", async () => {
  const headers = new Headers();
  const res = await client.say({ text: "hi" }, { onHeader: (h) => h.forEach((v, k) => headers.set(k, v)) });
  assert.equal(res.text, "hi");
  assert.equal(res.pod, "grpc-0");
  assert.equal(res.authority, `127.0.0.1:${sentinel.port}`, "the client's :authority reached the app");
  assert.match(res.requestId, /.+/, "the sentinel's request id reached the app");
  assert.equal(headers.get("x-request-id"), res.requestId);
});

test("an app's gRPC error reaches the client with its status and message (trailers-only answer kept)", async () => {
  await assert.rejects(client.say({ text: "no such book", failCode: Code.NotFound }), (err: unknown) => {
    assert.ok(err instanceof ConnectError);
    assert.equal(err.code, Code.NotFound);
    assert.equal(err.rawMessage, "no such book");
    return true;
  });
});

test("a server stream arrives whole and in order through a slow reader, with its trailers", async () => {
  const seen: number[] = [];
  let bytes = 0;
  for await (const m of client.count({ count: 40, bytes: 64 * 1024 })) {
    seen.push(m.n);
    bytes += m.padding.length;
    // A slow client: the sentinel must hold the instance back, not drop what it buffered.
    if (m.n % 10 === 0) await new Promise((r) => setTimeout(r, 50));
  }
  assert.deepEqual(
    seen,
    Array.from({ length: 40 }, (_, i) => i + 1),
  );
  assert.equal(bytes, 40 * 64 * 1024);
});

test("a bidirectional stream interleaves: each answer arrives before the next request is sent", async () => {
  let send: ((text: string) => void) | undefined;
  let end: (() => void) | undefined;
  async function* requests() {
    for (;;) {
      const text = await new Promise<string | undefined>((resolve) => {
        send = resolve;
        end = () => resolve(undefined);
      });
      if (text === undefined) return;
      yield create(EchoRequestSchema, { text });
    }
  }
  const answers = client.echo(requests())[Symbol.asyncIterator]();
  for (let i = 1; i <= 5; i++) {
    // Wait for the generator to ask for the next request.
    while (!send) await new Promise((r) => setTimeout(r, 5));
    const s = send;
    send = undefined;
    s(`m${i}`);
    const next = await answers.next();
    assert.equal(next.done, false);
    assert.equal(next.value?.text, `m${i}`);
    assert.equal(next.value?.n, i);
  }
  while (!end) await new Promise((r) => setTimeout(r, 5));
  end();
  assert.equal((await answers.next()).done, true);
});

test("a client's deadline is exceeded as DEADLINE_EXCEEDED, and the connection serves the next call", async () => {
  const started = Date.now();
  await assert.rejects(client.say({ text: "slow", delayMs: 10_000 }, { timeoutMs: 300 }), (err: unknown) => {
    assert.ok(err instanceof ConnectError);
    assert.equal(err.code, Code.DeadlineExceeded);
    return true;
  });
  assert.ok(Date.now() - started < 5_000);
  // The sentinel still serves the next call on the same connection.
  assert.equal((await client.say({ text: "after" })).text, "after");
});

test("an instance slower than the sentinel's upstream timeout: DEADLINE_EXCEEDED from the sentinel, named", async () => {
  const headers = new Headers();
  await assert.rejects(
    client.say(
      { text: "slower", delayMs: UPSTREAM_TIMEOUT_MS + 3_000 },
      { onHeader: (h) => h.forEach((v, k) => headers.set(k, v)) },
    ),
    (err: unknown) => {
      assert.ok(err instanceof ConnectError);
      assert.equal(err.code, Code.DeadlineExceeded);
      assert.match(err.rawMessage, /krane sentinel: the instance did not answer in time/);
      assert.equal(err.metadata.get("x-krane-sentinel-error"), "upstream-timeout");
      return true;
    },
  );
});

test("no instance answering: UNAVAILABLE from the sentinel as a trailers-only answer, never a text body", async () => {
  const closed = http2.createServer();
  await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
  const deadPort = (closed.address() as AddressInfo).port;
  await new Promise<void>((r) => closed.close(() => r()));
  route(deadPort);
  try {
    await assert.rejects(client.say({ text: "x" }), (err: unknown) => {
      assert.ok(err instanceof ConnectError);
      assert.equal(err.code, Code.Unavailable);
      assert.match(err.rawMessage, /krane sentinel/);
      return true;
    });
    // What a gRPC client receives on the wire: :status 200, grpc-status in the one header block
    // that ends the stream, no body.
    const session = http2.connect(`http://127.0.0.1:${sentinel.port}`);
    try {
      const s = session.request(
        {
          ":method": "POST",
          ":path": "/krane.hello.v1.HelloService/Say",
          "content-type": "application/grpc",
          te: "trailers",
        },
        { endStream: true },
      );
      const [headers, flags] = await new Promise<[http2.IncomingHttpHeaders, number]>((resolve) =>
        s.once("response", (h, f) => resolve([h, f])),
      );
      let body = 0;
      s.on("data", (c: Buffer) => (body += c.length));
      await new Promise((r) => s.once("close", r));
      assert.equal(headers[":status"], 200);
      assert.equal(headers["grpc-status"], "14");
      assert.equal(headers["content-type"], "application/grpc");
      assert.ok((flags & http2.constants.NGHTTP2_FLAG_END_STREAM) !== 0, "the header block ends the stream");
      assert.equal(body, 0);
    } finally {
      session.close();
    }
  } finally {
    route(appPort);
  }
});

test("HTTP/1.1 and a WebSocket reach the same instance through the same sentinel", async () => {
  const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = http.get(
      { host: "127.0.0.1", port: sentinel.port, path: "/hello?x=1", headers: { host: "shop.example.com" } },
      (res) => {
        let t = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (t += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text: t }));
      },
    );
    req.on("error", reject);
  });
  assert.equal(status, 200);
  const body = JSON.parse(text) as { pod: string; path: string; forwardedHost: string | null };
  assert.equal(body.pod, "grpc-0");
  assert.equal(body.path, "/hello?x=1");
  assert.equal(body.forwardedHost, "shop.example.com");

  const ws = new WebSocket(`ws://127.0.0.1:${sentinel.port}/ws`);
  const messages: string[] = [];
  ws.on("message", (m: Buffer) => messages.push(m.toString()));
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  ws.send("echo me");
  const deadline = Date.now() + 5_000;
  while (!messages.includes("echo me") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  ws.close();
  assert.ok(messages.includes("echo me"), `the WebSocket echoed (got ${JSON.stringify(messages)})`);
});

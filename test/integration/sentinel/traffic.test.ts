// krane's sentinel on the real local cluster: a sentinel pod (the stand-in runs a real `krane
// sentinel` process as the krane-sentinel ServiceAccount of deploy/rbac/sentinel.yaml) routes to
// user pods served by stand-ins, reading EndpointSlices and a policy ConfigMap written as the
// routing contract says the agent writes them.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import * as http2 from "node:http2";
import { WebSocket } from "ws";
import type { Pool } from "undici";
import { SENTINEL_PORT } from "../../../src/contracts/cluster.js";
import { SENTINEL_METRICS, SENTINEL_OPS_PORT } from "../../../src/contracts/routing.js";
import { STANDIN_ANNOTATION, type StandinAnswer } from "../../../src/cluster/standin/app.js";
import { KubeApiError, type KubeClient } from "../../../src/kube/client.js";
import { resources } from "../../../src/kube/resources.js";
import { sentinelKubeConfigFrom } from "../../../src/sentinel/rbac.js";
import { KubeClient as Client } from "../../../src/kube/client.js";
import { eventually, useCluster } from "../../support/cluster.js";
import {
  annotatePod,
  countBy,
  createAppPod,
  createSentinelPod,
  getJson,
  hit,
  hitMany,
  kubeFor,
  metricValue,
  proxyClient,
  rawExchange,
  RoutingWriter,
  sentinelMetrics,
  sentinelStatus,
  type PodRef,
  prepareAppNamespace,
} from "./support.js";

const h = useCluster({ standins: true });
const ENV = "env_traffic";
let kube: KubeClient;
let routes: RoutingWriter;
let sentinel: PodRef;
let pool: Pool;
const a: PodRef[] = [];

before(
  async () => {
    const cluster = await h.ready();
    kube = kubeFor(cluster);
    routes = new RoutingWriter(kube, ENV);
    await prepareAppNamespace(cluster, kube);
    a.push(...(await Promise.all(["a-1", "a-2", "a-3"].map((n) => createAppPod(cluster, kube, n, "dep-a")))));
    await routes.policy(1, "instances", [{ deploymentId: "dep-a", weight: 100 }]);
    await routes.slice(
      "dep-a",
      a.map((p) => ({ ip: p.ip, pod: p.name })),
    );
    sentinel = await createSentinelPod(cluster, kube, "snt-traffic-1", ENV, {
      KRANE_SENTINEL_HEADER_TIMEOUT_MS: "1500",
      KRANE_SENTINEL_UPSTREAM_TIMEOUT_MS: "1500",
    });
    pool = proxyClient(sentinel);
  },
  { timeout: 10 * 60_000 },
);

after(async () => {
  await pool?.close();
  kube?.close();
});

async function waitStatus(
  what: string,
  check: (s: Awaited<ReturnType<typeof sentinelStatus>>) => boolean,
): Promise<void> {
  await eventually(what, async () => (check(await sentinelStatus(sentinel)) ? true : undefined), 20_000);
}

test("the sentinel's role reads the routing table in namespace sentinel and nothing else", async () => {
  const kc = await sentinelKubeConfigFrom(h.cluster.kubeConfig());
  const asSentinel = new Client(kc);
  try {
    const slices = await asSentinel.list(resources.endpointSlices, { namespace: "sentinel" });
    assert.ok(slices.items.length >= 1);
    await asSentinel.list(resources.configMaps, { namespace: "sentinel" });
    for (const attempt of [
      () => asSentinel.list(resources.configMaps, { namespace: "default" }),
      () => asSentinel.list(resources.pods, { namespace: "sentinel" }),
      () => asSentinel.list(resources.endpointSlices, {}),
      () => asSentinel.apply(resources.configMaps, { metadata: { name: "x", namespace: "sentinel" }, data: {} }),
    ]) {
      await assert.rejects(attempt, (err: unknown) => err instanceof KubeApiError && err.status === 403);
    }
  } finally {
    asSentinel.close();
  }
});

test("traffic reaches every instance, with forwarding headers and a request id", async () => {
  const hits = await hitMany(pool, 300, 12);
  assert.deepEqual(
    hits.filter((x) => x.status !== 200),
    [],
  );
  const byPod = countBy(hits, (x) => x.answer?.pod ?? "?");
  assert.deepEqual([...byPod.keys()].sort(), ["a-1", "a-2", "a-3"]);
  for (const n of byPod.values()) assert.ok(n > 50, `each instance gets a fair share: ${[...byPod]}`);
  const one = hits[0]?.answer as StandinAnswer;
  assert.equal(one.revision, "dep-a");
  assert.equal(one.image, "registry.example.com/shop:dep-a");
  assert.equal(one.host, "shop.example.com", "Host is passed through");
  assert.equal(one.forwardedHost, "shop.example.com");
  assert.equal(one.forwardedProto, "http");
  assert.match(one.forwardedFor ?? "", /^127\.0\.0\.1$/);
  assert.match(one.requestId ?? "", /^[0-9a-f-]{36}$/, "a generated request id");
  assert.equal(hits[0]?.headers["x-request-id"], one.requestId, "and the client gets it back");
  const kept = await hit(pool, "/", { "x-request-id": "trace-123", "x-forwarded-for": "203.0.113.7" });
  assert.equal(kept.answer?.requestId, "trace-123");
  assert.equal(kept.answer?.forwardedFor, "203.0.113.7, 127.0.0.1");
  const replaced = await hit(pool, "/", { "x-request-id": "bad id with spaces" });
  assert.match(replaced.answer?.requestId ?? "", /^[0-9a-f-]{36}$/);
  const status = await sentinelStatus(sentinel);
  assert.equal(status.ready, true);
  assert.equal(status.routingVersion, 1);
  assert.equal(status.kubeConnected, true);
  assert.deepEqual(
    status.revisions.map((r) => [r.deploymentId, r.endpoints, r.routable, r.share]),
    [["dep-a", 3, 3, 100]],
  );
  const metrics = await sentinelMetrics(sentinel);
  assert.ok(metricValue(metrics, SENTINEL_METRICS.requests, { revision: "dep-a", code: "2xx" }) >= 300);
  assert.equal(metricValue(metrics, SENTINEL_METRICS.routingVersion), 1);
  assert.ok(metricValue(metrics, `${SENTINEL_METRICS.duration}_count`, { revision: "dep-a" }) >= 300);
});

test("a new instance in the slice receives traffic; a removed one receives none", async () => {
  const a4 = await createAppPod(h.cluster, kube, "a-4", "dep-a");
  a.push(a4);
  await routes.slice(
    "dep-a",
    a.map((p) => ({ ip: p.ip, pod: p.name })),
  );
  await eventually(
    "a-4 to get traffic",
    async () => ((await hit(pool)).answer?.pod === "a-4" ? true : undefined),
    10_000,
  );
  // An endpoint marked not ready is not routed either.
  await routes.slice(
    "dep-a",
    a.filter((p) => p.name !== "a-2").map((p) => ({ ip: p.ip, pod: p.name, ready: p.name !== "a-1" })),
  );
  await waitStatus("2 routable endpoints", (s) => s.revisions[0]?.endpoints === 2);
  const hits = await hitMany(pool, 300, 12);
  assert.deepEqual(
    hits.filter((x) => x.status !== 200),
    [],
  );
  assert.deepEqual([...countBy(hits, (x) => x.answer?.pod ?? "?").keys()].sort(), ["a-3", "a-4"]);
  await routes.slice(
    "dep-a",
    a.map((p) => ({ ip: p.ip, pod: p.name })),
  );
  await waitStatus("4 endpoints again", (s) => s.revisions[0]?.endpoints === 4);
});

test("an instance that refuses connections is ejected and requests still succeed", async () => {
  const before = await sentinelMetrics(sentinel);
  await annotatePod(kube, "a-3", { [STANDIN_ANNOTATION.mode]: "refuse" });
  await eventually("a-3 to refuse connections", async () => {
    const r = await getJson(`http://${a[2]?.local}:8080/`).catch((err: unknown) => ({ status: -1, err }));
    return r.status === -1 ? true : undefined;
  });
  // An idempotent request with a body is retried too (nothing was read before the connect failed).
  const puts = await Promise.all(
    Array.from({ length: 24 }, async (_, i) => {
      const body = Buffer.alloc(20_000 + i, i);
      const res = await pool.request({ method: "PUT", path: "/echo", headers: { host: "x" }, body });
      const back = Buffer.from(await res.body.arrayBuffer());
      return res.statusCode === 200 && back.equals(body);
    }),
  );
  assert.deepEqual(puts.filter((ok) => !ok).length, 0, "every PUT was answered by a serving instance, body intact");
  const hits = await hitMany(pool, 400, 12);
  assert.deepEqual(
    hits.filter((x) => x.status !== 200).map((x) => x.status),
    [],
    "no request fails: a failed connect is retried elsewhere",
  );
  assert.equal(hits.filter((x) => x.answer?.pod === "a-3").length, 0);
  const after = await sentinelMetrics(sentinel);
  assert.ok(
    metricValue(after, SENTINEL_METRICS.ejections) > metricValue(before, SENTINEL_METRICS.ejections),
    "an ejection was counted",
  );
  assert.ok(
    metricValue(after, SENTINEL_METRICS.upstreamConnectErrors) >
      metricValue(before, SENTINEL_METRICS.upstreamConnectErrors),
  );
  // While ejected it is not even tried; /status says so.
  const s = await sentinelStatus(sentinel);
  assert.equal(s.revisions[0]?.ejected, 1);
  // Resets count too: a-3 accepts and resets every connection.
  await annotatePod(kube, "a-3", { [STANDIN_ANNOTATION.mode]: "reset" });
  await new Promise((r) => setTimeout(r, 1000));
  const hits2 = await hitMany(pool, 300, 12);
  assert.deepEqual(
    hits2.filter((x) => x.status !== 200).map((x) => x.status),
    [],
  );
  // Healthy again: after its ejection ends it takes traffic again.
  await annotatePod(kube, "a-3", { [STANDIN_ANNOTATION.mode]: "serve" });
  await eventually(
    "a-3 to be back in rotation",
    async () => ((await hit(pool)).answer?.pod === "a-3" ? true : undefined),
    40_000,
  );
});

test("weights split traffic within ±2 points over 10,000 requests", async () => {
  const cluster = h.cluster;
  const b = await Promise.all(["b-1", "b-2"].map((n) => createAppPod(cluster, kube, n, "dep-b")));
  await routes.slice(
    "dep-b",
    b.map((p) => ({ ip: p.ip, pod: p.name })),
  );
  await routes.policy(2, "weighted", [
    { deploymentId: "dep-a", weight: 70 },
    { deploymentId: "dep-b", weight: 30 },
  ]);
  await waitStatus(
    "policy version 2 with both revisions",
    (s) => s.routingVersion === 2 && s.mode === "weighted" && s.revisions.length === 2,
  );
  const hits = await hitMany(pool, 10_000, 24);
  assert.deepEqual(hits.filter((x) => x.status !== 200).length, 0);
  const byRevision = countBy(hits, (x) => x.answer?.revision ?? "?");
  const pctB = ((byRevision.get("dep-b") ?? 0) / 10_000) * 100;
  assert.ok(Math.abs(pctB - 30) <= 2, `dep-b got ${pctB}% (weight 30)`);
  assert.ok(Math.abs(100 - pctB - 70) <= 2);
  const metrics = await sentinelMetrics(sentinel);
  assert.ok(
    metricValue(metrics, SENTINEL_METRICS.requests, { revision: "dep-b", code: "2xx" }) >= 2_500,
    "requests are counted per revision",
  );
  // A revision without instances hands its weight to the others.
  await routes.slice("dep-b", []);
  await waitStatus(
    "dep-b without endpoints",
    (s) => s.revisions.find((r) => r.deploymentId === "dep-b")?.endpoints === 0,
  );
  const rest = await hitMany(pool, 200, 12);
  assert.deepEqual([...countBy(rest, (x) => `${x.status} ${x.answer?.revision}`)], [["200 dep-a", 200]]);
  await routes.policy(3, "instances", [{ deploymentId: "dep-a", weight: 100 }]);
  await routes.deleteSlice("dep-b");
  await waitStatus("policy 3", (s) => s.routingVersion === 3 && s.revisions.length === 1);
});

test("malformed requests get a 4xx or a closed connection; the sentinel keeps serving", async () => {
  const host = sentinel.local;
  const port = SENTINEL_PORT;
  const garbage = await rawExchange(host, port, ["HELLO THERE\r\n\r\n"]);
  assert.match(garbage.text, /^HTTP\/1\.1 400 /);
  assert.ok(garbage.closed);
  const huge = await rawExchange(host, port, [`GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(40_000)}\r\n\r\n`]);
  assert.match(huge.text, /^HTTP\/1\.1 431 /);
  const badHost = await rawExchange(host, port, ["GET / HTTP/1.1\r\nHost: bad host\r\n\r\n"]);
  assert.match(badHost.text, /^HTTP\/1\.1 400 /);
  const noHost = await rawExchange(host, port, ["GET / HTTP/1.1\r\n\r\n"]);
  assert.match(noHost.text, /^HTTP\/1\.1 400 /);
  const badTarget = await rawExchange(host, port, ["GET nothing HTTP/1.1\r\nHost: x\r\n\r\n"]);
  assert.match(badTarget.text, /^HTTP\/1\.1 400 /);
  const badLength = await rawExchange(host, port, [
    "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
  ]);
  assert.match(badLength.text, /^HTTP\/1\.1 400 /);
  // Slowloris: headers trickle in more slowly than the 1.5 s header timeout allows.
  const slow = rawExchange(
    host,
    port,
    ["GET / HTTP/1.1\r\n", "Host: x\r\n", "X-A: 1\r\n", "X-B: 2\r\n", "X-C: 3\r\n", "X-D: 4\r\n", "\r\n"],
    10_000,
    700,
  );
  const idle = rawExchange(host, port, [], 10_000);
  // Meanwhile others are served.
  const during = await hitMany(pool, 50, 5);
  assert.deepEqual(
    during.filter((x) => x.status !== 200),
    [],
  );
  const [s, i] = await Promise.all([slow, idle]);
  assert.ok(s.closed && !/ 200 /.test(s.text), `the slow client was cut off: ${s.text.slice(0, 40)}`);
  assert.ok(i.closed, "an idle connection that never sends a request is closed");
  const ok = await hit(pool);
  assert.equal(ok.status, 200);
  const metrics = await sentinelMetrics(sentinel);
  assert.ok(metricValue(metrics, "krane_sentinel_client_errors_total") >= 6);
});

test("upstream timeouts answer 504 naming the cause; bodies stream both ways", async () => {
  const t0 = Date.now();
  const slow = await hit(pool, "/?latency=4000");
  assert.equal(slow.status, 504);
  assert.equal(slow.headers["x-krane-sentinel-error"], "upstream-timeout");
  assert.ok(Date.now() - t0 < 3500, "answered at the 1.5 s upstream timeout");
  // A 4 MiB upload is echoed back through the proxy, streamed.
  const body = Buffer.alloc(4 << 20, 7);
  const res = await pool.request({
    method: "POST",
    path: "/echo",
    headers: { host: "x", "content-type": "application/octet-stream" },
    body,
  });
  const echoed = Buffer.from(await res.body.arrayBuffer());
  assert.equal(res.statusCode, 200);
  assert.equal(echoed.length, body.length);
  assert.ok(echoed.equals(body));
  // A response streamed in 20 chunks 50 ms apart arrives piece by piece, not buffered.
  const streamed = await pool.request({
    method: "GET",
    path: "/?bytes=200000&chunks=20&interval=50",
    headers: { host: "x" },
  });
  const arrivals: number[] = [];
  let total = 0;
  const s0 = Date.now();
  for await (const chunk of streamed.body) {
    total += (chunk as Buffer).length;
    arrivals.push(Date.now() - s0);
  }
  assert.equal(total, 200_000);
  assert.ok((arrivals[0] ?? 1e9) < 500, `the first bytes arrive before the last are sent (${arrivals[0]} ms)`);
  assert.ok((arrivals.at(-1) ?? 0) >= 800);
  // An app's own 5xx is passed through and counted as such, not as the sentinel's.
  const appError = await hit(pool, "/?status=503");
  assert.equal(appError.status, 503);
  assert.equal(appError.headers["x-krane-sentinel-error"], undefined);
});

test("WebSocket and h2c through the proxy", async () => {
  const ws = new WebSocket(`ws://${sentinel.local}:${SENTINEL_PORT}/socket`, { headers: { host: "ws.example.com" } });
  const messages: string[] = [];
  const opened = new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
  });
  ws.on("message", (d) => messages.push(String(d)));
  await opened;
  await eventually("the identity message", async () => (messages.length >= 1 ? true : undefined), 5_000);
  const who = JSON.parse(messages[0] ?? "{}") as StandinAnswer;
  assert.equal(who.revision, "dep-a");
  assert.equal(who.forwardedHost, "ws.example.com");
  ws.send("ping-1");
  ws.send(Buffer.alloc(100_000, 1));
  await eventually("the echoes", async () => (messages.length >= 3 ? true : undefined), 5_000);
  assert.equal(messages[1], "ping-1");
  assert.equal(messages[2]?.length, 100_000);
  ws.close();
  // A handshake the app refuses is relayed as it came (not a 502).
  const refused = await rawExchange(sentinel.local, SENTINEL_PORT, [
    "GET /?status=404 HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: something-else\r\n\r\n",
  ]);
  assert.match(refused.text, /^HTTP\/1\.1 (4\d\d|200) /);

  const session = http2.connect(`http://${sentinel.local}:${SENTINEL_PORT}`);
  try {
    const answers = await Promise.all(
      Array.from(
        { length: 20 },
        () =>
          new Promise<{ status: number; body: string }>((resolve, reject) => {
            const req = session.request({ ":path": "/h2?x=1", ":authority": "h2.example.com" });
            let status = 0;
            let body = "";
            req.on("response", (hd) => (status = Number(hd[":status"])));
            req.setEncoding("utf8");
            req.on("data", (c: string) => (body += c));
            req.on("end", () => resolve({ status, body }));
            req.on("error", reject);
            req.end();
          }),
      ),
    );
    for (const x of answers) {
      assert.equal(x.status, 200);
      const ans = JSON.parse(x.body) as StandinAnswer;
      assert.equal(ans.forwardedHost, "h2.example.com");
      assert.equal(ans.host, "h2.example.com");
      assert.equal(ans.path, "/h2?x=1");
    }
    assert.ok(
      new Set(answers.map((x) => (JSON.parse(x.body) as StandinAnswer).pod)).size >= 2,
      "h2 streams are balanced too",
    );
  } finally {
    session.close();
  }
});

test("no instance → 503 naming the cause; /readyz and /healthz on the ops port", async () => {
  await routes.slice("dep-a", []);
  await eventually("no endpoints", async () =>
    (await sentinelStatus(sentinel)).revisions[0]?.endpoints === 0 ? true : undefined,
  );
  const r = await hit(pool);
  assert.equal(r.status, 503);
  assert.equal(r.headers["x-krane-sentinel-error"], "no-instance");
  assert.match(r.headers["x-request-id"] as string, /^[0-9a-f-]{36}$/);
  assert.equal(
    (await getJson(`http://${sentinel.local}:${SENTINEL_OPS_PORT}/readyz`)).status,
    200,
    "no instance is not a sentinel problem",
  );
  assert.equal((await getJson(`http://${sentinel.local}:${SENTINEL_OPS_PORT}/healthz`)).status, 200);
  assert.equal(
    (await getJson(`http://${sentinel.local}:${SENTINEL_PORT}/_krane/ready`)).status,
    200,
    "the probe path on the proxy port",
  );
  await routes.slice(
    "dep-a",
    a.map((p) => ({ ip: p.ip, pod: p.name })),
  );
  await eventually("traffic again", async () => ((await hit(pool)).status === 200 ? true : undefined));
});

test("/status gives the requests in flight per revision and when the last request came (what the autoscaler reads)", async () => {
  const before = await sentinelStatus(sentinel);
  assert.equal(before.revisions.find((r) => r.deploymentId === "dep-a")?.inFlight, 0);
  const t0 = Date.now();
  const open = Promise.all(Array.from({ length: 5 }, () => hit(pool, "/?latency=1200")));
  await waitStatus(
    "5 requests in flight on dep-a",
    (s) => s.revisions.find((r) => r.deploymentId === "dep-a")?.inFlight === 5,
  );
  const answers = await open;
  assert.deepEqual(
    answers.map((x) => x.status),
    [200, 200, 200, 200, 200],
  );
  const after = await sentinelStatus(sentinel);
  assert.equal(
    after.revisions.find((r) => r.deploymentId === "dep-a")?.inFlight,
    0,
    "finished requests leave the count",
  );
  assert.ok(after.lastRequestAt, "a last request time");
  const last = Date.parse(after.lastRequestAt);
  // The sentinel's pod clock is this machine's: the last request began after t0 (1 s of slack
  // for the conversion from the monotonic clock) and before now.
  assert.ok(last >= t0 - 1000 && last <= Date.now() + 1000, `${after.lastRequestAt} vs ${new Date(t0).toISOString()}`);
});

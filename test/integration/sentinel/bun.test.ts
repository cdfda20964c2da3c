// krane's sentinel on Bun (`bun bin/krane.js sentinel`: the Bun.serve shell of
// src/sentinel/bun-server.ts around the same request path as on Node), on the real local
// cluster: the sentinel runs as its own process with the krane-sentinel ServiceAccount and routes
// to user pods served by stand-ins, reading the routing table the agent would write. The image
// runs the sentinel on Node (docs/scaling.md); this keeps the Bun shell honest. What Bun.serve
// cannot do (a deadline for the request head, counting the requests its parser refuses) is not
// tested here: the Node sentinel's suites test it, and docs/scaling.md says Bun lacks it.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as http2 from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Pool } from "undici";
import { WebSocket } from "ws";
import { SENTINEL_PORT } from "../../../src/contracts/cluster.js";
import { SENTINEL_METRICS, SENTINEL_OPS_PORT } from "../../../src/contracts/routing.js";
import { localAddress } from "../../../src/cluster/pod-network.js";
import { STANDIN_ANNOTATION, type StandinAnswer } from "../../../src/cluster/standin/app.js";
import type { KubeClient } from "../../../src/kube/client.js";
import { sentinelKubeConfigFrom } from "../../../src/sentinel/rbac.js";
import { eventually, useCluster } from "../../support/cluster.js";
import {
  annotatePod,
  countBy,
  createAppPod,
  getJson,
  hit,
  hitMany,
  kubeFor,
  metricValue,
  proxyClient,
  RoutingWriter,
  sentinelMetrics,
  sentinelStatus,
  type PodRef,
  prepareAppNamespace,
} from "./support.js";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const BUN = join(root, "node_modules", ".bin", "bun");
const h = useCluster({ standins: true });
const ENV = "env_bun";
const dir = mkdtempSync(join(tmpdir(), "krane-sentinel-bun-"));
let kube: KubeClient;
let routes: RoutingWriter;
let sentinel: PodRef;
let child: ChildProcess;
let exited: Promise<number | null>;
let pool: Pool;
const a: PodRef[] = [];

before(
  async () => {
    assert.ok(existsSync(BUN), "Bun is installed with the dev dependencies (npm install)");
    const cluster = await h.ready();
    const net = cluster.podNetwork;
    if (!net) throw new Error("the cluster has no pod network");
    kube = kubeFor(cluster);
    routes = new RoutingWriter(kube, ENV);
    await prepareAppNamespace(cluster, kube);
    a.push(...(await Promise.all(["u-1", "u-2", "u-3"].map((n) => createAppPod(cluster, kube, n, "dep-u")))));
    await routes.policy(1, "instances", [{ deploymentId: "dep-u", weight: 100 }]);
    await routes.slice(
      "dep-u",
      a.map((p) => ({ ip: p.ip, pod: p.name })),
    );
    // An address of this machine no pod has, with the sentinel's usual ports.
    const local = localAddress(net, `10.${net.slot}.254.254`);
    const kubeconfig = join(dir, "sentinel.kubeconfig");
    writeFileSync(kubeconfig, (await sentinelKubeConfigFrom(cluster.kubeConfig())).exportConfig(), { mode: 0o600 });
    child = spawn(
      BUN,
      [
        join(root, "bin/krane.js"),
        "sentinel",
        "--environment-id",
        ENV,
        "--region",
        "local",
        "--listen",
        local,
        "--kubeconfig",
        kubeconfig,
        "--pod-address-map",
        `${net.cidr}=${net.localCidr}`,
        "--upstream-timeout-ms",
        "1500",
      ],
      { stdio: ["ignore", "ignore", "inherit"], env: { PATH: process.env.PATH, KRANE_LOG_LEVEL: "warn" } },
    );
    exited = new Promise((resolve) => child.once("exit", (code) => resolve(code)));
    sentinel = { name: "bun", ip: local, local };
    await eventually(
      "the sentinel on Bun to be ready",
      async () =>
        (await getJson(`http://${local}:${SENTINEL_OPS_PORT}/readyz`).catch(() => ({ status: 0 }))).status === 200
          ? true
          : undefined,
      60_000,
    );
    pool = proxyClient(sentinel);
  },
  { timeout: 10 * 60_000 },
);

after(async () => {
  await pool?.close();
  if (child && child.exitCode === null) {
    child.kill("SIGKILL");
    await exited;
  }
  kube?.close();
  rmSync(dir, { recursive: true, force: true });
});

test("on Bun: traffic reaches every instance with forwarding headers and a request id, over HTTP/1.1 and h2c", async () => {
  const hits = await hitMany(pool, 300, 12);
  assert.deepEqual(
    hits.filter((x) => x.status !== 200).map((x) => `${x.status} ${x.cause ?? x.error ?? ""}`),
    [],
  );
  assert.deepEqual([...countBy(hits, (x) => x.answer?.pod ?? "?").keys()].sort(), ["u-1", "u-2", "u-3"]);
  const one = hits[0]?.answer as StandinAnswer;
  assert.equal(one.revision, "dep-u");
  assert.equal(one.host, "shop.example.com");
  assert.equal(one.forwardedHost, "shop.example.com");
  assert.equal(one.forwardedProto, "http");
  assert.match(one.forwardedFor ?? "", /127\.0\.0\.1$/);
  assert.match(one.requestId ?? "", /^[0-9a-f-]{36}$/);
  assert.equal(hits[0]?.headers["x-request-id"], one.requestId);
  const kept = await hit(pool, "/", { "x-request-id": "trace-9", "x-forwarded-for": "203.0.113.7" });
  assert.equal(kept.answer?.requestId, "trace-9");
  assert.match(kept.answer?.forwardedFor ?? "", /^203\.0\.113\.7, .*127\.0\.0\.1$/);

  const session = http2.connect(`http://${sentinel.local}:${SENTINEL_PORT}`);
  try {
    const answers = await Promise.all(
      Array.from(
        { length: 20 },
        () =>
          new Promise<StandinAnswer>((resolve, reject) => {
            const req = session.request({ ":path": "/h2?x=1", ":authority": "h2.example.com" });
            let body = "";
            req.setEncoding("utf8");
            req.on("data", (c: string) => (body += c));
            req.on("end", () => resolve(JSON.parse(body) as StandinAnswer));
            req.on("error", reject);
            req.end();
          }),
      ),
    );
    for (const x of answers) {
      assert.equal(x.forwardedHost, "h2.example.com");
      assert.equal(x.path, "/h2?x=1");
    }
    assert.ok(new Set(answers.map((x) => x.pod)).size >= 2, "h2 streams are balanced too");
  } finally {
    session.close();
  }
  const status = await sentinelStatus(sentinel);
  assert.equal(status.ready, true);
  assert.deepEqual(
    status.revisions.map((r) => [r.deploymentId, r.endpoints]),
    [["dep-u", 3]],
  );
  const metrics = await sentinelMetrics(sentinel);
  assert.ok(metricValue(metrics, SENTINEL_METRICS.requests, { revision: "dep-u", code: "2xx" }) >= 321);
  assert.ok(metricValue(metrics, `${SENTINEL_METRICS.duration}_count`, { revision: "dep-u" }) >= 321);
});

test("on Bun: bodies stream both ways; no answer in time is 504; an app's own 5xx passes through", async () => {
  const body = Buffer.alloc(4 << 20, 7);
  const res = await pool.request({ method: "POST", path: "/echo", headers: { host: "x" }, body });
  const echoed = Buffer.from(await res.body.arrayBuffer());
  assert.equal(res.statusCode, 200);
  assert.ok(echoed.equals(body), "a 4 MiB upload came back intact");
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
  const t0 = Date.now();
  const slow = await hit(pool, "/?latency=4000");
  assert.equal(slow.status, 504);
  assert.equal(slow.headers["x-krane-sentinel-error"], "upstream-timeout");
  assert.ok(Date.now() - t0 < 3500);
  const appError = await hit(pool, "/?status=503");
  assert.equal(appError.status, 503);
  assert.equal(appError.headers["x-krane-sentinel-error"], undefined);
});

test("on Bun: an instance that refuses connections is ejected and requests still succeed", async () => {
  const before = await sentinelMetrics(sentinel);
  await annotatePod(kube, "u-3", { [STANDIN_ANNOTATION.mode]: "refuse" });
  await eventually("u-3 to refuse connections", async () => {
    const r = await getJson(`http://${a[2]?.local}:8080/`).catch(() => ({ status: -1 }));
    return r.status === -1 ? true : undefined;
  });
  const hits = await hitMany(pool, 300, 12);
  assert.deepEqual(
    hits.filter((x) => x.status !== 200).map((x) => x.status),
    [],
    "a failed connect is retried elsewhere",
  );
  assert.equal(hits.filter((x) => x.answer?.pod === "u-3").length, 0);
  const after = await sentinelMetrics(sentinel);
  assert.ok(metricValue(after, SENTINEL_METRICS.ejections) > metricValue(before, SENTINEL_METRICS.ejections));
  assert.equal((await sentinelStatus(sentinel)).revisions[0]?.ejected, 1);
  await annotatePod(kube, "u-3", { [STANDIN_ANNOTATION.mode]: "serve" });
  await eventually(
    "u-3 back in rotation",
    async () => ((await hit(pool)).answer?.pod === "u-3" ? true : undefined),
    40_000,
  );
});

test("on Bun: WebSocket messages are relayed both ways", async () => {
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
  assert.equal(who.revision, "dep-u");
  assert.equal(who.forwardedHost, "ws.example.com");
  ws.send("ping-1");
  ws.send(Buffer.alloc(100_000, 1));
  await eventually("the echoes", async () => (messages.length >= 3 ? true : undefined), 5_000);
  assert.equal(messages[1], "ping-1");
  assert.equal(messages[2]?.length, 100_000);
  ws.close();
});

test("on Bun: SIGTERM drains: in-flight requests finish, then the process exits", async () => {
  const slow = hit(pool, "/?latency=1000");
  await new Promise((r) => setTimeout(r, 200));
  child.kill("SIGTERM");
  const answer = await slow;
  assert.equal(answer.status, 200, `the in-flight request finished: ${answer.cause ?? answer.error ?? ""}`);
  assert.equal(await exited, 0);
});

// The sentinel when things go away, on the real local cluster: its pod is deleted (SIGTERM: it
// turns unready, accepts for its drain delay while endpoints are withdrawn, then drains), and
// the API server stops (it keeps serving its last routing table).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { connect } from "node:net";
import type { Pool } from "undici";
import { SENTINEL_NAMESPACE, SENTINEL_PORT } from "../../../src/contracts/cluster.js";
import { SENTINEL_OPS_PORT } from "../../../src/contracts/routing.js";
import { stopPid } from "../../../src/cluster/process.js";
import type { KubeClient } from "../../../src/kube/client.js";
import { eventually, useCluster } from "../../support/cluster.js";
import {
  countBy,
  createAppPod,
  createSentinelPod,
  deletePod,
  getJson,
  hit,
  hitMany,
  kubeFor,
  proxyClient,
  RoutingWriter,
  sentinelStatus,
  type PodRef,
  prepareAppNamespace,
} from "./support.js";

const h = useCluster({ standins: true });
const ENV = "env_resilience";
let kube: KubeClient;
let routes: RoutingWriter;
let pods: PodRef[] = [];
const pools: Pool[] = [];

before(
  async () => {
    const cluster = await h.ready();
    kube = kubeFor(cluster);
    routes = new RoutingWriter(kube, ENV);
    await prepareAppNamespace(cluster, kube);
    pods = await Promise.all(["r-1", "r-2"].map((n) => createAppPod(cluster, kube, n, "dep-r")));
    await routes.policy(7, "instances", [{ deploymentId: "dep-r", weight: 100 }]);
    await routes.slice(
      "dep-r",
      pods.map((p) => ({ ip: p.ip, pod: p.name })),
    );
  },
  { timeout: 10 * 60_000 },
);

after(async () => {
  await Promise.all(pools.map((p) => p.close()));
  kube?.close();
});

function refused(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host, port });
    s.once("connect", () => {
      s.destroy();
      resolve(false);
    });
    s.once("error", (err: NodeJS.ErrnoException) => resolve(err.code === "ECONNREFUSED"));
  });
}

test("SIGTERM drains: not ready, still accepting for the drain delay, then no new connections, in-flight requests finish, then exit", async () => {
  const s = await createSentinelPod(h.cluster, kube, "snt-drain", ENV, { KRANE_SENTINEL_DRAIN_DELAY_MS: "3000" });
  const pool = proxyClient(s, 4);
  pools.push(pool);
  assert.equal((await hit(pool)).status, 200);
  // A slow request is in flight when the pod is deleted (the stand-in sends SIGTERM).
  const slow = hit(pool, "/?latency=4000");
  await new Promise((r) => setTimeout(r, 300));
  await deletePod(kube, SENTINEL_NAMESPACE, "snt-drain");
  await eventually(
    "/readyz to say draining",
    async () => {
      const r = await getJson(`http://${s.local}:${SENTINEL_OPS_PORT}/readyz`);
      return r.status === 503 && r.text.includes("draining") ? true : undefined;
    },
    10_000,
  );
  // Within the delay, a connection kube-proxy still sends here is served, and told to close.
  const late = proxyClient(s, 1);
  pools.push(late);
  const served = await late.request({ method: "GET", path: "/" });
  await served.body.dump();
  assert.equal(served.statusCode, 200, "a new connection during the drain delay is served");
  assert.equal(served.headers.connection, "close", "and told to close");
  await eventually(
    "the proxy port to refuse new connections after the delay",
    async () => ((await refused(s.local, SENTINEL_PORT)) ? true : undefined),
    10_000,
  );
  const done = await slow;
  assert.equal(done.status, 200, "the in-flight request finished");
  assert.equal(done.answer?.revision, "dep-r");
  await eventually(
    "the sentinel process to exit",
    async () => ((await refused(s.local, SENTINEL_OPS_PORT)) ? true : undefined),
    10_000,
  );
});

test("with the API server stopped, the sentinel keeps serving its last table", async () => {
  const s = await createSentinelPod(h.cluster, kube, "snt-keep", ENV);
  const pool = proxyClient(s, 8);
  pools.push(pool);
  const before = await hitMany(pool, 100, 8);
  assert.deepEqual([...countBy(before, (x) => String(x.status))], [["200", 100]]);
  const apiserver = h.cluster.state.pids["kube-apiserver"];
  assert.ok(apiserver);
  await stopPid(apiserver, 3000);
  await eventually(
    "the sentinel to notice",
    async () => ((await sentinelStatus(s)).kubeConnected === false ? true : undefined),
    30_000,
  );
  const started = Date.now();
  const during: Awaited<ReturnType<typeof hit>>[] = [];
  while (Date.now() - started < 6_000) during.push(...(await hitMany(pool, 40, 8)));
  assert.deepEqual([...countBy(during, (x) => String(x.status))], [["200", during.length]]);
  assert.deepEqual(
    [...countBy(during, (x) => x.answer?.pod ?? "?").keys()].sort(),
    ["r-1", "r-2"],
    "both instances still get traffic",
  );
  const status = await sentinelStatus(s);
  assert.equal(status.routingVersion, 7);
  assert.equal(status.ready, true, "still ready: the table it has is the table it serves");
  assert.equal(status.revisions[0]?.endpoints, 2);
});

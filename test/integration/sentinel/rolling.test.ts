// Zero-downtime routing on the real local cluster: 200 requests/s through a sentinel while its
// EndpointSlices change step by step as a rolling update of 3 → 3 replicas (maxSurge 1,
// maxUnavailable 0) and then a scale-down would change them, with the ordering the agent
// guarantees: a new pod enters its slice once Running, and a pod being deleted leaves its slice
// before it stops serving (the stand-in keeps serving for its termination delay).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import type { Pool } from "undici";
import { STANDIN_ANNOTATION } from "../../../src/cluster/standin/app.js";
import type { KubeClient } from "../../../src/kube/client.js";
import { eventually, useCluster } from "../../support/cluster.js";
import {
  APP_NAMESPACE,
  countBy,
  createAppPod,
  createSentinelPod,
  deletePod,
  failure,
  openLoad,
  kubeFor,
  proxyClient,
  RoutingWriter,
  sentinelStatus,
  type PodRef,
  prepareAppNamespace,
} from "./support.js";

const h = useCluster({ standins: true });
const ENV = "env_rolling";
const RATE = 200;
/** How long a deleted pod's process keeps serving (its graceful shutdown). */
const TERMINATION_DELAY_MS = 1500;
let kube: KubeClient;
let routes: RoutingWriter;
let sentinel: PodRef;
let pool: Pool;

before(
  async () => {
    const cluster = await h.ready();
    kube = kubeFor(cluster);
    routes = new RoutingWriter(kube, ENV);
    await prepareAppNamespace(cluster, kube);
    await routes.policy(1, "instances", [{ deploymentId: "v1", weight: 100 }]);
    sentinel = await createSentinelPod(cluster, kube, "snt-rolling-1", ENV);
    pool = proxyClient(sentinel, 64);
  },
  { timeout: 10 * 60_000 },
);

after(async () => {
  await pool?.close();
  kube?.close();
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

test("0 failed requests at 200 requests/s through a rolling update 3 → 3 (maxSurge 1, maxUnavailable 0) and a scale-down", async () => {
  const cluster = h.cluster;
  const annotations = { [STANDIN_ANNOTATION.terminationDelayMs]: String(TERMINATION_DELAY_MS) };
  const v1 = await Promise.all(["v1-a", "v1-b", "v1-c"].map((n) => createAppPod(cluster, kube, n, "v1", annotations)));
  const v2: PodRef[] = [];
  await routes.slice(
    "v1",
    v1.map((p) => ({ ip: p.ip, pod: p.name })),
  );
  await eventually("3 endpoints", async () =>
    (await sentinelStatus(sentinel)).revisions[0]?.endpoints === 3 ? true : undefined,
  );

  const run = openLoad(pool, RATE);
  await sleep(2000);
  const live = [...v1];
  for (const next of ["v2-a", "v2-b", "v2-c"]) {
    // Surge: one new pod; it enters its slice once Running (the agent's rule).
    const p = await createAppPod(cluster, kube, next, "v2", annotations);
    v2.push(p);
    await routes.slice(
      "v2",
      v2.map((x) => ({ ip: x.ip, pod: x.name })),
    );
    await sleep(500);
    // Then one old pod goes: out of its slice first, then deleted (it keeps serving 1.5 s).
    const old = live.shift();
    assert.ok(old);
    await routes.slice(
      "v1",
      live.map((x) => ({ ip: x.ip, pod: x.name })),
    );
    await deletePod(kube, APP_NAMESPACE, old.name);
    await sleep(1000);
  }
  await routes.deleteSlice("v1");
  await sleep(1500);
  // Scale-down 3 → 1, the same way.
  for (const gone of v2.splice(1)) {
    await routes.slice(
      "v2",
      v2.map((x) => ({ ip: x.ip, pod: x.name })),
    );
    await deletePod(kube, APP_NAMESPACE, gone.name);
  }
  await sleep(2500);
  const hits = await run.stop();

  const failed = hits.filter((x) => x.status !== 200);
  assert.deepEqual([...countBy(failed, failure)], [], `0 of ${hits.length} requests may fail`);
  const seconds = hits.length / RATE;
  assert.ok(hits.length >= RATE * 10, `a real load: ${hits.length} requests over ~${seconds.toFixed(0)} s`);
  const byRevision = countBy(hits, (x) => x.answer?.revision ?? "?");
  assert.ok(
    (byRevision.get("v1") ?? 0) > 0 && (byRevision.get("v2") ?? 0) > 0,
    `both revisions served: ${[...byRevision]}`,
  );
  const last = hits.slice(-RATE);
  assert.deepEqual(
    [...countBy(last, (x) => x.answer?.pod ?? "?")],
    [["v2-a", RATE]],
    "in the end only the remaining pod serves",
  );
});

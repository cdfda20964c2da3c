// Scale to zero's cold start without the kubelet's probe period, on the real local cluster: a
// sentinel pod (a real `krane sentinel` process run by the stand-in) holds a request while its
// revision's only instance is listed not ready, probes that instance's readiness path itself,
// and releases the request the moment it answers — while the EndpointSlice still says not ready.
// A revision whose slice names no readiness path is never probed; a promoted instance the
// kubelet never finds ready leaves the routing again after the promotion's TTL.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Pool } from "undici";
import { READINESS_PATH_ANNOTATION } from "../../../src/contracts/routing.js";
import { STANDIN_ANNOTATION } from "../../../src/cluster/standin/app.js";
import type { KubeClient } from "../../../src/kube/client.js";
import { resources } from "../../../src/kube/resources.js";
import { PROMOTION_TTL_MS } from "../../../src/sentinel/warm.js";
import { eventually, useCluster } from "../../support/cluster.js";
import {
  annotatePod,
  APP_PORT,
  createAppPod,
  createSentinelPod,
  hit,
  kubeFor,
  metricValue,
  proxyClient,
  RoutingWriter,
  sentinelMetrics,
  sentinelStatus,
  type Hit,
  type PodRef,
  prepareAppNamespace,
} from "./support.js";

const h = useCluster({ standins: true });
let kube: KubeClient;
const pools: Pool[] = [];

/** Resolves once nothing listens on the pod's address (the stand-in withdrew its listener). */
async function refusing(pod: PodRef): Promise<void> {
  await eventually(
    `${pod.name} refusing connections`,
    async () => {
      try {
        await fetch(`http://${pod.local}:${APP_PORT}/`, { signal: AbortSignal.timeout(2_000) });
        return undefined;
      } catch {
        return true;
      }
    },
    30_000,
  );
}

before(
  async () => {
    const cluster = await h.ready();
    kube = kubeFor(cluster);
    await prepareAppNamespace(cluster, kube);
  },
  { timeout: 10 * 60_000 },
);

after(async () => {
  await Promise.all(pools.map((p) => p.close()));
  kube?.close();
});

describe("a held request and a starting instance", () => {
  it(
    "is released when the instance answers its readiness path, before its slice says ready; after the TTL it leaves the routing",
    { timeout: 5 * 60_000 },
    async () => {
      const ENV = "env_warm";
      const routes = new RoutingWriter(kube, ENV);
      const app = await createAppPod(h.cluster, kube, "warm-1", "dep-warm");
      // The app has not started listening yet.
      await annotatePod(kube, app.name, { [STANDIN_ANNOTATION.mode]: "refuse" });
      await refusing(app);
      await routes.policy(1, "instances", [], { maxHeld: 10, timeoutMs: 120_000 });
      await routes.slice("dep-warm", [{ ip: app.ip, pod: app.name, ready: false }], APP_PORT, {
        [READINESS_PATH_ANNOTATION]: "/healthz",
      });
      const sentinel = await createSentinelPod(h.cluster, kube, "snt-warm-1", ENV);
      const pool = proxyClient(sentinel);
      pools.push(pool);

      let early: Hit | undefined;
      const pending = hit(pool, "/").then((x) => (early = x));
      await eventually(
        "the request held",
        async () => ((await sentinelStatus(sentinel)).held === 1 ? true : undefined),
        20_000,
      );
      // Probed and refused for a while: still held, nothing routable.
      await new Promise((r) => setTimeout(r, 1_500));
      assert.equal(early, undefined, "held while the instance refuses");
      const before = await sentinelStatus(sentinel);
      assert.equal(before.held, 1);
      assert.equal(before.revisions.find((r) => r.deploymentId === "dep-warm")?.routable ?? 0, 0);

      // The app listens: the sentinel's own probe finds it and the request goes there. The slice
      // is never changed, so nothing but the probe can have released it.
      await annotatePod(kube, app.name, { [STANDIN_ANNOTATION.mode]: "serve" });
      const answer = await pending;
      assert.equal(answer.status, 200, JSON.stringify(answer.cause));
      assert.equal(answer.answer?.pod, app.name);
      const metrics = await sentinelMetrics(sentinel);
      assert.equal(metricValue(metrics, "krane_sentinel_warm_releases_total"), 1);
      assert.equal(metricValue(metrics, "krane_sentinel_held_requests_total", { outcome: "released" }), 1);
      // Further requests go to it as well while it is promoted.
      assert.equal((await hit(pool, "/")).answer?.pod, app.name);
      const slice = await kube.get(resources.endpointSlices, "sentinel", routes.sliceName("dep-warm"));
      const eps = (slice?.endpoints ?? []) as { conditions?: { ready?: boolean } }[];
      assert.equal(eps[0]?.conditions?.ready, false, "the slice still lists it not ready");

      // The kubelet never finds it ready (its slice never changes): after the TTL it leaves the
      // routing, and a request is held again.
      await new Promise((r) => setTimeout(r, PROMOTION_TTL_MS));
      await eventually(
        "the promotion to run out",
        async () =>
          ((await sentinelStatus(sentinel)).revisions.find((r) => r.deploymentId === "dep-warm")?.routable ?? 0) === 0
            ? true
            : undefined,
        10_000,
      );

      // Once the slice lists it ready, it is routed as any instance.
      await routes.slice("dep-warm", [{ ip: app.ip, pod: app.name, ready: true }], APP_PORT);
      await eventually(
        "routed once listed ready",
        async () => ((await hit(pool, "/")).answer?.pod === app.name ? true : undefined),
        20_000,
      );
    },
  );

  it(
    "is never released to a starting instance whose slice names no readiness path",
    { timeout: 5 * 60_000 },
    async () => {
      const ENV = "env_warm_nopath";
      const routes = new RoutingWriter(kube, ENV);
      // Serving all along: only the missing path keeps the sentinel from routing to it.
      const app = await createAppPod(h.cluster, kube, "warm-2", "dep-nopath");
      await routes.policy(1, "instances", [], { maxHeld: 10, timeoutMs: 3_000 });
      await routes.slice("dep-nopath", [{ ip: app.ip, pod: app.name, ready: false }]);
      const sentinel = await createSentinelPod(h.cluster, kube, "snt-warm-2", ENV);
      const pool = proxyClient(sentinel);
      pools.push(pool);
      const answer = await hit(pool, "/");
      assert.equal(answer.status, 503, "held until its timeout, then 503");
      assert.equal(answer.answer, undefined);
      assert.equal(answer.headers["retry-after"], "1");
      const metrics = await sentinelMetrics(sentinel);
      assert.equal(metricValue(metrics, "krane_sentinel_warm_releases_total"), 0);
      assert.equal(metricValue(metrics, "krane_sentinel_held_requests_total", { outcome: "timeout" }), 1);
    },
  );
});

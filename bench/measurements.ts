// Measurement collection for rollout analysis (`npm run bench -- measurements`): the real ctrl,
// the real agent (as its ServiceAccount) and krane's own sentinel on a local cluster with pod
// stand-ins. Measured:
//  - a request answered by the sentinel → visible in ctrl's MeasurementSource (samples()), p50/p99
//    over KRANE_BENCH_MEASURE_ROUNDS bursts (default 30) with the agent scraping every second:
//    this bounds how fast an analysis can judge a canary;
//  - the sentinel's throughput (closed loop, 32 connections) with the agent scraping it every
//    second vs with collection off (--measure-interval 0), alternating, in the same run: the cost
//    of collection to the data plane; and how long one /metrics answer takes under that load.
// The load average is printed beside the figures (the machine is shared).
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Registry } from "prom-client";
import { Pool } from "undici";
import { Agent } from "../src/agent/agent.js";
import { agentKubeConfigFrom } from "../src/agent/rbac.js";
import { silentLogger } from "../src/base/log.js";
import { createApiClients } from "../src/client/node.js";
import { podAddressMap, startCluster } from "../src/cluster/index.js";
import { SENTINEL_NAMESPACE, SENTINEL_PORT } from "../src/contracts/cluster.js";
import { SENTINEL_OPS_PORT } from "../src/contracts/routing.js";
import { COMPONENT, LABEL_COMPONENT, LABEL_ENVIRONMENT_ID } from "../src/contracts/labels.js";
import { StoredMeasurements } from "../src/ctrl/domain/measurements.js";
import { KubeClient } from "../src/kube/client.js";
import { isRecord } from "../src/kube/object.js";
import { resources } from "../src/kube/resources.js";
import { applySentinelRbac } from "../src/sentinel/rbac.js";
import { load, percentileOf, until } from "./support.js";
import { startTestCtrl } from "../test/integration/ctrl/support.js";

const ROUNDS = Number(process.env.KRANE_BENCH_MEASURE_ROUNDS ?? 30);
const REF = { workspace: "bench", project: "shop", environment: "production" };
const fmt = (v: number[]): string =>
  `p50 ${percentileOf(v, 50).toFixed(0)} ms, p99 ${percentileOf(v, 99).toFixed(0)} ms, max ${Math.max(...v).toFixed(0)} ms (n=${v.length})`;

/** `until` with this bench's defaults. */
const waitFor = <T>(
  what: string,
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 120_000,
  stepMs = 10,
): Promise<T> => until(what, check, timeoutMs, stepMs);

async function ok(pool: Pool): Promise<boolean> {
  try {
    const res = await pool.request({ method: "GET", path: "/", headersTimeout: 5_000, bodyTimeout: 5_000 });
    await res.body.text();
    return res.statusCode === 200;
  } catch {
    return false;
  }
}

/** Requests per second answered 200 by `pool` over `ms`, `conns` at a time. */
async function throughput(pool: Pool, conns: number, ms: number): Promise<number> {
  const end = performance.now() + ms;
  let n = 0;
  await Promise.all(
    Array.from({ length: conns }, async () => {
      while (performance.now() < end) if (await ok(pool)) n++;
    }),
  );
  return n / (ms / 1000);
}

export async function benchMeasurements(): Promise<void> {
  const cluster = await startCluster({ name: "bench-measure", standins: true, pods: { readyDelayMs: 0 } });
  const dir = await mkdtemp(join(tmpdir(), "krane-bench-measure-"));
  const kube = new KubeClient(cluster.kubeConfig(), { qps: 100, burst: 200 });
  const ctrl = await startTestCtrl(join(dir, "ctrl.db"), {
    opsListen: null,
    shutdownGraceMs: 500,
  });
  let agent: Agent | undefined;
  let pool: Pool | undefined;
  try {
    const net = cluster.podNetwork;
    if (!net) throw new Error("the cluster has no pod network");
    await applySentinelRbac(cluster.kubeConfig());
    const token = ctrl.adminToken;
    const api = createApiClients(ctrl.url, token);
    await api.regions.createRegion({ name: "local" });
    const { token: agentToken } = await api.regions.createClusterToken({ region: "local", clusterName: "bench" });
    const kubeconfig = await agentKubeConfigFrom(cluster.kubeConfig());
    const startAgent = async (measureIntervalMs: number): Promise<Agent> => {
      const a = new Agent({
        ctrlUrl: ctrl.url,
        token: agentToken,
        region: "local",
        kubeconfig,
        log: silentLogger,
        registry: new Registry(),
        opsPort: -1,
        podAddressMap: podAddressMap(net),
        measureIntervalMs,
      });
      await a.start();
      return a;
    };
    agent = await startAgent(1_000);
    await api.workspaces.createWorkspace({ slug: REF.workspace });
    await api.projects.createProject({ workspace: REF.workspace, slug: REF.project });
    const { environment } = await api.environments.createEnvironment({
      workspace: REF.workspace,
      project: REF.project,
      slug: REF.environment,
      regions: [{ region: "local", replicas: 1 }],
      sentinel: { image: "", replicas: 1 },
    });
    const envId = environment?.id ?? "";
    const { deployment } = await api.deployments.createDeployment({
      ...REF,
      image: "registry.example.com/shop:1",
      port: 8080,
    });
    const dep = deployment?.id ?? "";
    const entry = await waitFor(
      "a running sentinel pod",
      async () => {
        const { items } = await kube.list(resources.pods, {
          namespace: SENTINEL_NAMESPACE,
          labelSelector: `${LABEL_COMPONENT}=${COMPONENT.sentinel},${LABEL_ENVIRONMENT_ID}=${envId}`,
        });
        for (const pod of items) {
          const st = isRecord(pod.status) ? pod.status : {};
          if (
            !pod.metadata.deletionTimestamp &&
            st.phase === "Running" &&
            typeof st.podIP === "string" &&
            st.podIP !== ""
          )
            return `http://${cluster.localAddress(st.podIP)}:${SENTINEL_PORT}`;
        }
        return undefined;
      },
      300_000,
      200,
    );
    pool = new Pool(entry, { connections: 32, pipelining: 1 });
    const p = pool;
    await waitFor("the instance routed", async () => ((await ok(p)) ? true : undefined), 300_000, 50);

    // Answered → visible in samples().
    const source = new StoredMeasurements(ctrl.store);
    const since = Date.now() - 60_000;
    const seen = async (): Promise<number> => (await source.samples(envId, [dep], since)).get(dep)?.requests ?? 0;
    await waitFor("the first requests visible", async () => ((await seen()) > 0 ? true : undefined), 60_000, 50);
    const delays: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const before = await seen();
      let answered = 0;
      for (let k = 0; k < 10; k++) if (await ok(p)) answered++;
      const t0 = performance.now();
      await waitFor(
        "the burst visible",
        async () => ((await seen()) >= before + answered ? true : undefined),
        30_000,
        10,
      );
      delays.push(performance.now() - t0);
      // Start the next burst at a random point of the scrape interval.
      await new Promise((r) => setTimeout(r, Math.random() * 1_000));
    }
    console.log(`measurements: agent scraping every 1 s, ctrl on SQLite (${load()})`);
    console.log(
      `  request answered by the sentinel → visible in samples(): ${fmt(delays)}   (bound: the interval + a scrape + a report)`,
    );

    // The sentinel's throughput with and without collection, alternating.
    const withScrape: number[] = [];
    const without: number[] = [];
    for (let i = 0; i < 3; i++) {
      withScrape.push(await throughput(p, 32, 6_000));
      await agent.stop();
      agent = await startAgent(0);
      without.push(await throughput(p, 32, 6_000));
      await agent.stop();
      agent = await startAgent(1_000);
    }
    const med = (v: number[]): number => percentileOf(v, 50);
    console.log(`  sentinel throughput, 32 connections, 3 × 6 s each, alternating (${load()}):`);
    console.log(
      `    agent scraping every 1 s: median ${med(withScrape).toFixed(0)} req/s  (${withScrape.map((v) => v.toFixed(0)).join(", ")})`,
    );
    console.log(
      `    collection off:           median ${med(without).toFixed(0)} req/s  (${without.map((v) => v.toFixed(0)).join(", ")})`,
    );
    console.log(
      `    difference: ${(((med(without) - med(withScrape)) / med(without)) * 100).toFixed(1)} % (on a shared machine, compare with the spread of the runs)`,
    );

    // What one scrape costs the sentinel: its /metrics answer under the same load.
    const ops = entry.replace(`:${SENTINEL_PORT}`, `:${SENTINEL_OPS_PORT}`);
    const scrapeMs: number[] = [];
    let bytes = 0;
    const busy = throughput(p, 32, 5_000);
    for (let i = 0; i < 40; i++) {
      const t0 = performance.now();
      const res = await fetch(`${ops}/metrics`);
      bytes = (await res.text()).length;
      scrapeMs.push(performance.now() - t0);
      await new Promise((r) => setTimeout(r, 100));
    }
    await busy;
    console.log(
      `  one scrape of the sentinel's /metrics under load: ${fmt(scrapeMs)}, ${(bytes / 1024).toFixed(1)} KiB (once per interval per pod)`,
    );
  } finally {
    await pool?.close();
    await agent?.stop();
    await ctrl.close();
    kube.close();
    await cluster.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

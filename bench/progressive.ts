// Progressive delivery's propagation (`npm run bench -- progressive`): the real ctrl with its
// progressive engine, three real local clusters (regions r1, r2, r3), an agent each, krane's own
// sentinel per region, pods as stand-ins. Measured:
//  - weight change committed → every sentinel in the 3 regions routing with it: from the answer
//    to `rollout promote` (the pass that moved the canary to its next weight commits before the
//    call answers) until each region's sentinel reports the new routing version on its ops port
//    (/status), the last of the three counting; over KRANE_BENCH_PROGRESSIVE_CHANGES (default 24)
//    weight changes of canaries 10 → 20 → … → 90, each started with every sentinel settled on
//    the version before it (so a measurement never includes an earlier change's backlog);
//  - abort decision → 100 % stable in every region: from the answer to `rollout abort` until
//    every sentinel serves the version whose policy sends 100 % to the stable revision, over
//    KRANE_BENCH_PROGRESSIVE_ABORTS (default 20) aborts.
// Anchors printed next to them: unkey's frontline route cache (5 s) and the targets (p99 ≤ 1 s
// for weights, ≤ 5 s for an abort). The load average is printed, as the machine is shared.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Registry } from "prom-client";
import { Agent } from "../src/agent/agent.js";
import { agentKubeConfigFrom } from "../src/agent/rbac.js";
import { silentLogger } from "../src/base/log.js";
import { createApiClients } from "../src/client/node.js";
import { podAddressMap, startCluster, type LocalCluster } from "../src/cluster/index.js";
import { SENTINEL_NAMESPACE } from "../src/contracts/cluster.js";
import { COMPONENT, LABEL_COMPONENT, LABEL_ENVIRONMENT_ID } from "../src/contracts/labels.js";
import { SENTINEL_OPS_PORT, SENTINEL_STATUS_PATH, type SentinelStatus } from "../src/contracts/routing.js";
import { KubeClient } from "../src/kube/client.js";
import { isRecord } from "../src/kube/object.js";
import { resources } from "../src/kube/resources.js";
import { applySentinelRbac } from "../src/sentinel/rbac.js";
import { load, percentileOf, until } from "./support.js";
import { startTestCtrl } from "../test/integration/ctrl/support.js";

const CHANGES = Number(process.env.KRANE_BENCH_PROGRESSIVE_CHANGES ?? 24);
const ABORTS = Number(process.env.KRANE_BENCH_PROGRESSIVE_ABORTS ?? 20);
const REGIONS = ["r1", "r2", "r3"];
const REF = { workspace: "bench", project: "shop", environment: "production" };
const STEPS = [10, 20, 30, 40, 50, 60, 70, 80, 90];

const fmt = (v: number[]): string =>
  `p50 ${percentileOf(v, 50).toFixed(0)} ms, p99 ${percentileOf(v, 99).toFixed(0)} ms, max ${Math.max(...v).toFixed(0)} ms (n=${v.length})`;

/** `until` with this bench's defaults. */
const waitFor = <T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 180_000, stepMs = 5): Promise<T> =>
  until(what, check, timeoutMs, stepMs, true);

/** The ops URL of the environment's running sentinel pod in a cluster. */
async function sentinelOps(cluster: LocalCluster, kube: KubeClient, envId: string): Promise<string> {
  return waitFor("a running sentinel pod", async () => {
    const { items } = await kube.list(resources.pods, {
      namespace: SENTINEL_NAMESPACE,
      labelSelector: `${LABEL_COMPONENT}=${COMPONENT.sentinel},${LABEL_ENVIRONMENT_ID}=${envId}`,
    });
    for (const pod of items) {
      const st = isRecord(pod.status) ? pod.status : {};
      if (!pod.metadata.deletionTimestamp && st.phase === "Running" && typeof st.podIP === "string" && st.podIP !== "")
        return `http://${cluster.localAddress(st.podIP)}:${SENTINEL_OPS_PORT}`;
    }
    return undefined;
  });
}

async function servedVersion(ops: string): Promise<number> {
  const res = await fetch(`${ops}${SENTINEL_STATUS_PATH}`);
  return ((await res.json()) as SentinelStatus).routingVersion;
}

/** Ms from t0 until every sentinel serves at least `version` (the slowest region counts). */
async function propagated(ops: readonly string[], version: number, t0: number): Promise<number> {
  const times = await Promise.all(
    ops.map((o) =>
      waitFor(
        `routing version ${version} at ${o}`,
        async () => ((await servedVersion(o)) >= version ? performance.now() : undefined),
        60_000,
        2,
      ),
    ),
  );
  return Math.max(...times) - t0;
}

export async function benchProgressive(): Promise<void> {
  const clusters: LocalCluster[] = [];
  const kubes: KubeClient[] = [];
  const agents: Agent[] = [];
  const dir = await mkdtemp(join(tmpdir(), "krane-bench-progressive-"));
  const ctrl = await startTestCtrl(join(dir, "ctrl.db"), {
    opsListen: null,
    shutdownGraceMs: 500,
    rolloutSweepIntervalMs: 200,
  });
  try {
    const token = ctrl.adminToken;
    const api = createApiClients(ctrl.url, token);
    for (const region of REGIONS) {
      const cluster = await startCluster({
        name: `bench-progressive-${region}`,
        standins: true,
        pods: { readyDelayMs: 0 },
      });
      clusters.push(cluster);
      kubes.push(new KubeClient(cluster.kubeConfig(), { qps: 100, burst: 200 }));
      const net = cluster.podNetwork;
      if (!net) throw new Error("the cluster has no pod network");
      await applySentinelRbac(cluster.kubeConfig());
      await api.regions.createRegion({ name: region });
      const { token: agentToken } = await api.regions.createClusterToken({ region, clusterName: `bench-${region}` });
      const agent = new Agent({
        ctrlUrl: ctrl.url,
        token: agentToken,
        region,
        kubeconfig: await agentKubeConfigFrom(cluster.kubeConfig()),
        log: silentLogger,
        registry: new Registry(),
        opsPort: -1,
        podAddressMap: podAddressMap(net),
      });
      await agent.start();
      agents.push(agent);
    }
    await api.workspaces.createWorkspace({ slug: REF.workspace });
    await api.projects.createProject({ workspace: REF.workspace, slug: REF.project });
    const { environment } = await api.environments.createEnvironment({
      workspace: REF.workspace,
      project: REF.project,
      slug: REF.environment,
      regions: REGIONS.map((region) => ({ region, replicas: 10 })),
      sentinel: { image: "", replicas: 1 },
      rollout: {
        progressive: {
          canary: {
            steps: STEPS.flatMap((w) => [
              { step: { case: "setWeight" as const, value: w } },
              { step: { case: "pause" as const, value: { seconds: 0 } } },
            ]),
          },
        },
      },
    });
    const envId = environment?.id ?? "";
    const ops = await Promise.all(clusters.map((c, i) => sentinelOps(c, kubes[i] as KubeClient, envId)));
    const version = async (): Promise<number> =>
      Number((await api.status.getEnvironmentStatus(REF)).sentinels[0]?.routingVersion ?? 0n);
    const phase = async (): Promise<string> =>
      (await api.rollouts.getRolloutStatus(REF)).status?.progressive?.phase ?? "";
    let n = 1;
    await api.deployments.createDeployment({ ...REF, image: `registry.example.com/shop:${n++}`, port: 8080 });
    await waitFor("the first revision healthy", async () => ((await phase()) === "Healthy" ? true : undefined));

    // Weight changes: promote from one pause to the next setWeight (whose weight commits at once).
    const weights: number[] = [];
    while (weights.length < CHANGES) {
      await api.deployments.createDeployment({ ...REF, image: `registry.example.com/shop:${n++}`, port: 8080 });
      await waitFor("the canary paused at its first weight", async () =>
        (await phase()) === "Paused" ? true : undefined,
      );
      for (let i = 1; i < STEPS.length && weights.length < CHANGES; i++) {
        // Start settled: every sentinel serves the current version (no earlier change in flight).
        await propagated(ops, await version(), performance.now());
        const t0 = performance.now();
        await api.rollouts.promote(REF);
        weights.push(await propagated(ops, await version(), t0));
        await waitFor("the canary paused again", async () => ((await phase()) === "Paused" ? true : undefined));
      }
      await api.rollouts.abort(REF);
    }

    // Aborts: retry (promote) to the first weight, then abort.
    const aborts: number[] = [];
    for (let i = 0; i < ABORTS; i++) {
      await api.rollouts.promote(REF);
      await waitFor("the canary paused at its first weight", async () =>
        (await phase()) === "Paused" ? true : undefined,
      );
      await propagated(ops, await version(), performance.now());
      const t0 = performance.now();
      await api.rollouts.abort(REF);
      aborts.push(await propagated(ops, await version(), t0));
    }

    console.log(
      `weight change committed → every sentinel in ${REGIONS.length} regions routing with it: ${fmt(weights)}  (target p99 ≤ 1000 ms; anchor: unkey frontline route cache 5000 ms)`,
    );
    console.log(
      `abort decision → 100 % stable in every region:                  ${fmt(aborts)}  (target p99 ≤ 5000 ms)`,
    );
    console.log(`  weight changes in order (ms): ${weights.map((w) => w.toFixed(0)).join(" ")}`);
    console.log(`load average: ${load()}`);
  } finally {
    for (const a of agents) await a.stop();
    await ctrl.close();
    for (const k of kubes) k.close();
    for (const c of clusters) await c.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

// Routing through the whole chain (`npm run bench -- routing`): the real ctrl, the real agent (as
// its ServiceAccount) and krane's own sentinel on a local cluster with pod stand-ins. Measured:
//  - pod Running → the first request answered by it through the sentinel;
//  - pod deleted (deletionTimestamp set) → the last request answered by it;
// each over repeated scale-ups and scale-downs (KRANE_BENCH_ROUTING_CHANGES, default 20), with
// the times taken from a watch of the pods (what the agent and a kube-proxy also react to) and a
// client sending a request every ~2 ms through the sentinel. Compared, in the same run, with the
// same client reaching the instance by its own address (what a Service's kube-proxy rules would
// let through at once), i.e. the stand-in's own start-up, which is not the routing's cost.
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
import type { StandinAnswer } from "../src/cluster/standin/app.js";
import { SENTINEL_NAMESPACE, SENTINEL_PORT } from "../src/contracts/cluster.js";
import { COMPONENT, LABEL_COMPONENT, LABEL_ENVIRONMENT_ID } from "../src/contracts/labels.js";
import { KubeClient } from "../src/kube/client.js";
import { Informer } from "../src/kube/informer.js";
import { isRecord, type KubeObject } from "../src/kube/object.js";
import { resources } from "../src/kube/resources.js";
import { applySentinelRbac } from "../src/sentinel/rbac.js";
import { percentileOf, until } from "./support.js";
import { startTestCtrl } from "../test/integration/ctrl/support.js";

const CHANGES = Number(process.env.KRANE_BENCH_ROUTING_CHANGES ?? 20);
const NS = "ws-bench";
const REF = { workspace: "bench", project: "shop", environment: "production" };

const fmt = (v: number[]): string =>
  `p50 ${percentileOf(v, 50).toFixed(0)} ms, p99 ${percentileOf(v, 99).toFixed(0)} ms, max ${Math.max(...v).toFixed(0)} ms (n=${v.length})`;

function running(pod: KubeObject): string | undefined {
  const st = isRecord(pod.status) ? pod.status : {};
  return !pod.metadata.deletionTimestamp && st.phase === "Running" && typeof st.podIP === "string" && st.podIP !== ""
    ? st.podIP
    : undefined;
}

/** `until` with this bench's defaults. */
const waitFor = <T>(
  what: string,
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 120_000,
): Promise<T> => until(what, check, timeoutMs, 2);

async function who(pool: Pool): Promise<string | undefined> {
  try {
    const res = await pool.request({ method: "GET", path: "/", headersTimeout: 5_000, bodyTimeout: 5_000 });
    const text = await res.body.text();
    return res.statusCode === 200 ? (JSON.parse(text) as StandinAnswer).pod : undefined;
  } catch {
    return undefined;
  }
}

export async function benchRouting(): Promise<void> {
  const cluster = await startCluster({ name: "bench-routing", standins: true, pods: { readyDelayMs: 0 } });
  const dir = await mkdtemp(join(tmpdir(), "krane-bench-routing-"));
  const kube = new KubeClient(cluster.kubeConfig(), { qps: 100, burst: 200 });
  const ctrl = await startTestCtrl(join(dir, "ctrl.db"), {
    opsListen: null,
    shutdownGraceMs: 500,
  });
  const abort = new AbortController();
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
    agent = new Agent({
      ctrlUrl: ctrl.url,
      token: agentToken,
      region: "local",
      kubeconfig: await agentKubeConfigFrom(cluster.kubeConfig()),
      log: silentLogger,
      registry: new Registry(),
      opsPort: -1,
      podAddressMap: podAddressMap(net),
    });
    await agent.start();
    await api.workspaces.createWorkspace({ slug: REF.workspace });
    await api.projects.createProject({ workspace: REF.workspace, slug: REF.project });
    const { environment } = await api.environments.createEnvironment({
      workspace: REF.workspace,
      project: REF.project,
      slug: REF.environment,
      regions: [{ region: "local", replicas: 1 }],
      sentinel: { image: "", replicas: 1 },
    });
    await api.deployments.createDeployment({ ...REF, image: "registry.example.com/shop:1", port: 8080 });

    // A watch of the environment's pods: when each became Running, and when each was deleted.
    const runningAt = new Map<string, number>();
    const deletedAt = new Map<string, number>();
    const pods = new Informer({
      resource: resources.pods,
      namespace: NS,
      labelSelector: "",
      client: kube,
      log: silentLogger,
    });
    pods.onChange((type, pod) => {
      const name = pod.metadata.name ?? "";
      if (type !== "deleted" && running(pod) && !runningAt.has(name)) runningAt.set(name, performance.now());
      if ((type === "deleted" || pod.metadata.deletionTimestamp) && !deletedAt.has(name))
        deletedAt.set(name, performance.now());
    });
    void pods.run(abort.signal);

    const entry = await waitFor("a running sentinel pod", async () => {
      const { items } = await kube.list(resources.pods, {
        namespace: SENTINEL_NAMESPACE,
        labelSelector: `${LABEL_COMPONENT}=${COMPONENT.sentinel},${LABEL_ENVIRONMENT_ID}=${environment?.id ?? ""}`,
      });
      const ip = items.map(running).find((x) => x !== undefined);
      return ip ? `http://${cluster.localAddress(ip)}:${SENTINEL_PORT}` : undefined;
    });
    pool = new Pool(entry, { connections: 4, pipelining: 1 });
    const p = pool;
    await waitFor("the first instance routed", async () => (await who(p)) ?? undefined);

    const toRouted: number[] = [];
    const toDirect: number[] = [];
    const toUnrouted: number[] = [];
    for (let i = 0; i < CHANGES; i++) {
      const before = new Set(pods.list().map((x) => x.metadata.name ?? ""));
      await api.rollouts.scale({ ...REF, replicas: 2 });
      const fresh = await waitFor("a new pod Running", () =>
        pods.list().find((x) => !before.has(x.metadata.name ?? "") && running(x) !== undefined),
      );
      const name = fresh.metadata.name ?? "";
      const ip = running(fresh) ?? "";
      const t0 = runningAt.get(name) ?? performance.now();
      const direct = new Pool(`http://${cluster.localAddress(ip)}:8080`, { connections: 1 });
      const [routed, reached] = await Promise.all([
        waitFor(`${name} routed`, async () => ((await who(p)) === name ? performance.now() : undefined)),
        waitFor(`${name} reachable`, async () => ((await who(direct)) === name ? performance.now() : undefined)),
      ]);
      await direct.close();
      toRouted.push(routed - t0);
      toDirect.push(reached - t0);

      // Scale down: the newest pod goes (the ReplicaSet deletes the youngest first).
      await api.rollouts.scale({ ...REF, replicas: 1 });
      const gone = await waitFor("a pod deleted", () => [...deletedAt.keys()].find((n) => before.has(n) || n === name));
      const t1 = deletedAt.get(gone) ?? performance.now();
      // The last answer from it: keep asking until 300 answers in a row come from others.
      let last = t1;
      let others = 0;
      while (others < 300) {
        const w = await who(p);
        if (w === gone) {
          last = performance.now();
          others = 0;
        } else others++;
      }
      toUnrouted.push(Math.max(0, last - t1));
      await waitFor(`${gone} gone`, () => (pods.get(NS, gone) ? undefined : true));
    }

    console.log(
      `routing: ${CHANGES} scale-ups and scale-downs through ctrl → agent → EndpointSlice → krane sentinel (stand-ins serve the pods)`,
    );
    console.log(`  pod Running → first request routed to it:     ${fmt(toRouted)}   (target p99 ≤ 200 ms)`);
    console.log(
      `  pod Running → its own address answers (direct): ${fmt(toDirect)}   (the stand-in's start, not routing)`,
    );
    console.log(`  pod deleted → last request routed to it:      ${fmt(toUnrouted)}   (target p99 ≤ 200 ms)`);
  } finally {
    abort.abort();
    await pool?.close();
    await agent?.stop();
    await ctrl.close();
    kube.close();
    await cluster.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

// Real nodes (`npm run bench -- nodes`): how long from `krane deploy` to the first request
// answered by the new revision's real container (gVisor, image already on the node) — through the
// environment's sentinel and straight at the pod — next to the kubelet's own pod start in the same
// run: a bare Pod of the same image, RuntimeClass and probe posted to the API server, until Ready
// and until it answers — and the same Pod under runc, to show what gVisor's sandbox costs. The difference is krane's share: ctrl, the stream to the agent, the
// agent's ReplicaSet, the ReplicaSet controller and scheduler (which the bare Pod skips too), and
// the routing table reaching the sentinel.
import { join } from "node:path";
import { pino } from "pino";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { Agent } from "../src/agent/agent.js";
import { agentKubeConfigFrom } from "../src/agent/rbac.js";
import { startCluster } from "../src/cluster/index.js";
import { workloadImages } from "../src/cluster/images.js";
import { getJson, kubeRequest } from "../src/cluster/kube-http.js";
import { realNodeSupport } from "../src/cluster/nodes/host.js";
import { SENTINEL_NAMESPACE, SENTINEL_PORT } from "../src/contracts/cluster.js";
import { createApiClients } from "../src/client/node.js";
import { applySentinelRbac } from "../src/sentinel/rbac.js";
import { bareNamespace, barePodSpec } from "./bare-pods.js";
import { load, pct, until } from "./support.js";
import { startTestCtrl } from "../test/integration/ctrl/support.js";

const RUNS = Number(process.env.KRANE_BENCH_NODES_RUNS ?? "15");

interface Pod {
  metadata: { name: string; labels?: Record<string, string>; deletionTimestamp?: string };
  status?: { podIP?: string; conditions?: { type: string; status: string }[] };
}

async function answer(url: string): Promise<{ revision: string; pod: string } | undefined> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
    if (res.status !== 200) return undefined;
    return (await res.json()) as { revision: string; pod: string };
  } catch {
    return undefined;
  }
}

function line(what: string, ms: number[]): string {
  const s = [...ms].sort((a, b) => a - b);
  return `${what.padEnd(58)} p50 ${(pct(s, 50) / 1000).toFixed(2)} s, p99 ${(pct(s, 99) / 1000).toFixed(2)} s (${s.length} runs, ${load()})`;
}

export async function benchNodes(): Promise<void> {
  const support = await realNodeSupport();
  if (!support.ok) {
    console.log(`nodes: skipped, this machine cannot run real nodes: ${support.reason}`);
    return;
  }
  const images = await workloadImages((l) => console.log(`  ${l}`));
  const t0 = performance.now();
  const cluster = await startCluster({
    name: "bench-nodes",
    realNodes: ["untrusted", "sentinel"],
    images: [images.krane, images.hello],
  });
  console.log(`nodes: cluster with 2 real nodes up in ${((performance.now() - t0) / 1000).toFixed(1)} s (${load()})`);
  const dir = mkdtempSync(join(tmpdir(), "krane-bench-nodes-"));
  const ep = cluster.endpoint();
  const admin = cluster.kubeConfig();
  await applySentinelRbac(admin);
  const ctrl = await startTestCtrl(join(dir, "ctrl.db"), {
    opsListen: null,
    rolloutSweepIntervalMs: 200,
  });
  const token = ctrl.adminToken;
  const api = createApiClients(ctrl.url, token);
  const ref = { workspace: "bench", project: "hello", environment: "production" };
  let agent: Agent | undefined;
  try {
    await api.regions.createRegion({ name: "local" });
    const { token: agentToken } = await api.regions.createClusterToken({ region: "local", clusterName: "bench" });
    await api.workspaces.createWorkspace({ slug: ref.workspace });
    await api.projects.createProject({ workspace: ref.workspace, slug: ref.project });
    await api.environments.createEnvironment({
      workspace: ref.workspace,
      project: ref.project,
      slug: ref.environment,
      regions: [{ region: "local", replicas: 1 }],
      sentinel: { image: "", replicas: 1, cpuMillicores: 200n, memoryMib: 256n },
      rollout: { maxSurge: "1", maxUnavailable: "0" },
    });
    agent = new Agent({
      ctrlUrl: ctrl.url,
      token: agentToken,
      region: "local",
      kubeconfig: await agentKubeConfigFrom(admin, 3600),
      opsPort: -1,
      sentinelImage: images.krane.name,
      sentinelObserveIntervalMs: 500,
      log: pino({ level: "warn" }, pino.destination(2)),
    });
    await agent.start();
    const probe = { method: "GET", path: "/healthz", intervalSeconds: 1, timeoutSeconds: 2, failureThreshold: 3 };
    const deploy = (i: number) =>
      api.deployments.createDeployment({
        ...ref,
        image: images.hello.names[0] ?? "",
        port: 8080,
        cpuMillicores: 100n,
        memoryMib: 128n,
        env: [{ name: "RUN", value: String(i) }],
        healthCheck: probe,
      });
    const sentinelUrl = await until(
      "the sentinel pod",
      async () => {
        const pods = await getJson<{ items: Pod[] }>(
          ep,
          `/api/v1/namespaces/${SENTINEL_NAMESPACE}/pods?labelSelector=app.kubernetes.io/component%3Dsentinel`,
        );
        const ip = pods.items.find((p) => p.status?.podIP)?.status?.podIP;
        return ip ? `http://${ip}:${SENTINEL_PORT}/` : undefined;
      },
      300_000,
      200,
    );
    // A first revision, so every measured one replaces a running container (a rolling update).
    const first = await deploy(0);
    await until(
      "the first revision answering",
      async () => (await answer(sentinelUrl))?.revision === String(first.deployment?.revision),
      300_000,
      100,
    );

    const toPod: number[] = [];
    const toSentinel: number[] = [];
    for (let i = 1; i <= RUNS; i++) {
      const started = performance.now();
      const { deployment } = await deploy(i);
      const revision = String(deployment?.revision ?? "");
      const ns = deployment?.k8sNamespace ?? "";
      let podAt: number | undefined;
      let sentinelAt: number | undefined;
      await until(
        `revision ${revision} answering`,
        async () => {
          if (podAt === undefined) {
            const pods = await getJson<{ items: Pod[] }>(
              ep,
              `/api/v1/namespaces/${ns}/pods?labelSelector=krane.dev/deployment-id%3D${deployment?.id ?? ""}`,
            );
            const ip = pods.items.find((p) => p.status?.podIP && !p.metadata.deletionTimestamp)?.status?.podIP;
            if (ip && (await answer(`http://${ip}:8080/`))?.revision === revision) podAt = performance.now();
          }
          if (sentinelAt === undefined && (await answer(sentinelUrl))?.revision === revision)
            sentinelAt = performance.now();
          return podAt !== undefined && sentinelAt !== undefined;
        },
        300_000,
        20,
      );
      toPod.push((podAt ?? 0) - started);
      toSentinel.push((sentinelAt ?? 0) - started);
    }

    // The kubelet alone: a bare Pod like the deployment's, straight to the API server.
    const readyMs: number[] = [];
    const answerMs: number[] = [];
    const runcReadyMs: number[] = [];
    const runcAnswerMs: number[] = [];
    const bareNs = "bench-bare";
    await bareNamespace(ep, bareNs);
    // The same bare Pod under gVisor (as the deployment) and under runc (no sandbox), alternating.
    const bare = async (name: string, runtimeClassName: string | undefined): Promise<[number, number]> => {
      const started = performance.now();
      const res = await kubeRequest(ep, "POST", `/api/v1/namespaces/${bareNs}/pods`, {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name },
        spec: barePodSpec(images.hello.names[0] ?? "", runtimeClassName),
      });
      if (res.status !== 201) throw new Error(`bare pod: HTTP ${res.status} ${res.body.slice(0, 200)}`);
      let readyAt: number | undefined;
      let answeredAt: number | undefined;
      await until(
        `${name} Ready and answering`,
        async () => {
          const p = await getJson<Pod>(ep, `/api/v1/namespaces/${bareNs}/pods/${name}`);
          const ip = p.status?.podIP;
          if (answeredAt === undefined && ip && (await answer(`http://${ip}:8080/`)) !== undefined)
            answeredAt = performance.now();
          if (
            readyAt === undefined &&
            (p.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True")
          )
            readyAt = performance.now();
          return readyAt !== undefined && answeredAt !== undefined;
        },
        300_000,
        20,
      );
      await kubeRequest(ep, "DELETE", `/api/v1/namespaces/${bareNs}/pods/${name}?gracePeriodSeconds=0`);
      return [(readyAt ?? 0) - started, (answeredAt ?? 0) - started];
    };
    for (let i = 1; i <= RUNS; i++) {
      const [ready, answered] = await bare(`bare-gvisor-${i}`, "gvisor");
      readyMs.push(ready);
      answerMs.push(answered);
      const [runcReady, runcAnswered] = await bare(`bare-runc-${i}`, undefined);
      runcReadyMs.push(runcReady);
      runcAnswerMs.push(runcAnswered);
    }
    console.log(line("nodes: krane deploy → new container answers (pod IP)", toPod));
    console.log(line("nodes: krane deploy → new container answers through the sentinel", toSentinel));
    console.log(line("nodes: kubelet alone under gVisor, bare Pod POST → answers", answerMs));
    console.log(line("nodes: kubelet alone under gVisor, bare Pod POST → Ready", readyMs));
    console.log(line("nodes: kubelet alone under runc, bare Pod POST → answers", runcAnswerMs));
    console.log(line("nodes: kubelet alone under runc, bare Pod POST → Ready", runcReadyMs));
  } finally {
    await agent?.stop();
    await ctrl.close();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await benchNodes();

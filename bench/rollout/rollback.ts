// Rollback on real nodes (`npm run bench -- rollout`, after the engine's figures): how long from
// the command until all traffic is served by the old revision, in the same run for
//  - krane's instant rollback: the previous revision kept warm (at its size) after the rollout
//    that replaced it, so the rollback is a switch of the sentinel's weights;
//  - krane's rolling rollback: the same rollback with the warm window at 0 (what a user gets
//    otherwise): the old revision rolls out with new pods, readiness probes and all;
//  - `kubectl rollout undo` of a plain Deployment of the same image, probe and size behind a
//    Service (the Deployment controller's rollback, without krane).
// Rounds alternate between the three (the machine is shared: alternating spreads its load over
// all of them). Each round first rolls out a new revision (krane: a deploy with --unpin; plain:
// `kubectl set env`), waits until only it answers, then starts an open load of
// KRANE_BENCH_ROLLBACK_RATE requests/s through the sentinel's (or the Service's) address, asks for
// the rollback, and waits until only the old revision answers. "All traffic on the old revision"
// is the answer to the first request after which every request sent is answered by the old
// revision, or the last answer by another revision if one came later. Failed requests are
// counted. The warm window's cost is printed beside: the warm revision's requests (replicas × CPU
// and memory, held for the window after each rollout) and what its pods used while warm
// (the kubelet's summary: working set, CPU).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { Pool } from "undici";
import { Agent } from "../../src/agent/agent.js";
import { agentKubeConfigFrom } from "../../src/agent/rbac.js";
import { createApiClients } from "../../src/client/node.js";
import { startCluster } from "../../src/cluster/index.js";
import { workloadImages } from "../../src/cluster/images.js";
import { getJson, kubeRequest, type KubeEndpoint } from "../../src/cluster/kube-http.js";
import { realNodeSupport } from "../../src/cluster/nodes/host.js";
import { SENTINEL_NAMESPACE, SENTINEL_PORT } from "../../src/contracts/cluster.js";
import { InstanceStatus } from "../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { applySentinelRbac } from "../../src/sentinel/rbac.js";
import { kubectlOk } from "../../test/support/real-nodes.js";
import { startTestCtrl } from "../../test/integration/ctrl/support.js";
import { hit, hitMany } from "../../test/integration/sentinel/support.js";
import { bareNamespace, barePodSpec } from "../bare-pods.js";
import { load, pct, until } from "../support.js";

const ROUNDS = Number(process.env.KRANE_BENCH_ROLLBACK_ROUNDS ?? "5");
const RATE = Number(process.env.KRANE_BENCH_ROLLBACK_RATE ?? "100");
const REPLICAS = 2;
/** The hello app's size, as bare-pods.ts gives the plain Deployment's pods. */
const CPU_MILLICORES = 100;
const MEMORY_MIB = 128;
const WARM_WINDOW_SECONDS = 1800;
const REF = { workspace: "bench", project: "hello", environment: "production" };
const PLAIN_NS = "bench-plain";

interface Sample {
  sent: number;
  done: number;
  /** The answering revision, or "failed". */
  revision: string;
}

/** Open-loop load at `rate` requests/s through `pool`, each request's times and answering revision. */
function traffic(pool: Pool, rate: number): { stop: () => Promise<Sample[]> } {
  const out: Promise<Sample>[] = [];
  const started = performance.now();
  let running = true;
  const tick = (): void => {
    if (!running) return;
    const due = Math.floor(((performance.now() - started) / 1000) * rate);
    while (out.length < due) {
      const sent = performance.now();
      out.push(
        hit(pool).then((h) => ({
          sent,
          done: performance.now(),
          revision: h.status === 200 ? (h.answer?.revision ?? "?") : "failed",
        })),
      );
    }
    setTimeout(tick, 2);
  };
  tick();
  return {
    stop: async () => {
      running = false;
      return Promise.all(out);
    },
  };
}

/**
 * Ms from `asked` until all traffic is on `old`: the answer to the first request after which every
 * request sent is answered by it, or the last answer by anything else, whichever came later.
 */
export function allTrafficOn(samples: readonly Sample[], asked: number, old: string): number | undefined {
  const bySent = [...samples].sort((a, b) => a.sent - b.sent);
  let first = bySent.length;
  while (first > 0 && bySent[first - 1]?.revision === old) first--;
  const from = bySent[first];
  if (from === undefined) return undefined;
  const lastOther = Math.max(-Infinity, ...bySent.filter((s) => s.revision !== old).map((s) => s.done));
  return Math.max(from.done, lastOther) - asked;
}

interface Round {
  switchMs: number;
  callMs: number;
  requests: number;
  failed: number;
}

/** Measures one rollback: load on `pool`, `rollback()` answers the old revision, until only it answers. */
async function measure(pool: Pool, rollback: () => Promise<string>): Promise<Round> {
  const load = traffic(pool, RATE);
  await new Promise((r) => setTimeout(r, 1_000));
  const asked = performance.now();
  const old = await rollback();
  const callMs = performance.now() - asked;
  await until("only the old revision answering", () => onlyFrom(pool, old), 300_000, 50);
  await new Promise((r) => setTimeout(r, 1_000));
  const samples = await load.stop();
  const switchMs = allTrafficOn(samples, asked, old);
  if (switchMs === undefined) throw new Error(`bench: revision ${old} never took all the traffic`);
  return { switchMs, callMs, requests: samples.length, failed: samples.filter((s) => s.revision === "failed").length };
}

/** Whether 20 requests are all answered by `revision`. */
async function onlyFrom(pool: Pool, revision: string): Promise<boolean> {
  return (await hitMany(pool, 20, 4)).every((h) => h.status === 200 && h.answer?.revision === revision);
}

function row(what: string, rounds: readonly Round[]): string {
  const ms = rounds.map((r) => r.switchMs).sort((a, b) => a - b);
  const calls = rounds.map((r) => r.callMs).sort((a, b) => a - b);
  const s = (v: number): string => (v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${v.toFixed(0)} ms`);
  const failed = rounds.reduce((n, r) => n + r.failed, 0);
  const requests = rounds.reduce((n, r) => n + r.requests, 0);
  return (
    `| ${what.padEnd(40)} | ${s(pct(ms, 50)).padStart(8)} | ${s(pct(ms, 99)).padStart(8)} | ` +
    `${s(pct(calls, 50)).padStart(8)} | ${`${failed} of ${requests}`.padStart(14)} | ${String(rounds.length).padStart(6)} |`
  );
}

interface SummaryPod {
  podRef: { name: string; namespace: string };
  cpu?: { usageNanoCores?: number };
  memory?: { workingSetBytes?: number };
}

/** The kubelet's figures for a deployment's pods: working set MiB, CPU millicores. */
async function podUsage(
  ep: KubeEndpoint,
  ns: string,
  deploymentId: string,
): Promise<{ mib: number; millicores: number }> {
  const listed = await getJson<{ items: { metadata: { name: string } }[] }>(
    ep,
    `/api/v1/namespaces/${ns}/pods?labelSelector=krane.dev/deployment-id%3D${deploymentId}`,
  );
  const names = new Set(listed.items.map((p) => p.metadata.name));
  const summary = await getJson<{ pods?: SummaryPod[] }>(ep, "/api/v1/nodes/untrusted-real/proxy/stats/summary");
  const pods = (summary.pods ?? []).filter((p) => p.podRef.namespace === ns && names.has(p.podRef.name));
  if (pods.length === 0) throw new Error(`no pod of ${deploymentId} in the kubelet's summary`);
  return {
    mib: pods.reduce((n, p) => n + (p.memory?.workingSetBytes ?? 0), 0) / 2 ** 20,
    millicores: pods.reduce((n, p) => n + (p.cpu?.usageNanoCores ?? 0), 0) / 1e6,
  };
}

export async function benchRollback(): Promise<void> {
  const support = await realNodeSupport();
  if (!support.ok) {
    console.log(`rollback: skipped, this machine cannot run real nodes: ${support.reason}`);
    return;
  }
  const images = await workloadImages((l) => console.log(`  ${l}`));
  const image = images.hello.names[0] ?? "";
  const cluster = await startCluster({
    name: "bench-rollback",
    realNodes: ["untrusted", "sentinel"],
    images: [images.krane, images.hello],
  });
  const dir = mkdtempSync(join(tmpdir(), "krane-bench-rollback-"));
  const ep = cluster.endpoint();
  await applySentinelRbac(cluster.kubeConfig());
  const ctrl = await startTestCtrl(join(dir, "ctrl.db"), { opsListen: null, rolloutSweepIntervalMs: 200 });
  const api = createApiClients(ctrl.url, ctrl.adminToken);
  let agent: Agent | undefined;
  const pools: Pool[] = [];
  try {
    await api.regions.createRegion({ name: "local" });
    const { token } = await api.regions.createClusterToken({ region: "local", clusterName: "bench" });
    await api.workspaces.createWorkspace({ slug: REF.workspace });
    await api.projects.createProject({ workspace: REF.workspace, slug: REF.project });
    await api.environments.createEnvironment({
      workspace: REF.workspace,
      project: REF.project,
      slug: REF.environment,
      regions: [{ region: "local", replicas: REPLICAS }],
      sentinel: { image: "", replicas: 1, cpuMillicores: 200n, memoryMib: 256n },
      rollout: { maxSurge: "1", maxUnavailable: "0", warmWindowSeconds: WARM_WINDOW_SECONDS },
    });
    agent = new Agent({
      ctrlUrl: ctrl.url,
      token,
      region: "local",
      kubeconfig: await agentKubeConfigFrom(cluster.kubeConfig(), 3600),
      opsPort: -1,
      sentinelImage: images.krane.name,
      sentinelObserveIntervalMs: 500,
      log: pino({ level: "warn" }, pino.destination(2)),
    });
    await agent.start();

    // krane: through the sentinel's Service, as the instant-rollback test sends its load.
    const sentinelIp = await until(
      "the sentinel's Service",
      async () =>
        (
          await getJson<{ items: { spec: { clusterIP?: string } }[] }>(
            ep,
            `/api/v1/namespaces/${SENTINEL_NAMESPACE}/services`,
          )
        ).items[0]?.spec.clusterIP,
      300_000,
      200,
    );
    const krane = new Pool(`http://${sentinelIp}:${SENTINEL_PORT}`, { connections: 32, keepAliveTimeout: 10_000 });
    pools.push(krane);
    let run = 0;
    const probe = { method: "GET", path: "/healthz", intervalSeconds: 1, timeoutSeconds: 2, failureThreshold: 3 };
    /** Running instances per deployment id. */
    const running = async (): Promise<Map<string, number>> => {
      const s = await api.status.getEnvironmentStatus(REF);
      return new Map(
        s.deployments.map((d) => [
          d.deployment?.id ?? "",
          (d.regions[0]?.instances ?? []).filter((i) => i.status === InstanceStatus.RUNNING).length,
        ]),
      );
    };
    /** A new revision rolled out and answering alone; warm: the one before kept warm, else none. */
    const rollForward = async (warm: boolean): Promise<void> => {
      await api.environments.updateEnvironment({
        ...REF,
        rollout: { warmWindowSeconds: warm ? WARM_WINDOW_SECONDS : 0 },
      });
      const { deployment } = await api.deployments.createDeployment({
        ...REF,
        image,
        unpin: true,
        port: 8080,
        cpuMillicores: BigInt(CPU_MILLICORES),
        memoryMib: BigInt(MEMORY_MIB),
        env: [{ name: "RUN", value: String(run++) }],
        healthCheck: probe,
      });
      const id = deployment?.id ?? "";
      await until(
        "the new revision rolled out",
        async () => {
          const r = (await api.rollouts.getRolloutStatus(REF)).status?.regions[0];
          const n = await running();
          if (r?.complete !== true || r.targetDeploymentId !== id || n.get(id) !== REPLICAS) return false;
          const others = [...n].filter(([d]) => d !== id);
          // Warm: the one before runs at its size; else nothing but the new revision runs.
          if (!warm) return others.every(([, c]) => c === 0);
          return r.warm !== undefined && n.get(r.warm.deploymentId) === REPLICAS;
        },
        600_000,
        200,
      );
      await until("only the new revision answering", () => onlyFrom(krane, String(deployment?.revision)), 300_000, 100);
    };
    await rollForward(false);

    // Plain: a Deployment and a Service of the same image, probe and size, on the same node.
    await bareNamespace(ep, PLAIN_NS);
    const spec = barePodSpec(image, "gvisor") as { containers: Record<string, unknown>[] };
    const container = { ...spec.containers[0], env: [{ name: "HELLO_REVISION", value: "p0" }] };
    const created = await kubeRequest(ep, "POST", `/apis/apps/v1/namespaces/${PLAIN_NS}/deployments`, {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "plain" },
      spec: {
        replicas: REPLICAS,
        selector: { matchLabels: { app: "plain" } },
        strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
        template: { metadata: { labels: { app: "plain" } }, spec: { ...spec, containers: [container] } },
      },
    });
    if (created.status !== 201)
      throw new Error(`plain Deployment: HTTP ${created.status} ${created.body.slice(0, 200)}`);
    const svc = await kubeRequest(ep, "POST", `/api/v1/namespaces/${PLAIN_NS}/services`, {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "plain" },
      spec: { selector: { app: "plain" }, ports: [{ port: 8080, targetPort: 8080 }] },
    });
    if (svc.status !== 201) throw new Error(`plain Service: HTTP ${svc.status} ${svc.body.slice(0, 200)}`);
    const plainIp = (JSON.parse(svc.body) as { spec: { clusterIP: string } }).spec.clusterIP;
    const plain = new Pool(`http://${plainIp}:8080`, { connections: 32, keepAliveTimeout: 10_000 });
    pools.push(plain);
    const kubectl = (args: string[]): Promise<string> => kubectlOk(cluster, ["-n", PLAIN_NS, ...args]);
    await kubectl(["rollout", "status", "deployment/plain", "--timeout=600s"]);
    await until("the plain Deployment answering", () => onlyFrom(plain, "p0"), 300_000, 100);

    const warm: Round[] = [];
    const rolling: Round[] = [];
    const undo: Round[] = [];
    let warmUsage: { mib: number; millicores: number } | string = "not measured";
    for (let i = 1; i <= ROUNDS; i++) {
      await rollForward(true);
      if (i === 1) {
        // The warm revision's pods, idle, as the kubelet sees them (the sentinel sends them nothing).
        await new Promise((r) => setTimeout(r, 15_000));
        const warmId = (await api.rollouts.getRolloutStatus(REF)).status?.regions[0]?.warm?.deploymentId ?? "";
        const ns = (await api.deployments.getDeployment({ deploymentId: warmId })).deployment?.k8sNamespace ?? "";
        warmUsage = await podUsage(ep, ns, warmId).catch((e: unknown) => `not available (${String(e)})`);
      }
      warm.push(
        await measure(krane, async () => {
          const res = await api.rollouts.rollback({ ...REF, instant: true });
          return String(res.revision);
        }),
      );
      await rollForward(false);
      rolling.push(
        await measure(krane, async () => {
          const res = await api.rollouts.rollback(REF);
          if (res.instant) throw new Error("bench: a rollback with the warm window at 0 was instant");
          return String(res.revision);
        }),
      );
      // The undo goes back to what ran before the change: p0 every round.
      await kubectl(["set", "env", "deployment/plain", `HELLO_REVISION=p${i}`]);
      await kubectl(["rollout", "status", "deployment/plain", "--timeout=600s"]);
      await until("only the plain Deployment's new revision answering", () => onlyFrom(plain, `p${i}`), 300_000, 100);
      undo.push(
        await measure(plain, async () => {
          await kubectl(["rollout", "undo", "deployment/plain"]);
          return "p0";
        }),
      );
      console.log(
        `  round ${i}: warm ${warm.at(-1)?.switchMs.toFixed(0)} ms, rolling ${rolling.at(-1)?.switchMs.toFixed(0)} ms, ` +
          `kubectl undo ${undo.at(-1)?.switchMs.toFixed(0)} ms (${load()})`,
      );
    }

    console.log(
      `\nrollback → all traffic on the old revision, ${REPLICAS} replicas of the hello app (gVisor, ${CPU_MILLICORES}m, ${MEMORY_MIB} MiB, ` +
        `readiness probe every 1 s), ${RATE} requests/s during each, ${ROUNDS} rounds alternating, ${load()}:\n`,
    );
    console.log(
      "| rollback                                 |      p50 |      p99 | call p50 |         failed | rounds |",
    );
    console.log(
      "| ---------------------------------------- | -------- | -------- | -------- | -------------- | ------ |",
    );
    console.log(row("krane, warm (instant: weights switch)", warm));
    console.log(row("krane, rolling (warm window 0: new pods)", rolling));
    console.log(row("kubectl rollout undo, plain Deployment", undo));
    const used =
      typeof warmUsage === "string"
        ? warmUsage
        : `${warmUsage.mib.toFixed(0)} MiB working set, ${warmUsage.millicores.toFixed(1)} millicores of CPU`;
    console.log(
      `\nthe warm window's cost: the previous revision kept at its size, ${REPLICAS} × (${CPU_MILLICORES}m CPU, ${MEMORY_MIB} MiB) requested ` +
        `for ${WARM_WINDOW_SECONDS / 60} minutes after each rollout; its idle pods used ${used}`,
    );
  } finally {
    for (const p of pools) await p.close();
    await agent?.stop();
    await ctrl.close();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

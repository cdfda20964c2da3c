// Outage scenarios on the real processes and a real local cluster, shared by the tests (few
// cycles, loose bounds) and `npm run bench -- outages` (more cycles, the targets printed next to
// the figures):
//  - ctrl killed with SIGKILL and restarted, again and again, with a `krane agent` process
//    connected: how long after ctrl is ready the agent's streams are connected again, and how long
//    a deploy made the moment ctrl is ready takes to reach the cluster (its ReplicaSet appears);
//  - the local kube-apiserver frozen (SIGSTOP) while the agent runs and a change is made: how long
//    until the agent's `krane_agent_kube_api_up` shows it, and how long after SIGCONT until the
//    cluster holds the change.
// None of them asserts: the caller decides what the figures must be.
import { join } from "node:path";
import type { KubeConfig } from "@kubernetes/client-node";
import { createClient } from "@connectrpc/connect";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { RolloutService } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { agentKubeConfigFrom } from "../../../src/agent/rbac.js";
import type { LocalCluster } from "../../../src/cluster/index.js";
import { KubeClient } from "../../../src/kube/client.js";
import { resources } from "../../../src/kube/resources.js";
import { LABEL_DEPLOYMENT_ID } from "../../../src/contracts/labels.js";
import { generateToken } from "../../../src/ctrl/domain/tokens.js";
import { transportFor } from "../../integration/ctrl/support.js";
import { ReplicaSetSampler, specReplicas } from "./checks.js";
import { AgentChild, CtrlChild, metric, sleep, until, writeKubeconfig } from "./processes.js";

export interface OutageResult {
  readonly name: string;
  readonly problems: string[];
}

interface Setup {
  readonly ctrl: CtrlChild;
  readonly agent: AgentChild;
  readonly admin: string;
  readonly ref: { workspace: string; project: string; environment: string };
  readonly region: string;
  readonly environmentId: string;
  readonly kube: KubeClient;
  readonly sampler: ReplicaSetSampler;
  close(): Promise<void>;
}

/** ctrl (a process on SQLite in `dir`), one environment in `region`, a `krane agent` process connected to it. */
async function setup(cluster: LocalCluster, dir: string, region: string, replicas: number): Promise<Setup> {
  const admin = generateToken("user");
  const ctrl = await CtrlChild.create(join(dir, `${region}.db`), dir, admin);
  await ctrl.startReady();
  const t = transportFor(ctrl.url, admin);
  const ref = { workspace: "acme", project: "web", environment: region };
  await createClient(RegionService, t).createRegion({ name: region });
  await createClient(WorkspaceService, t).createWorkspace({ slug: "acme" });
  await createClient(ProjectService, t).createProject({ workspace: "acme", slug: "web" });
  const { environment } = await createClient(EnvironmentService, t).createEnvironment({
    workspace: "acme",
    project: "web",
    slug: region,
    regions: [{ region, replicas }],
    rollout: { maxSurge: "1", maxUnavailable: "0", revisionHistoryLimit: 100 },
  });
  const environmentId = environment?.id ?? "";
  const { token } = await createClient(RegionService, t).createClusterToken({ region });
  const kubeconfig = writeKubeconfig(
    (await agentKubeConfigFrom(cluster.kubeConfig())) as KubeConfig,
    join(dir, `${region}.kubeconfig`),
  );
  const agent = await AgentChild.create({ ctrlUrl: ctrl.url, token, region, kubeconfig, dir, agentId: region });
  agent.start();
  const kube = new KubeClient(cluster.kubeConfig(), { fieldManager: "outage-test" });
  const sampler = new ReplicaSetSampler(kube, "ws-acme", environmentId);
  await sampler.synced();
  return {
    ctrl,
    agent,
    admin,
    ref,
    region,
    environmentId,
    kube,
    sampler,
    async close() {
      await agent.stop();
      await sampler.stop();
      kube.close();
      await ctrl.stop();
    },
  };
}

/** Creates a deployment through ctrl; its id. */
async function deploy(s: Setup, image: string): Promise<string> {
  const { deployment } = await createClient(DeploymentService, transportFor(s.ctrl.url, s.admin)).createDeployment(
    { ...s.ref, image },
    { timeoutMs: 5000 },
  );
  return deployment?.id ?? "";
}

/** Waits until a ReplicaSet of deployment `id` exists in the cluster; when it was first seen (unix ms). */
async function replicaSetSeen(s: Setup, id: string, timeoutMs: number): Promise<number | undefined> {
  return until(() => s.sampler.events.find((e) => e.deploymentId === id)?.at, timeoutMs, 5);
}

/**
 * `cycles` times: SIGKILL of ctrl, a restart, and from the moment /readyz answers 200: the time
 * until the agent's streams are all connected again, and the time until a deploy made then has
 * its ReplicaSet in the cluster.
 */
export async function ctrlRestartsWithAgent(
  cluster: LocalCluster,
  dir: string,
  o: { cycles: number },
): Promise<OutageResult & { reconnectMs: number[]; deployMs: number[] }> {
  const s = await setup(cluster, dir, "ctrl-restarts", 1);
  const problems: string[] = [];
  const reconnectMs: number[] = [];
  const deployMs: number[] = [];
  try {
    if (!(await until(() => s.agent.streamsConnected().then((c) => (c ? true : undefined)), 60_000, 50)))
      problems.push(`the agent never connected: ${s.agent.output.slice(-2000)}`);
    for (let i = 0; i < o.cycles && problems.length === 0; i++) {
      await s.ctrl.kill9();
      // The agent notices the reset connection; then ctrl comes back after a short, varying pause.
      await until(() => s.agent.streamsConnected().then((c) => (c ? undefined : true)), 5000, 20);
      await sleep(100 + Math.random() * 400);
      s.ctrl.start();
      const ready = await s.ctrl.ready();
      const id = await deploy(s, `registry.example.com/web:restart-${i}`).catch((err: unknown) => {
        problems.push(`cycle ${i + 1}: deploy at readiness failed: ${String(err)}`);
        return "";
      });
      const connected = await until(
        () => s.agent.streamsConnected().then((c) => (c ? Date.now() : undefined)),
        30_000,
        5,
      );
      if (connected === undefined) problems.push(`cycle ${i + 1}: the agent did not reconnect within 30 s`);
      else reconnectMs.push(Math.max(0, connected - ready));
      if (!id) continue;
      const seen = await replicaSetSeen(s, id, 30_000);
      if (seen === undefined)
        problems.push(`cycle ${i + 1}: the deploy made at readiness did not reach the cluster within 30 s`);
      else deployMs.push(seen - ready);
    }
    return { name: `ctrl kill -9 and restart ×${o.cycles} with the agent connected`, problems, reconnectMs, deployMs };
  } finally {
    await s.close();
  }
}

/**
 * The local kube-apiserver frozen (SIGSTOP) for `freezeMs` while the agent runs; a scale is made
 * through ctrl during the freeze. Measures: from SIGSTOP until the agent's metric
 * `krane_agent_kube_api_up` reads 0; from SIGCONT until the metric reads 1 and until the cluster
 * holds the scaled count.
 */
export async function apiServerFrozen(
  cluster: LocalCluster,
  dir: string,
  o: { freezeMs: number },
): Promise<OutageResult & { detectedMs?: number; upAgainMs?: number; convergedMs?: number }> {
  const s = await setup(cluster, dir, "api-frozen", 1);
  const problems: string[] = [];
  const pid = cluster.state.pids["kube-apiserver"];
  if (pid === undefined) throw new Error("apiServerFrozen: the cluster's kube-apiserver pid is unknown");
  let frozen = false;
  const up = (): Promise<number | undefined> => metric(`${s.agent.opsUrl}/metrics`, "krane_agent_kube_api_up");
  try {
    const id = await deploy(s, "registry.example.com/web:0");
    if ((await replicaSetSeen(s, id, 60_000)) === undefined)
      problems.push(`the first deploy never reached the cluster: ${s.agent.output.slice(-2000)}`);
    if ((await until(() => up().then((v) => (v === 1 ? true : undefined)), 30_000, 100)) === undefined)
      problems.push("the agent never saw the API server up");
    if (problems.length > 0) return { name: "API server frozen", problems };
    process.kill(pid, "SIGSTOP");
    frozen = true;
    const stoppedAt = Date.now();
    await createClient(RolloutService, transportFor(s.ctrl.url, s.admin)).scale({
      ...s.ref,
      region: s.region,
      replicas: 2,
    });
    const detected = await until(() => up().then((v) => (v === 0 ? Date.now() : undefined)), o.freezeMs, 50);
    const rest = o.freezeMs - (Date.now() - stoppedAt);
    if (rest > 0) await sleep(rest);
    process.kill(pid, "SIGCONT");
    frozen = false;
    const resumedAt = Date.now();
    const scaled = await until(
      async () => {
        const rs = await s.kube
          .list(resources.replicaSets, { namespace: "ws-acme", labelSelector: `${LABEL_DEPLOYMENT_ID}=${id}` })
          .catch(() => undefined);
        const first = rs?.items[0];
        return first && specReplicas(first) === 2 ? Date.now() : undefined;
      },
      60_000,
      20,
    );
    const upAgain = await until(() => up().then((v) => (v === 1 ? Date.now() : undefined)), 30_000, 50);
    if (detected === undefined)
      problems.push(`the agent's metric did not show the frozen API server within ${o.freezeMs} ms`);
    if (scaled === undefined)
      problems.push("the change made during the freeze did not reach the cluster within 60 s after it");
    return {
      name: `API server frozen ${o.freezeMs / 1000} s (SIGSTOP)`,
      problems,
      ...(detected !== undefined ? { detectedMs: detected - stoppedAt } : {}),
      ...(upAgain !== undefined ? { upAgainMs: upAgain - resumedAt } : {}),
      ...(scaled !== undefined ? { convergedMs: scaled - resumedAt } : {}),
    };
  } finally {
    if (frozen) process.kill(pid, "SIGCONT");
    await s.close();
  }
}

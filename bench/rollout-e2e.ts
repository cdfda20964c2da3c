// Rollout propagation on the real cluster: from an instance becoming ready in
// Kubernetes to the next scale step applied. Local cluster (KWOK pods ready after 1–2.5 s), ctrl on
// SQLite in this process, the agent as its ServiceAccount; repeated 10-replica rollouts with
// maxSurge 25% / maxUnavailable 0. Two watches on the API server time the pod Ready transitions
// and the ReplicaSet size changes; each pod-ready is paired with the first size change after it
// (changes right after a deploy are not counted). The figure includes the API server's own time
// (pod status → watch, ReplicaSet apply → watch), the agent's report, the pass and the stream.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Registry } from "prom-client";
import { startCluster } from "../src/cluster/index.js";
import { Agent } from "../src/agent/agent.js";
import { silentLogger } from "../src/base/log.js";
import { KubeClient } from "../src/kube/client.js";
import { isRecord } from "../src/kube/object.js";
import { resources } from "../src/kube/resources.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../src/gen/krane/ctrl/v1/api_pb.js";
import { RolloutService } from "../src/gen/krane/ctrl/v1/rollout_pb.js";
import { agentKubeConfig } from "../test/integration/agent/support.js";
import { startTestCtrl } from "../test/integration/ctrl/support.js";
import { pct } from "./support.js";

const ROLLOUTS = Number(process.env.KRANE_BENCH_ROLLOUTS ?? 5);

function podIsReady(obj: unknown): { name: string; ready: boolean } | null {
  if (!isRecord(obj) || !isRecord(obj.metadata) || typeof obj.metadata.name !== "string") return null;
  const status = isRecord(obj.status) ? obj.status : {};
  const conditions: unknown[] = Array.isArray(status.conditions) ? status.conditions : [];
  return {
    name: obj.metadata.name,
    ready: conditions.some((c) => isRecord(c) && c.type === "Ready" && c.status === "True"),
  };
}

export async function benchRolloutPropagation(): Promise<void> {
  const cluster = await startCluster({ name: "bench-rollout", pods: { readyDelayMs: 1000, readyJitterMs: 1500 } });
  const dir = mkdtempSync(join(tmpdir(), "krane-bench-rollout-"));
  const ctrl = await startTestCtrl(join(dir, "ctrl.db"));
  const stop = new AbortController();
  let agent: Agent | undefined;
  try {
    const t = ctrl.adminToken;
    const ref = { workspace: "bench", project: "app", environment: "prod" };
    await ctrl.client(RegionService, t).createRegion({ name: "local" });
    await ctrl.client(WorkspaceService, t).createWorkspace({ slug: ref.workspace });
    await ctrl.client(ProjectService, t).createProject({ workspace: ref.workspace, slug: ref.project });
    const { environment } = await ctrl.client(EnvironmentService, t).createEnvironment({
      ...{ workspace: ref.workspace, project: ref.project },
      slug: ref.environment,
      regions: [{ region: "local", replicas: 10 }],
      rollout: { maxSurge: "25%", maxUnavailable: "0" },
    });
    const envId = environment?.id ?? "";
    agent = new Agent({
      ctrlUrl: ctrl.url,
      token: await ctrl.agentToken("local"),
      region: "local",
      kubeconfig: await agentKubeConfig(cluster),
      log: silentLogger,
      registry: new Registry(),
      opsPort: -1,
      resyncPeriodMs: 30_000,
    });
    await agent.start();

    const kube = new KubeClient(cluster.kubeConfig(), { fieldManager: "bench" });
    const readyAt: number[] = [];
    const stepAt: number[] = [];
    const deployAt: number[] = [];
    const wasReady = new Set<string>();
    const sizes = new Map<string, number>();
    const selector = `krane.dev/environment-id=${envId}`;
    void kube
      .watch(
        resources.pods,
        { labelSelector: selector },
        (type, obj) => {
          const p = podIsReady(obj);
          if (!p || type === "DELETED") return;
          if (p.ready && !wasReady.has(p.name)) readyAt.push(performance.now());
          if (p.ready) wasReady.add(p.name);
        },
        stop.signal,
      )
      .catch(() => undefined);
    void kube
      .watch(
        resources.replicaSets,
        { labelSelector: selector },
        (_type, obj) => {
          if (!isRecord(obj) || !isRecord(obj.metadata) || !isRecord(obj.spec)) return;
          const name = String(obj.metadata.name);
          const n = typeof obj.spec.replicas === "number" ? obj.spec.replicas : 0;
          if (sizes.has(name) && sizes.get(name) !== n) stepAt.push(performance.now());
          sizes.set(name, n);
        },
        stop.signal,
      )
      .catch(() => undefined);

    const rollouts = ctrl.client(RolloutService, t);
    const complete = async (): Promise<void> => {
      const deadline = Date.now() + 90_000;
      for (;;) {
        const { status } = await rollouts.getRolloutStatus(ref);
        if (status?.regions.every((r) => r.complete)) return;
        if (Date.now() > deadline) throw new Error("bench: rollout did not complete in 90 s");
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    const t0 = performance.now();
    for (let i = 0; i <= ROLLOUTS; i++) {
      deployAt.push(performance.now());
      await ctrl.client(DeploymentService, t).createDeployment({ ...ref, image: `app:${i}` });
      await complete();
    }
    const elapsed = (performance.now() - t0) / 1000;

    // Pair each pod-ready with the first size change after it, unless a deploy came in between.
    const lat: number[] = [];
    for (let k = 0; k < readyAt.length; k++) {
      const r = readyAt[k] ?? 0;
      const next = readyAt[k + 1] ?? Infinity;
      const step = stepAt.find((s) => s > r);
      if (step === undefined || step > next) continue;
      if (deployAt.some((d) => d > r && d < step)) continue;
      lat.push(step - r);
    }
    lat.sort((a, b) => a - b);
    console.log(
      `rollout: pod ready → next scale step applied   p50 ${pct(lat, 50).toFixed(1)} ms, p99 ${pct(lat, 99).toFixed(1)} ms, max ${pct(lat, 100).toFixed(1)} ms (${lat.length} steps, ${ROLLOUTS} rollouts of 10 replicas in ${elapsed.toFixed(0)} s)`,
    );
  } finally {
    stop.abort();
    await agent?.stop();
    await ctrl.close();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

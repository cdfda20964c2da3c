// What the autoscaling tests on real nodes share: ctrl (SQLite, restartable on the same address and
// database) and the fenced agent driving the local cluster's real nodes, one environment with
// krane's own sentinel and the hello app under gVisor, and the ways to look at it: ctrl's count
// and decision, the ReplicaSet the cluster has, the sentinels' metrics, real load through the
// sentinel's Service.
import { join } from "node:path";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { Pool, request } from "undici";
import type { Agent } from "../../../src/agent/agent.js";
import { SENTINEL_NAMESPACE, SENTINEL_PORT } from "../../../src/contracts/cluster.js";
import { LABEL_DEPLOYMENT_ID } from "../../../src/contracts/labels.js";
import {
  DeploymentService,
  EnvironmentService,
  type RolloutPolicySchema,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
  type GetEnvironmentStatusResponse,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import type { AutoscaleUpdateSchema } from "../../../src/gen/krane/ctrl/v1/autoscale_pb.js";
import { InstanceStatus } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { applySentinelRbac } from "../../../src/sentinel/rbac.js";
import { eventually } from "../../support/cluster.js";
import { kubectl, kubectlJson, type RealClusterHandle } from "../../support/real-nodes.js";
import { routingAgent } from "../agent/support.js";
import { startTestCtrl, type TestCtrl } from "../ctrl/support.js";

export const REGION = "local";
export const REF = { workspace: "acme", project: "shop", environment: "production" };
const NS = "ws-acme";

const t0 = performance.now();
/** Progress on stderr, so a slow run shows where its time went. */
export function step(what: string): void {
  process.stderr.write(`autoscale: ${((performance.now() - t0) / 1000).toFixed(0)} s: ${what}\n`);
}

type Policy = MessageInitShape<typeof AutoscaleUpdateSchema>;
type Rollout = MessageInitShape<typeof RolloutPolicySchema>;

export class World {
  ctrl!: TestCtrl;
  agent!: Agent;
  sentinelUrl = "";
  v1 = "";
  #port = 0;
  #cpu = 500n;

  constructor(
    readonly h: RealClusterHandle,
    readonly db: string,
  ) {}

  /** ctrl, the agent, the environment (1 replica, `policy`) and v1 answering through the sentinel. */
  async start(policy: Policy, o: { cpuMillicores?: number; rollout?: Rollout } = {}): Promise<void> {
    this.#cpu = BigInt(o.cpuMillicores ?? 500);
    const cluster = await this.h.ready();
    step("cluster ready");
    await applySentinelRbac(cluster.kubeConfig());
    this.ctrl = await startTestCtrl(this.db, { rolloutSweepIntervalMs: 300 });
    this.#port = Number(new URL(this.ctrl.url).port);
    const t = this.ctrl.adminToken;
    await this.ctrl.client(RegionService, t).createRegion({ name: REGION });
    await this.ctrl.client(WorkspaceService, t).createWorkspace({ slug: REF.workspace });
    await this.ctrl.client(ProjectService, t).createProject({ workspace: REF.workspace, slug: REF.project });
    await this.envs().createEnvironment({
      ...REF,
      slug: REF.environment,
      regions: [{ region: REGION, replicas: 1 }],
      sentinel: { image: "", replicas: 1, cpuMillicores: 1000n, memoryMib: 256n },
      rollout: { maxSurge: "1", maxUnavailable: "0", ...o.rollout },
    });
    this.agent = await routingAgent(cluster, this.ctrl, REGION, {
      sentinelImage: (await this.h.images()).krane.name,
      sentinelObserveIntervalMs: 300,
      autoscaleIntervalMs: 300,
      measureIntervalMs: 0,
      usageIntervalMs: 2_000,
    });
    await this.agent.start();
    this.v1 = await this.deploy("krane.local/hello:v1");
    await eventually(
      "1 running instance of v1",
      async () => ((await this.running()) === 1 ? true : undefined),
      300_000,
    );
    const svc = await kubectlJson<{ items: { spec: { clusterIP: string } }[] }>(this.h.cluster, [
      "services",
      "-n",
      SENTINEL_NAMESPACE,
    ]);
    this.sentinelUrl = `http://${svc.items[0]?.spec.clusterIP}:${SENTINEL_PORT}`;
    await eventually(
      "the sentinel routes to v1",
      async () => {
        const res = await request(`${this.sentinelUrl}/`).catch(() => undefined);
        if (!res) return undefined;
        await res.body.dump();
        return res.statusCode === 200 ? true : undefined;
      },
      180_000,
    );
    await this.setPolicy(policy);
    step("environment serving");
  }

  /** A new revision of the hello app (`env`: its HELLO_* misbehaviour); its deployment id. */
  async deploy(image: string, env: Record<string, string> = {}): Promise<string> {
    const { deployment } = await this.ctrl.client(DeploymentService, this.ctrl.adminToken).createDeployment({
      ...REF,
      image,
      port: 8080,
      cpuMillicores: this.#cpu,
      memoryMib: 256n,
      env: Object.entries(env).map(([name, value]) => ({ name, value })),
      healthCheck: {
        method: "GET",
        path: "/healthz",
        intervalSeconds: 1,
        timeoutSeconds: 2,
        failureThreshold: 3,
        initialDelaySeconds: 0,
      },
    });
    return deployment?.id ?? "";
  }

  async stop(): Promise<void> {
    await this.agent?.stop();
    await this.ctrl?.close();
  }

  envs() {
    return this.ctrl.client(EnvironmentService, this.ctrl.adminToken);
  }

  setPolicy(autoscale: Policy) {
    return this.envs().updateEnvironment({ ...REF, autoscale });
  }

  /** ctrl comes back on the same address and database. */
  async restartCtrl(): Promise<void> {
    this.ctrl = await startTestCtrl(this.db, {
      rolloutSweepIntervalMs: 300,
      listen: { host: "127.0.0.1", port: this.#port },
    });
  }

  status(): Promise<GetEnvironmentStatusResponse> {
    return this.ctrl.client(StatusService, this.ctrl.adminToken).getEnvironmentStatus(REF);
  }

  async running(deploymentId = this.v1): Promise<number> {
    const d = (await this.status()).deployments.find((x) => x.deployment?.id === deploymentId);
    return (d?.regions[0]?.instances ?? []).filter((i) => i.status === InstanceStatus.RUNNING).length;
  }

  async regionCount(): Promise<number> {
    return (await this.envs().getEnvironment(REF)).environment?.regions[0]?.replicas ?? -1;
  }

  /** A revision's ReplicaSet (default v1) as the cluster has it: its size and ready pods. */
  async replicaSet(deploymentId = this.v1): Promise<{ size: number; ready: number }> {
    const list = await kubectlJson<{
      items: {
        metadata: { labels?: Record<string, string> };
        spec: { replicas: number };
        status: { readyReplicas?: number };
      }[];
    }>(this.h.cluster, ["replicasets", "-n", NS]);
    const rs = list.items.find((x) => x.metadata.labels?.[LABEL_DEPLOYMENT_ID] === deploymentId);
    return { size: rs?.spec.replicas ?? -1, ready: rs?.status.readyReplicas ?? 0 };
  }

  /** A sample's value summed over the sentinel pods (`name` with its labels, as exposed). */
  async sentinelMetric(name: string): Promise<number> {
    const pods = await kubectlJson<{ items: { status: { podIP?: string } }[] }>(this.h.cluster, [
      "pods",
      "-n",
      SENTINEL_NAMESPACE,
    ]);
    let sum = 0;
    for (const p of pods.items) {
      const text = await fetch(`http://${p.status.podIP}:8041/metrics`).then((r) => r.text());
      for (const l of text.split("\n")) if (l.startsWith(`${name} `)) sum += Number(l.split(" ")[1]);
    }
    return sum;
  }

  /**
   * `workers` clients each keeping one slow request in flight through the sentinel until stopped;
   * `cpuMs`: each request keeps its instance's CPU busy that long (the hello app's `?cpu=`).
   */
  load(workers: number, latencyMs = 0, cpuMs = 0): { stop(): Promise<{ ok: number; failed: number }> } {
    const pool = new Pool(this.sentinelUrl, { connections: workers, keepAliveTimeout: 10_000 });
    let running = true;
    let ok = 0;
    let failed = 0;
    const loops = Array.from({ length: workers }, async () => {
      while (running) {
        try {
          const q = [latencyMs > 0 ? `latency=${latencyMs}` : "", cpuMs > 0 ? `cpu=${cpuMs}` : ""].filter(Boolean);
          const path = q.length > 0 ? `/?${q.join("&")}` : "/";
          const res = await pool.request({ method: "GET", path, headersTimeout: 120_000 });
          await res.body.dump();
          if (res.statusCode === 200) ok++;
          else failed++;
        } catch {
          failed++;
        }
      }
    });
    return {
      async stop() {
        running = false;
        await Promise.all(loops);
        await pool.close();
        return { ok, failed };
      },
    };
  }

  /** What the cluster looked like, printed when a wait failed. */
  async dump(): Promise<void> {
    for (const args of [
      ["get", "pods", "-A", "-o", "wide"],
      ["get", "rs", "-n", NS, "-o", "wide"],
      ["logs", "-n", SENTINEL_NAMESPACE, "-l", "app.kubernetes.io/component=sentinel", "--tail=30"],
    ])
      console.log(`$ kubectl ${args.join(" ")}\n${(await kubectl(this.h.cluster, args)).stdout}`);
    console.log(JSON.stringify((await this.status().catch(() => undefined))?.autoscale ?? []));
  }

  /** Waits, printing the cluster when the wait fails. */
  async until(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
    try {
      await eventually(what, async () => ((await check()) ? true : undefined), timeoutMs);
    } catch (err) {
      await this.dump();
      throw err;
    }
    step(what);
  }
}

/** Samples `read` every 250 ms until `until` settles; the samples. */
export async function sampleWhile<T>(read: () => Promise<T>, until: Promise<unknown>): Promise<T[]> {
  const out: T[] = [];
  let done = false;
  void until.finally(() => (done = true)).catch(() => undefined);
  while (!done) {
    out.push(await read());
    await new Promise((r) => setTimeout(r, 250));
  }
  return out;
}

export function dbIn(dir: string): string {
  return join(dir, "ctrl.db");
}

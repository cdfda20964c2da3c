// Autoscaling on real containers, one cluster for the file (heavy: run it on its own). ctrl and
// the fenced agent drive the local cluster's real nodes; the load is real requests through the
// environment's sentinel (krane's own image) to the hello app under gVisor, whose `?latency=`
// keeps them in flight; the kubelet's readiness probes decide when an instance is Ready.
//  - A load step up: the region follows within the scale-up window (0 s); the load stops: it comes
//    down after the scale-down window, never below min.
//  - ctrl down: the region still scales up from its sentinels' load (the agent resizes the settled
//    ReplicaSet itself), and when ctrl is back it takes the count without the ReplicaSet moving.
//  - Idle → 0; 1,000 concurrent requests at zero are held by the sentinel, wake the environment
//    and are all answered.
//  - Over the held-request bound: 503 with Retry-After, never a drop, and the sentinel stays
//    healthy.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Agent as HttpAgent, Pool, request } from "undici";
import type { Agent } from "../../src/agent/agent.js";
import { SENTINEL_NAMESPACE, SENTINEL_PORT } from "../../src/contracts/cluster.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";
import { InstanceStatus } from "../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { applySentinelRbac } from "../../src/sentinel/rbac.js";
import { eventually } from "../support/cluster.js";
import { kubectl, kubectlJson, realNodesSkip, useRealCluster } from "../support/real-nodes.js";
import { routingAgent } from "./agent/support.js";
import { startTestCtrl, tempDir, type TestCtrl } from "./ctrl/support.js";

const skip = await realNodesSkip();
const t0 = performance.now();
/** Progress on stderr, so a slow run shows where its time went. */
const step = (what: string): void =>
  void process.stderr.write(`autoscale.test: ${((performance.now() - t0) / 1000).toFixed(0)} s: ${what}\n`);
const REGION = "local";
const REF = { workspace: "acme", project: "shop", environment: "production" };
const NS = "ws-acme";

describe("autoscaling on real containers", { skip }, () => {
  const h = useRealCluster(["untrusted", "sentinel"]);
  const dir = tempDir("krane-autoscale-");
  const db = join(dir.path, "ctrl.db");
  let ctrl: TestCtrl;
  let ctrlPort = 0;
  let agent: Agent;
  let sentinelUrl = "";
  let v1 = "";

  const status = () => ctrl.client(StatusService, ctrl.adminToken).getEnvironmentStatus(REF);
  const running = async (): Promise<number> => {
    const d = (await status()).deployments.find((x) => x.deployment?.id === v1);
    return (d?.regions[0]?.instances ?? []).filter((i) => i.status === InstanceStatus.RUNNING).length;
  };
  const regionCount = async (): Promise<number> =>
    (await ctrl.client(EnvironmentService, ctrl.adminToken).getEnvironment(REF)).environment?.regions[0]?.replicas ??
    -1;
  interface Rs {
    metadata: { labels?: Record<string, string> };
    spec: { replicas: number };
    status: { readyReplicas?: number };
  }
  /** v1's ReplicaSet as the cluster has it: its size and ready pods. */
  const replicaSet = async (): Promise<{ size: number; ready: number }> => {
    const list = await kubectlJson<{ items: Rs[] }>(h.cluster, ["replicasets", "-n", NS]);
    const rs = list.items.find((x) => x.metadata.labels?.["krane.dev/deployment-id"] === v1);
    return { size: rs?.spec.replicas ?? -1, ready: rs?.status.readyReplicas ?? 0 };
  };
  const sentinelMetric = async (name: string): Promise<number> => {
    const pods = await kubectlJson<{ items: { status: { podIP?: string } }[] }>(h.cluster, [
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
  };
  const setPolicy = (autoscale: Parameters<ReturnType<typeof envClient>["updateEnvironment"]>[0]["autoscale"]) =>
    envClient().updateEnvironment({ ...REF, autoscale });
  const envClient = () => ctrl.client(EnvironmentService, ctrl.adminToken);

  /** `workers` clients each keeping one slow request in flight through the sentinel until stopped. */
  function load(workers: number, latencyMs: number): { stop(): Promise<{ ok: number; failed: number }> } {
    const pool = new Pool(sentinelUrl, { connections: workers, keepAliveTimeout: 10_000 });
    let running = true;
    let ok = 0;
    let failed = 0;
    const loops = Array.from({ length: workers }, async () => {
      while (running) {
        try {
          const res = await pool.request({ method: "GET", path: `/?latency=${latencyMs}` });
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

  /** Samples `read` every 250 ms until `until` resolves; the samples. */
  async function sampleWhile<T>(read: () => Promise<T>, until: Promise<unknown>): Promise<T[]> {
    const out: T[] = [];
    let done = false;
    void until.finally(() => (done = true));
    while (!done) {
      out.push(await read());
      await new Promise((r) => setTimeout(r, 250));
    }
    return out;
  }

  const dump = async (): Promise<void> => {
    for (const args of [
      ["get", "pods", "-A", "-o", "wide"],
      ["get", "rs", "-n", NS, "-o", "wide"],
      ["logs", "-n", SENTINEL_NAMESPACE, "-l", "app.kubernetes.io/component=sentinel", "--tail=30"],
    ])
      console.log(`$ kubectl ${args.join(" ")}\n${(await kubectl(h.cluster, args)).stdout}`);
    console.log(JSON.stringify((await status().catch(() => undefined))?.autoscale ?? []));
  };

  before(
    async () => {
      const cluster = await h.ready();
      step("cluster ready");
      await applySentinelRbac(cluster.kubeConfig());
      ctrl = await startTestCtrl(db, { rolloutSweepIntervalMs: 300 });
      ctrlPort = Number(new URL(ctrl.url).port);
      const t = ctrl.adminToken;
      await ctrl.client(RegionService, t).createRegion({ name: REGION });
      await ctrl.client(WorkspaceService, t).createWorkspace({ slug: REF.workspace });
      await ctrl.client(ProjectService, t).createProject({ workspace: REF.workspace, slug: REF.project });
      await envClient().createEnvironment({
        ...REF,
        slug: REF.environment,
        regions: [{ region: REGION, replicas: 1 }],
        sentinel: { image: "", replicas: 1, cpuMillicores: 1000n, memoryMib: 256n },
        rollout: { maxSurge: "1", maxUnavailable: "0" },
      });
      agent = await routingAgent(cluster, ctrl, REGION, {
        sentinelImage: (await h.images()).krane.name,
        sentinelObserveIntervalMs: 300,
        autoscaleIntervalMs: 300,
        measureIntervalMs: 0,
      });
      await agent.start();
      const { deployment } = await ctrl.client(DeploymentService, t).createDeployment({
        ...REF,
        image: "krane.local/hello:v1",
        port: 8080,
        cpuMillicores: 500n,
        memoryMib: 256n,
        healthCheck: {
          method: "GET",
          path: "/healthz",
          intervalSeconds: 1,
          timeoutSeconds: 2,
          failureThreshold: 3,
          initialDelaySeconds: 0,
        },
      });
      v1 = deployment?.id ?? "";
      step("deployed");
      await eventually("1 running instance of v1", async () => ((await running()) === 1 ? true : undefined), 300_000);
      const svc = await kubectlJson<{ items: { spec: { clusterIP: string } }[] }>(h.cluster, [
        "services",
        "-n",
        SENTINEL_NAMESPACE,
      ]);
      sentinelUrl = `http://${svc.items[0]?.spec.clusterIP}:${SENTINEL_PORT}`;
      await eventually(
        "the sentinel routes to v1",
        async () => {
          const res = await request(`${sentinelUrl}/`).catch(() => undefined);
          if (!res) return undefined;
          await res.body.dump();
          return res.statusCode === 200 ? true : undefined;
        },
        180_000,
      );
    },
    { timeout: 30 * 60_000 },
  );
  after(async () => {
    await agent?.stop();
    await ctrl?.close();
    dir.remove();
  });

  it(
    "a load step up is followed; the load gone, the count comes down after the window, never below min",
    { timeout: 10 * 60_000 },
    async () => {
      await setPolicy({
        minReplicas: 1,
        maxReplicas: 3,
        concurrencyTarget: 2,
        scaleUpWindowSeconds: 0,
        scaleDownWindowSeconds: 20,
      });
      const started = performance.now();
      const l = load(6, 1_000);
      try {
        await eventually("3 running instances", async () => ((await running()) === 3 ? true : undefined), 240_000);
      } catch (err) {
        await dump();
        throw err;
      }
      step(`load step: 3 instances serving after ${((performance.now() - started) / 1000).toFixed(1)} s`);
      const s = await status();
      assert.match(s.autoscale[0]?.reason ?? "", /in flight at 2 per instance/, "the reason names the load");
      assert.equal(await regionCount(), 3, "ctrl holds the count the agent decided");
      const { ok } = await l.stop();
      assert.ok(ok > 0);
      const stopped = performance.now();
      const down = eventually(
        "back to 1 instance",
        async () => ((await replicaSet()).size === 1 ? true : undefined),
        240_000,
      );
      const sizes = await sampleWhile(async () => (await replicaSet()).size, down);
      await down;
      const after = (performance.now() - stopped) / 1000;
      step(
        `load gone: down to 1 after ${after.toFixed(1)} s (window 20 s); sizes seen ${[...new Set(sizes)].join(" ")}`,
      );
      assert.ok(after >= 18, `came down after ${after.toFixed(1)} s, inside the 20 s window`);
      assert.ok(Math.min(...sizes) >= 1, "never below min");
      await eventually("ctrl holds 1", async () => ((await regionCount()) === 1 ? true : undefined), 60_000);
    },
  );

  it(
    "ctrl down: the region still scales up from its sentinels' load; ctrl back takes the count without a flap",
    { timeout: 10 * 60_000 },
    async () => {
      await ctrl.close();
      const l = load(6, 1_000);
      try {
        await eventually(
          "3 ready pods with ctrl down",
          async () => {
            const rs = await replicaSet();
            return rs.size === 3 && rs.ready === 3 ? true : undefined;
          },
          240_000,
        );
      } catch (err) {
        await dump();
        throw err;
      } finally {
        // ctrl comes back on the same address and database.
        ctrl = await startTestCtrl(db, { rolloutSweepIntervalMs: 300, listen: { host: "127.0.0.1", port: ctrlPort } });
      }
      const taken = eventually(
        "ctrl takes the region's count",
        async () => ((await regionCount()) === 3 ? true : undefined),
        120_000,
      );
      const sizes = await sampleWhile(async () => (await replicaSet()).size, taken);
      await taken;
      // And a few seconds more: the engine's pass and the stream back must not move it either.
      const settle = new Promise((r) => setTimeout(r, 5_000));
      sizes.push(...(await sampleWhile(async () => (await replicaSet()).size, settle)));
      step(`ctrl back: ReplicaSet sizes seen ${sizes.join(" ")}`);
      assert.ok(
        sizes.every((n) => n === 3),
        `the ReplicaSet moved while ctrl caught up: ${sizes.join(" ")}`,
      );
      await l.stop();
    },
  );

  it(
    "idle → 0; 1,000 concurrent requests at zero are held, wake it and are all answered",
    { timeout: 15 * 60_000 },
    async () => {
      await setPolicy({
        minReplicas: 0,
        scaleDownWindowSeconds: 0,
        scaleToZero: { idleSeconds: 30, heldTimeoutSeconds: 180 },
      });
      try {
        await eventually(
          "0 instances",
          async () => ((await replicaSet()).size === 0 && (await running()) === 0 ? true : undefined),
          300_000,
        );
      } catch (err) {
        await dump();
        throw err;
      }
      assert.equal(await regionCount(), 0);
      const s = await status();
      assert.match(s.autoscale[0]?.reason ?? "", /scaled to zero/);

      const client = new HttpAgent({ connections: 1000, keepAliveTimeout: 10_000 });
      const started = performance.now();
      const answers = await Promise.all(
        Array.from({ length: 1000 }, async () => {
          try {
            const res = await request(`${sentinelUrl}/`, { dispatcher: client, headersTimeout: 240_000 });
            await res.body.dump();
            return res.statusCode;
          } catch (err) {
            return err instanceof Error ? err.message : String(err);
          }
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      await client.close();
      const counts = new Map<string | number, number>();
      for (const a of answers) counts.set(a, (counts.get(a) ?? 0) + 1);
      step(`1,000 at zero: ${JSON.stringify([...counts])} in ${seconds.toFixed(1)} s`);
      assert.deepEqual([...counts], [[200, 1000]], "every request answered by the app");
      assert.ok((await sentinelMetric("krane_sentinel_cold_start_seconds_count")) >= 1, "a cold start measured");
      assert.ok(
        (await sentinelMetric('krane_sentinel_held_requests_total{outcome="released"}')) >= 1,
        "held requests released",
      );
    },
  );

  it(
    "over the held-request bound: 503 with Retry-After, none dropped, and the sentinel stays healthy",
    { timeout: 10 * 60_000 },
    async () => {
      await setPolicy({ scaleToZero: { maxHeldRequests: 5 } });
      await eventually("0 instances again", async () => ((await replicaSet()).size === 0 ? true : undefined), 300_000);
      const client = new HttpAgent({ connections: 50 });
      const answers = await Promise.all(
        Array.from({ length: 40 }, async () => {
          const res = await request(`${sentinelUrl}/`, { dispatcher: client, headersTimeout: 240_000 });
          await res.body.dump();
          return {
            status: res.statusCode,
            retryAfter: res.headers["retry-after"],
            error: res.headers["x-krane-sentinel-error"],
          };
        }),
      );
      await client.close();
      const refused = answers.filter((a) => a.status === 503);
      const served = answers.filter((a) => a.status === 200);
      step(`over the bound: ${served.length} served, ${refused.length} refused`);
      assert.equal(served.length + refused.length, 40, "every request answered");
      assert.ok(refused.length >= 1, "the bound refused some");
      assert.ok(served.length >= 5, "the held ones were served");
      for (const r of refused) {
        assert.equal(r.retryAfter, "1");
        assert.equal(r.error, "held-full");
      }
      // Healthy: ready, and serving the next request at once.
      const ready = await kubectlJson<{ items: { status: { conditions?: { type: string; status: string }[] } }[] }>(
        h.cluster,
        ["pods", "-n", SENTINEL_NAMESPACE],
      );
      assert.ok(ready.items.every((p) => p.status.conditions?.some((c) => c.type === "Ready" && c.status === "True")));
      const res = await request(`${sentinelUrl}/`);
      await res.body.dump();
      assert.equal(res.statusCode, 200);
    },
  );
});

// Instant rollback on real containers: 200 requests/s through the environment's sentinel Service
// while `rollback` moves traffic back to the revision a rolling update kept warm. Not one request
// fails, no pod is created (the deployment pods' UIDs after are among those before), and the time
// from the call to the first request answered only by the old revision is printed (a figure, not
// an assertion). Then the pin holds through a deploy (its revision gets no pod and no request),
// and unpin moves traffic to the newest. ctrl and the agent drive the cluster; the kubelet's
// probes decide readiness; krane's own sentinel routes.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Pool } from "undici";
import type { Agent } from "../../../src/agent/agent.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { InstanceStatus } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { RolloutService } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { SENTINEL_NAMESPACE, SENTINEL_PORT } from "../../../src/contracts/cluster.js";
import { applySentinelRbac } from "../../../src/sentinel/rbac.js";
import { eventually } from "../../support/cluster.js";
import { kubectlJson, realNodesSkip, useRealCluster } from "../../support/real-nodes.js";
import { routingAgent } from "../agent/support.js";
import { startTestCtrl, tempDir, type TestCtrl } from "../ctrl/support.js";
import { countBy, failure, hit, hitMany, openLoad } from "../sentinel/support.js";

const skip = await realNodesSkip();
const REGION = "local";
const REF = { workspace: "acme", project: "shop", environment: "production" };
const RATE = 200;

interface Sample {
  sent: number;
  done: number;
  revision: string;
}

/**
 * One request at a time on a connection of its own (not queued behind the load) until stopped:
 * when each was sent and answered, and by which revision.
 */
function probe(url: string): { stop: () => Promise<Sample[]> } {
  const pool = new Pool(url, { connections: 1, pipelining: 1, keepAliveTimeout: 10_000 });
  const out: Sample[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const sent = performance.now();
      const h = await hit(pool);
      out.push({ sent, done: performance.now(), revision: h.status === 200 ? (h.answer?.revision ?? "?") : "failed" });
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      await pool.close();
      return out;
    },
  };
}

/** From `asked`: the last request answered by `from` (when sent) and the first answered by `to` (when answered), ms. */
function switchTimes(samples: readonly Sample[], asked: number, from: string, to: string): string {
  const lastFrom = Math.max(...samples.filter((x) => x.revision === from).map((x) => x.sent - asked));
  const firstTo = Math.min(...samples.filter((x) => x.revision === to).map((x) => x.done - asked));
  return `last answer by revision ${from} for a request sent ${lastFrom.toFixed(0)} ms after the call, first by revision ${to} ${firstTo.toFixed(0)} ms after it`;
}

describe("instant rollback on real containers", { skip }, () => {
  const h = useRealCluster(["untrusted", "sentinel"]);
  const dir = tempDir("krane-instant-rollback-");
  let ctrl: TestCtrl;
  let agent: Agent;
  let pool: Pool | undefined;

  const status = () => ctrl.client(StatusService, ctrl.adminToken).getEnvironmentStatus(REF);
  const running = async (deploymentId: string): Promise<number> => {
    const d = (await status()).deployments.find((x) => x.deployment?.id === deploymentId);
    return (d?.regions[0]?.instances ?? []).filter((i) => i.status === InstanceStatus.RUNNING).length;
  };
  const deploy = async (image: string, unpin = false): Promise<{ id: string; pinned: string }> => {
    const { deployment, pinnedDeploymentId } = await ctrl.client(DeploymentService, ctrl.adminToken).createDeployment({
      ...REF,
      image,
      unpin,
      port: 8080,
      cpuMillicores: 500n,
      memoryMib: 256n,
      healthCheck: {
        method: "GET",
        path: "/healthz",
        intervalSeconds: 1,
        timeoutSeconds: 2,
        failureThreshold: 3,
        initialDelaySeconds: 1,
      },
    });
    assert.ok(deployment);
    return { id: deployment.id, pinned: pinnedDeploymentId };
  };
  /** The app pods that are not shutting down: name → UID. */
  const appPods = async (): Promise<Map<string, string>> => {
    const pods = await kubectlJson<{
      items: { metadata: { name: string; uid: string; deletionTimestamp?: string } }[];
    }>(h.cluster, ["pods", "-n", "ws-acme", "-l", "app.kubernetes.io/component=deployment"]);
    return new Map(
      pods.items
        .filter((p) => p.metadata.deletionTimestamp === undefined)
        .map((p) => [p.metadata.name, p.metadata.uid]),
    );
  };
  /** Every one of `n` requests answered by `revision`. */
  const allFrom = async (revision: string, n = 40): Promise<true | undefined> => {
    const hits = await hitMany(pool as Pool, n, 8);
    return hits.every((x) => x.status === 200 && x.answer?.revision === revision) ? true : undefined;
  };

  before(
    async () => {
      const cluster = await h.ready();
      await applySentinelRbac(cluster.kubeConfig());
      ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { rolloutSweepIntervalMs: 300 });
      const t = ctrl.adminToken;
      await ctrl.client(RegionService, t).createRegion({ name: REGION });
      await ctrl.client(WorkspaceService, t).createWorkspace({ slug: REF.workspace });
      await ctrl.client(ProjectService, t).createProject({ workspace: REF.workspace, slug: REF.project });
      await ctrl.client(EnvironmentService, t).createEnvironment({
        workspace: REF.workspace,
        project: REF.project,
        slug: REF.environment,
        regions: [{ region: REGION, replicas: 2 }],
        sentinel: { image: "", replicas: 1, cpuMillicores: 1000n, memoryMib: 256n },
        // The default warm window (30 minutes).
        rollout: { maxSurge: "1", maxUnavailable: "0" },
      });
      agent = await routingAgent(cluster, ctrl, REGION, {
        sentinelImage: (await h.images()).krane.name,
        sentinelObserveIntervalMs: 500,
      });
      await agent.start();
    },
    { timeout: 30 * 60_000 },
  );
  after(async () => {
    await pool?.close();
    await agent?.stop();
    await ctrl?.close();
    dir.remove();
  });

  it(
    "0 failed requests at 200/s and no pod created by a rollback; the pin holds through a deploy; unpin moves traffic",
    { timeout: 20 * 60_000 },
    async () => {
      const rollouts = ctrl.client(RolloutService, ctrl.adminToken);
      const v1 = (await deploy("krane.local/hello:v1")).id;
      await eventually(
        "2 running instances of v1",
        async () => ((await running(v1)) === 2 ? true : undefined),
        300_000,
      );
      const svc = await kubectlJson<{ items: { spec: { clusterIP: string } }[] }>(h.cluster, [
        "services",
        "-n",
        SENTINEL_NAMESPACE,
      ]);
      const ip = svc.items[0]?.spec.clusterIP;
      assert.ok(ip, "the sentinel's Service");
      pool = new Pool(`http://${ip}:${SENTINEL_PORT}`, { connections: 32, pipelining: 1, keepAliveTimeout: 10_000 });
      await eventually("the sentinel routes to v1", () => allFrom("1", 4), 240_000);

      // The rolling update leaves v1 warm: its pods run, the sentinel sends them nothing.
      const v2 = (await deploy("krane.local/hello:v2")).id;
      await eventually(
        "v2 rolled out",
        async () =>
          (await running(v2)) === 2 && (await rollouts.getRolloutStatus(REF)).status?.regions[0]?.complete === true
            ? true
            : undefined,
        300_000,
      );
      await eventually("only v2 answers", () => allFrom("2"), 60_000);
      assert.equal(await running(v1), 2, "v1 is kept warm at its size");
      const warm = (await rollouts.getRolloutStatus(REF)).status?.regions[0]?.warm;
      assert.equal(warm?.deploymentId, v1);
      const podsBefore = await appPods();
      assert.equal(podsBefore.size, 4, `v1's and v2's pods: ${[...podsBefore.keys()].join(", ")}`);

      const url = `http://${ip}:${SENTINEL_PORT}`;
      const load = openLoad(pool, RATE);
      const probing = probe(url);
      await new Promise((r) => setTimeout(r, 3_000));
      const asked = performance.now();
      const res = await rollouts.rollback({ ...REF, instant: true });
      const answered = performance.now();
      assert.equal(res.instant, true);
      assert.equal(res.deploymentId, v1);
      await new Promise((r) => setTimeout(r, 5_000));
      const samples = await probing.stop();
      const hits = await load.stop();
      const failed = hits.filter((x) => x.status !== 200);
      assert.deepEqual([...countBy(failed, failure)], [], `0 of ${hits.length} requests may fail`);
      assert.ok(hits.length >= RATE * 7, `a real load: ${hits.length} requests`);
      assert.ok(
        hits.slice(-RATE).every((x) => x.answer?.revision === "1"),
        "the last second is answered by v1 only",
      );
      const podsAfter = await appPods();
      const created = [...podsAfter].filter(([, uid]) => ![...podsBefore.values()].includes(uid));
      assert.deepEqual(created, [], "no pod was created");
      console.log(
        `instant rollback: ${hits.length} requests, 0 failed, 0 pods created; the call took ${(answered - asked).toFixed(0)} ms; ` +
          `${switchTimes(samples, asked, "2", "1")}; ` +
          `by revision ${[...countBy(hits, (x) => x.answer?.revision ?? "?")].map(([k, v]) => `${k} ${v}`).join(", ")}`,
      );

      // Pinned: a deploy is recorded and gets neither pods nor requests.
      const v3 = await deploy("krane.local/hello:v1");
      assert.equal(v3.pinned, v1);
      await new Promise((r) => setTimeout(r, 5_000));
      assert.equal(await allFrom("1"), true, "v1 keeps every request");
      assert.equal(await running(v3.id), 0);
      assert.equal((await rollouts.getRolloutStatus(REF)).status?.regions[0]?.targetDeploymentId, v1);

      // Unpinned: the newest rolls out and takes the traffic.
      const unpinned = await rollouts.rollback({ ...REF, unpin: true });
      assert.equal(unpinned.unpinned, true);
      await eventually("only v3 answers", () => allFrom("3"), 300_000);
      await eventually(
        "v3 rolled out, v1 warm",
        async () => {
          const r = (await rollouts.getRolloutStatus(REF)).status?.regions[0];
          return r?.complete === true && r.warm?.deploymentId === v1 ? true : undefined;
        },
        300_000,
      );

      // Beside it, a rolling rollback (nothing warm: window 0) in the same run, for the figure.
      await ctrl
        .client(EnvironmentService, ctrl.adminToken)
        .updateEnvironment({ ...REF, rollout: { warmWindowSeconds: 0 } });
      await eventually("v1 let go", async () => ((await running(v1)) === 0 ? true : undefined), 120_000);
      const rollingProbe = probe(url);
      await new Promise((r) => setTimeout(r, 1_000));
      const rollingAsked = performance.now();
      const rolling = await rollouts.rollback(REF);
      assert.equal(rolling.instant, false);
      assert.equal(rolling.deploymentId, v2);
      await eventually("only v2 answers", () => allFrom("2"), 300_000);
      const rollingSamples = await rollingProbe.stop();
      assert.deepEqual(
        rollingSamples.filter((x) => x.revision === "failed"),
        [],
        "the rolling rollback fails no request either",
      );
      console.log(`rolling rollback: ${switchTimes(rollingSamples, rollingAsked, "3", "2")}`);
    },
  );
});

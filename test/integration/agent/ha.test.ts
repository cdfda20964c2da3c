// Agent high availability on a real API server: two replicas of one region's agent elect a
// leader with a coordination.k8s.io Lease; only the leader writes. A leader that stalls (stops
// renewing, as a paused or partitioned process would) is replaced, and from the moment its lease
// could have been taken over it writes nothing — counted by its own Kubernetes request metrics
// and by the objects in the cluster; changes made during the takeover are applied by the new
// leader. A replica that shuts down gives the lease up, so the other takes over at once.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import type { KubeConfig } from "@kubernetes/client-node";
import { eventually, useCluster } from "../../support/cluster.js";
import { resources } from "../../../src/kube/resources.js";
import type { KubeClient } from "../../../src/kube/client.js";
import { isRecord, type KubeObject } from "../../../src/kube/object.js";
import type { Agent } from "../../../src/agent/agent.js";
import { TestCtrl, type DeploymentInit } from "./test-ctrl.js";
import { adminKube, agentKubeConfig, kubeWrites, startAgent } from "./support.js";

const handle = useCluster();
let kc: KubeConfig;
let admin: KubeClient;
const ctrl = new TestCtrl();
const REGION = "ha";
// Short periods so the test is quick: lease 3 s, renew deadline 2 s, retry every 0.4 s.
const TIMING = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 400 };
let agents: Agent[] = [];

function deployment(id: string, replicas: number): DeploymentInit {
  return {
    workspaceId: "ws_ha",
    projectId: "prj_ha",
    environmentId: "env_ha",
    deploymentId: id,
    k8sNamespace: "ws-ha",
    k8sName: id.replace(/_/g, "-"),
    image: "ghcr.io/acme/web:1",
    port: 8080,
    replicas,
    cpuMillicores: 100n,
    memoryMib: 64n,
    revision: 1n,
  };
}

function replica(id: string): Agent {
  return startAgent(kc, ctrl, REGION, { agentId: id, leaderElection: { timing: TIMING } });
}

async function replicasOf(name: string): Promise<number | undefined> {
  const o: KubeObject | undefined = await admin.get(resources.replicaSets, "ws-ha", name);
  return o && isRecord(o.spec) && typeof o.spec.replicas === "number" ? o.spec.replicas : undefined;
}

function leaders(): Agent[] {
  return agents.filter((a) => a.manager.leading);
}

before(async () => {
  await handle.ready();
  kc = await agentKubeConfig(handle.cluster);
  admin = adminKube(handle.cluster);
  await ctrl.start();
  agents = [replica("replica-a"), replica("replica-b")];
  await Promise.all(agents.map((a) => a.start()));
});

after(async () => {
  await Promise.all(agents.map((a) => a.stop()));
  await ctrl.stop();
  admin?.close();
});

test(
  "exactly one replica leads and applies; the follower is ready, writes nothing and does not heartbeat",
  { timeout: 120_000 },
  async () => {
    const leader = await eventually(
      "a leader",
      async () => (leaders().length === 1 ? leaders()[0] : undefined),
      30_000,
    );
    const follower = agents.find((a) => a !== leader);
    assert.ok(follower);
    ctrl.applyDeployment(REGION, deployment("dep_h1", 2));
    await eventually("dep_h1 applied", async () => ((await replicasOf("dep-h1")) === 2 ? true : undefined), 60_000);
    assert.equal(await kubeWrites(follower), 0, "the follower never wrote");
    // The follower joins the election only once its own caches have synced; on a loaded machine
    // that can finish after the leader has already applied, so readiness is awaited, not sampled.
    const readyz = await eventually(
      "the follower standing by is ready",
      async () => {
        const res = await fetch(`${follower.opsUrl}/readyz`);
        const body = (await res.json()) as { role: string };
        return res.status === 200 ? body : undefined;
      },
      30_000,
    );
    assert.equal(readyz.role, "follower");
    assert.equal(await kubeWrites(follower), 0, "the follower never wrote, also once ready");
    const lease = await admin.raw("GET", "/apis/coordination.k8s.io/v1/namespaces/krane-system/leases/krane-agent-ha");
    assert.equal(
      isRecord(lease) && isRecord(lease.spec) ? lease.spec.holderIdentity : undefined,
      leader.manager.identity,
    );
    await eventually(
      "a heartbeat from the leader",
      async () =>
        ctrl.heartbeats.some((h) => h.region === REGION && h.agentId === leader.manager.identity) ? true : undefined,
      30_000,
    );
    const beats = new Set(ctrl.heartbeats.filter((h) => h.region === REGION).map((h) => h.agentId));
    assert.deepEqual([...beats], [leader.manager.identity], "heartbeats only from the leader");
  },
);

test(
  "a stalled leader is replaced and writes nothing once its lease could be taken; changes made meanwhile are applied by the new leader",
  { timeout: 120_000 },
  async () => {
    const old = leaders()[0];
    assert.ok(old);
    const next = agents.find((a) => a !== old);
    assert.ok(next);
    old.manager.pauseLeaseRenewals(true);
    try {
      // Its own clock stops it writing within the renew deadline, before the lease can expire.
      await eventually(
        "the stalled leader fences itself",
        async () => (old.manager.leading ? undefined : true),
        10_000,
      );
      const writesAtFence = await kubeWrites(old);
      ctrl.applyDeployment(REGION, { deploymentId: "dep_h1", replicas: 3 });
      ctrl.applyDeployment(REGION, deployment("dep_h2", 1));
      await eventually("the other replica took over", async () => (next.manager.leading ? true : undefined), 15_000);
      await eventually(
        "the changes applied by the new leader",
        async () => ((await replicasOf("dep-h1")) === 3 && (await replicasOf("dep-h2")) === 1 ? true : undefined),
        60_000,
      );
      assert.equal(await kubeWrites(old), writesAtFence, "no write from the deposed leader");
    } finally {
      old.manager.pauseLeaseRenewals(false);
    }
    // Back from its stall it finds the lease held and stays a follower.
    await new Promise((r) => setTimeout(r, 2 * TIMING.leaseDurationMs));
    assert.deepEqual(leaders(), [next]);
  },
);

test(
  "a leader that shuts down gives the lease up (a write the fence admits) and the other takes over without waiting for expiry",
  { timeout: 120_000 },
  async () => {
    const old = leaders()[0];
    assert.ok(old);
    const next = agents.find((a) => a !== old);
    assert.ok(next);
    const oldIdentity = old.manager.identity;
    await old.stop();
    const stopped = performance.now();
    agents = agents.filter((a) => a !== old);
    // stop() resolves after the release was written: the Lease no longer names the old leader
    // (empty, or already the new one). A release the fence refused would leave it there, and the
    // other replica would wait out the whole lease.
    const lease = await admin.raw("GET", "/apis/coordination.k8s.io/v1/namespaces/krane-system/leases/krane-agent-ha");
    const holder = isRecord(lease) && isRecord(lease.spec) ? lease.spec.holderIdentity : undefined;
    assert.notEqual(holder, oldIdentity, "the stopped leader released its lease");
    assert.ok(holder === "" || holder === next.manager.identity, `holder ${String(holder)}`);
    await eventually("the other replica leads", async () => (next.manager.leading ? true : undefined), 10_000);
    const handover = performance.now() - stopped;
    assert.ok(
      handover < TIMING.leaseDurationMs,
      `took over in ${handover.toFixed(0)} ms, sooner than the ${TIMING.leaseDurationMs} ms lease could expire`,
    );
    ctrl.applyDeployment(REGION, { deploymentId: "dep_h2", replicas: 2 });
    await eventually(
      "applied by the new leader",
      async () => ((await replicasOf("dep-h2")) === 2 ? true : undefined),
      60_000,
    );
  },
);

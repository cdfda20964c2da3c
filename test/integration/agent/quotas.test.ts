// A workspace's quota backed by the cluster (src/agent/deployments/quota.ts), against a real API
// server with its quota admission and the resourcequota controller, the agent running as its
// least-privilege ServiceAccount: the ResourceQuota and LimitRange appear in the namespace from
// the payload's quota and follow a change; the API server refuses a pod past them even when
// written directly (not by krane); a rolling update with a surge and a warm previous revision
// fits the room, and a third full revision does not.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { eventually, useCluster } from "../../support/cluster.js";
import { resources } from "../../../src/kube/resources.js";
import { KubeApiError, type KubeClient } from "../../../src/kube/client.js";
import { isRecord, type KubeObject } from "../../../src/kube/object.js";
import { QUOTA_OBJECT_NAME } from "../../../src/agent/deployments/quota.js";
import { COMPONENT, LABEL_COMPONENT, LABEL_MANAGED_BY, LABEL_REGION } from "../../../src/contracts/labels.js";
import type { Agent } from "../../../src/agent/agent.js";
import { TestCtrl, type DeploymentInit } from "./test-ctrl.js";
import { adminKube, agentKubeConfig, startAgent } from "./support.js";

const handle = useCluster();
let admin: KubeClient;
const ctrl = new TestCtrl();
let agent: Agent;
const REGION = "local";

type Quota = NonNullable<DeploymentInit["workspaceQuota"]>;
function quota(cpu: bigint, memory: bigint, instances: bigint): Quota {
  return { $typeName: "krane.ctrl.v1.WorkspaceQuota", cpuMillicores: cpu, memoryMib: memory, instances };
}

function deployment(id: string, ns: string, env: string, replicas: number, q: Quota): DeploymentInit {
  return {
    workspaceId: `ws_${ns.replace(/-/g, "_")}`,
    projectId: "proj_q",
    environmentId: env,
    deploymentId: id,
    k8sNamespace: ns,
    k8sName: id.replace(/_/g, "-"),
    image: "ghcr.io/acme/web:1",
    port: 8080,
    replicas,
    // Limits 200m / 128Mi; requests at half.
    cpuMillicores: 200n,
    memoryMib: 128n,
    revision: 1n,
    workspaceQuota: q,
  };
}

function hardOf(o: KubeObject | undefined): Record<string, unknown> | undefined {
  const hard = o && isRecord(o.spec) && isRecord(o.spec.hard) ? o.spec.hard : undefined;
  return hard;
}

/** The ResourceQuota's hard limits once they equal `want` (the API server's own spelling). */
async function quotaBecomes(ns: string, want: Record<string, string>): Promise<KubeObject> {
  return eventually(
    `ResourceQuota of ${ns} at ${JSON.stringify(want)}`,
    async () => {
      const rq = await admin.get(resources.resourceQuotas, ns, QUOTA_OBJECT_NAME);
      return JSON.stringify(hardOf(rq)) === JSON.stringify(want) ? rq : undefined;
    },
    60_000,
  );
}

/** How many pods a ReplicaSet has (status.replicas), once it is `n`. */
async function podsOf(ns: string, name: string, n: number): Promise<KubeObject> {
  return eventually(
    `${n} pods of ${ns}/${name}`,
    async () => {
      const rs = await admin.get(resources.replicaSets, ns, name);
      const status = rs && isRecord(rs.status) ? rs.status : {};
      return status.replicas === n ? rs : undefined;
    },
    60_000,
  );
}

function pod(ns: string, name: string, resourcesOf?: Record<string, unknown>): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: ns },
    spec: {
      containers: [{ name: "app", image: "ghcr.io/acme/web:1", ...(resourcesOf ? { resources: resourcesOf } : {}) }],
    },
  };
}

before(
  async () => {
    await handle.ready(); // Node 20 runs a file's top-level before hooks concurrently
    const kc = await agentKubeConfig(handle.cluster);
    admin = adminKube(handle.cluster);
    await ctrl.start();
    agent = startAgent(kc, ctrl, REGION);
    await agent.start();
    await eventually("agent ready", async () => (agent.ready ? true : undefined), 60_000);
  },
  { timeout: 16 * 60_000 },
);

after(async () => {
  await agent?.stop();
  await ctrl.stop();
  admin?.close();
});

test("the namespace gets the quota's ResourceQuota (with room) and LimitRange, krane's, and they follow a change", async () => {
  ctrl.applyDeployment(REGION, deployment("dep_q1", "ws-q1", "env_q1", 1, quota(400n, 256n, 2n)));
  const rq = await quotaBecomes("ws-q1", {
    "limits.cpu": "1",
    "limits.memory": "640Mi",
    pods: "5",
    "requests.cpu": "1",
    "requests.memory": "640Mi",
  });
  assert.equal(rq.metadata.labels?.[LABEL_MANAGED_BY], "krane");
  assert.equal(rq.metadata.labels?.[LABEL_COMPONENT], COMPONENT.quota);
  assert.equal(rq.metadata.labels?.[LABEL_REGION], undefined);
  const lr = await admin.get(resources.limitRanges, "ws-q1", QUOTA_OBJECT_NAME);
  assert.equal(lr?.metadata.labels?.[LABEL_COMPONENT], COMPONENT.quota);
  await podsOf("ws-q1", "dep-q1", 1);

  // A new quota reaches the namespace with the next payload; an unlimited quota drops its lines.
  ctrl.applyDeployment(REGION, {
    ...deployment("dep_q1", "ws-q1", "env_q1", 1, quota(800n, 512n, 4n)),
    workspaceQuota: { $typeName: "krane.ctrl.v1.WorkspaceQuota", cpuMillicores: 800n, instances: 4n },
  });
  await quotaBecomes("ws-q1", { "limits.cpu": "2", pods: "10", "requests.cpu": "2" });
  ctrl.applyDeployment(REGION, deployment("dep_q1", "ws-q1", "env_q1", 1, quota(400n, 256n, 2n)));
  await quotaBecomes("ws-q1", {
    "limits.cpu": "1",
    "limits.memory": "640Mi",
    pods: "5",
    "requests.cpu": "1",
    "requests.memory": "640Mi",
  });
});

test("the API server refuses a pod past the quota written directly; a pod naming no size gets the defaults", async () => {
  // ws-q1 holds 1 CPU with room, its revision's one pod uses 200m of it.
  await assert.rejects(
    admin.create(resources.pods, pod("ws-q1", "too-big", { requests: { cpu: "2" }, limits: { cpu: "2" } })),
    (e: unknown) =>
      e instanceof KubeApiError && e.status === 403 && /exceeded quota: krane-workspace-quota/.test(e.message),
  );
  assert.equal(await admin.get(resources.pods, "ws-q1", "too-big"), undefined);

  assert.equal(await admin.create(resources.pods, pod("ws-q1", "no-size")), "created");
  const p = await admin.get(resources.pods, "ws-q1", "no-size");
  const c = ((p?.spec as { containers: { resources?: unknown }[] }).containers[0] ?? {}).resources;
  assert.deepEqual(c, { limits: { cpu: "250m", memory: "256Mi" }, requests: { cpu: "125m", memory: "128Mi" } });
  await admin.delete(resources.pods, "ws-q1", "no-size");
});

test("a rolling update with a surge and the previous revision kept warm fits; a third full revision does not", async () => {
  // The environment uses the whole quota: 2 instances of 200m / 128Mi. Room: 1000m, 640Mi, 5 pods.
  const q = quota(400n, 256n, 2n);
  const ns = "ws-q2";
  ctrl.applyDeployment(REGION, deployment("dep_r1", ns, "env_r", 2, q));
  await podsOf(ns, "dep-r1", 2);
  // The new revision surges one pod beside the two serving ...
  ctrl.applyDeployment(REGION, { ...deployment("dep_r2", ns, "env_r", 1, q), revision: 2n });
  await podsOf(ns, "dep-r2", 1);
  // ... and comes up in full while the previous one is kept warm with every pod it had.
  ctrl.applyDeployment(REGION, { ...deployment("dep_r2", ns, "env_r", 2, q), revision: 2n });
  await podsOf(ns, "dep-r2", 2);
  await podsOf(ns, "dep-r1", 2);

  // A third revision at full size beside both: the API server admits the one pod left in the room.
  ctrl.applyDeployment(REGION, { ...deployment("dep_r3", ns, "env_r", 2, q), revision: 3n });
  const r3 = await eventually(
    "dep-r3 refused a pod by the quota",
    async () => {
      const rs = await admin.get(resources.replicaSets, ns, "dep-r3");
      const status = rs && isRecord(rs.status) ? rs.status : {};
      const conditions = Array.isArray(status.conditions) ? (status.conditions as Record<string, unknown>[]) : [];
      const failure = conditions.find((c) => c.type === "ReplicaFailure");
      // The status counts the pods the controller saw when it began a sync: the one admitted
      // shows in a later one than the refusal.
      return failure && /exceeded quota/.test(String(failure.message)) && status.replicas === 1 ? status : undefined;
    },
    60_000,
  );
  assert.equal(r3.replicas, 1);
  const pods = await admin.list(resources.pods, { namespace: ns });
  assert.equal(pods.items.length, 5);
  const used = await admin.get(resources.resourceQuotas, ns, QUOTA_OBJECT_NAME);
  assert.deepEqual((used?.status as { used?: Record<string, string> } | undefined)?.used?.pods, "5");
});

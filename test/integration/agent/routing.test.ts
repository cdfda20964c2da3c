// The routing table the agent keeps for each environment's sentinel (src/contracts/routing.ts),
// against a real API server with the agent's least-privilege ServiceAccount: one EndpointSlice
// per revision with its RUNNING pods (from the agent's own pod cache, not a round trip through
// ctrl), the policy ConfigMap from ctrl's sentinel desired state, slices pruned when a revision
// leaves, everything gone with the sentinel, drift repaired, and no write when nothing changed.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { eventually, useCluster } from "../../support/cluster.js";
import { RoutingPolicySchema } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { parseRoutingPolicy, routingPolicyName, routingSelector } from "../../../src/contracts/routing.js";
import { SENTINEL_NAMESPACE } from "../../../src/contracts/cluster.js";
import { resources } from "../../../src/kube/resources.js";
import type { KubeClient } from "../../../src/kube/client.js";
import type { KubeObject } from "../../../src/kube/object.js";
import type { Agent } from "../../../src/agent/agent.js";
import { TestCtrl, type DeploymentInit, type SentinelInit } from "./test-ctrl.js";
import { adminKube, agentKubeConfig, kubeWritesBy, startAgent } from "./support.js";

const handle = useCluster();
let admin: KubeClient;
const ctrl = new TestCtrl();
let agent: Agent;
const REGION = "local";
const ENV = "env_route";

function deployment(id: string, replicas: number): DeploymentInit {
  return {
    workspaceId: "ws_route",
    projectId: "prj_route",
    environmentId: ENV,
    deploymentId: id,
    k8sNamespace: "ws-route",
    k8sName: id.replace(/_/g, "-"),
    image: "ghcr.io/acme/web:1",
    port: 8080,
    replicas,
    cpuMillicores: 100n,
    memoryMib: 64n,
    revision: 1n,
  };
}

const SENTINEL: SentinelInit = {
  workspaceId: "ws_route",
  projectId: "prj_route",
  environmentId: ENV,
  sentinelId: "snt_route",
  k8sName: "snt-route",
  // A custom image: this file is about the table, not about running krane's proxy.
  image: "ghcr.io/acme/proxy:1",
  replicas: 1,
  cpuMillicores: 100n,
  memoryMib: 64n,
};

async function slices(): Promise<Map<string, string[]>> {
  const list = await admin.list(resources.endpointSlices, {
    namespace: SENTINEL_NAMESPACE,
    labelSelector: routingSelector(ENV, REGION),
  });
  const out = new Map<string, string[]>();
  for (const s of list.items) {
    const dep = s.metadata.labels?.["krane.dev/deployment-id"] ?? "";
    const eps = Array.isArray(s.endpoints) ? (s.endpoints as Array<{ addresses: string[] }>) : [];
    out.set(dep, [...(out.get(dep) ?? []), ...eps.map((e) => e.addresses[0] ?? "")]);
  }
  return out;
}

/** The uids of the sentinel Service's EndpointSlices (those Kubernetes' controller manages). */
async function serviceSlices(): Promise<string[]> {
  const list = await admin.list(resources.endpointSlices, {
    namespace: SENTINEL_NAMESPACE,
    labelSelector: `kubernetes.io/service-name=${SENTINEL.k8sName}`,
  });
  return list.items.map((s) => s.metadata.uid ?? "").sort();
}

async function runningIps(deploymentId: string): Promise<string[]> {
  const pods = await admin.list(resources.pods, {
    namespace: "ws-route",
    labelSelector: `krane.dev/deployment-id=${deploymentId}`,
  });
  return pods.items
    .filter(
      (p: KubeObject) =>
        !p.metadata.deletionTimestamp && (p.status as { phase?: string } | undefined)?.phase === "Running",
    )
    .map((p: KubeObject) => (p.status as { podIP?: string }).podIP ?? "")
    .filter((ip) => ip !== "")
    .sort();
}

before(async () => {
  await handle.ready();
  admin = adminKube(handle.cluster);
  await ctrl.start();
  agent = startAgent(await agentKubeConfig(handle.cluster), ctrl, REGION);
  await agent.start();
});

after(async () => {
  await agent?.stop();
  await ctrl.stop();
  admin?.close();
});

test(
  "each revision's RUNNING pods become its EndpointSlice; scaling and new revisions follow; a revision that leaves is pruned",
  { timeout: 180_000 },
  async () => {
    ctrl.applySentinel(REGION, SENTINEL);
    ctrl.applyDeployment(REGION, deployment("dep_r1", 2));
    const first = await eventually(
      "dep_r1's two pods in its slice",
      async () => {
        const [ips, s] = [await runningIps("dep_r1"), await slices()];
        return ips.length === 2 && JSON.stringify((s.get("dep_r1") ?? []).sort()) === JSON.stringify(ips)
          ? ips
          : undefined;
      },
      90_000,
    );
    assert.equal(first.length, 2);

    // The sentinel Service's own slice, which Kubernetes' EndpointSlice controller keeps (with
    // the Service's labels copied onto it): routing changes must leave it alone.
    const serviceSlice = await eventually(
      "the sentinel Service's EndpointSlice",
      async () => (await serviceSlices())[0],
      60_000,
    );

    ctrl.applyDeployment(REGION, deployment("dep_r2", 1));
    ctrl.applyDeployment(REGION, { deploymentId: "dep_r1", replicas: 1 });
    await eventually(
      "dep_r1 down to one endpoint, dep_r2 with one",
      async () => {
        const s = await slices();
        const [r1, r2] = [await runningIps("dep_r1"), await runningIps("dep_r2")];
        return r1.length === 1 &&
          r2.length === 1 &&
          JSON.stringify((s.get("dep_r1") ?? []).sort()) === JSON.stringify(r1) &&
          JSON.stringify(s.get("dep_r2")) === JSON.stringify(r2)
          ? true
          : undefined;
      },
      90_000,
    );

    ctrl.deleteDeployment(REGION, "dep_r1");
    await eventually(
      "dep_r1's slice pruned once its pods are gone",
      async () => ((await slices()).has("dep_r1") ? undefined : true),
      90_000,
    );
    assert.ok((await slices()).has("dep_r2"));
    assert.deepEqual(
      await serviceSlices(),
      [serviceSlice],
      "the Service's EndpointSlice was never deleted (kube-proxy and Gateways route by it)",
    );
  },
);

test("the policy ConfigMap carries ctrl's routing policy and follows its changes", { timeout: 120_000 }, async () => {
  const name = routingPolicyName(SENTINEL.k8sName ?? "");
  const policy = async (): Promise<ReturnType<typeof parseRoutingPolicy> | undefined> => {
    const cm = await admin.get(resources.configMaps, SENTINEL_NAMESPACE, name);
    const text = (cm?.data as Record<string, string> | undefined)?.["policy.json"];
    return text === undefined ? undefined : parseRoutingPolicy(text);
  };
  const p0 = await eventually("default policy", policy, 60_000);
  assert.equal(p0.mode, "instances");
  ctrl.applySentinel(REGION, {
    sentinelId: "snt_route",
    routing: create(RoutingPolicySchema, {
      version: 4n,
      mode: "weighted",
      revisions: [{ deploymentId: "dep_r2", weight: 100 }],
    }),
  });
  const p1 = await eventually(
    "weighted policy",
    async () => {
      const p = await policy();
      return p?.version === 4 ? p : undefined;
    },
    60_000,
  );
  assert.deepEqual(p1, {
    version: 4,
    environmentId: ENV,
    mode: "weighted",
    revisions: [{ deploymentId: "dep_r2", weight: 100 }],
  });
});

test("a hand-edited slice is repaired; an idle resync writes nothing", { timeout: 120_000 }, async () => {
  const rt = agent.runtime("sentinels");
  assert.ok(rt);
  const list = await admin.list(resources.endpointSlices, {
    namespace: SENTINEL_NAMESPACE,
    labelSelector: routingSelector(ENV, REGION),
  });
  const slice = list.items[0];
  assert.ok(slice);
  const want = JSON.stringify(slice.endpoints);
  await admin.apply(
    resources.endpointSlices,
    {
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: { name: slice.metadata.name, namespace: SENTINEL_NAMESPACE },
      addressType: "IPv4",
      endpoints: [{ addresses: ["10.9.9.9"] }],
    } as KubeObject,
    { force: true },
  );
  await eventually(
    "slice repaired",
    async () => {
      const s = await admin.get(resources.endpointSlices, SENTINEL_NAMESPACE, slice.metadata.name ?? "");
      return JSON.stringify(s?.endpoints) === want ? true : undefined;
    },
    60_000,
  );
  const settled = rt.resyncCount;
  await eventually("a settling resync", async () => (rt.resyncCount > settled ? true : undefined), 30_000);
  await rt.idle();
  const writes = await kubeWritesBy(agent);
  const before = rt.resyncCount;
  await eventually("two more resyncs", async () => (rt.resyncCount >= before + 2 ? true : undefined), 30_000);
  await rt.idle();
  assert.deepEqual(await kubeWritesBy(agent), writes);
});

test("deleting the sentinel removes its routing table", { timeout: 120_000 }, async () => {
  ctrl.deleteSentinel(REGION, "snt_route");
  await eventually(
    "routing table gone",
    async () => {
      const [s, cm] = [
        await slices(),
        await admin.get(resources.configMaps, SENTINEL_NAMESPACE, routingPolicyName(SENTINEL.k8sName ?? "")),
      ];
      return s.size === 0 && cm === undefined ? true : undefined;
    },
    60_000,
  );
});

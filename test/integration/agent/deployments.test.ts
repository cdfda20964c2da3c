// The deployment controller end to end against a real API server (RBAC on, KWOK nodes), with
// the agent running as its least-privilege ServiceAccount and the test ClusterService (test-ctrl.ts).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import type { KubeConfig } from "@kubernetes/client-node";
import { eventually, useCluster } from "../../support/cluster.js";
import { InstanceStatus } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { resources } from "../../../src/kube/resources.js";
import { KubeApiError, type KubeClient } from "../../../src/kube/client.js";
import { isRecord, type KubeObject } from "../../../src/kube/object.js";
import { networkPolicyName } from "../../../src/agent/deployments/render.js";
import type { Agent } from "../../../src/agent/agent.js";
import { TestCtrl, type DeploymentInit } from "./test-ctrl.js";
import { adminKube, agentKubeConfig, kubeWrites, startAgent } from "./support.js";

const handle = useCluster();
let kc: KubeConfig;
let admin: KubeClient;
const ctrl = new TestCtrl();
let agent: Agent;
const REGION = "local";

function deployment(id: string, ns: string, extra: Partial<DeploymentInit> = {}): DeploymentInit {
  return {
    workspaceId: "ws_it",
    projectId: "proj_it",
    environmentId: `env_${id}`,
    deploymentId: id,
    k8sNamespace: ns,
    k8sName: id.replace(/_/g, "-"),
    image: "ghcr.io/acme/web:1",
    command: ["/web"],
    args: ["--port", "8080"],
    port: 8080,
    env: [{ $typeName: "krane.ctrl.v1.EnvVar", name: "GREETING", value: "hi" }],
    replicas: 3,
    cpuMillicores: 200n,
    memoryMib: 128n,
    healthCheck: {
      $typeName: "krane.ctrl.v1.HealthCheck",
      method: "GET",
      path: "/healthz",
      intervalSeconds: 5,
      timeoutSeconds: 1,
      failureThreshold: 3,
      initialDelaySeconds: 1,
    },
    buildId: "b1",
    workspaceSlug: "acme",
    projectSlug: "web",
    environmentSlug: "prod",
    revision: 1n,
    minReadySeconds: 1,
    ...extra,
  };
}

function spec(o: KubeObject | undefined): Record<string, unknown> {
  return o && isRecord(o.spec) ? o.spec : {};
}

async function rs(ns: string, name: string): Promise<KubeObject | undefined> {
  return admin.get(resources.replicaSets, ns, name);
}

before(
  async () => {
    await handle.ready(); // Node 20 runs a file's top-level before hooks concurrently
    kc = await agentKubeConfig(handle.cluster);
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

test("the agent's identity is the least-privilege ServiceAccount, not admin", async () => {
  const { KubeClient } = await import("../../../src/kube/client.js");
  const asAgent = new KubeClient(kc);
  try {
    await assert.rejects(
      asAgent.list({ group: "", version: "v1", kind: "Secret", plural: "secrets", namespaced: true }),
      (e: unknown) => e instanceof KubeApiError && e.status === 403,
    );
  } finally {
    asAgent.close();
  }
});

test("a deployment becomes a ReplicaSet with every field; pods run on untrusted nodes across zones and are reported", async () => {
  ctrl.applyDeployment(REGION, deployment("dep_a", "ws-a"));
  const live = await eventually("ReplicaSet dep-a", () => rs("ws-a", "dep-a"), 60_000);
  const s = spec(live);
  assert.equal(s.replicas, 3);
  assert.equal(s.minReadySeconds, 1);
  const pod = (s.template as { spec: Record<string, unknown> }).spec;
  assert.equal(pod.runtimeClassName, "gvisor");
  assert.equal(pod.automountServiceAccountToken, false);
  assert.equal(pod.enableServiceLinks, false);
  assert.deepEqual(pod.nodeSelector, { "node-class": "untrusted" });
  const c = (pod.containers as Array<Record<string, unknown>>)[0] ?? {};
  assert.deepEqual(c.command, ["/web"]);
  assert.deepEqual(c.args, ["--port", "8080"]);
  assert.ok((c.env as Array<{ name: string }>).some((e) => e.name === "GREETING"));
  assert.ok(c.readinessProbe && c.livenessProbe);
  assert.equal(live.metadata.labels?.["krane.dev/region"], REGION);
  const cnp = await admin.get(resources.ciliumNetworkPolicies, "ws-a", networkPolicyName("env_dep_a", REGION));
  assert.ok(cnp, "the environment's network policy exists");
  const ns = await admin.get(resources.namespaces, undefined, "ws-a");
  assert.equal(ns?.metadata.labels?.["app.kubernetes.io/managed-by"], "krane");

  const instances = await eventually(
    "3 running instances reported",
    async () => {
      const r = ctrl.deploymentReports.get("dep_a");
      const running = r?.instances?.filter((i) => i.status === InstanceStatus.RUNNING) ?? [];
      return running.length === 3 ? running : undefined;
    },
    90_000,
  );
  for (const i of instances) assert.match(i.address, /^\d+\.\d+\.\d+\.\d+:8080$/);
  const pods = await admin.list(resources.pods, { namespace: "ws-a", labelSelector: "krane.dev/deployment-id=dep_a" });
  const nodes = new Set(pods.items.map((p) => String(spec(p).nodeName)));
  for (const n of nodes) {
    const node = await admin.get(resources.nodes, undefined, n);
    assert.equal(node?.metadata.labels?.["node-class"], "untrusted", `pod on ${n}`);
  }
  const zones = new Set(instances.map((i) => i.zone));
  assert.equal(zones.size, 3, `instances spread over 3 zones, got ${[...zones].join(",")}`);
});

test("a replica change is followed and a delete removes the ReplicaSet and is reported", async () => {
  ctrl.applyDeployment(REGION, { deploymentId: "dep_a", replicas: 1 });
  await eventually("replicas 1", async () => (spec(await rs("ws-a", "dep-a")).replicas === 1 ? true : undefined));
  await eventually(
    "1 instance reported",
    async () => (ctrl.deploymentReports.get("dep_a")?.instances?.length === 1 ? true : undefined),
    60_000,
  );
  ctrl.deleteDeployment(REGION, "dep_a");
  await eventually("ReplicaSet gone", async () => ((await rs("ws-a", "dep-a")) ? undefined : true));
  await eventually("deletion reported", async () => (ctrl.deploymentReports.get("dep_a")?.deleted ? true : undefined));
});

test("drift is repaired: a deleted ReplicaSet and replicas changed by another field manager", async () => {
  ctrl.applyDeployment(REGION, deployment("dep_b", "ws-b", { replicas: 2 }));
  await eventually("ReplicaSet dep-b", () => rs("ws-b", "dep-b"), 60_000);
  await admin.delete(resources.replicaSets, "ws-b", "dep-b");
  await eventually("ReplicaSet dep-b recreated", async () => {
    const o = await rs("ws-b", "dep-b");
    return o && !o.metadata.deletionTimestamp ? o : undefined;
  });
  // Another manager (kubectl scale, say) changes replicas. The agent may repair it before any
  // later read, so the drift is proven by the server's answer to that write, and the repair by
  // a write of the agent's own. A write is counted only once its response has been read, which
  // can be after a read of ours already sees its effect: so the count is taken with the agent's
  // queue drained, before (the recreation above is in it) and after (the repair is).
  const rt = agent.runtime("deployments");
  assert.ok(rt);
  await rt.idle();
  const writesBefore = await kubeWrites(agent);
  const drifted = await admin.apply(
    resources.replicaSets,
    {
      apiVersion: "apps/v1",
      kind: "ReplicaSet",
      metadata: { name: "dep-b", namespace: "ws-b" },
      spec: { replicas: 5 },
    } as KubeObject,
    { force: true },
  );
  assert.equal(spec(drifted).replicas, 5);
  await eventually("replicas repaired to 2", async () =>
    spec(await rs("ws-b", "dep-b")).replicas === 2 ? true : undefined,
  );
  await rt.idle();
  assert.ok((await kubeWrites(agent)) > writesBefore, "the agent wrote the repair");
});

test("a resync with nothing drifted makes no Kubernetes write and reads desired state in batches", async () => {
  const rt = agent.runtime("deployments");
  assert.ok(rt);
  // Let one pass settle what earlier tests left (e.g. the network policy of a deleted
  // environment is garbage-collected by the resync: a legitimate write).
  const settled = rt.resyncCount;
  await eventually("a settling resync", async () => (rt.resyncCount > settled ? true : undefined), 30_000);
  await rt.idle();
  const writes = await kubeWrites(agent);
  const reads = ctrl.count("getDesiredDeploymentStates");
  const before = rt.resyncCount;
  await eventually("two more resyncs", async () => (rt.resyncCount >= before + 2 ? true : undefined), 30_000);
  await rt.idle();
  assert.equal(await kubeWrites(agent), writes, "no Kubernetes writes when nothing drifted");
  const perResync = (ctrl.count("getDesiredDeploymentStates") - reads) / (rt.resyncCount - before);
  assert.ok(perResync <= 1.5, `one batched read per resync, got ${perResync}`);
});

test("an invalid deployment between two valid ones is rejected with its reason; the others are applied", async () => {
  ctrl.applyDeployment(REGION, deployment("dep_c1", "ws-c"));
  ctrl.applyDeployment(REGION, deployment("dep_c2", "ws-c", { cpuMillicores: 0n }));
  ctrl.applyDeployment(REGION, deployment("dep_c3", "ws-c"));
  await eventually("dep-c1", () => rs("ws-c", "dep-c1"), 60_000);
  await eventually("dep-c3", () => rs("ws-c", "dep-c3"), 60_000);
  const reason = await eventually("rejection reported", async () => ctrl.deploymentReports.get("dep_c2")?.rejected);
  assert.match(reason, /cpu_millicores must be > 0/);
  assert.equal(await rs("ws-c", "dep-c2"), undefined);
});

test("an object the API server refuses for good is reported as rejected and not retried until it changes", async () => {
  // Valid for the agent's own checks, refused by the API server (422: env names must be ASCII).
  ctrl.applyDeployment(
    REGION,
    deployment("dep_t1", "ws-t", { env: [{ $typeName: "krane.ctrl.v1.EnvVar", name: "CAFÉ", value: "x" }] }),
  );
  const reason = await eventually(
    "rejection reported",
    async () => ctrl.deploymentReports.get("dep_t1")?.rejected,
    60_000,
  );
  assert.match(reason, /422|Invalid/);
  const refused = async (): Promise<number> => {
    const metric = agent.registry.getSingleMetric("krane_agent_kube_requests_total");
    const { values } = (await metric?.get()) ?? { values: [] };
    return values
      .filter((v) => v.labels.verb === "apply" && v.labels.resource === "replicasets" && v.labels.code === "422")
      .reduce((a, v) => a + v.value, 0);
  };
  const first = await refused();
  assert.ok(first >= 1);
  // Pod events and queue runs do not retry it; only a resync looks again (every 2 s here, so at
  // most 3 looks in 5 s; a backoff retry from 100 ms would make about ten).
  await new Promise((r) => setTimeout(r, 5_000));
  const later = await refused();
  assert.ok(later - first <= 4, `a terminal key was retried ${later - first} times in 5 s`);
  assert.equal(await rs("ws-t", "dep-t1"), undefined);
  // A corrected desired state is applied at once.
  ctrl.applyDeployment(REGION, deployment("dep_t1", "ws-t"));
  await eventually("dep-t1 applied after the fix", () => rs("ws-t", "dep-t1"), 60_000);
});

test("an orphan (unknown to ctrl) is deleted by the resync", async () => {
  ctrl.applyDeployment(REGION, deployment("dep_o", "ws-o", { replicas: 0 }));
  await eventually("dep-o", () => rs("ws-o", "dep-o"), 60_000);
  ctrl.forgetDeployment(REGION, "dep_o");
  await eventually("orphan deleted", async () => ((await rs("ws-o", "dep-o")) ? undefined : true), 30_000);
});

test("two agents for two regions on one cluster leave each other's objects alone", async () => {
  const other = startAgent(kc, ctrl, "other");
  await other.start();
  try {
    ctrl.applyDeployment("other", deployment("dep_x", "ws-c", { replicas: 1 }));
    await eventually("dep-x", () => rs("ws-c", "dep-x"), 60_000);
    // Region "local" resyncs and snapshots never touch region "other"'s ReplicaSet, and vice versa.
    const lrt = agent.runtime("deployments");
    const ort = other.runtime("deployments");
    assert.ok(lrt && ort);
    await lrt.resyncOnce();
    await ort.resyncOnce();
    await lrt.idle();
    await ort.idle();
    assert.ok(await rs("ws-c", "dep-x"));
    assert.ok(await rs("ws-c", "dep-c1"));
    const xr = await rs("ws-c", "dep-x");
    assert.equal(xr?.metadata.labels?.["krane.dev/region"], "other");
    // Each region has its own network policy for the environment.
    assert.ok(await admin.get(resources.ciliumNetworkPolicies, "ws-c", networkPolicyName("env_dep_x", "other")));
  } finally {
    await other.stop();
  }
});

test("an agent restarted mid-stream converges, including changes made while it was down", async () => {
  await agent.stop();
  ctrl.applyDeployment(REGION, { deploymentId: "dep_c1", replicas: 1 });
  ctrl.deleteDeployment(REGION, "dep_c3");
  ctrl.applyDeployment(REGION, deployment("dep_d", "ws-c", { replicas: 1 }));
  agent = startAgent(kc, ctrl, REGION);
  await agent.start();
  await eventually(
    "dep-c1 scaled",
    async () => (spec(await rs("ws-c", "dep-c1")).replicas === 1 ? true : undefined),
    60_000,
  );
  await eventually("dep-c3 collected", async () => ((await rs("ws-c", "dep-c3")) ? undefined : true), 60_000);
  await eventually("dep-d created", () => rs("ws-c", "dep-d"), 60_000);
  assert.ok(await rs("ws-c", "dep-x"), "the other region's object survived the snapshot");
});

test("ctrl down for a while: the agent keeps running, reconnects with backoff and converges", async () => {
  const rt = agent.runtime("deployments");
  assert.ok(rt);
  const metric = agent.registry.getSingleMetric("krane_agent_stream_reconnects_total");
  const reconnects = async (): Promise<number> =>
    ((await metric?.get())?.values ?? []).reduce((a, v) => a + v.value, 0);
  const before = await reconnects();
  await ctrl.stop();
  await eventually("stream disconnected", async () => (rt.streamConnected ? undefined : true), 30_000);
  ctrl.applyDeployment(REGION, { deploymentId: "dep_d", replicas: 2 });
  ctrl.applyDeployment(REGION, deployment("dep_e", "ws-c", { replicas: 1 }));
  await new Promise((r) => setTimeout(r, 3_000));
  assert.ok((await reconnects()) > before + 1, "it kept trying");
  const res = await fetch(`${agent.opsUrl}/healthz`);
  assert.equal(res.status, 200, "still alive");
  assert.equal((await fetch(`${agent.opsUrl}/readyz`)).status, 503, "not ready without ctrl");
  await ctrl.start();
  await eventually(
    "dep-d scaled to 2",
    async () => (spec(await rs("ws-c", "dep-d")).replicas === 2 ? true : undefined),
    60_000,
  );
  await eventually("dep-e created", () => rs("ws-c", "dep-e"), 60_000);
  await eventually(
    "ready again",
    async () => ((await fetch(`${agent.opsUrl}/readyz`)).status === 200 ? true : undefined),
    30_000,
  );
  const metrics = await (await fetch(`${agent.opsUrl}/metrics`)).text();
  for (const name of [
    "krane_agent_reconciles_total",
    "krane_agent_stream_reconnects_total",
    "krane_agent_cursor_version",
    "krane_agent_breaker_state",
    "krane_agent_reports_total",
    "krane_agent_reports_deduplicated_total",
    "krane_agent_kube_requests_total",
  ]) {
    assert.ok(metrics.includes(name), `metric ${name}`);
  }
});

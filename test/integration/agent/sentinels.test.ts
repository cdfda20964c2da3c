// The sentinel controller end to end against a real API server (RBAC on, KWOK nodes in three
// zones), inside one agent next to the deployment controller, running as the agent's
// least-privilege ServiceAccount (deploy/rbac/agent.yaml). ctrl is the test ClusterService of
// test-ctrl.ts, which can fail one controller's methods at a time; the last test runs a second
// agent (another region) against the real ctrl.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Registry } from "prom-client";
import type { KubeConfig } from "@kubernetes/client-node";
import { eventually, useCluster } from "../../support/cluster.js";
import { Health } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import {
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { resources } from "../../../src/kube/resources.js";
import type { KubeClient } from "../../../src/kube/client.js";
import { isRecord, type KubeObject } from "../../../src/kube/object.js";
import { Agent } from "../../../src/agent/agent.js";
import { silentLogger } from "../../../src/base/log.js";
import { findDrift } from "../../../src/agent/runtime/drift.js";
import {
  renderSentinelDeployment,
  renderSentinelNetworkPolicy,
  renderSentinelService,
} from "../../../src/agent/sentinels/render.js";
import {
  TestCtrl,
  type ClusterMethod,
  type DeploymentInit,
  type SentinelInit,
  type SentinelReport,
} from "./test-ctrl.js";
import { adminKube, agentKubeConfig, startAgent } from "./support.js";
import { startTestCtrl, tempDir } from "../ctrl/support.js";

const NEVER_READY = "ghcr.io/krane/never-ready:1";
const handle = useCluster({ pods: { neverReadyImages: [NEVER_READY] } });
const REGION = "local";
const NS = "sentinel";
const ctrl = new TestCtrl();
let admin: KubeClient;
let agent: Agent;
let agentKc: KubeConfig;

/** The agent under test (region "local"), as the RBAC ServiceAccount, with short periods. */
function localAgent(): Agent {
  return startAgent(agentKc, ctrl, REGION);
}

/** Kubernetes writes the agent made to sentinel objects (Deployments, Services) so far. */
async function sentinelWrites(a: Agent): Promise<number> {
  const metric = a.registry.getSingleMetric("krane_agent_kube_requests_total");
  if (!metric) return 0;
  let n = 0;
  for (const v of (await metric.get()).values) {
    if (
      ["apply", "create", "delete"].includes(String(v.labels.verb)) &&
      ["deployments", "services"].includes(String(v.labels.resource))
    )
      n += v.value;
  }
  return n;
}

function sentinel(id: string, extra: Partial<SentinelInit> = {}): SentinelInit {
  return {
    workspaceId: "ws_it",
    projectId: "proj_it",
    environmentId: `env_${id}`,
    sentinelId: id,
    k8sName: `snt-${id.replace(/_/g, "-")}`,
    image: "ghcr.io/krane/sentinel:1",
    replicas: 3,
    cpuMillicores: 250n,
    memoryMib: 128n,
    ...extra,
  };
}

function spec(o: KubeObject | undefined): Record<string, unknown> {
  return o && isRecord(o.spec) ? o.spec : {};
}

const getDeployment = (name: string): Promise<KubeObject | undefined> => admin.get(resources.deployments, NS, name);
const getService = (name: string): Promise<KubeObject | undefined> => admin.get(resources.services, NS, name);
const getPolicy = (name: string): Promise<KubeObject | undefined> =>
  admin.get(resources.ciliumNetworkPolicies, NS, name);
/** What the drift checks render with: every sentinel they check names an image of its own. */
const DEFAULTS = { image: "unused: every sentinel here names its image" };

function runtime(name: string): NonNullable<ReturnType<Agent["runtime"]>> {
  const rt = agent.runtime(name);
  if (!rt) throw new Error(`agent has no ${name} controller`);
  return rt;
}

/** Waits until ctrl holds a report for the sentinel that satisfies `ok`. */
async function reported(id: string, what: string, ok: (r: SentinelReport) => boolean): Promise<void> {
  await eventually(
    `report for ${id}: ${what}`,
    async () => {
      const r = ctrl.sentinelReports.get(id);
      return r && ok(r) ? true : undefined;
    },
    60_000,
  );
}

/** Waits until the live Deployment and Service match what the desired state renders. */
async function converged(s: SentinelInit): Promise<KubeObject> {
  const desired = ctrl.previewSentinel(REGION, s);
  return await eventually(
    `sentinel ${s.sentinelId} converged`,
    async () => {
      const d = await getDeployment(desired.k8sName);
      const svc = await getService(desired.k8sName);
      if (!d || !svc) return undefined;
      if (findDrift(renderSentinelDeployment(desired, REGION, DEFAULTS), d) !== undefined) return undefined;
      if (findDrift(renderSentinelService(desired, REGION, d.metadata.uid), svc) !== undefined) return undefined;
      const cnp = await getPolicy(desired.k8sName);
      if (!cnp || findDrift(renderSentinelNetworkPolicy(desired, REGION, DEFAULTS), cnp) !== undefined)
        return undefined;
      return d;
    },
    60_000,
  );
}

function deploymentInit(id: string, ns: string): DeploymentInit {
  return {
    workspaceId: "ws_it",
    projectId: "proj_it",
    environmentId: `env_${id}`,
    deploymentId: id,
    k8sNamespace: ns,
    k8sName: id.replace(/_/g, "-"),
    image: "ghcr.io/acme/web:1",
    port: 8080,
    replicas: 1,
    cpuMillicores: 100n,
    memoryMib: 64n,
    revision: 1n,
  };
}

before(
  async () => {
    await handle.ready(); // Node 20 runs a file's top-level before hooks concurrently
    agentKc = await agentKubeConfig(handle.cluster);
    admin = adminKube(handle.cluster);
    await ctrl.start();
    agent = localAgent();
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

test(
  "apply: Deployment and owned Service with every field; pods on sentinel nodes across zones; HEALTHY",
  { timeout: 120_000 },
  async () => {
    const s = sentinel("snt_a");
    ctrl.applySentinel(REGION, s);
    const d = await converged(s);
    const svc = await getService("snt-snt-a");
    assert.ok(svc);
    assert.deepEqual(
      svc.metadata.ownerReferences?.map((o) => [o.kind, o.name, o.uid]),
      [["Deployment", "snt-snt-a", d.metadata.uid]],
    );
    assert.equal(spec(svc).type, "ClusterIP");

    const pods = await eventually(
      "3 running sentinel pods",
      async () => {
        const { items } = await admin.list(resources.pods, {
          namespace: NS,
          labelSelector: "krane.dev/sentinel-id=snt_a",
        });
        const running = items.filter(
          (p) => isRecord(p.status) && p.status.phase === "Running" && typeof spec(p).nodeName === "string",
        );
        return running.length === 3 ? running : undefined;
      },
      60_000,
    );
    const zones = new Set<string>();
    for (const p of pods) {
      const node = await admin.get(resources.nodes, undefined, String(spec(p).nodeName));
      assert.equal(
        node?.metadata.labels?.["node-class"],
        "sentinel",
        `pod ${p.metadata.name} is on ${String(spec(p).nodeName)}`,
      );
      zones.add(node?.metadata.labels?.["topology.kubernetes.io/zone"] ?? "");
      // The labels the per-environment network policy and the deployments' zone affinity match.
      assert.equal(p.metadata.labels?.["app.kubernetes.io/component"], "sentinel");
      assert.equal(p.metadata.labels?.["krane.dev/environment-id"], "env_snt_a");
    }
    assert.equal(zones.size, 3, `zones: ${[...zones].join(",")}`);
    await reported("snt_a", "3 available, HEALTHY", (r) => r.availableReplicas === 3 && r.health === Health.HEALTHY);
  },
);

test("scale up, then to 0 (PAUSED), then back", { timeout: 120_000 }, async () => {
  ctrl.applySentinel(REGION, { sentinelId: "snt_a", replicas: 5 });
  await converged(sentinel("snt_a", { replicas: 5 }));
  await reported("snt_a", "5 available", (r) => r.availableReplicas === 5 && r.health === Health.HEALTHY);

  ctrl.applySentinel(REGION, { sentinelId: "snt_a", replicas: 0 });
  await converged(sentinel("snt_a", { replicas: 0 }));
  await reported("snt_a", "PAUSED with 0 available", (r) => r.availableReplicas === 0 && r.health === Health.PAUSED);

  ctrl.applySentinel(REGION, { sentinelId: "snt_a", replicas: 2 });
  await reported("snt_a", "2 available again", (r) => r.availableReplicas === 2 && r.health === Health.HEALTHY);
});

test("a sentinel whose pods never become ready is reported UNHEALTHY", { timeout: 120_000 }, async () => {
  ctrl.applySentinel(REGION, sentinel("snt_sick", { image: NEVER_READY, replicas: 2 }));
  await converged(sentinel("snt_sick", { image: NEVER_READY, replicas: 2 }));
  // Wait for the pods to be Running (but not Ready) and for a resync after that, so the
  // report reflects the pods and not just a Deployment without status.
  await eventually(
    "2 running, unready pods",
    async () => {
      const { items } = await admin.list(resources.pods, {
        namespace: NS,
        labelSelector: "krane.dev/sentinel-id=snt_sick",
      });
      return items.filter((p) => isRecord(p.status) && p.status.phase === "Running").length === 2 ? true : undefined;
    },
    60_000,
  );
  const rt = runtime("sentinels");
  const passes = rt.resyncCount;
  await eventually("a resync after the pods started", async () => (rt.resyncCount > passes ? true : undefined), 60_000);
  await rt.idle();
  const d = await getDeployment("snt-snt-sick");
  assert.equal(isRecord(d?.status) ? (d.status.availableReplicas ?? 0) : 0, 0);
  await reported("snt_sick", "UNHEALTHY", (r) => r.health === Health.UNHEALTHY && r.availableReplicas === 0);
  ctrl.deleteSentinel(REGION, "snt_sick");
  await reported("snt_sick", "deleted", (r) => r.deleted);
});

test(
  "drift: a deleted Service and replicas changed by another field manager are repaired",
  { timeout: 120_000 },
  async () => {
    const want = sentinel("snt_a", { replicas: 2 });
    const before = await converged(want);
    const svcBefore = await getService("snt-snt-a");
    await admin.delete(resources.services, NS, "snt-snt-a");
    // The ingress fence deleted too: the peers' port would be open to every pod.
    const policyBefore = await getPolicy("snt-snt-a");
    assert.ok(policyBefore, "the sentinel's CiliumNetworkPolicy exists");
    await admin.delete(resources.ciliumNetworkPolicies, NS, "snt-snt-a");
    // Seen gone, or already re-created (a new uid): either proves the deletion happened.
    await eventually(
      "the Service deleted",
      async () => {
        const svc = await getService("snt-snt-a");
        return !svc || svc.metadata.uid !== svcBefore?.metadata.uid ? true : undefined;
      },
      30_000,
    );
    await converged(want);
    const policyAfter = await getPolicy("snt-snt-a");
    assert.notEqual(policyAfter?.metadata.uid, policyBefore.metadata.uid, "the policy was re-created");

    await admin.apply(
      resources.deployments,
      {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "snt-snt-a", namespace: NS },
        spec: { replicas: 7 },
      },
      { force: true },
    );
    await eventually(
      "the other manager's replicas took effect",
      async () => {
        const d = await getDeployment("snt-snt-a");
        // Either seen at 7 or already repaired: both prove the write happened (the uid is the same).
        return d && d.metadata.uid === before.metadata.uid && d.metadata.generation !== before.metadata.generation
          ? true
          : undefined;
      },
      30_000,
    );
    const d = await converged(want);
    assert.equal(spec(d).replicas, 2);
  },
);

test(
  "an invalid sentinel between two valid ones is rejected; the valid ones are applied",
  { timeout: 120_000 },
  async () => {
    ctrl.applySentinel(REGION, sentinel("snt_v1", { replicas: 1 }));
    ctrl.applySentinel(REGION, sentinel("snt_bad", { replicas: 1, cpuMillicores: 0n }));
    ctrl.applySentinel(REGION, sentinel("snt_v2", { replicas: 1 }));
    await converged(sentinel("snt_v1", { replicas: 1 }));
    await converged(sentinel("snt_v2", { replicas: 1 }));
    await reported("snt_bad", "rejected", (r) => /cpu_millicores must be > 0/.test(r.rejected ?? ""));
    assert.equal(await getDeployment("snt-snt-bad"), undefined);
  },
);

test(
  "delete: the Service and the Deployment are removed and the deletion is reported",
  { timeout: 120_000 },
  async () => {
    ctrl.deleteSentinel(REGION, "snt_v1");
    await eventually(
      "Deployment and Service gone",
      async () => {
        const [d, s] = await Promise.all([getDeployment("snt-snt-v1"), getService("snt-snt-v1")]);
        return !d && !s ? true : undefined;
      },
      60_000,
    );
    await reported("snt_v1", "deleted", (r) => r.deleted);
  },
);

test(
  "krane's own sentinel: its replicas' peer Secret is created before its pods and deleted with it",
  { timeout: 120_000 },
  async () => {
    ctrl.applySentinel(REGION, sentinel("snt_own", { image: "", replicas: 1 }));
    const d = await eventually("the own sentinel's Deployment", () => getDeployment("snt-snt-own"), 60_000);
    const secret = await admin.get(resources.secrets, NS, "snt-snt-own-peers");
    assert.ok(secret, "the peer Secret exists once the Deployment does");
    const key = Buffer.from(String((secret.data as Record<string, string>).secret), "base64").toString();
    assert.ok(key.length >= 32, "a random key of at least 32 characters");
    const template = spec(d).template as { spec: { containers: { env: { name: string; valueFrom?: unknown }[] }[] } };
    const env = template.spec.containers[0]?.env ?? [];
    assert.deepEqual(env.find((e) => e.name === "KRANE_SENTINEL_PEER_SECRET")?.valueFrom, {
      secretKeyRef: { name: "snt-snt-own-peers", key: "secret", optional: true },
    });
    // Its ingress fence: the exchange's port from its own replicas only, the ops port from the
    // nodes and the agent's namespace, the proxy port from anywhere; nothing else.
    const cnp = await eventually("the own sentinel's policy", () => getPolicy("snt-snt-own"), 60_000);
    const ingress = (cnp.spec as { ingress: { toPorts: { ports: { port: string }[] }[] }[] }).ingress;
    const from = (port: number) =>
      ingress.filter((r) => r.toPorts.some((t) => t.ports.some((x) => x.port === String(port))));
    assert.deepEqual(
      from(8043).map((r) => ({ ...r, toPorts: undefined })),
      [{ fromEndpoints: [{ matchLabels: { "krane.dev/sentinel-id": "snt_own" } }], toPorts: undefined }],
    );
    assert.equal(from(8041).length, 2);
    assert.deepEqual(
      from(8040).map((r) => (r as { fromEntities?: string[] }).fromEntities),
      [["all"]],
    );
    assert.equal(ingress.length, 4, "no other rule");
    ctrl.deleteSentinel(REGION, "snt_own");
    await eventually(
      "the Deployment, the policy and the peer Secret gone",
      async () => {
        const [dep, sec, pol] = await Promise.all([
          getDeployment("snt-snt-own"),
          admin.get(resources.secrets, NS, "snt-snt-own-peers"),
          getPolicy("snt-snt-own"),
        ]);
        return !dep && !sec && !pol ? true : undefined;
      },
      60_000,
    );
  },
);

test(
  "orphans: unknown sentinels of this region are deleted, other regions' are left alone",
  { timeout: 120_000 },
  async () => {
    // Known to ctrl once, then dropped without a stream message.
    ctrl.applySentinel(REGION, sentinel("snt_gone", { replicas: 1 }));
    await converged(sentinel("snt_gone", { replicas: 1 }));
    ctrl.forgetSentinel(REGION, "snt_gone");
    // Never known to ctrl at all (a leftover of an earlier install of this region).
    const stray = ctrl.previewSentinel(REGION, sentinel("snt_stray", { replicas: 1 }));
    await admin.apply(
      resources.deployments,
      renderSentinelDeployment(stray, REGION, { image: "unused: every sentinel here names its image" }),
    );
    // Another region's sentinel on the same cluster.
    const foreign = ctrl.previewSentinel("elsewhere", sentinel("snt_foreign", { replicas: 1 }));
    await admin.apply(
      resources.deployments,
      renderSentinelDeployment(foreign, "elsewhere", { image: "unused: every sentinel here names its image" }),
    );

    await eventually(
      "orphans deleted",
      async () => {
        const [a, b] = await Promise.all([getDeployment("snt-snt-gone"), getDeployment("snt-snt-stray")]);
        return !a && !b ? true : undefined;
      },
      60_000,
    );
    await eventually(
      "Service of the orphan deleted",
      async () => ((await getService("snt-snt-gone")) ? undefined : true),
      30_000,
    );
    await reported("snt_gone", "deleted", (r) => r.deleted);
    // Two more full resync passes later the foreign one is still there.
    const rt = runtime("sentinels");
    const passes = rt.resyncCount;
    await eventually("two more resyncs", async () => (rt.resyncCount >= passes + 2 ? true : undefined), 60_000);
    assert.ok(await getDeployment("snt-snt-foreign"), "another region's sentinel must not be touched");
    await admin.delete(resources.deployments, NS, "snt-snt-foreign");
  },
);

test(
  "ctrl outage: the agent keeps running, reconnects and converges with nothing missed",
  { timeout: 180_000 },
  async () => {
    const rt = runtime("sentinels");
    await ctrl.stop();
    // Changes committed while the agent cannot reach ctrl.
    ctrl.applySentinel(REGION, { sentinelId: "snt_a", replicas: 4 });
    ctrl.applySentinel(REGION, sentinel("snt_during", { replicas: 1 }));
    ctrl.deleteSentinel(REGION, "snt_v2");
    await eventually("the stream noticed", async () => (rt.streamConnected ? undefined : true), 30_000);
    // Down for a while: several reconnect attempts and at least one failing resync.
    await sleep(4_000);
    assert.ok(await getDeployment("snt-snt-a"), "what runs keeps running while ctrl is down");
    await ctrl.start();
    await converged(sentinel("snt_a", { replicas: 4 }));
    await converged(sentinel("snt_during", { replicas: 1 }));
    await eventually("snt_v2 deleted", async () => ((await getDeployment("snt-snt-v2")) ? undefined : true), 60_000);
    await reported("snt_a", "4 available", (r) => r.availableReplicas === 4);
    await reported("snt_v2", "deleted", (r) => r.deleted);
    await eventually("stream reconnected", async () => (rt.streamConnected ? true : undefined), 30_000);
  },
);

const DEPLOYMENT_METHODS: ClusterMethod[] = [
  "watchDeployments",
  "getDesiredDeploymentStates",
  "reportDeploymentStatus",
];
const SENTINEL_METHODS: ClusterMethod[] = ["watchSentinels", "getDesiredSentinelStates", "reportSentinelStatus"];

test(
  "isolation: ctrl failing only the deployment stream (breaker open) does not stop sentinels",
  { timeout: 180_000 },
  async () => {
    const deployments = runtime("deployments");
    const sentinels = runtime("sentinels");
    // A deployment the agent already runs: its resync reads are what trip the breaker.
    ctrl.applyDeployment(REGION, deploymentInit("dep_iso0", "ws-iso"));
    await eventually(
      "a first deployment applied",
      async () => admin.get(resources.replicaSets, "ws-iso", "dep-iso0"),
      60_000,
    );
    ctrl.setFailing(DEPLOYMENT_METHODS, true);
    try {
      ctrl.applyDeployment(REGION, deploymentInit("dep_iso1", "ws-iso"));
      await eventually(
        "deployment breaker open",
        async () => (deployments.breaker.phase !== "closed" ? true : undefined),
        60_000,
      );
      await eventually("deployment stream down", async () => (deployments.streamConnected ? undefined : true), 30_000);

      ctrl.applySentinel(REGION, { sentinelId: "snt_a", replicas: 3 });
      ctrl.applySentinel(REGION, sentinel("snt_iso1", { replicas: 2 }));
      await converged(sentinel("snt_a", { replicas: 3 }));
      await converged(sentinel("snt_iso1", { replicas: 2 }));
      await reported("snt_iso1", "2 available", (r) => r.availableReplicas === 2 && r.health === Health.HEALTHY);
      assert.equal(sentinels.breaker.phase, "closed");
      assert.ok(sentinels.streamConnected);
      // The failure was real: the deployment committed meanwhile has not reached the cluster.
      assert.equal(await admin.get(resources.replicaSets, "ws-iso", "dep-iso1"), undefined);
    } finally {
      ctrl.setFailing(DEPLOYMENT_METHODS, false);
    }
    await eventually(
      "deployment applied after recovery",
      async () => admin.get(resources.replicaSets, "ws-iso", "dep-iso1"),
      60_000,
    );
    await eventually(
      "deployment breaker closed",
      async () => (deployments.breaker.phase === "closed" ? true : undefined),
      60_000,
    );
  },
);

test(
  "isolation, the other way round: ctrl failing only the sentinel stream does not stop deployments",
  { timeout: 180_000 },
  async () => {
    const deployments = runtime("deployments");
    const sentinels = runtime("sentinels");
    ctrl.setFailing(SENTINEL_METHODS, true);
    try {
      ctrl.applySentinel(REGION, sentinel("snt_iso2", { replicas: 1 }));
      await eventually(
        "sentinel breaker open",
        async () => (sentinels.breaker.phase !== "closed" ? true : undefined),
        60_000,
      );
      await eventually("sentinel stream down", async () => (sentinels.streamConnected ? undefined : true), 30_000);

      ctrl.applyDeployment(REGION, deploymentInit("dep_iso2", "ws-iso"));
      ctrl.applyDeployment(REGION, { deploymentId: "dep_iso1", replicas: 2 });
      await eventually(
        "deployments applied",
        async () => {
          const [a, b] = await Promise.all([
            admin.get(resources.replicaSets, "ws-iso", "dep-iso2"),
            admin.get(resources.replicaSets, "ws-iso", "dep-iso1"),
          ]);
          return a && b && spec(b).replicas === 2 ? true : undefined;
        },
        60_000,
      );
      await eventually(
        "deployment instances reported",
        async () => ((ctrl.deploymentReports.get("dep_iso2")?.instances?.length ?? 0) === 1 ? true : undefined),
        60_000,
      );
      assert.equal(deployments.breaker.phase, "closed");
      assert.ok(deployments.streamConnected);
      assert.equal(await getDeployment("snt-snt-iso2"), undefined);
    } finally {
      ctrl.setFailing(SENTINEL_METHODS, false);
    }
    await converged(sentinel("snt_iso2", { replicas: 1 }));
    await reported("snt_iso2", "HEALTHY", (r) => r.health === Health.HEALTHY);
    await eventually(
      "sentinel breaker closed",
      async () => (sentinels.breaker.phase === "closed" ? true : undefined),
      60_000,
    );
  },
);

test("a resync with nothing drifted writes nothing to sentinel objects", { timeout: 120_000 }, async () => {
  const rt = runtime("sentinels");
  const settled = rt.resyncCount;
  await eventually("a settling resync", async () => (rt.resyncCount > settled ? true : undefined), 30_000);
  await rt.idle();
  const writes = await sentinelWrites(agent);
  const live = (await admin.list(resources.deployments, { namespace: NS, labelSelector: "krane.dev/region=local" }))
    .items.length;
  assert.ok(live >= 3, `expected several sentinels to compare, found ${live}`);
  const before = rt.resyncCount;
  await eventually("two more resyncs", async () => (rt.resyncCount >= before + 2 ? true : undefined), 30_000);
  await rt.idle();
  assert.equal(await sentinelWrites(agent), writes);
});

test(
  "agent restarted while changes happen: the snapshot converges it (scaled, added, deleted)",
  { timeout: 180_000 },
  async () => {
    await agent.stop();
    ctrl.applySentinel(REGION, { sentinelId: "snt_a", replicas: 1 });
    ctrl.applySentinel(REGION, sentinel("snt_restart", { replicas: 1 }));
    // Deleted while no agent runs: only the snapshot (it no longer names snt_iso1) can tell.
    ctrl.deleteSentinel(REGION, "snt_iso1");
    agent = localAgent();
    await agent.start();
    await converged(sentinel("snt_a", { replicas: 1 }));
    await converged(sentinel("snt_restart", { replicas: 1 }));
    await eventually(
      "snt_iso1 collected",
      async () => {
        const [d, s] = await Promise.all([getDeployment("snt-snt-iso1"), getService("snt-snt-iso1")]);
        return !d && !s ? true : undefined;
      },
      60_000,
    );
    await reported("snt_iso1", "deleted", (r) => r.deleted);
    await reported("snt_restart", "HEALTHY", (r) => r.health === Health.HEALTHY && r.availableReplicas === 1);
  },
);

test(
  "real ctrl: an environment's sentinel set, changed and removed through the public API; its health reaches status",
  { timeout: 180_000 },
  async () => {
    // A second agent, for another region on the same cluster, against the real ctrl on SQLite.
    const dir = tempDir("krane-snt-");
    const real = await startTestCtrl(join(dir.path, "ctrl.db"));
    const region = "eu-central";
    let second: Agent | undefined;
    try {
      await real.client(RegionService, real.adminToken).createRegion({ name: region });
      await real.client(WorkspaceService, real.adminToken).createWorkspace({ slug: "acme" });
      await real.client(ProjectService, real.adminToken).createProject({ workspace: "acme", slug: "shop" });
      await real.client(EnvironmentService, real.adminToken).createEnvironment({
        workspace: "acme",
        project: "shop",
        slug: "production",
        regions: [{ region, replicas: 1 }],
        sentinel: { image: "ghcr.io/krane/sentinel:1", replicas: 2, cpuMillicores: 200n, memoryMib: 128n },
      });
      second = new Agent({
        ctrlUrl: real.url,
        token: await real.agentToken(region),
        region,
        kubeconfig: await agentKubeConfig(handle.cluster),
        log: silentLogger,
        registry: new Registry(),
        opsPort: -1,
        resyncPeriodMs: 2_000,
        callTimeoutMs: 3_000,
        runtime: { reconnect: { baseMs: 100, capMs: 1_000, minMs: 50 } },
      });
      await second.start();
      const status = real.client(StatusService, real.adminToken);
      const snt = await eventually(
        "sentinel HEALTHY with 2 available in ctrl's status",
        async () => {
          const res = await status.getEnvironmentStatus({
            workspace: "acme",
            project: "shop",
            environment: "production",
          });
          const s = res.sentinels.find((x) => x.region === region);
          return s && s.health === Health.HEALTHY && s.availableReplicas === 2 ? s : undefined;
        },
        90_000,
      );
      const d = await getDeployment(snt.k8sName);
      assert.ok(d, "the sentinel Deployment exists");
      assert.equal(d.metadata.labels?.["krane.dev/region"], region);
      assert.equal(d.metadata.labels?.["krane.dev/sentinel-id"], snt.sentinelId);
      assert.equal(spec(d).replicas, 2);
      const svc = await getService(snt.k8sName);
      assert.equal(svc?.metadata.ownerReferences?.[0]?.uid, d.metadata.uid);
      // The first agent (region "local") leaves this region's sentinel alone across its resyncs.
      const rt = runtime("sentinels");
      const passes = rt.resyncCount;
      await eventually(
        "two resyncs of the local agent",
        async () => (rt.resyncCount >= passes + 2 ? true : undefined),
        60_000,
      );
      assert.equal((await getDeployment(snt.k8sName))?.metadata.uid, d.metadata.uid);

      // Changed through UpdateEnvironment: the same Deployment is rolled to the new image and size.
      const envs = real.client(EnvironmentService, real.adminToken);
      const ref = { workspace: "acme", project: "shop", environment: "production" };
      await envs.updateEnvironment({ ...ref, sentinel: { image: "ghcr.io/krane/sentinel:2", replicas: 3 } });
      await eventually(
        "sentinel HEALTHY with 3 available after the update",
        async () => {
          const res = await status.getEnvironmentStatus(ref);
          const s = res.sentinels.find((x) => x.region === region);
          return s && s.health === Health.HEALTHY && s.availableReplicas === 3 ? s : undefined;
        },
        90_000,
      );
      const updated = await getDeployment(snt.k8sName);
      assert.equal(updated?.metadata.uid, d.metadata.uid, "updated in place");
      assert.equal(spec(updated).replicas, 3);
      assert.match(JSON.stringify(spec(updated).template), /ghcr\.io\/krane\/sentinel:2/);

      // Removed: the Deployment and its Service go, and status no longer lists the sentinel.
      await envs.updateEnvironment({ ...ref, removeSentinel: true });
      await eventually(
        "the sentinel's Deployment and Service deleted",
        async () =>
          (await getDeployment(snt.k8sName)) === undefined && (await getService(snt.k8sName)) === undefined
            ? true
            : undefined,
        60_000,
      );
      assert.deepEqual(
        (await status.getEnvironmentStatus(ref)).sentinels.filter((x) => x.region === region),
        [],
      );
    } finally {
      await second?.stop();
      await real.close();
      dir.remove();
    }
  },
);

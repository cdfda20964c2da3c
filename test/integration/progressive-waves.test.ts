// Region waves end to end: two real local clusters (regions eu and us), an agent each, ctrl with
// its progressive engine, krane's own sentinel per region. A canary in waves [eu] then [us] with
// a gate: while eu runs the new revision, us has no ReplicaSet of it and its sentinel's policy
// still sends 100 % to the stable revision; promote passes the gate and us follows; a wave
// aborted mid-way leaves us untouched (no ReplicaSet, same weights).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { Registry } from "prom-client";
import { Agent } from "../../src/agent/agent.js";
import { silentLogger } from "../../src/base/log.js";
import { SENTINEL_NAMESPACE } from "../../src/contracts/cluster.js";
import { LABEL_DEPLOYMENT_ID, LABEL_ENVIRONMENT_ID } from "../../src/contracts/labels.js";
import { parseRoutingPolicy, POLICY_KEY } from "../../src/contracts/routing.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";
import { RolloutService, type RolloutStatus } from "../../src/gen/krane/ctrl/v1/rollout_pb.js";
import type { KubeClient } from "../../src/kube/client.js";
import { isRecord } from "../../src/kube/object.js";
import { resources } from "../../src/kube/resources.js";
import { applySentinelRbac } from "../../src/sentinel/rbac.js";
import { eventually, useCluster, type ClusterHandle } from "../support/cluster.js";
import { adminKube, agentKubeConfig } from "./agent/support.js";
import { startTestCtrl, tempDir, type TestCtrl } from "./ctrl/support.js";

const REGIONS = ["eu", "us"] as const;
const handles: Record<(typeof REGIONS)[number], ClusterHandle> = {
  eu: useCluster({ standins: true, pods: { readyDelayMs: 200 } }),
  us: useCluster({ standins: true, pods: { readyDelayMs: 200 } }),
};
const REF = { workspace: "acme", project: "shop", environment: "production" };
const NS = "ws-acme";
const dir = tempDir("krane-waves-");
let ctrl: TestCtrl;
const agents: Agent[] = [];
const kubes = new Map<string, KubeClient>();
let envId = "";

async function status(): Promise<RolloutStatus> {
  const { status: s } = await ctrl.client(RolloutService, ctrl.adminToken).getRolloutStatus(REF);
  assert.ok(s);
  return s;
}

/** ReplicaSets of a revision in a region's cluster, with their spec replicas. */
async function replicaSets(region: string, deploymentId: string): Promise<number[]> {
  const kube = kubes.get(region);
  assert.ok(kube);
  const { items } = await kube.list(resources.replicaSets, {
    namespace: NS,
    labelSelector: `${LABEL_DEPLOYMENT_ID}=${deploymentId}`,
  });
  return items.map((rs) => (isRecord(rs.spec) && typeof rs.spec.replicas === "number" ? rs.spec.replicas : -1));
}

/** The weights a region's sentinel is told (its policy ConfigMap), as "id:weight". */
async function policyWeights(region: string): Promise<string[]> {
  const kube = kubes.get(region);
  assert.ok(kube);
  const { items } = await kube.list(resources.configMaps, {
    namespace: SENTINEL_NAMESPACE,
    labelSelector: `${LABEL_ENVIRONMENT_ID}=${envId}`,
  });
  const cm = items[0];
  const text = cm && isRecord(cm.data) ? cm.data[POLICY_KEY] : undefined;
  if (typeof text !== "string") return [];
  const p = parseRoutingPolicy(text);
  return p.revisions.filter((r) => r.weight > 0).map((r) => `${r.deploymentId}:${r.weight}`);
}

async function deploy(image: string): Promise<string> {
  const { deployment } = await ctrl
    .client(DeploymentService, ctrl.adminToken)
    .createDeployment({ ...REF, image, port: 8080 });
  assert.ok(deployment);
  return deployment.id;
}

describe("region waves", () => {
  before(
    async () => {
      ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { rolloutSweepIntervalMs: 300 });
      const t = ctrl.adminToken;
      for (const r of REGIONS) await ctrl.client(RegionService, t).createRegion({ name: r });
      await ctrl.client(WorkspaceService, t).createWorkspace({ slug: REF.workspace });
      await ctrl.client(ProjectService, t).createProject({ workspace: REF.workspace, slug: REF.project });
      const { environment } = await ctrl.client(EnvironmentService, t).createEnvironment({
        workspace: REF.workspace,
        project: REF.project,
        slug: REF.environment,
        regions: REGIONS.map((region) => ({ region, replicas: 2 })),
        sentinel: { image: "", replicas: 1 },
        rollout: {
          progressive: {
            canary: { steps: [{ step: { case: "setWeight", value: 50 } }] },
            waves: [{ regions: ["eu"] }, { regions: ["us"] }],
            waveGate: { availableSeconds: 3600 },
          },
        },
      });
      envId = environment?.id ?? "";
      for (const region of REGIONS) {
        const cluster = await handles[region].ready();
        await applySentinelRbac(cluster.kubeConfig());
        kubes.set(region, adminKube(cluster));
        const a = new Agent({
          ctrlUrl: ctrl.url,
          token: await ctrl.agentToken(region),
          region,
          kubeconfig: await agentKubeConfig(cluster),
          log: silentLogger,
          registry: new Registry(),
          opsPort: -1,
          resyncPeriodMs: 10_000,
          podAddressMap: cluster.podAddressMap,
          sentinelObserveIntervalMs: 300,
          runtime: { reconnect: { baseMs: 100, capMs: 1_000, minMs: 50 } },
        });
        await a.start();
        agents.push(a);
      }
    },
    { timeout: 15 * 60_000 },
  );

  after(async () => {
    for (const a of agents) await a.stop();
    await ctrl?.close();
    for (const k of kubes.values()) k.close();
    dir.remove();
  });

  test(
    "a later wave sees nothing before the gate; promote passes it; an aborted wave leaves the later region untouched",
    { timeout: 600_000 },
    async () => {
      const v1 = await deploy("registry.example.com/shop:1");
      await eventually(
        "v1 healthy in both regions",
        async () => {
          const s = await status();
          return s.progressive?.phase === "Healthy" &&
            s.regions.every((r) => r.revisions.find((x) => x.deploymentId === v1)?.availableReplicas === 2)
            ? true
            : undefined;
        },
        180_000,
      );

      const v2 = await deploy("registry.example.com/shop:2");
      const gated = await eventually(
        "wave 1 (eu) done, waiting at the gate",
        async () => {
          const s = await status();
          return s.progressive?.atWaveGate ? s : undefined;
        },
        180_000,
      );
      assert.equal(gated.progressive?.wave, 1);
      await eventually(
        "eu's sentinel told 100 % v2",
        async () => ((await policyWeights("eu")).join() === `${v2}:100` ? true : undefined),
        60_000,
      );
      assert.deepEqual(await replicaSets("us", v2), [], "us has no ReplicaSet of v2");
      assert.deepEqual(await policyWeights("us"), [`${v1}:100`], "us's sentinel still sends everything to v1");

      await ctrl.client(RolloutService, ctrl.adminToken).promote(REF);
      await eventually(
        "the rollout complete in both regions",
        async () => {
          const s = await status();
          return s.progressive?.phase === "Healthy" && s.progressive.stableDeploymentId === v2 ? true : undefined;
        },
        180_000,
      );
      await eventually(
        "us's sentinel told 100 % v2",
        async () => ((await policyWeights("us")).join() === `${v2}:100` ? true : undefined),
        60_000,
      );

      // A wave that fails: abort while eu runs v3 (50 %, then 100 % at the gate); us never sees v3.
      const v3 = await deploy("registry.example.com/shop:3");
      await eventually(
        "eu routing to v3",
        async () => ((await policyWeights("eu")).some((w) => w.startsWith(`${v3}:`)) ? true : undefined),
        120_000,
      );
      const usBefore = await policyWeights("us");
      assert.deepEqual(usBefore, [`${v2}:100`]);
      const { status: aborted } = await ctrl.client(RolloutService, ctrl.adminToken).abort(REF);
      assert.equal(aborted?.progressive?.phase, "Degraded");
      await eventually(
        "eu back to 100 % v2",
        async () => ((await policyWeights("eu")).join() === `${v2}:100` ? true : undefined),
        60_000,
      );
      assert.deepEqual(await replicaSets("us", v3), [], "us never got a ReplicaSet of v3");
      assert.deepEqual(await policyWeights("us"), usBefore, "us's weights unchanged");
    },
  );
});

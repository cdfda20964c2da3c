// Routed traffic end to end, real parts only: ctrl (SQLite, HTTP/2) → the agent (as its RBAC
// ServiceAccount) → the real local Kubernetes, whose pod stand-ins run krane's own sentinel for
// the environment and small HTTP servers for the user's pods. Requests go through real sockets to
// the sentinel pod and on to the instances. Nothing here writes the routing table by hand: the
// agent derives it from its pod cache and ctrl's sentinel desired state.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { Pool } from "undici";
import { Agent } from "../../src/agent/agent.js";
import { STANDIN_ANNOTATION } from "../../src/cluster/standin/app.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";
import { RolloutService } from "../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { InstanceStatus } from "../../src/gen/krane/ctrl/v1/cluster_pb.js";
import type { KubeClient } from "../../src/kube/client.js";
import { resources } from "../../src/kube/resources.js";
import { applySentinelRbac } from "../../src/sentinel/rbac.js";
import { eventually, useCluster } from "../support/cluster.js";
import { adminKube, routingAgent } from "./agent/support.js";
import { startTestCtrl, tempDir, type TestCtrl } from "./ctrl/support.js";
import { countBy, failure, hit, hitMany, openLoad, runningSentinel } from "./sentinel/support.js";

const handle = useCluster({ standins: true, pods: { readyDelayMs: 500, readyJitterMs: 500 } });
const REGION = "local";
const NS = "ws-acme";
const REF = { workspace: "acme", project: "shop", environment: "production" };
const PORT = 8080;
const RATE = 200;
const dir = tempDir("krane-traffic-");
let ctrl: TestCtrl;
let agent: Agent;
let kube: KubeClient;
let pool: Pool | undefined;
let envId = "";

/** The environment's sentinel pod, as the local cluster serves it on this machine. */
async function sentinelEntry(): Promise<string> {
  return (await runningSentinel(handle.cluster, kube, envId)).url;
}

async function running(deploymentId: string): Promise<string[]> {
  const s = await ctrl.client(StatusService, ctrl.adminToken).getEnvironmentStatus(REF);
  const d = s.deployments.find((x) => x.deployment?.id === deploymentId);
  return (d?.regions[0]?.instances ?? []).filter((i) => i.status === InstanceStatus.RUNNING).map((i) => i.k8sName);
}

async function deploy(image: string): Promise<string> {
  const { deployment } = await ctrl
    .client(DeploymentService, ctrl.adminToken)
    .createDeployment({ ...REF, image, port: PORT });
  assert.ok(deployment);
  return deployment.id;
}

async function startAgent(): Promise<Agent> {
  const a = await routingAgent(handle.cluster, ctrl, REGION, { sentinelObserveIntervalMs: 500 });
  await a.start();
  return a;
}

describe("routed traffic through krane's own sentinel", () => {
  let v1 = "";
  let v2 = "";

  before(
    async () => {
      const cluster = await handle.ready();
      await applySentinelRbac(cluster.kubeConfig());
      kube = adminKube(cluster);
      ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { rolloutSweepIntervalMs: 300 });
      const t = ctrl.adminToken;
      await ctrl.client(RegionService, t).createRegion({ name: REGION });
      await ctrl.client(WorkspaceService, t).createWorkspace({ slug: REF.workspace });
      await ctrl.client(ProjectService, t).createProject({ workspace: REF.workspace, slug: REF.project });
      // No sentinel image named: krane's own sentinel.
      const { environment } = await ctrl.client(EnvironmentService, t).createEnvironment({
        workspace: REF.workspace,
        project: REF.project,
        slug: REF.environment,
        regions: [{ region: REGION, replicas: 3 }],
        sentinel: { image: "", replicas: 1 },
        // The rolling update's own traffic: nothing kept warm for a rollback (the old pods go).
        rollout: { maxSurge: "1", maxUnavailable: "0", warmWindowSeconds: 0 },
      });
      envId = environment?.id ?? "";
      agent = await startAgent();
    },
    { timeout: 15 * 60_000 },
  );

  after(async () => {
    await pool?.close();
    await agent?.stop();
    await ctrl?.close();
    kube?.close();
    dir.remove();
  });

  test(
    "every running instance receives traffic; a new one does too; one that refuses connections is ejected",
    { timeout: 240_000 },
    async () => {
      v1 = await deploy("registry.example.com/shop:1");
      await eventually(
        "3 running instances",
        async () => ((await running(v1)).length === 3 ? true : undefined),
        120_000,
      );
      pool = new Pool(await sentinelEntry(), { connections: 32, pipelining: 1, keepAliveTimeout: 10_000 });
      const p = pool;

      const pods = await eventually(
        "all 3 instances answering through the sentinel",
        async () => {
          const seen = countBy(await hitMany(p, 60, 8), (h) => h.answer?.pod ?? failure(h));
          return seen.size === 3 && (await running(v1)).every((n) => seen.has(n)) ? seen : undefined;
        },
        60_000,
      );
      assert.equal(pods.size, 3);
      const sample = await hit(p);
      assert.equal(sample.answer?.revision, v1, "the answer names the revision");
      assert.equal(sample.answer?.image, "registry.example.com/shop:1");
      assert.equal(sample.answer?.port, PORT);

      // The status shows the sentinel's address and that it serves ctrl's routing version.
      await eventually(
        "the sentinel's address and served routing version in status",
        async () => {
          const s = await ctrl.client(StatusService, ctrl.adminToken).getEnvironmentStatus(REF);
          const snt = s.sentinels[0];
          return snt &&
            snt.address !== "" &&
            snt.servedRoutingVersion > 0n &&
            snt.servedRoutingVersion === snt.routingVersion
            ? true
            : undefined;
        },
        60_000,
      );

      // Scale up: the fourth instance receives traffic.
      await ctrl.client(RolloutService, ctrl.adminToken).scale({ ...REF, replicas: 4 });
      const names = await eventually(
        "4 running instances",
        async () => {
          const r = await running(v1);
          return r.length === 4 ? r : undefined;
        },
        120_000,
      );
      const fresh = names.find((n) => !pods.has(n));
      assert.ok(fresh, `a new instance among ${names.join(", ")}`);
      await eventually(
        `${fresh} to receive traffic`,
        async () => ((await hitMany(p, 40, 8)).some((h) => h.answer?.pod === fresh) ? true : undefined),
        60_000,
      );

      // One instance refuses connections (its stand-in misbehaves on request): requests still succeed.
      const bad = names[0] ?? "";
      await kube.apply(
        resources.pods,
        { metadata: { name: bad, namespace: NS, annotations: { [STANDIN_ANNOTATION.mode]: "refuse" } } },
        { force: true },
      );
      await new Promise((r) => setTimeout(r, 1000));
      const during = await hitMany(p, 200, 8);
      assert.deepEqual(
        [
          ...countBy(
            during.filter((h) => h.status !== 200),
            failure,
          ),
        ],
        [],
        "no request fails",
      );
      const late = during.slice(-100);
      assert.equal(late.filter((h) => h.answer?.pod === bad).length, 0, "the refusing instance is ejected");
      await kube.apply(
        resources.pods,
        { metadata: { name: bad, namespace: NS, annotations: { [STANDIN_ANNOTATION.mode]: "serve" } } },
        { force: true },
      );
    },
  );

  test(
    `0 failed requests at ${RATE} requests/s through a rolling update 4 → 3 of a new revision (maxSurge 1, maxUnavailable 0) and a scale-down`,
    { timeout: 300_000 },
    async () => {
      const p = pool;
      assert.ok(p);
      await ctrl.client(RolloutService, ctrl.adminToken).scale({ ...REF, replicas: 3 });
      await eventually(
        "3 running instances",
        async () => ((await running(v1)).length === 3 ? true : undefined),
        120_000,
      );
      await new Promise((r) => setTimeout(r, 1500));

      const run = openLoad(p, RATE);
      await new Promise((r) => setTimeout(r, 1500));
      v2 = await deploy("registry.example.com/shop:2");
      await eventually(
        "the rollout to v2 to complete",
        async () => {
          const { status } = await ctrl.client(RolloutService, ctrl.adminToken).getRolloutStatus(REF);
          const r = status?.regions[0];
          return r?.complete && (await running(v1)).length === 0 && (await running(v2)).length === 3 ? true : undefined;
        },
        180_000,
      );
      await new Promise((r) => setTimeout(r, 1500));
      await ctrl.client(RolloutService, ctrl.adminToken).scale({ ...REF, replicas: 1 });
      await eventually(
        "1 running instance",
        async () => ((await running(v2)).length === 1 ? true : undefined),
        120_000,
      );
      await new Promise((r) => setTimeout(r, 2500));
      const all = await run.stop();

      const failed = all.filter((h) => h.status !== 200);
      assert.deepEqual([...countBy(failed, failure)], [], `0 of ${all.length} requests may fail`);
      assert.ok(all.length >= RATE * 5, `a real load: ${all.length} requests`);
      const byRevision = countBy(all, (h) => h.answer?.revision ?? "?");
      assert.ok(
        (byRevision.get(v1) ?? 0) > 0 && (byRevision.get(v2) ?? 0) > 0,
        `both revisions served: ${[...byRevision].join(" ")}`,
      );
      const last = all.slice(-RATE);
      const remaining = await running(v2);
      assert.deepEqual(
        [...countBy(last, (h) => h.answer?.pod ?? "?")],
        [[remaining[0], RATE]],
        "in the end only the remaining instance serves",
      );
    },
  );

  test("with ctrl and the agent stopped, the sentinel keeps serving its last table", { timeout: 120_000 }, async () => {
    const p = pool;
    assert.ok(p);
    await agent.stop();
    await ctrl.close();
    await new Promise((r) => setTimeout(r, 2000));
    const served = await hitMany(p, 100, 8);
    assert.deepEqual(
      [...countBy(served, (h) => `${h.status} ${h.answer?.revision ?? h.cause ?? h.error ?? ""}`)],
      [[`200 ${v2}`, 100]],
    );

    // Both come back; deleting the deployment leaves the sentinel with nothing to route to.
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { rolloutSweepIntervalMs: 300 });
    agent = await startAgent();
    await ctrl.client(DeploymentService, ctrl.adminToken).deleteDeployment({ deploymentId: v2 });
    const none = await eventually(
      "503 naming the cause",
      async () => {
        const h = await hit(p);
        return h.status === 503 ? h : undefined;
      },
      60_000,
    );
    assert.match(none.cause ?? "", /instance/);
  });
});

// End-to-end through the real HTTP/2 server on SQLite: the public API writes desired state and
// an agent's watch stream receives it (snapshot, then live changes), reports flow back to status.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import {
  ClusterService,
  Health,
  InstanceStatus,
  type DeploymentState,
} from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { startTestCtrl, tempDir, withoutBookmarks, type TestCtrl } from "./support.js";

async function take<T>(it: AsyncIterator<T>, n: number): Promise<T[]> {
  const out: T[] = [];
  while (out.length < n) {
    const r = await it.next();
    if (r.done) throw new Error(`stream ended after ${out.length} of ${n} messages`);
    out.push(r.value);
  }
  return out;
}

describe("ctrl end to end (SQLite, HTTP/2)", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;

  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"));
  });
  after(async () => {
    await ctrl.close();
    dir.remove();
  });

  it("creates a deployment that streams to both regions and reports back into status", async () => {
    const admin = ctrl.adminToken;
    const regions = ctrl.client(RegionService, admin);
    await regions.createRegion({ name: "eu-west" });
    await regions.createRegion({ name: "us-east" });
    await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: "acme" });
    await ctrl.client(ProjectService, admin).createProject({ workspace: "acme", slug: "shop" });
    const { environment } = await ctrl.client(EnvironmentService, admin).createEnvironment({
      workspace: "acme",
      project: "shop",
      slug: "production",
      regions: [
        { region: "eu-west", replicas: 2 },
        { region: "us-east", replicas: 3 },
      ],
      sentinel: { image: "ghcr.io/krane/sentinel:1", replicas: 1 },
    });
    assert.equal(environment?.regions.length, 2);

    const euToken = await ctrl.agentToken("eu-west");
    const usToken = await ctrl.agentToken("us-east");
    const eu = ctrl.client(ClusterService, euToken);
    const us = ctrl.client(ClusterService, usToken);

    const ac = new AbortController();
    const euStream = withoutBookmarks(
      eu.watchDeployments({ region: "eu-west", versionLastSeen: 0n }, { signal: ac.signal }),
    )[Symbol.asyncIterator]();
    const [start, end] = await take(euStream, 2);
    assert.equal(start?.state.case, "snapshotStart");
    assert.equal(end?.state.case, "snapshotEnd");

    const { deployment } = await ctrl.client(DeploymentService, admin).createDeployment({
      workspace: "acme",
      project: "shop",
      environment: "production",
      image: "registry.example.com/shop:1.0",
      env: [{ name: "MODE", value: "prod" }],
      command: ["node"],
      args: ["server.js"],
    });
    assert.ok(deployment);
    assert.match(deployment.k8sName, /^shop-production-[a-z0-9]{8}$/);
    assert.equal(deployment.port, 8080);

    const [live] = await take(euStream, 1);
    assert.equal(live?.version, 1n);
    assert.equal(live?.state.case, "apply");
    if (live?.state.case === "apply") {
      const a = live.state.value;
      assert.equal(a.deploymentId, deployment.id);
      assert.equal(a.replicas, 2);
      assert.equal(a.k8sNamespace, "ws-acme");
      assert.equal(a.region, "eu-west");
      assert.deepEqual(a.command, ["node"]);
      assert.deepEqual(a.args, ["server.js"]);
      assert.equal(a.env[0]?.name, "MODE");
      assert.equal(a.revision, 1n);
    }

    // The other region got its own copy in its own outbox, and a snapshot shows it.
    const usMsgs: DeploymentState[] = [];
    const usAc = new AbortController();
    const usStream = withoutBookmarks(
      us.watchDeployments({ region: "us-east", versionLastSeen: 0n }, { signal: usAc.signal }),
    )[Symbol.asyncIterator]();
    usMsgs.push(...(await take(usStream, 3)));
    usAc.abort();
    assert.deepEqual(
      usMsgs.map((m) => m.state.case),
      ["snapshotStart", "apply", "snapshotEnd"],
    );
    const usApply = usMsgs[1]?.state;
    assert.equal(usApply?.case === "apply" ? usApply.value.replicas : -1, 3);
    assert.equal(usMsgs[2]?.state.case === "snapshotEnd" ? usMsgs[2].state.value.headVersion : -1n, 1n);

    // Sentinels have their own stream.
    const sAc = new AbortController();
    const sStream = withoutBookmarks(
      eu.watchSentinels({ region: "eu-west", versionLastSeen: 0n }, { signal: sAc.signal }),
    )[Symbol.asyncIterator]();
    const sMsgs = await take(sStream, 3);
    sAc.abort();
    assert.equal(sMsgs[1]?.state.case, "apply");
    const sentinel = sMsgs[1]?.state.case === "apply" ? sMsgs[1].state.value : undefined;
    assert.equal(sentinel?.image, "ghcr.io/krane/sentinel:1");

    // Reports and heartbeats land in status.
    await eu.reportDeploymentStatus({
      region: "eu-west",
      change: {
        case: "update",
        value: {
          deploymentId: deployment.id,
          k8sName: deployment.k8sName,
          instances: [
            { k8sName: `${deployment.k8sName}-a`, address: "10.0.0.1:8080", status: InstanceStatus.RUNNING },
            { k8sName: `${deployment.k8sName}-b`, address: "10.0.0.2:8080", status: InstanceStatus.PENDING },
          ],
        },
      },
    });
    await us.reportDeploymentStatus({
      region: "us-east",
      change: { case: "rejected", value: { deploymentId: deployment.id, reason: "quota exceeded" } },
    });
    await eu.reportSentinelStatus({
      region: "eu-west",
      change: {
        case: "update",
        value: { sentinelId: sentinel?.sentinelId ?? "", availableReplicas: 1, health: Health.HEALTHY },
      },
    });
    await eu.heartbeat({ region: "eu-west", agentId: "agent-0", build: "test", deploymentsVersion: 1n });

    const status = await ctrl
      .client(StatusService, admin)
      .getEnvironmentStatus({ workspace: "acme", project: "shop", environment: "production" });
    const ds = status.deployments[0];
    assert.equal(ds?.deployment?.id, deployment.id);
    const euStatus = ds?.regions.find((r) => r.region === "eu-west");
    assert.equal(euStatus?.instances.length, 2);
    assert.equal(euStatus?.runningInstances, 1);
    assert.equal(ds?.regions.find((r) => r.region === "us-east")?.rejectedReason, "quota exceeded");
    assert.equal(status.sentinels.find((s) => s.region === "eu-west")?.health, Health.HEALTHY);
    const euCluster = status.clusters.find((c) => c.region === "eu-west");
    assert.ok(euCluster && euCluster.lastHeartbeatUnixMs > 0n);
    assert.equal(euCluster.agentId, "agent-0");

    // A second report replaces the instance set.
    await eu.reportDeploymentStatus({
      region: "eu-west",
      change: {
        case: "update",
        value: {
          deploymentId: deployment.id,
          instances: [{ k8sName: `${deployment.k8sName}-c`, address: "10.0.0.3:8080", status: InstanceStatus.RUNNING }],
        },
      },
    });
    const status2 = await ctrl
      .client(StatusService, admin)
      .getEnvironmentStatus({ workspace: "acme", project: "shop", environment: "production" });
    assert.deepEqual(
      status2.deployments[0]?.regions.find((r) => r.region === "eu-west")?.instances.map((i) => i.k8sName),
      [`${deployment.k8sName}-c`],
    );

    // Point reads for the resync loop.
    const got = await eu.getDesiredDeploymentState({ region: "eu-west", deploymentId: deployment.id });
    assert.equal(got.state.case, "apply");
    const batch = await eu.getDesiredDeploymentStates({
      region: "eu-west",
      deploymentIds: [deployment.id, "dep_doesnotexist"],
    });
    assert.equal(batch.states.length, 1);
    assert.deepEqual(batch.notFound, ["dep_doesnotexist"]);

    // Deleting streams a DeleteDeployment, and the point read then says NotFound.
    await ctrl.client(DeploymentService, admin).deleteDeployment({ deploymentId: deployment.id });
    const [del] = await take(euStream, 1);
    assert.equal(del?.version, 2n);
    assert.equal(del?.state.case, "delete");
    assert.equal(del?.state.case === "delete" ? del.state.value.k8sName : "", deployment.k8sName);
    await assert.rejects(
      eu.getDesiredDeploymentState({ region: "eu-west", deploymentId: deployment.id }),
      (e) => ConnectError.from(e).code === Code.NotFound,
    );
    ac.abort();
  });
});

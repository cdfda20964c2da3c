// The rollout driver inside a real ctrl (HTTP/2, SQLite and PostgreSQL), with a fake agent that
// reports exactly the desired instances: a rolling update stays within its bounds and completes;
// scale, pause/resume, undo, restart, history; the progress deadline fires from the driver's
// timer; validation names the field.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { DeploymentService, EnvironmentService } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { ClusterService, InstanceStatus } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { RolloutService } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { startTestCtrl, tempDir, type TestCtrl } from "../ctrl/support.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { deploy, FakeAgent, REF, regionStatus, setupEnvironment, sizes } from "./support.js";

const REGION = "eu-west";

async function eventually(check: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Lets the fake agent follow the rollout, checking the bounds at every observation. */
async function follow(ctrl: TestCtrl, agent: FakeAgent, maxTotal: number, minAvailable: number): Promise<void> {
  await eventually(async () => {
    const moved = await agent.converge();
    const s = await sizes(ctrl, REGION);
    const total = [...s.values()].reduce((a, b) => a + b, 0);
    assert.ok(total <= maxTotal, `desired total ${total} > ${maxTotal}`);
    const r = await regionStatus(ctrl, REGION);
    assert.ok(
      r.availableReplicas >= minAvailable || !r.observed || r.revisions.length === 1,
      `available ${r.availableReplicas} < ${minAvailable}`,
    );
    return !moved && r.complete;
  }, "the rollout to complete");
}

function scenarios(name: string, databaseUrl: () => Promise<string>): void {
  describe(`rollout driver (${name})`, () => {
    let ctrl: TestCtrl;
    let agent: FakeAgent;
    const dir = tempDir("krane-rollout-");

    before(async () => {
      ctrl = await startTestCtrl(await databaseUrl(), { rolloutSweepIntervalMs: 200 });
      await setupEnvironment(ctrl, REGION, {
        replicas: 4,
        maxSurge: "1",
        maxUnavailable: "0",
        revisionHistoryLimit: 10,
      });
      agent = await FakeAgent.start(ctrl, REGION);
    });
    after(async () => {
      await ctrl.close();
      dir.remove();
    });

    it("the first deployment gets every replica at once", async () => {
      const v1 = await deploy(ctrl, "shop:1");
      assert.equal((await sizes(ctrl, REGION)).get(v1.id), 4);
      await follow(ctrl, agent, 4, 0);
      const r = await regionStatus(ctrl, REGION);
      assert.equal(r.targetDeploymentId, v1.id);
      assert.equal(r.revisions[0]?.revision, 1n);
      assert.ok(r.conditions.some((c) => c.type === "Available" && c.status === "True"));
      assert.ok(r.conditions.some((c) => c.type === "Progressing" && c.reason === "NewReplicaSetAvailable"));
    });

    it("rolls v1 → v2 one surge pod at a time and never below 4 available", async () => {
      const v2 = await deploy(ctrl, "shop:2");
      const s = await sizes(ctrl, REGION);
      assert.equal(s.get(v2.id), 1);
      assert.equal(
        [...s.values()].reduce((a, b) => a + b, 0),
        5,
      );
      await follow(ctrl, agent, 5, 4);
      const r = await regionStatus(ctrl, REGION);
      assert.equal(r.targetDeploymentId, v2.id);
      assert.deepEqual(
        r.revisions.map((x) => [x.image, x.desiredReplicas, Number(x.revision)]),
        [
          ["shop:2", 4, 2],
          ["shop:1", 0, 1],
        ],
      );
      assert.ok(
        r.events.some(
          (e) => e.reason === "ScalingReplicaSet" && /Scaled down replica set .* from 1 to 0/.test(e.message),
        ),
      );
    });

    it("scales proportionally, rejects bad input naming the field", async () => {
      const rollouts = ctrl.client(RolloutService, ctrl.adminToken);
      await rollouts.scale({ ...REF, replicas: 6 });
      await follow(ctrl, agent, 7, 4);
      assert.equal((await regionStatus(ctrl, REGION)).replicas, 6);
      await assert.rejects(
        rollouts.scale({ ...REF, replicas: -1 }),
        (e: unknown) => e instanceof ConnectError && e.code === Code.InvalidArgument && /replicas/.test(e.rawMessage),
      );
      await assert.rejects(
        rollouts.scale({ ...REF, region: "nowhere", replicas: 2 }),
        (e: unknown) => e instanceof ConnectError && e.code === Code.NotFound,
      );
      await assert.rejects(
        rollouts.undo({ ...REF, toRevision: 99n }),
        (e: unknown) =>
          e instanceof ConnectError && e.code === Code.InvalidArgument && /to_revision/.test(e.rawMessage),
      );
      await assert.rejects(
        rollouts.pause({ ...REF, environment: "" }),
        (e: unknown) =>
          e instanceof ConnectError && e.code === Code.InvalidArgument && /environment/.test(e.rawMessage),
      );
    });

    it("pause holds the sizes, resume continues", async () => {
      const rollouts = ctrl.client(RolloutService, ctrl.adminToken);
      await rollouts.pause(REF);
      const v3 = await deploy(ctrl, "shop:3");
      const held = await sizes(ctrl, REGION);
      assert.equal(held.get(v3.id), undefined, "a paused environment does not start the new revision");
      await agent.converge();
      await new Promise((r) => setTimeout(r, 300));
      assert.deepEqual(await sizes(ctrl, REGION), held);
      const paused = await regionStatus(ctrl, REGION);
      assert.ok(paused.conditions.some((c) => c.type === "Progressing" && c.reason === "DeploymentPaused"));
      assert.equal(paused.complete, false);
      await rollouts.resume(REF);
      assert.equal((await sizes(ctrl, REGION)).get(v3.id), 1);
      await follow(ctrl, agent, 7, 6);
      assert.equal((await regionStatus(ctrl, REGION)).targetDeploymentId, v3.id);
    });

    it("undo returns to the previous revision, which takes the newest revision number", async () => {
      const rollouts = ctrl.client(RolloutService, ctrl.adminToken);
      const before = await regionStatus(ctrl, REGION);
      const v2 = before.revisions.find((x) => x.image === "shop:2");
      await rollouts.undo(REF);
      await follow(ctrl, agent, 7, 6);
      const r = await regionStatus(ctrl, REGION);
      assert.equal(r.targetDeploymentId, v2?.deploymentId);
      assert.equal(r.revisions.find((x) => x.image === "shop:2")?.revision, 4n);
      assert.ok(r.events.some((e) => e.reason === "DeploymentRollback"));
      // --to-revision names a region revision number: 1 is shop:1.
      await rollouts.undo({ ...REF, toRevision: 1n });
      await follow(ctrl, agent, 7, 6);
      const r1 = await regionStatus(ctrl, REGION);
      assert.equal(r1.revisions.find((x) => x.target)?.image, "shop:1");
      assert.equal(r1.revisions.find((x) => x.target)?.revision, 5n);
    });

    it("restart rolls out a fresh copy of the target; history lists every revision", async () => {
      const rollouts = ctrl.client(RolloutService, ctrl.adminToken);
      const res = await rollouts.restart(REF);
      assert.match(res.deploymentId, /^dep_/);
      await follow(ctrl, agent, 7, 6);
      const r = await regionStatus(ctrl, REGION);
      assert.equal(r.targetDeploymentId, res.deploymentId);
      assert.equal(r.revisions.find((x) => x.target)?.image, "shop:1");
      const { status } = await rollouts.history(REF);
      const revs = status?.regions[0]?.revisions.map((x) => Number(x.revision)).sort((a, b) => a - b);
      assert.deepEqual(revs, [3, 4, 5, 6]);
    });

    it("a revision that never becomes ready exceeds its progress deadline while the old one keeps serving", async () => {
      // A separate environment with a 1 s deadline.
      const rollouts = ctrl.client(RolloutService, ctrl.adminToken);
      const { environment } = await ctrl.client(EnvironmentService, ctrl.adminToken).createEnvironment({
        workspace: REF.workspace,
        project: REF.project,
        slug: "staging",
        regions: [{ region: REGION, replicas: 2 }],
        rollout: { maxSurge: "1", maxUnavailable: "0", progressDeadlineSeconds: 1 },
      });
      assert.ok(environment);
      const ref = { ...REF, environment: "staging" };
      const deployments = ctrl.client(DeploymentService, ctrl.adminToken);
      await deployments.createDeployment({ ...ref, image: "shop:good" });
      const agentClient = ctrl.client(ClusterService, await ctrl.agentToken(REGION, "second"));
      const report = async (): Promise<void> => {
        const { status } = await rollouts.getRolloutStatus(ref);
        const { deployments: list } = await deployments.listDeployments(ref);
        for (const rev of status?.regions[0]?.revisions ?? []) {
          const d = list.find((x) => x.id === rev.deploymentId);
          const ready = rev.image !== "shop:bad";
          await agentClient.reportDeploymentStatus({
            region: REGION,
            change: {
              case: "update",
              value: {
                deploymentId: rev.deploymentId,
                k8sName: d?.k8sName ?? "",
                instances: Array.from({ length: rev.desiredReplicas }, (_, i) => ({
                  k8sName: `${d?.k8sName}-${i}`,
                  status: ready ? InstanceStatus.RUNNING : InstanceStatus.PENDING,
                  readySinceUnixMs: ready ? BigInt(Date.now() - 60_000) : 0n,
                })),
              },
            },
          });
        }
      };
      await eventually(async () => {
        await report();
        return (await rollouts.getRolloutStatus(ref)).status?.regions[0]?.complete === true;
      }, "staging v1 to complete");
      await deployments.createDeployment({ ...ref, image: "shop:bad" });
      await report();
      await eventually(
        async () => (await rollouts.getRolloutStatus(ref)).status?.regions[0]?.deadlineExceeded === true,
        "the progress deadline",
        15_000,
      );
      const r = (await rollouts.getRolloutStatus(ref)).status?.regions[0];
      const progressing = r?.conditions.find((c) => c.type === "Progressing");
      assert.equal(progressing?.status, "False");
      assert.equal(progressing?.reason, "ProgressDeadlineExceeded");
      assert.equal(r?.revisions.find((x) => x.image === "shop:good")?.availableReplicas, 2);
      assert.equal(r?.revisions.find((x) => x.image === "shop:good")?.desiredReplicas, 2);
      assert.equal(r?.complete, false);
    });
  });
}

const dir = tempDir("krane-rollout-sqlite-");
scenarios("SQLite", async () => join(dir.path, "ctrl.db"));

let pg: TestPostgres | null = null;
scenarios("PostgreSQL", async () => {
  pg ??= await startPostgres();
  return pg.newDatabase();
});
after(async () => {
  await pg?.stop();
  dir.remove();
});

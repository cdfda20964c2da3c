// Instant rollback inside a real ctrl (HTTP/2, SQLite and PostgreSQL) with a fake agent that
// reports exactly the desired instances: after a rolling update the previous revision keeps its
// pods with no traffic; `rollback` within the warm window switches the region's weights to it at
// once and never grows any revision (no pod is created); the pin holds through a deploy; unpin and
// a deploy with unpin roll out the newest; outside the window (here: a window of 0) rollback
// rolls out; an instant rollback with nothing warm is refused with nothing changed; the window
// ends on the driver's own timer.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { DeploymentService, EnvironmentService } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { RolloutService, type RegionRollout } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
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

/**
 * Lets the fake agent follow the rollout until it completes; `each` sees the desired sizes at
 * every observation.
 */
async function follow(
  ctrl: TestCtrl,
  agent: FakeAgent,
  each: (s: Map<string, number>) => void = () => undefined,
): Promise<RegionRollout> {
  let last: RegionRollout | null = null;
  await eventually(async () => {
    const moved = await agent.converge();
    each(await sizes(ctrl, REGION));
    last = await regionStatus(ctrl, REGION);
    return !moved && last.complete;
  }, "the rollout to complete");
  return last as unknown as RegionRollout;
}

const weightsOf = (r: RegionRollout | undefined): [string, number][] =>
  (r?.weights ?? []).map((w) => [w.deploymentId, w.weight]);

function scenarios(name: string, databaseUrl: () => Promise<string>): void {
  describe(`instant rollback (${name})`, () => {
    let ctrl: TestCtrl;
    let agent: FakeAgent;
    let v1: { id: string };
    let v2: { id: string };
    let v3: { id: string };

    before(async () => {
      ctrl = await startTestCtrl(await databaseUrl(), { rolloutSweepIntervalMs: 200 });
      await setupEnvironment(ctrl, REGION, { replicas: 3, maxSurge: "1", maxUnavailable: "0", sentinel: true });
      agent = await FakeAgent.start(ctrl, REGION);
    });
    after(async () => {
      await ctrl.close();
    });

    it("a rolling update keeps the previous revision's pods, with no traffic, for the warm window", async () => {
      v1 = await deploy(ctrl, "shop:1");
      await follow(ctrl, agent);
      v2 = await deploy(ctrl, "shop:2");
      let sawBoth = false;
      const r = await follow(ctrl, agent, (s) => {
        // The old revision is never scaled down while the new one comes up.
        assert.equal(s.get(v1.id), 3);
        if ((s.get(v2.id) ?? 0) > 0 && (s.get(v2.id) ?? 0) < 3) sawBoth = true;
      });
      assert.ok(sawBoth, "the rollout went step by step");
      assert.equal(r.targetDeploymentId, v2.id);
      assert.equal(r.warm?.deploymentId, v1.id);
      assert.equal(r.warm?.replicas, 3);
      assert.ok((r.warm?.untilUnixMs ?? 0n) > BigInt(Date.now()), "the window runs");
      assert.equal(r.revisions.find((x) => x.deploymentId === v1.id)?.warm, true);
      assert.deepEqual(weightsOf(r), [[v2.id, 100]]);
      // The rollout counts only the new revision (kubectl's reading: complete).
      assert.equal(r.currentReplicas, 3);
      assert.ok(r.events.some((e) => e.reason === "KeepingRevisionWarm"));
      const { status } = await ctrl.client(RolloutService, ctrl.adminToken).getRolloutStatus(REF);
      assert.equal(status?.warmWindowSeconds, 1800);
      assert.equal(status?.pinnedDeploymentId, "");
    });

    it("rollback within the window switches traffic at once, grows no revision, and pins", async () => {
      const rollouts = ctrl.client(RolloutService, ctrl.adminToken);
      const res = await rollouts.rollback({ ...REF, instant: true });
      assert.equal(res.instant, true);
      assert.equal(res.deploymentId, v1.id);
      assert.equal(res.revision, 1n);
      assert.deepEqual(res.rollingRegions, []);
      // The passes the call ran already switched the region's sentinels.
      assert.deepEqual(weightsOf(res.status?.regions[0]), [[v1.id, 100]]);
      assert.equal(res.status?.pinnedDeploymentId, v1.id);
      assert.equal(res.status?.pinnedRevision, 1n);
      let v2Size = 3;
      const r = await follow(ctrl, agent, (s) => {
        assert.equal(s.get(v1.id), 3, "the warm revision keeps exactly its pods");
        const n = s.get(v2.id) ?? 0;
        assert.ok(n <= v2Size, `revision 2 grew from ${v2Size} to ${n}`);
        v2Size = n;
      });
      assert.equal(v2Size, 0);
      assert.equal(r.targetDeploymentId, v1.id);
      assert.ok(r.events.some((e) => e.reason === "SwitchedToWarmRevision"));
      assert.equal(r.warm, undefined, "a rollback keeps nothing warm");
    });

    it("the pin holds through a deploy; undo, restart and a rollback with nothing before are refused, nothing changed", async () => {
      const { deployment, pinnedDeploymentId } = await ctrl
        .client(DeploymentService, ctrl.adminToken)
        .createDeployment({ ...REF, image: "shop:3" });
      assert.ok(deployment);
      v3 = deployment;
      assert.equal(pinnedDeploymentId, v1.id);
      const r = await follow(ctrl, agent);
      assert.equal(r.targetDeploymentId, v1.id);
      assert.equal((await sizes(ctrl, REGION)).get(v3.id) ?? 0, 0, "the pinned-over revision gets no pods");
      const rollouts = ctrl.client(RolloutService, ctrl.adminToken);
      // Pinned to the first revision: nothing before it.
      await assert.rejects(
        rollouts.rollback(REF),
        (e: unknown) =>
          e instanceof ConnectError &&
          e.code === Code.FailedPrecondition &&
          /no revision before revision 1 to roll back to/.test(e.rawMessage),
      );
      const { status } = await rollouts.getRolloutStatus(REF);
      assert.equal(status?.pinnedDeploymentId, v1.id);
      assert.equal(status?.regions[0]?.targetDeploymentId, v1.id);
      // Undo and restart would fight the pin: refused until unpin.
      for (const call of [() => rollouts.undo(REF), () => rollouts.restart(REF)])
        await assert.rejects(
          call(),
          (e: unknown) =>
            e instanceof ConnectError &&
            e.code === Code.FailedPrecondition &&
            /krane rollback --unpin/.test(e.rawMessage),
        );
      await assert.rejects(
        rollouts.rollback({ ...REF, unpin: true, instant: true }),
        (e: unknown) => e instanceof ConnectError && e.code === Code.InvalidArgument && /instant/.test(e.rawMessage),
      );
    });

    it("unpin rolls out the newest, and the revision it leaves is warm again", async () => {
      const rollouts = ctrl.client(RolloutService, ctrl.adminToken);
      const res = await rollouts.rollback({ ...REF, unpin: true });
      assert.equal(res.unpinned, true);
      assert.equal(res.status?.pinnedDeploymentId, "");
      const r = await follow(ctrl, agent);
      assert.equal(r.targetDeploymentId, v3.id);
      assert.equal(r.warm?.deploymentId, v1.id);
      assert.deepEqual(weightsOf(r), [[v3.id, 100]]);
      assert.equal((await rollouts.rollback({ ...REF, unpin: true })).unpinned, false);
    });

    it("with no warm window an instant rollback is refused and a rollback rolls out with new pods; a deploy with unpin lifts the pin", async () => {
      const rollouts = ctrl.client(RolloutService, ctrl.adminToken);
      await ctrl
        .client(EnvironmentService, ctrl.adminToken)
        .updateEnvironment({ ...REF, rollout: { warmWindowSeconds: 0 } });
      let r = await follow(ctrl, agent);
      assert.equal(r.warm, undefined);
      assert.equal((await sizes(ctrl, REGION)).get(v1.id), 0, "the warm revision was let go");
      await assert.rejects(
        rollouts.rollback({ ...REF, instant: true }),
        (e: unknown) =>
          e instanceof ConnectError &&
          e.code === Code.FailedPrecondition &&
          /keeps nothing warm to roll back to in region "eu-west" \(its warm window is 0/.test(e.rawMessage),
      );
      assert.equal((await rollouts.getRolloutStatus(REF)).status?.pinnedDeploymentId, "", "nothing half-applied");
      const res = await rollouts.rollback(REF);
      assert.equal(res.instant, false);
      assert.equal(res.deploymentId, v2.id, "the revision before the current one");
      assert.deepEqual(res.rollingRegions, [REGION]);
      let grew = false;
      r = await follow(ctrl, agent, (s) => {
        if ((s.get(v2.id) ?? 0) > 0) grew = true;
      });
      assert.ok(grew);
      assert.equal(r.targetDeploymentId, v2.id);
      const { deployment, pinnedDeploymentId } = await ctrl
        .client(DeploymentService, ctrl.adminToken)
        .createDeployment({ ...REF, image: "shop:4", unpin: true });
      assert.equal(pinnedDeploymentId, "");
      r = await follow(ctrl, agent);
      assert.equal(r.targetDeploymentId, deployment?.id);
      // Deleting the pinned revision lifts the pin with it.
      const pinnedTo = (await rollouts.rollback(REF)).deploymentId;
      assert.equal(pinnedTo, v3.id);
      await ctrl.client(DeploymentService, ctrl.adminToken).deleteDeployment({ deploymentId: pinnedTo });
      assert.equal((await rollouts.getRolloutStatus(REF)).status?.pinnedDeploymentId, "");
      r = await follow(ctrl, agent);
      assert.equal(r.targetDeploymentId, deployment?.id);
    });

    it("the warm revision goes when its window ends, on the driver's timer", async () => {
      const ref = { ...REF, environment: "staging" };
      await ctrl.client(EnvironmentService, ctrl.adminToken).createEnvironment({
        workspace: REF.workspace,
        project: REF.project,
        slug: "staging",
        regions: [{ region: REGION, replicas: 2 }],
        rollout: { maxSurge: "1", maxUnavailable: "0", warmWindowSeconds: 1 },
        sentinel: {},
      });
      const deployments = ctrl.client(DeploymentService, ctrl.adminToken);
      const rollouts = ctrl.client(RolloutService, ctrl.adminToken);
      const agentFor = await FakeAgent.start(ctrl, REGION);
      const status = async (): Promise<RegionRollout | undefined> =>
        (await rollouts.getRolloutStatus(ref)).status?.regions[0];
      const converge = async (): Promise<boolean> => agentFor.converge(ref);
      const a = (await deployments.createDeployment({ ...ref, image: "shop:a" })).deployment;
      await eventually(async () => !(await converge()) && (await status())?.complete === true, "staging a");
      await deployments.createDeployment({ ...ref, image: "shop:b" });
      await eventually(async () => !(await converge()) && (await status())?.complete === true, "staging b");
      // Nothing but the driver's wake time lets it go (the fake agent reports nothing meanwhile).
      await eventually(async () => (await status())?.warm === undefined, "the warm window to end");
      const r = await status();
      assert.ok(r?.events.some((e) => e.reason === "KeepingRevisionWarm"));
      assert.equal(r?.revisions.find((x) => x.deploymentId === a?.id)?.desiredReplicas, 0);
      assert.ok(
        r?.events.some((e) => e.reason === "WarmRevisionReleased" && /warm window of 1s passed/.test(e.message)),
      );
      await converge();
      await assert.rejects(
        rollouts.rollback({ ...ref, instant: true }),
        (e: unknown) => e instanceof ConnectError && e.code === Code.FailedPrecondition,
      );
    });

    it("a third rolling update while a revision is warm lets that one go and rolls out", async () => {
      const ref = { ...REF, environment: "qa" };
      await ctrl.client(EnvironmentService, ctrl.adminToken).createEnvironment({
        workspace: REF.workspace,
        project: REF.project,
        slug: "qa",
        regions: [{ region: REGION, replicas: 2 }],
        rollout: { maxSurge: "1", maxUnavailable: "0" },
        sentinel: {},
      });
      const deployments = ctrl.client(DeploymentService, ctrl.adminToken);
      const rollouts = ctrl.client(RolloutService, ctrl.adminToken);
      const agentFor = await FakeAgent.start(ctrl, REGION);
      const status = async (): Promise<RegionRollout | undefined> =>
        (await rollouts.getRolloutStatus(ref)).status?.regions[0];
      const rollOut = async (image: string): Promise<string> => {
        const id = (await deployments.createDeployment({ ...ref, image })).deployment?.id ?? "";
        await eventually(
          async () => !(await agentFor.converge(ref)) && (await status())?.targetDeploymentId === id,
          `${image} to roll out`,
        );
        await eventually(async () => !(await agentFor.converge(ref)) && (await status())?.complete === true, image);
        return id;
      };
      const a = await rollOut("shop:qa-1");
      const b = await rollOut("shop:qa-2");
      assert.equal((await status())?.warm?.deploymentId, a);
      // The pass that takes the third revision lets the first go; before the fix it waited for
      // that revision's pods to go while it never wrote its scale-down, and the rollout stood.
      const c = await rollOut("shop:qa-3");
      const r = await status();
      assert.equal(r?.targetDeploymentId, c);
      assert.equal(r?.warm?.deploymentId, b);
      assert.equal(r?.revisions.find((x) => x.deploymentId === a)?.desiredReplicas ?? 0, 0);
      assert.ok(r?.events.some((e) => e.reason === "WarmRevisionReleased" && /previous revision now/.test(e.message)));
    });
  });
}

const dir = tempDir("krane-rollback-sqlite-");
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

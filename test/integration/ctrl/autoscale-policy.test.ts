// The autoscaling policy through the real HTTP/2 server on SQLite and PostgreSQL: set, changed in
// part, shown, removed; streamed to every region's agent with the environment's sentinel; bad
// policies refused naming the field, with nothing stored or streamed. A region's agent's decision
// (ReportAutoscale): taken as the region's count only within the region's policy, newest first,
// streamed back with the sentinel and shown by `krane status`; a person's scale of an autoscaled
// region refused; regions' own policies.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it, type TestContext } from "node:test";
import { Code, type Client } from "@connectrpc/connect";
import {
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { ClusterService } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { RolloutService } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { watchSentinels } from "./region-watch.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const REF = { workspace: "acme", project: "shop", environment: "prod" };

interface Fixture {
  ctrl: TestCtrl;
  envs: Client<typeof EnvironmentService>;
  agent: Record<"eu" | "us", string>;
}

/** shop/prod in eu (2) and us (1) with a sentinel; shop/bare in eu without one. */
async function setup(t: TestContext, url: string): Promise<Fixture> {
  const ctrl = await startTestCtrl(url);
  t.after(() => ctrl.close());
  const admin = ctrl.adminToken;
  for (const name of ["eu", "us"]) await ctrl.client(RegionService, admin).createRegion({ name });
  await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: "acme" });
  await ctrl.client(ProjectService, admin).createProject({ workspace: "acme", slug: "shop" });
  const envs = ctrl.client(EnvironmentService, admin);
  await envs.createEnvironment({
    workspace: "acme",
    project: "shop",
    slug: "prod",
    regions: [
      { region: "eu", replicas: 2 },
      { region: "us", replicas: 1 },
    ],
    sentinel: { image: "" },
  });
  await envs.createEnvironment({
    workspace: "acme",
    project: "shop",
    slug: "bare",
    regions: [{ region: "eu", replicas: 1 }],
  });
  return { ctrl, envs, agent: { eu: await ctrl.agentToken("eu"), us: await ctrl.agentToken("us") } };
}

function suite(newUrl: () => Promise<string>): void {
  it("sets, changes in part, shows and removes the policy; each region's sentinel carries it", async (t) => {
    const f = await setup(t, await newUrl());
    const eu = watchSentinels(f.ctrl, f.agent.eu, "eu");
    const us = watchSentinels(f.ctrl, f.agent.us, "us");
    await eu.synced();
    await us.synced();

    const set = await f.envs.updateEnvironment({
      ...REF,
      autoscale: { minReplicas: 1, maxReplicas: 20, concurrencyTarget: 50, cpuTargetPercent: 80 },
    });
    const a = set.environment?.autoscale;
    assert.ok(a);
    assert.equal(a.minReplicas, 1);
    assert.equal(a.maxReplicas, 20);
    assert.equal(a.concurrencyTarget, 50);
    assert.equal(a.cpuTargetPercent, 80);
    assert.equal(a.scaleUpWindowSeconds, 0, "default: scale up at once");
    assert.equal(a.scaleDownWindowSeconds, 300, "default: down after five minutes");
    assert.equal(a.scaleToZero, undefined);
    for (const [region, w] of [
      ["eu", eu],
      ["us", us],
    ] as const) {
      const m = await w.next();
      assert.equal(m.state.case, "apply", region);
      if (m.state.case !== "apply") continue;
      assert.equal(m.state.value.autoscale?.maxReplicas, 20, region);
      assert.equal(m.state.value.autoscale?.concurrencyTarget, 50, region);
    }

    // Only what is given changes; scale-to-zero needs min 0, given with it.
    const zero = await f.envs.updateEnvironment({
      ...REF,
      autoscale: { minReplicas: 0, scaleToZero: { idleSeconds: 300 } },
    });
    const z = zero.environment?.autoscale;
    assert.equal(z?.minReplicas, 0);
    assert.equal(z?.maxReplicas, 20, "kept");
    assert.equal(z?.concurrencyTarget, 50, "kept");
    assert.equal(z?.scaleToZero?.idleSeconds, 300);
    assert.equal(z?.scaleToZero?.maxHeldRequests, 1000, "the default bound of held requests");
    assert.equal(z?.scaleToZero?.heldTimeoutSeconds, 30);
    const m = await eu.next();
    assert.equal(m.state.case, "apply");
    if (m.state.case === "apply") assert.equal(m.state.value.autoscale?.scaleToZero?.idleSeconds, 300);
    await us.next();

    const got = await f.envs.getEnvironment(REF);
    assert.equal(got.environment?.autoscale?.scaleToZero?.idleSeconds, 300, "stored, not only answered");

    // The same request again changes nothing and tells no agent.
    await f.envs.updateEnvironment({ ...REF, autoscale: { minReplicas: 0 } });

    const off = await f.envs.updateEnvironment({ ...REF, removeAutoscale: true });
    assert.equal(off.environment?.autoscale, undefined);
    const back = await eu.next();
    assert.equal(back.state.case, "apply");
    if (back.state.case === "apply")
      assert.equal(back.state.value.autoscale, undefined, "the region stops autoscaling");
    assert.deepEqual(
      off.environment?.regions.map((r) => [r.region, r.replicas]),
      [
        ["eu", 2],
        ["us", 1],
      ],
      "the regions keep their counts",
    );
  });

  it("refuses bad policies naming the field, storing and streaming nothing", async (t) => {
    const f = await setup(t, await newUrl());
    await f.envs.updateEnvironment({ ...REF, autoscale: { minReplicas: 2, maxReplicas: 4 } });
    const eu = watchSentinels(f.ctrl, f.agent.eu, "eu");
    await eu.synced();
    const cases: [Parameters<typeof f.envs.updateEnvironment>[0]["autoscale"], RegExp][] = [
      [{ minReplicas: 5, maxReplicas: 3 }, /^autoscale\.min_replicas: must not be above max_replicas \(3\)/],
      [{ maxReplicas: 1001 }, /^autoscale\.max_replicas: must be between 1 and 1000/],
      [{ concurrencyTarget: 0 }, /^autoscale\.concurrency: must be between 1 and/],
      [
        { minReplicas: 1, scaleToZero: { idleSeconds: 300 } },
        /^autoscale\.scale_to_zero: cannot be combined with min_replicas 1/,
      ],
      [{ minReplicas: 0 }, /^autoscale\.min_replicas: 0 needs scale-to-zero/],
      [
        { minReplicas: 0, scaleToZero: { idleSeconds: 300, maxHeldRequests: 0 } },
        /^autoscale\.scale_to_zero\.max_held_requests/,
      ],
      [{ maxStep: -1 }, /^autoscale\.max_step/],
    ];
    for (const [autoscale, message] of cases) {
      await expectCode(f.envs.updateEnvironment({ ...REF, autoscale }), Code.InvalidArgument, message);
    }
    await expectCode(
      f.envs.updateEnvironment({ ...REF, autoscale: { minReplicas: 3 }, removeAutoscale: true }),
      Code.InvalidArgument,
      /^remove_autoscale: cannot be combined with autoscale/,
    );
    const got = await f.envs.getEnvironment(REF);
    assert.equal(got.environment?.autoscale?.minReplicas, 2, "nothing half-applied");
    assert.equal(got.environment?.autoscale?.maxReplicas, 4);

    // The sentinels measure the load: no sentinel, no autoscaling; nor removing it while autoscaling.
    await expectCode(
      f.envs.updateEnvironment({ ...REF, environment: "bare", autoscale: { maxReplicas: 3 } }),
      Code.FailedPrecondition,
      /^autoscale: environment "bare" has no sentinel/,
    );
    await expectCode(
      f.envs.updateEnvironment({ ...REF, removeSentinel: true }),
      Code.FailedPrecondition,
      /^remove_sentinel: the environment autoscales/,
    );
    // No refused request reached the agent: the next message is the one this change causes.
    await f.envs.updateEnvironment({ ...REF, autoscale: { maxReplicas: 5 } });
    const m = await eu.next();
    assert.equal(m.state.case, "apply");
    if (m.state.case === "apply") assert.equal(m.state.value.autoscale?.maxReplicas, 5);
  });

  it("takes a region's decision within its policy, newest first, streams it back and shows it", async (t) => {
    const f = await setup(t, await newUrl());
    await f.envs.updateEnvironment({ ...REF, autoscale: { minReplicas: 1, maxReplicas: 6 } });
    const envId = (await f.envs.getEnvironment(REF)).environment?.id ?? "";
    const eu = watchSentinels(f.ctrl, f.agent.eu, "eu");
    await eu.synced();
    const agentEu = f.ctrl.client(ClusterService, f.agent.eu);
    const at = BigInt(Date.now());
    const report = (replicas: number, decidedAtUnixMs: bigint, environmentId = envId) =>
      agentEu.reportAutoscale({
        region: "eu",
        environmentId,
        replicas,
        reason: `load asks ${replicas}`,
        decidedAtUnixMs,
      });

    const taken = await report(5, at);
    assert.deepEqual([taken.recorded, taken.replicas], [true, 5]);
    const m = await eu.next();
    assert.equal(m.state.case, "apply");
    if (m.state.case === "apply") {
      assert.equal(m.state.value.autoscaleRegion?.replicas, 5, "the count ctrl holds, streamed back");
      assert.equal(m.state.value.autoscaleRegion?.decidedAtUnixMs, at, "with the decision that set it");
    }
    const regions = async (): Promise<string[][]> =>
      ((await f.envs.getEnvironment(REF)).environment?.regions ?? []).map((r) => [r.region, String(r.replicas)]);
    assert.deepEqual(await regions(), [
      ["eu", "5"],
      ["us", "1"],
    ]);

    // An older decision (another agent replica that led before) changes nothing.
    const older = await report(2, at - 1000n);
    assert.deepEqual([older.recorded, older.replicas], [false, 5]);
    // Outside the policy, another region's environment, an environment that does not autoscale:
    // refused, nothing written.
    await expectCode(
      report(7, at + 1n),
      Code.InvalidArgument,
      /^replicas: must be within the region's policy \(1 to 6\)/,
    );
    await expectCode(report(0, at + 1n), Code.InvalidArgument, /^replicas: must be within/);
    await expectCode(
      f.ctrl.client(ClusterService, f.agent.us).reportAutoscale({
        region: "eu",
        environmentId: envId,
        replicas: 3,
        reason: "x",
        decidedAtUnixMs: at + 1n,
      }),
      Code.PermissionDenied,
    );
    const bare = (await f.envs.getEnvironment({ ...REF, environment: "bare" })).environment?.id ?? "";
    await expectCode(report(1, at + 1n, bare), Code.FailedPrecondition, /does not autoscale in region eu/);
    await expectCode(
      report(3, BigInt(Date.now() + 3_600_000)),
      Code.InvalidArgument,
      /^decided_at_unix_ms: is in the future/,
    );
    assert.deepEqual(await regions(), [
      ["eu", "5"],
      ["us", "1"],
    ]);

    // `krane status`: each autoscaled region's decision and its reason.
    const status = await f.ctrl.client(StatusService, f.ctrl.adminToken).getEnvironmentStatus(REF);
    assert.deepEqual(
      status.autoscale.map((a) => [a.region, a.replicas, a.reason, a.policy?.maxReplicas]),
      [
        ["eu", 5, "load asks 5", 6],
        ["us", 1, "no decision from the region's agent yet", 6],
      ],
    );

    // One writer per number: a person sets the bounds, not the count.
    const rollout = f.ctrl.client(RolloutService, f.ctrl.adminToken);
    await expectCode(
      rollout.scale({ ...REF, region: "eu", replicas: 2 }),
      Code.FailedPrecondition,
      /autoscales in region "eu": set its bounds instead/,
    );
    await expectCode(
      f.envs.updateEnvironment({ ...REF, regions: [{ region: "eu", replicas: 2 }] }),
      Code.FailedPrecondition,
      /^regions\[0\]\.replicas: environment "prod" autoscales in region "eu"/,
    );
    // New bounds bring the count within them at once, and reach the agent.
    await f.envs.updateEnvironment({ ...REF, autoscale: { maxReplicas: 3 } });
    assert.deepEqual(await regions(), [
      ["eu", "3"],
      ["us", "1"],
    ]);
    const bounded = await eu.next();
    if (bounded.state.case === "apply") {
      assert.equal(bounded.state.value.autoscale?.maxReplicas, 3);
      assert.equal(bounded.state.value.autoscaleRegion?.replicas, 3);
    }

    // A region's own policy: off in us (a person scales it again), its own bounds in eu.
    await f.envs.updateEnvironment({
      ...REF,
      regionAutoscale: [
        { region: "us", off: true },
        { region: "eu", policy: { maxReplicas: 10 } },
      ],
    });
    await rollout.scale({ ...REF, region: "us", replicas: 4 });
    const env = (await f.envs.getEnvironment(REF)).environment;
    assert.deepEqual(
      env?.regionAutoscale.map((r) => [r.region, r.policy?.maxReplicas ?? "off"]),
      [
        ["eu", 10],
        ["us", "off"],
      ],
    );
    assert.equal(env?.autoscale?.maxReplicas, 3, "the environment's own policy is unchanged");
    const own = await eu.next();
    if (own.state.case === "apply") assert.equal(own.state.value.autoscale?.maxReplicas, 10, "eu's own policy");
    assert.deepEqual((await report(9, at + 2n)).replicas, 9, "within eu's own bounds");
    await expectCode(
      f.envs.updateEnvironment({ ...REF, regionAutoscale: [{ region: "eu", policy: { minReplicas: 11 } }] }),
      Code.InvalidArgument,
      /^region_autoscale\[0\]\.policy\.min_replicas: must not be above max_replicas \(10\)/,
    );
    await expectCode(
      f.envs.updateEnvironment({ ...REF, regionAutoscale: [{ region: "eu", off: true, inherit: true }] }),
      Code.InvalidArgument,
      /^region_autoscale\[0\]: give exactly one of policy, off and inherit/,
    );
    await f.envs.updateEnvironment({ ...REF, regionAutoscale: [{ region: "eu", inherit: true }] });
    assert.deepEqual(
      await regions(),
      [
        ["eu", "3"],
        ["us", "4"],
      ],
      "back to the environment's max of 3",
    );
  });
}

describe("Autoscaling policy (SQLite)", () => {
  const dir = tempDir();
  let n = 0;
  after(() => dir.remove());
  suite(async () => join(dir.path, `ctrl-${++n}.db`));
});

describe("Autoscaling policy (PostgreSQL)", () => {
  let pg: TestPostgres;
  before(async () => {
    pg = await startPostgres();
  });
  after(async () => {
    await pg.stop();
  });
  suite(() => pg.newDatabase());
});

// The autoscaling policy through the real HTTP/2 server on SQLite and PostgreSQL: set, changed in
// part, shown, removed; streamed to every region's agent with the environment's sentinel; bad
// policies refused naming the field, with nothing stored or streamed.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it, type TestContext } from "node:test";
import { Code, type Client } from "@connectrpc/connect";
import {
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
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

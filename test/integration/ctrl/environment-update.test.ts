// UpdateEnvironment through the real HTTP/2 server on SQLite and PostgreSQL: every field
// changes what is stored, and what each region's agent is told arrives on its watch streams
// (sentinels re-rendered, added and removed; deployments re-rendered, rescaled by the rollout
// driver, added to a joining region and deleted from a region left). Refused requests name the
// field and change nothing, not even a stream version.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it, type TestContext } from "node:test";
import { Code, type Client } from "@connectrpc/connect";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  RolloutStrategy,
  StatusService,
  WorkspaceService,
  type Environment,
  type UpdateEnvironmentRequestSchema,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { RolloutService } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { UpdateEnvironmentRequestSchema as UpdateSchema } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { setTimeout as sleep } from "node:timers/promises";
import { deleteDeployment } from "../../../src/ctrl/domain/deployments.js";
import { updateEnvironment } from "../../../src/ctrl/domain/environment-update.js";
import { lockEnvironment } from "../../../src/ctrl/domain/environments.js";
import { validateUpdateEnvironment } from "../../../src/ctrl/validate/api.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { watchDeployments, watchSentinels } from "./region-watch.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

type UpdateInit = Omit<
  MessageInitShape<typeof UpdateEnvironmentRequestSchema>,
  "$typeName" | "workspace" | "project" | "environment"
>;

const REF = { workspace: "acme", project: "shop", environment: "prod" };

interface Fixture {
  ctrl: TestCtrl;
  envs: Client<typeof EnvironmentService>;
  update(req: UpdateInit, environment?: string): Promise<Environment>;
  get(environment?: string): Promise<Environment>;
  agent: Record<"eu" | "us" | "ap", string>;
}

/**
 * Regions eu, us and ap (registered, each with an agent token); environment shop/prod in eu (2
 * replicas) and us (1) with a sentinel.
 */
async function setup(t: TestContext, url: string): Promise<Fixture> {
  const ctrl = await startTestCtrl(url);
  t.after(() => ctrl.close());
  const admin = ctrl.adminToken;
  for (const name of ["eu", "us", "ap"]) await ctrl.client(RegionService, admin).createRegion({ name });
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
    sentinel: { image: "registry.example.com/sentinel:1" },
  });
  const agent = { eu: await ctrl.agentToken("eu"), us: await ctrl.agentToken("us"), ap: await ctrl.agentToken("ap") };
  return {
    ctrl,
    envs,
    agent,
    async update(req, environment = "prod") {
      const res = await envs.updateEnvironment({ ...REF, environment, ...req });
      assert.ok(res.environment);
      return res.environment;
    },
    async get(environment = "prod") {
      const res = await envs.getEnvironment({ ...REF, environment });
      assert.ok(res.environment);
      return res.environment;
    },
  };
}

async function deploy(f: Fixture, image: string, environment = "prod"): Promise<string> {
  const { deployment } = await f.ctrl
    .client(DeploymentService, f.ctrl.adminToken)
    .createDeployment({ ...REF, environment, image });
  assert.ok(deployment);
  return deployment.id;
}

function suite(newUrl: () => Promise<string>): void {
  it("changes, removes and adds the sentinel; every region's agent is told", async (t) => {
    const f = await setup(t, await newUrl());
    const eu = watchSentinels(f.ctrl, f.agent.eu, "eu");
    const us = watchSentinels(f.ctrl, f.agent.us, "us");
    await eu.synced();
    await us.synced();

    const changed = await f.update({ sentinel: { image: "registry.example.com/sentinel:2", replicas: 3 } });
    assert.equal(changed.sentinel?.image, "registry.example.com/sentinel:2");
    assert.equal(changed.sentinel?.replicas, 3);
    assert.equal(changed.sentinel?.cpuMillicores, 250n, "fields not given keep their value");
    assert.ok(changed.updatedAtUnixMs >= changed.createdAtUnixMs);
    let firstId = "";
    for (const [region, w] of [
      ["eu", eu],
      ["us", us],
    ] as const) {
      const m = await w.next();
      assert.equal(m.state.case, "apply", region);
      if (m.state.case !== "apply") continue;
      assert.equal(m.state.value.image, "registry.example.com/sentinel:2");
      assert.equal(m.state.value.replicas, 3);
      assert.equal(m.state.value.cpuMillicores, 250n);
      assert.equal(m.state.value.region, region);
      if (region === "eu") firstId = m.state.value.sentinelId;
    }

    const removed = await f.update({ removeSentinel: true });
    assert.equal(removed.sentinel, undefined);
    for (const w of [eu, us]) assert.equal((await w.next()).state.case, "delete");
    const status = await f.ctrl.client(StatusService, f.ctrl.adminToken).getEnvironmentStatus(REF);
    assert.deepEqual(status.sentinels, []);

    const added = await f.update({ sentinel: { image: "registry.example.com/sentinel:3" } });
    assert.deepEqual(
      [added.sentinel?.image, added.sentinel?.replicas, added.sentinel?.memoryMib],
      ["registry.example.com/sentinel:3", 2, 256n],
    );
    const again = await eu.next();
    assert.equal(again.state.case, "apply");
    assert.notEqual(
      again.state.case === "apply" ? again.state.value.sentinelId : "",
      firstId,
      "a new sentinel, not the removed one",
    );
    assert.equal((await us.next()).state.case, "apply");
    assert.deepEqual(await eu.quiet(150), []);

    // A sentinel named by no image is krane's own (the agents' image): removed and added again.
    await f.update({ removeSentinel: true });
    for (const w of [eu, us]) assert.equal((await w.next()).state.case, "delete");
    const own = await f.update({ sentinel: { replicas: 1 } });
    assert.deepEqual([own.sentinel?.image, own.sentinel?.replicas], ["", 1]);
    const ownApply = await eu.next();
    assert.deepEqual(
      ownApply.state.case === "apply" ? [ownApply.state.value.image, ownApply.state.value.routing?.mode] : [],
      ["", "instances"],
    );
    assert.equal((await us.next()).state.case, "apply");
    eu.close();
    us.close();
  });

  it("changes each rollout policy field alone; min_ready_seconds reaches the desired deployments", async (t) => {
    const f = await setup(t, await newUrl());
    const depId = await deploy(f, "registry.example.com/shop:1");
    const eu = watchDeployments(f.ctrl, f.agent.eu, "eu");
    await eu.synced();

    const steps: [UpdateInit["rollout"], (e: Environment) => unknown, unknown][] = [
      [{ strategy: RolloutStrategy.RECREATE }, (e) => e.rollout?.strategy, RolloutStrategy.RECREATE],
      [{ maxSurge: "3" }, (e) => e.rollout?.maxSurge, "3"],
      [{ maxUnavailable: "50%" }, (e) => e.rollout?.maxUnavailable, "50%"],
      [{ minReadySeconds: 7 }, (e) => e.rollout?.minReadySeconds, 7],
      [{ progressDeadlineSeconds: 90 }, (e) => e.rollout?.progressDeadlineSeconds, 90],
      [{ revisionHistoryLimit: 2 }, (e) => e.rollout?.revisionHistoryLimit, 2],
      [{ paused: true }, (e) => e.rollout?.paused, true],
      [
        { strategy: RolloutStrategy.ROLLING_UPDATE, paused: false },
        (e) => [e.rollout?.strategy, e.rollout?.paused],
        [RolloutStrategy.ROLLING_UPDATE, false],
      ],
    ];
    let prev = await f.get();
    for (const [rollout, pick, want] of steps) {
      const next = await f.update({ rollout });
      assert.deepEqual(pick(next), want, JSON.stringify(rollout));
      // Exactly the fields given changed.
      const { updatedAtUnixMs: _a, ...restNext } = next;
      const { updatedAtUnixMs: _b, ...restPrev } = prev;
      assert.deepEqual(restNext, { ...restPrev, rollout: { ...prev.rollout, ...rollout } });
      assert.ok(next.updatedAtUnixMs >= prev.updatedAtUnixMs);
      assert.deepEqual(pick(await f.get()), want, "stored");
      prev = next;
    }
    // min_ready_seconds is part of what the agent applies: the deployment was re-rendered, with
    // the replica count the rollout engine had given it.
    const rerendered = await eu.next(
      (m) => m.state.case === "apply" && m.state.value.deploymentId === depId && m.state.value.minReadySeconds === 7,
    );
    assert.equal(rerendered.state.case === "apply" ? rerendered.state.value.replicas : -1, 2);
    // The rollout engine sees the new policy.
    const { status } = await f.ctrl.client(RolloutService, f.ctrl.adminToken).getRolloutStatus(REF);
    assert.equal(status?.strategy, "RollingUpdate");
    assert.deepEqual(
      status?.regions.map((r) => r.paused),
      [false, false],
    );
    eu.close();
  });

  it("rescales regions, adds one (its agent gets the sentinel and the revision) and removes one (its agent is told to delete them)", async (t) => {
    const f = await setup(t, await newUrl());
    const depId = await deploy(f, "registry.example.com/shop:1");
    const euDeps = watchDeployments(f.ctrl, f.agent.eu, "eu");
    const usDeps = watchDeployments(f.ctrl, f.agent.us, "us");
    const usSentinels = watchSentinels(f.ctrl, f.agent.us, "us");
    const apDeps = watchDeployments(f.ctrl, f.agent.ap, "ap");
    const apSentinels = watchSentinels(f.ctrl, f.agent.ap, "ap");
    for (const w of [euDeps, usDeps, usSentinels, apDeps, apSentinels]) await w.synced();

    const scaled = await f.update({ regions: [{ region: "eu", replicas: 4 }] });
    assert.deepEqual(
      scaled.regions.map((r) => [r.region, r.replicas]),
      [
        ["eu", 4],
        ["us", 1],
      ],
    );
    const four = await euDeps.next((m) => m.state.case === "apply" && m.state.value.deploymentId === depId);
    assert.equal(four.state.case === "apply" ? four.state.value.replicas : -1, 4);

    const joined = await f.update({ regions: [{ region: "ap", replicas: 2 }] });
    assert.deepEqual(
      joined.regions.map((r) => [r.region, r.replicas]),
      [
        ["ap", 2],
        ["eu", 4],
        ["us", 1],
      ],
    );
    const apSentinel = await apSentinels.next();
    assert.equal(
      apSentinel.state.case === "apply" ? apSentinel.state.value.image : "",
      "registry.example.com/sentinel:1",
    );
    const apDep = await apDeps.next((m) => m.state.case === "apply" && m.state.value.replicas > 0);
    assert.deepEqual(
      apDep.state.case === "apply"
        ? [apDep.state.value.deploymentId, apDep.state.value.region, apDep.state.value.replicas]
        : [],
      [depId, "ap", 2],
    );

    const left = await f.update({ removeRegions: ["us"] });
    assert.deepEqual(
      left.regions.map((r) => r.region),
      ["ap", "eu"],
    );
    const gone = await usDeps.next();
    assert.deepEqual(gone.state.case === "delete" ? gone.state.value.deploymentId : gone.state.case, depId);
    assert.equal((await usSentinels.next()).state.case, "delete");
    const db = f.ctrl.store.db;
    const envId = left.id;
    assert.deepEqual(
      await db.selectFrom("desired_objects").select("object_id").where("region", "=", "us").execute(),
      [],
    );
    assert.deepEqual(
      await db.selectFrom("sentinels").select("region").where("environment_id", "=", envId).orderBy("region").execute(),
      [{ region: "ap" }, { region: "eu" }],
    );
    assert.deepEqual(
      await db
        .selectFrom("rollouts")
        .select("region")
        .where("environment_id", "=", envId)
        .where("region", "=", "us")
        .execute(),
      [],
    );
    assert.deepEqual(
      await db
        .selectFrom("rollout_revisions")
        .select("region")
        .where("environment_id", "=", envId)
        .where("region", "=", "us")
        .execute(),
      [],
    );
    const { status } = await f.ctrl.client(RolloutService, f.ctrl.adminToken).getRolloutStatus(REF);
    assert.deepEqual(
      status?.regions.map((r) => r.region),
      ["ap", "eu"],
    );
    // Nothing further reaches the region left, and eu was not disturbed by the change.
    assert.deepEqual(await usDeps.quiet(200), []);
    assert.deepEqual(
      (await euDeps.quiet(0)).filter((m) => m.state.case === "delete"),
      [],
    );
    for (const w of [euDeps, usDeps, usSentinels, apDeps, apSentinels]) w.close();
  });

  it("leaving a region removes the environment's objects there within the update's own transaction", async (t) => {
    // The update alone, through the store: no rollout pass runs after it here.
    const f = await setup(t, await newUrl());
    const depId = await deploy(f, "registry.example.com/shop:1");
    const db = f.ctrl.store.db;
    const inUs = () =>
      db
        .selectFrom("desired_objects")
        .select(["kind", "object_id"])
        .where("region", "=", "us")
        .orderBy("kind")
        .execute();
    assert.deepEqual(
      (await inUs()).map((o) => o.kind),
      ["deployment", "sentinel"],
    );
    const head = await db
      .selectFrom("stream_versions")
      .select(["kind", "version"])
      .where("region", "=", "us")
      .orderBy("kind")
      .execute();
    const res = await updateEnvironment(
      f.ctrl.store,
      validateUpdateEnvironment(create(UpdateSchema, { ...REF, removeRegions: ["us"] })),
    );
    assert.deepEqual(res.removedRegions, ["us"]);
    assert.deepEqual(await inUs(), []);
    const deletes = await db
      .selectFrom("outbox")
      .select(["kind", "object_id", "op"])
      .where("region", "=", "us")
      .where("version", ">", Math.min(...head.map((h) => Number(h.version))))
      .orderBy("kind")
      .execute();
    assert.deepEqual(
      deletes.filter((d) => d.op === "delete").map((d) => [d.kind, d.kind === "deployment" ? d.object_id : "…"]),
      [
        ["deployment", depId],
        ["sentinel", "…"],
      ],
    );
  });

  it("a region added after a rollback runs the rolled-back revision, not the newest", async (t) => {
    const f = await setup(t, await newUrl());
    await f.envs.createEnvironment({
      ...REF,
      slug: "canary",
      regions: [{ region: "eu", replicas: 1 }],
      rollout: { maxSurge: "1", maxUnavailable: "0" },
    });
    const v1 = await deploy(f, "registry.example.com/shop:1", "canary");
    const v2 = await deploy(f, "registry.example.com/shop:2", "canary");
    const rollouts = f.ctrl.client(RolloutService, f.ctrl.adminToken);
    const { status } = await rollouts.undo({ ...REF, environment: "canary" });
    assert.equal(status?.regions[0]?.targetDeploymentId, v1);

    const ap = watchDeployments(f.ctrl, f.agent.ap, "ap");
    await ap.synced();
    await f.update({ regions: [{ region: "ap", replicas: 1 }] }, "canary");
    const m = await ap.next();
    assert.deepEqual(m.state.case === "apply" ? [m.state.value.deploymentId, m.state.value.replicas] : [], [v1, 1]);
    assert.deepEqual(await ap.quiet(300), [], `${v2} is not sent to the new region`);
    const after = await rollouts.getRolloutStatus({ ...REF, environment: "canary" });
    assert.equal(after.status?.regions.find((r) => r.region === "ap")?.targetDeploymentId, v1);
    ap.close();
  });

  it("refuses bad input naming the field, and changes nothing (not even a stream version)", async (t) => {
    const f = await setup(t, await newUrl());
    await deploy(f, "registry.example.com/shop:1");
    await f.envs.createEnvironment({ ...REF, slug: "bare", regions: [{ region: "eu", replicas: 1 }] });
    const db = f.ctrl.store.db;
    const snapshot = async (): Promise<unknown> => ({
      prod: await f.get(),
      bare: await f.get("bare"),
      versions: await db
        .selectFrom("stream_versions")
        .select(["region", "kind", "version"])
        .orderBy("region")
        .orderBy("kind")
        .execute(),
      sentinels: await db.selectFrom("sentinels").select(["id", "region"]).orderBy("id").execute(),
      rollouts: await db
        .selectFrom("rollouts")
        .select(["environment_id", "region"])
        .orderBy("environment_id")
        .orderBy("region")
        .execute(),
    });
    const before = await snapshot();

    const bad: [UpdateInit, Code, RegExp, string?][] = [
      [{ sentinel: { image: "Not An Image" } }, Code.InvalidArgument, /^sentinel\.image: /],
      [{ sentinel: { replicas: 101 } }, Code.InvalidArgument, /^sentinel\.replicas: /],
      [{ sentinel: { cpuMillicores: 1n } }, Code.InvalidArgument, /^sentinel\.cpu_millicores: /],
      [{ sentinel: { memoryMib: 1n << 40n } }, Code.InvalidArgument, /^sentinel\.memory_mib: /],
      [
        { sentinel: { image: "registry.example.com/sentinel:9" }, removeSentinel: true },
        Code.InvalidArgument,
        /^remove_sentinel: /,
      ],
      [{ sentinel: { replicas: 101 } }, Code.InvalidArgument, /^sentinel\.replicas: /, "bare"],
      [{ rollout: { strategy: RolloutStrategy.UNSPECIFIED } }, Code.InvalidArgument, /^rollout\.strategy: /],
      [{ rollout: { strategy: 9 as RolloutStrategy } }, Code.InvalidArgument, /^rollout\.strategy: /],
      [{ rollout: { maxSurge: "" } }, Code.InvalidArgument, /^rollout\.max_surge: /],
      [{ rollout: { maxUnavailable: "101%" } }, Code.InvalidArgument, /^rollout\.max_unavailable: /],
      [{ rollout: { maxSurge: "0", maxUnavailable: "0" } }, Code.InvalidArgument, /^rollout\.max_unavailable: /],
      [{ rollout: { minReadySeconds: -1 } }, Code.InvalidArgument, /^rollout\.min_ready_seconds: /],
      [
        { rollout: { minReadySeconds: 600 } },
        Code.InvalidArgument,
        /^rollout\.min_ready_seconds: must be less than rollout\.progress_deadline_seconds/,
      ],
      [{ rollout: { progressDeadlineSeconds: 0 } }, Code.InvalidArgument, /^rollout\.progress_deadline_seconds: /],
      [{ rollout: { revisionHistoryLimit: 101 } }, Code.InvalidArgument, /^rollout\.revision_history_limit: /],
      [
        {
          regions: [
            { region: "eu", replicas: 1 },
            { region: "us", replicas: -1 },
          ],
        },
        Code.InvalidArgument,
        /^regions\[1\]\.replicas: /,
      ],
      [
        {
          regions: [
            { region: "eu", replicas: 1 },
            { region: "eu", replicas: 2 },
          ],
        },
        Code.InvalidArgument,
        /^regions\[1\]\.region: duplicates/,
      ],
      [{ regions: [{ region: "Bad Region", replicas: 1 }] }, Code.InvalidArgument, /^regions\[0\]\.region: /],
      [{ removeRegions: ["us", "us"] }, Code.InvalidArgument, /^remove_regions\[1\]: duplicates/],
      [
        { regions: [{ region: "us", replicas: 3 }], removeRegions: ["us"] },
        Code.InvalidArgument,
        /^remove_regions\[0\]: /,
      ],
      [
        { regions: Array.from({ length: 21 }, (_, i) => ({ region: `r${i}`, replicas: 1 })) },
        Code.InvalidArgument,
        /^regions: /,
      ],
      // Checked against what is stored, still before anything is written: the valid parts of
      // these requests (a new sentinel image, a rescale) must not be applied either.
      [
        { sentinel: { image: "registry.example.com/sentinel:9" }, removeRegions: ["ap"] },
        Code.FailedPrecondition,
        /^remove_regions\[0\]: .*"ap"/,
      ],
      [
        {
          regions: [
            { region: "eu", replicas: 5 },
            { region: "mars", replicas: 1 },
          ],
        },
        Code.FailedPrecondition,
        /^regions\[1\]\.region: region "mars" is not registered/,
      ],
      [
        { sentinel: { image: "registry.example.com/sentinel:9" }, rollout: { maxSurge: "0" } },
        Code.InvalidArgument,
        /^rollout\.max_surge: /,
        "bare-surge",
      ],
    ];
    // An environment whose max_unavailable is 0: setting max_surge to 0 must name max_surge.
    await f.envs.createEnvironment({
      ...REF,
      slug: "bare-surge",
      regions: [],
      rollout: { maxSurge: "1", maxUnavailable: "0" },
    });
    const beforeSurge = await f.get("bare-surge");
    for (const [req, code, message, environment] of bad)
      await expectCode(f.envs.updateEnvironment({ ...REF, environment: environment ?? "prod", ...req }), code, message);
    await expectCode(f.envs.updateEnvironment({ ...REF, environment: "nope" }), Code.NotFound);
    await expectCode(f.envs.updateEnvironment({ ...REF, project: "" }), Code.InvalidArgument, /^project: /);

    assert.deepEqual(await snapshot(), before);
    assert.deepEqual(await f.get("bare-surge"), beforeSurge);
  });

  it("an update and a revision's deletion wait for a rollout pass in flight", async (t) => {
    const f = await setup(t, await newUrl());
    const depId = await deploy(f, "registry.example.com/shop:1");
    const envId = (
      await f.ctrl.store.db.selectFrom("environments").select("id").where("slug", "=", "prod").executeTakeFirstOrThrow()
    ).id;
    const order: string[] = [];
    // A pass holds the environment shared for its whole transaction (rollout/pass.ts).
    let holding: () => void = () => undefined;
    const held = new Promise<void>((r) => (holding = r));
    const pass = f.ctrl.store.write(async (tx) => {
      await lockEnvironment(tx, envId, "share");
      holding();
      await sleep(300);
      order.push("pass");
    });
    await held;
    const changes = [
      updateEnvironment(
        f.ctrl.store,
        validateUpdateEnvironment(create(UpdateSchema, { ...REF, removeRegions: ["us"] })),
      ).then(() => order.push("update")),
      deleteDeployment(f.ctrl.store, depId).then(() => order.push("delete")),
    ];
    await Promise.all([pass, ...changes]);
    // SQLite runs one write transaction at a time; PostgreSQL gets the same order from the lock.
    assert.equal(order[0], "pass");
    assert.deepEqual([...order].sort(), ["delete", "pass", "update"]);
  });

  it("an update that changes nothing writes nothing", async (t) => {
    const f = await setup(t, await newUrl());
    const before = await f.get();
    const eu = watchSentinels(f.ctrl, f.agent.eu, "eu");
    await eu.synced();
    const same = await f.update({
      sentinel: { image: before.sentinel?.image, replicas: before.sentinel?.replicas },
      rollout: { maxSurge: before.rollout?.maxSurge, paused: false },
      regions: [{ region: "eu", replicas: 2 }],
    });
    assert.deepEqual(same, before);
    assert.deepEqual(await f.update({}), before);
    assert.deepEqual(await eu.quiet(200), []);
    eu.close();
  });
}

describe("UpdateEnvironment (SQLite)", () => {
  const dir = tempDir();
  let n = 0;
  after(() => dir.remove());
  suite(async () => join(dir.path, `ctrl-${++n}.db`));
});

describe("UpdateEnvironment (PostgreSQL)", () => {
  let pg: TestPostgres;
  before(async () => {
    pg = await startPostgres();
  });
  after(async () => {
    await pg.stop();
  });
  suite(() => pg.newDatabase());
});

// Instance events through the real ctrl (HTTP/2), on SQLite and PostgreSQL: an agent's events
// arrive with its deployment report and are listed by InstanceEventService (filters, cursor,
// latest per instance); the same facts reported again write nothing; a crash loop is bounded per
// instance; an agent may report only revisions of its own region (another region's or another
// workspace's are permission_denied, and store nothing); malformed events and bad API input are
// invalid_argument naming the field; a request naming another workspace finds nothing. The CLI
// (krane events, -f following new events, krane status) against the same ctrl.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { EVENTS_MAX_AGE_MS, EVENTS_PER_INSTANCE } from "../../../src/ctrl/domain/instance-events.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import {
  ClusterService,
  InstanceStatus,
  ReportDeploymentStatusRequestSchema,
  type ReportedInstanceEvent,
} from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { InstanceEventService } from "../../../src/gen/krane/ctrl/v1/events_pb.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { REPO } from "../../../src/cluster/checkout.js";
import { krane } from "../../support/real-nodes.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

type EventInit = Partial<Omit<ReportedInstanceEvent, "$typeName">> & { instance: string; reason: string };

function update(region: string, deploymentId: string, pods: string[], events: EventInit[]) {
  return create(ReportDeploymentStatusRequestSchema, {
    region,
    change: {
      case: "update",
      value: {
        deploymentId,
        instances: pods.map((k8sName, n) => ({
          k8sName,
          address: `10.0.0.${n + 1}:8080`,
          status: InstanceStatus.FAILED,
        })),
        events: events.map((e) => ({
          kind: "terminated",
          atUnixMs: 1_000n,
          restarts: 0,
          image: "",
          message: "",
          ...e,
        })),
      },
    },
  });
}

async function desiredIn(ctrl: TestCtrl, deploymentId: string, region: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const row = await ctrl.store.db
      .selectFrom("desired_objects")
      .select("object_id")
      .where("object_id", "=", deploymentId)
      .where("region", "=", region)
      .executeTakeFirst();
    if (row) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${deploymentId} never became desired in ${region}`);
}

async function scenario(ctrl: TestCtrl): Promise<void> {
  const admin = ctrl.adminToken;
  for (const r of ["eu", "us"]) await ctrl.client(RegionService, admin).createRegion({ name: r });
  const eu = ctrl.client(ClusterService, await ctrl.agentToken("eu"));
  const us = ctrl.client(ClusterService, await ctrl.agentToken("us"));
  const deps: Record<string, string> = {};
  for (const ws of ["acme", "evil"]) {
    await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: ws });
    await ctrl.client(ProjectService, admin).createProject({ workspace: ws, slug: "shop" });
    await ctrl.client(EnvironmentService, admin).createEnvironment({
      workspace: ws,
      project: "shop",
      slug: "production",
      // acme runs in eu only; evil in us only.
      regions: [{ region: ws === "acme" ? "eu" : "us", replicas: 2 }],
    });
    const { deployment } = await ctrl.client(DeploymentService, admin).createDeployment({
      workspace: ws,
      project: "shop",
      environment: "production",
      image: `registry.example.com/${ws}:1`,
    });
    deps[ws] = deployment?.id ?? "";
  }
  const dep = deps.acme ?? "";
  const evilDep = deps.evil ?? "";
  await desiredIn(ctrl, dep, "eu");
  await desiredIn(ctrl, evilDep, "us");
  const api = ctrl.client(InstanceEventService, admin);
  const acme = { workspace: "acme", project: "shop", environment: "production" };

  // An OOM kill on one pod, an image pull error on the other.
  await eu.reportDeploymentStatus(
    update(
      "eu",
      dep,
      ["web-a", "web-b"],
      [
        { instance: "web-a", reason: "OOMKilled", exitCode: 137, restarts: 1, atUnixMs: 5_000n, image: "img:1" },
        {
          instance: "web-b",
          kind: "waiting",
          reason: "ErrImagePull",
          atUnixMs: 4_000n,
          image: "docker.io/nope:1",
          message: 'failed to pull image "docker.io/nope:1": not found',
        },
      ],
    ),
  );
  let res = await api.listInstanceEvents(acme);
  assert.deepEqual(
    res.events.map((e) => [e.instance, e.kind, e.reason, e.exitCode, e.region, e.revision, e.image]),
    [
      ["web-a", "terminated", "OOMKilled", 137, "eu", 1n, "img:1"],
      ["web-b", "waiting", "ErrImagePull", undefined, "eu", 1n, "docker.io/nope:1"],
    ],
  );
  const cursor = res.cursor;
  // The same facts again (every report carries what pods show now): nothing new after the cursor.
  await eu.reportDeploymentStatus(
    update(
      "eu",
      dep,
      ["web-a", "web-b"],
      [
        { instance: "web-a", reason: "OOMKilled", exitCode: 137, restarts: 1, atUnixMs: 5_000n, image: "img:1" },
        {
          instance: "web-b",
          kind: "waiting",
          reason: "ErrImagePull",
          atUnixMs: 4_000n,
          image: "docker.io/nope:1",
          message: 'failed to pull image "docker.io/nope:1": not found',
        },
      ],
    ),
  );
  res = await api.listInstanceEvents({ ...acme, cursor });
  assert.equal(res.events.length, 0);
  assert.equal(res.cursor, cursor);

  // A crash loop: a new termination per restart, bounded per instance.
  for (let n = 1; n <= EVENTS_PER_INSTANCE + 10; n++) {
    await eu.reportDeploymentStatus(
      update(
        "eu",
        dep,
        ["web-a", "web-b"],
        [
          { instance: "web-a", reason: "Error", exitCode: 3, restarts: n, atUnixMs: BigInt(10_000 + n * 1000) },
          {
            instance: "web-a",
            kind: "waiting",
            reason: "CrashLoopBackOff",
            exitCode: 3,
            restarts: n,
            atUnixMs: BigInt(10_000 + n * 1000),
          },
        ],
      ),
    );
  }
  const rows = await ctrl.store.db
    .selectFrom("instance_events")
    .select(["instance"])
    .where("deployment_id", "=", dep)
    .where("instance", "=", "web-a")
    .execute();
  assert.ok(rows.length <= EVENTS_PER_INSTANCE + 2, `web-a keeps ${rows.length} events`);
  res = await api.listInstanceEvents({ ...acme, cursor });
  assert.ok(res.events.length > 0, "a follower sees the crash loop after its cursor");
  assert.ok(res.events.every((e) => e.instance === "web-a"));

  // The newest event of each current instance (what `krane status` shows).
  const latest = await api.listInstanceEvents({ ...acme, latest: true });
  const last = new Map(latest.events.map((e) => [e.instance, e]));
  assert.equal(last.get("web-a")?.restarts, EVENTS_PER_INSTANCE + 10);
  assert.equal(last.get("web-a")?.exitCode, 3);
  assert.equal(last.get("web-b")?.reason, "ErrImagePull");

  // Filters and paging.
  res = await api.listInstanceEvents({ ...acme, instance: "web-b" });
  assert.deepEqual(
    res.events.map((e) => e.reason),
    ["ErrImagePull"],
  );
  res = await api.listInstanceEvents({ ...acme, sinceUnixMs: 30_000n });
  assert.ok(res.events.length > 0 && res.events.every((e) => e.atUnixMs >= 30_000n));
  const page = await api.listInstanceEvents({ ...acme, limit: 1 });
  assert.equal(page.events.length, 1);
  assert.equal(page.more, true);
  const next = await api.listInstanceEvents({ ...acme, limit: 1, cursor: page.cursor });
  assert.notEqual(next.events[0]?.reason, undefined);
  assert.notDeepEqual(next.events[0], page.events[0]);

  // A compromised agent: us reporting acme's eu revision, or eu reporting evil's us revision, is
  // refused and stores nothing; a region the token is not bound to is refused.
  const before = await ctrl.store.db.selectFrom("instance_events").select("seq").execute();
  await expectCode(
    us.reportDeploymentStatus(update("us", dep, ["x"], [{ instance: "x", reason: "OOMKilled" }])),
    Code.PermissionDenied,
    /does not run in region "us"/,
  );
  await expectCode(
    eu.reportDeploymentStatus(update("eu", evilDep, ["x"], [{ instance: "x", reason: "OOMKilled" }])),
    Code.PermissionDenied,
  );
  await expectCode(
    eu.reportDeploymentStatus(update("us", evilDep, ["x"], [{ instance: "x", reason: "OOMKilled" }])),
    Code.PermissionDenied,
    /bound to region "eu"/,
  );
  // Malformed events name the field, and nothing of the report is applied.
  const bad: [EventInit, RegExp][] = [
    [{ instance: "web-a", reason: "OOMKilled", kind: "exploded" }, /update\.events\[0\]\.kind/],
    [{ instance: "web-a", reason: "OOM Killed; DROP TABLE" }, /update\.events\[0\]\.reason/],
    [{ instance: "Not_A_Pod", reason: "Error" }, /update\.events\[0\]\.instance/],
    [{ instance: "web-a", reason: "Error", message: "x".repeat(5000) }, /update\.events\[0\]\.message/],
    [{ instance: "web-a", reason: "Error", message: "a\u0000b" }, /update\.events\[0\]\.message/],
    [{ instance: "web-a", reason: "Error", restarts: -1 }, /update\.events\[0\]\.restarts/],
    [{ instance: "web-a", reason: "Error", atUnixMs: -5n }, /update\.events\[0\]\.at_unix_ms/],
  ];
  for (const [e, field] of bad) {
    await expectCode(eu.reportDeploymentStatus(update("eu", dep, ["web-z"], [e])), Code.InvalidArgument, field);
  }
  const instances = await ctrl.store.db
    .selectFrom("instances")
    .select("k8s_name")
    .where("deployment_id", "=", dep)
    .execute();
  assert.ok(!instances.some((i) => i.k8s_name === "web-z"), "a refused report changed no instance");
  assert.equal((await ctrl.store.db.selectFrom("instance_events").select("seq").execute()).length, before.length);

  // The public API: bad input names the field.
  await expectCode(api.listInstanceEvents({ ...acme, revision: 99n }), Code.InvalidArgument, /^revision:/);
  await expectCode(api.listInstanceEvents({ ...acme, region: "mars" }), Code.InvalidArgument, /^region:/);
  await expectCode(
    api.listInstanceEvents({ ...acme, sinceUnixMs: BigInt(Date.now() + 3_600_000) }),
    Code.InvalidArgument,
    /^since_unix_ms:/,
  );
  await expectCode(api.listInstanceEvents({ ...acme, cursor: "12; --" }), Code.InvalidArgument, /^cursor:/);
  await expectCode(api.listInstanceEvents({ ...acme, limit: 5000 }), Code.InvalidArgument, /^limit:/);
  await expectCode(api.listInstanceEvents({ ...acme, environment: "" }), Code.InvalidArgument, /^environment:/);

  // Another workspace: its own environment has no events; acme's environment named from it, by
  // id, is not found (and answers no event).
  assert.equal(
    (await api.listInstanceEvents({ workspace: "evil", project: "shop", environment: "production" })).events.length,
    0,
  );
  const acmeEnv = await ctrl.store.db
    .selectFrom("deployments")
    .select(["environment_id", "project_id"])
    .where("id", "=", dep)
    .executeTakeFirstOrThrow();
  await expectCode(
    api.listInstanceEvents({ workspace: "evil", project: acmeEnv.project_id, environment: acmeEnv.environment_id }),
    Code.NotFound,
  );
  await expectCode(
    api.listInstanceEvents({ workspace: "evil", project: "shop", environment: acmeEnv.environment_id }),
    Code.NotFound,
  );
}

/** Every event ages out but each environment's newest, which keeps its numbering. */
async function agesOut(ctrl: TestCtrl): Promise<void> {
  const api = ctrl.client(InstanceEventService, ctrl.adminToken);
  const eu = ctrl.client(ClusterService, await ctrl.agentToken("eu"));
  const us = ctrl.client(ClusterService, await ctrl.agentToken("us"));
  const acme = { workspace: "acme", project: "shop", environment: "production" };
  const depOf = async (ws: string) =>
    ctrl.store.db
      .selectFrom("deployments")
      .innerJoin("workspaces", "workspaces.id", "deployments.workspace_id")
      .select(["deployments.id", "deployments.environment_id"])
      .where("workspaces.slug", "=", ws)
      .executeTakeFirstOrThrow();
  const acmeEnv = await depOf("acme");
  const dep = acmeEnv.id;
  const evilDep = (await depOf("evil")).id;

  // Every event ages out (recorded more than EVENTS_MAX_AGE_MS ago) but the environment's newest,
  // which keeps its numbering: the next event goes after a follower's cursor, not back to 1.
  const followed = (await api.listInstanceEvents({ ...acme, limit: 1000 })).cursor;
  const newest = await ctrl.store.db
    .selectFrom("instance_events")
    .select((eb) => eb.fn.max("seq").as("seq"))
    .where("environment_id", "=", acmeEnv.environment_id)
    .executeTakeFirstOrThrow();
  await ctrl.store.db
    .updateTable("instance_events")
    .set({ recorded_at: Date.now() - EVENTS_MAX_AGE_MS - 60_000 })
    .where("environment_id", "=", acmeEnv.environment_id)
    .execute();
  const acmeSeqs = async (): Promise<number[]> =>
    (
      await ctrl.store.db
        .selectFrom("instance_events")
        .select("seq")
        .where("environment_id", "=", acmeEnv.environment_id)
        .orderBy("seq")
        .execute()
    ).map((r) => Number(r.seq));
  // Another environment's report prunes by age: acme keeps its newest event only.
  await us.reportDeploymentStatus(
    update("us", evilDep, ["evil-a"], [{ instance: "evil-a", reason: "Error", exitCode: 2, atUnixMs: 80_000n }]),
  );
  assert.deepEqual(await acmeSeqs(), [Number(newest.seq)], "the aged events are gone but the newest");
  await eu.reportDeploymentStatus(
    update("eu", dep, ["web-c"], [{ instance: "web-c", reason: "Error", exitCode: 1, atUnixMs: 90_000n }]),
  );
  assert.deepEqual(await acmeSeqs(), [Number(newest.seq) + 1], "the next event is numbered after it");
  const res = await api.listInstanceEvents({ ...acme, cursor: followed });
  assert.deepEqual(
    res.events.map((e) => e.instance),
    ["web-c"],
    "a follower at its old cursor sees the new event",
  );
}

describe("instance events (SQLite)", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"));
  });
  after(async () => {
    await ctrl?.close();
    dir.remove();
  });
  it("records, lists, bounds, authorizes and validates", () => scenario(ctrl));
  it("krane events and krane status show them", async () => {
    const env = { KRANE_CTRL_URL: ctrl.url, KRANE_TOKEN: ctrl.adminToken, KRANE_WORKSPACE: "acme" };
    const table = await krane(env, ["events", "shop/production"]);
    assert.match(table, /r1 {2}eu {2}web-a {2}CrashLoopBackOff, exit 3, 30 restarts/);
    assert.match(table, /r1 {2}eu {2}web-a {2}Error \(exit 3, 30 restarts\)/);
    // The OOM kill was web-a's oldest event: the crash loop pushed it out (20 kept per instance).
    assert.doesNotMatch(table, /OOMKilled/);
    // The pull error names the registry and its answer (registry docker.io: not found).
    assert.match(
      table,
      /web-b {2}ErrImagePull \(registry docker\.io: not found\): docker\.io\/nope:1: failed to pull image/,
    );
    const json = JSON.parse(await krane(env, ["events", "shop/production", "--instance", "web-b", "-o", "json"])) as {
      events: { reason: string; image: string }[];
      cursor: string;
    };
    assert.deepEqual(
      json.events.map((e) => [e.reason, e.image]),
      [["ErrImagePull", "docker.io/nope:1"]],
    );
    const status = JSON.parse(await krane(env, ["status", "shop/production", "-o", "json"])) as {
      lastInstanceEvents: { instance: string; reason: string }[];
    };
    assert.deepEqual(status.lastInstanceEvents.map((e) => e.instance).sort(), ["web-a", "web-b"]);
    // -f: what was there, then each event as it is recorded (one JSON object per line).
    const follow = spawn(
      process.execPath,
      [
        `${REPO}bin/krane.js`,
        "events",
        "shop/production",
        "-f",
        "-o",
        "json",
        "--interval",
        "200",
        "--instance",
        "web-c",
      ],
      { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"] },
    );
    try {
      const lines = createInterface({ input: follow.stdout })[Symbol.asyncIterator]();
      const eu = ctrl.client(ClusterService, await ctrl.agentToken("eu"));
      const dep = (await ctrl.store.db.selectFrom("instance_events").select("deployment_id").executeTakeFirstOrThrow())
        .deployment_id;
      await eu.reportDeploymentStatus(
        update("eu", dep, ["web-c"], [{ instance: "web-c", reason: "OOMKilled", exitCode: 137, atUnixMs: 99_000n }]),
      );
      const first = await lines.next();
      assert.equal((JSON.parse(String(first.value)) as { reason: string }).reason, "OOMKilled");
      await eu.reportDeploymentStatus(
        update(
          "eu",
          dep,
          ["web-c"],
          [{ instance: "web-c", kind: "evicted", reason: "Evicted", atUnixMs: 100_000n, message: "low on memory" }],
        ),
      );
      const second = JSON.parse(String((await lines.next()).value)) as Record<string, unknown>;
      assert.equal(second.instance, "web-c");
      assert.equal(second.kind, "evicted");
      assert.equal(second.message, "low on memory");
    } finally {
      follow.kill();
    }
    await assert.rejects(
      krane(env, ["events", "shop/production", "--since", "2999-01-01"]),
      /--since: .*in the future/,
    );
    await assert.rejects(krane(env, ["events", "shop/production", "--revision", "x"]), /--revision: /);
    await assert.rejects(
      krane(env, ["events", "shop/production", "--region", "mars"]),
      /region: .*has no region "mars"/,
    );
  });
  it("ages events out but each environment's newest, which keeps the numbering", () => agesOut(ctrl));
});

describe("instance events (PostgreSQL)", () => {
  let pg: TestPostgres;
  let ctrl: TestCtrl;
  before(async () => {
    pg = await startPostgres();
    ctrl = await startTestCtrl(await pg.newDatabase());
  });
  after(async () => {
    await ctrl?.close();
    await pg?.stop();
  });
  it("records, lists, bounds, authorizes and validates", () => scenario(ctrl));
  it("ages events out but each environment's newest, which keeps the numbering", () => agesOut(ctrl));
});

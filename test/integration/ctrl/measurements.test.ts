// Measurements for rollout analysis through the real ctrl (HTTP/2), on SQLite and PostgreSQL:
// an agent's ReportMeasurements is stored and added up over regions by StoredMeasurements (the
// MeasurementSource the progressive engine reads); a retried report counts once; an agent may
// report only for its own region, for environments with a sentinel there and for their own
// revisions (permission_denied naming the field), malformed reports are invalid_argument naming
// the field and store nothing; old rows are pruned; a deleted environment's rows are purged. Each
// new row also goes into the metrics history's minutes, once, and leaves with its environment.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { LATENCY_BUCKETS_MS } from "../../../src/contracts/analysis.js";
import { pruneMeasurements, StoredMeasurements } from "../../../src/ctrl/domain/measurements.js";
import { readPoints } from "../../../src/ctrl/history/store.js";
import { MINUTE_MS, mergeSums } from "../../../src/ctrl/history/sums.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import {
  ClusterService,
  ReportMeasurementsRequestSchema,
  type ReportMeasurementsRequest,
} from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const SLOTS = LATENCY_BUCKETS_MS.length + 1;

interface Entry {
  env: string;
  dep: string;
  c: [number, number, number, number];
  lat?: number[];
}

const counts = (e: Entry) => ({
  environmentId: e.env,
  deploymentId: e.dep,
  responses2xx: BigInt(e.c[0]),
  responses3xx: BigInt(e.c[1]),
  responses4xx: BigInt(e.c[2]),
  responses5xx: BigInt(e.c[3]),
  latencyBuckets: (e.lat ?? []).map((v) => BigInt(v)),
});

function report(
  region: string,
  fromMs: number,
  toMs: number,
  entries: Entry[],
  instances: (Entry & { instance: string })[] = [],
): ReportMeasurementsRequest {
  return create(ReportMeasurementsRequestSchema, {
    region,
    fromUnixMs: BigInt(fromMs),
    toUnixMs: BigInt(toMs),
    revisions: entries.map(counts),
    instances: instances.map((e) => ({ ...counts(e), instance: e.instance })),
  });
}

function slots(at: number, n: number): number[] {
  const a = new Array<number>(SLOTS).fill(0);
  a[at] = n;
  return a;
}

async function scenario(ctrl: TestCtrl): Promise<void> {
  const admin = ctrl.adminToken;
  for (const r of ["eu", "us", "ap"]) await ctrl.client(RegionService, admin).createRegion({ name: r });
  const tokens = { eu: await ctrl.agentToken("eu"), us: await ctrl.agentToken("us"), ap: await ctrl.agentToken("ap") };
  const envs: Record<string, string> = {};
  const deps: Record<string, string[]> = {};
  for (const ws of ["acme", "evil"]) {
    await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: ws });
    await ctrl.client(ProjectService, admin).createProject({ workspace: ws, slug: "shop" });
    const { environment } = await ctrl.client(EnvironmentService, admin).createEnvironment({
      workspace: ws,
      project: "shop",
      slug: "production",
      // A sentinel in eu and us, none in ap.
      regions: [
        { region: "eu", replicas: 1 },
        { region: "us", replicas: 1 },
      ],
      sentinel: { image: "registry.example.com/sentinel:1", replicas: 1, cpuMillicores: 0n, memoryMib: 0n },
    });
    envs[ws] = environment?.id ?? "";
    deps[ws] = [];
    for (const tag of ["1", "2"]) {
      const { deployment } = await ctrl.client(DeploymentService, admin).createDeployment({
        workspace: ws,
        project: "shop",
        environment: "production",
        image: `registry.example.com/shop:${tag}`,
      });
      deps[ws]?.push(deployment?.id ?? "");
    }
  }
  const env = envs.acme ?? "";
  const [good, bad] = deps.acme ?? [];
  const evilDep = deps.evil?.[0] ?? "";
  assert.ok(env && good && bad && evilDep);
  const source = new StoredMeasurements(ctrl.store);
  const eu = ctrl.client(ClusterService, tokens.eu);
  const us = ctrl.client(ClusterService, tokens.us);
  const t0 = Date.now() - 30_000;

  // Two windows in eu, one in us. The first says which instances answered good's requests.
  const first = report(
    "eu",
    t0,
    t0 + 10_000,
    [
      { env, dep: good, c: [90, 5, 5, 0], lat: slots(3, 100) },
      { env, dep: bad, c: [80, 0, 0, 20], lat: slots(6, 100) },
    ],
    [
      { env, dep: good, instance: "shop-7f9c-a1", c: [60, 5, 0, 0], lat: slots(3, 65) },
      { env, dep: good, instance: "shop-7f9c-b2", c: [30, 0, 5, 0], lat: slots(3, 35) },
    ],
  );
  assert.equal((await eu.reportMeasurements(first)).stored, 2);
  assert.equal(
    (
      await eu.reportMeasurements(
        // An instance of a revision the report does not carry is ignored.
        report(
          "",
          t0 + 10_000,
          t0 + 20_000,
          [{ env, dep: good, c: [10, 0, 0, 0] }],
          [{ env, dep: bad, instance: "shop-other", c: [0, 0, 0, 3] }],
        ),
      )
    ).stored,
    1,
  );
  assert.equal(
    (
      await us.reportMeasurements(
        report("us", t0, t0 + 10_000, [{ env, dep: good, c: [100, 0, 0, 0], lat: slots(0, 100) }]),
      )
    ).stored,
    1,
  );
  // The same report again (a retry after a lost answer): nothing new.
  assert.equal((await eu.reportMeasurements(first)).stored, 0);

  let s = await source.samples(env, [good, bad, evilDep], 0);
  assert.deepEqual([...s.keys()].sort(), [bad, good].sort(), "a revision nobody reported on is absent");
  const g = s.get(good);
  assert.ok(g);
  assert.equal(g.requests, 210);
  assert.deepEqual(g.byClass, { "2xx": 200, "3xx": 5, "4xx": 5, "5xx": 0 });
  assert.deepEqual(g.regions, ["eu", "us"]);
  assert.equal(g.fromMs, t0);
  assert.equal(g.toMs, t0 + 20_000);
  assert.equal(g.latencyBuckets.length, SLOTS);
  assert.equal(g.latencyBuckets[3], 100);
  assert.equal(g.latencyBuckets[0], 100);
  const b = s.get(bad);
  assert.equal(b?.byClass["5xx"], 20);
  assert.equal(b?.requests, 100);
  // The metrics history got each new row once (the retried report added nothing), per region.
  const history = await readPoints(ctrl.store.db, { environmentId: env, stepMs: MINUTE_MS, fromMs: 0 });
  const hist = (dep: string, region?: string) =>
    mergeSums(
      history
        .filter((p) => p.instance === "" && p.deploymentId === dep && (region === undefined || p.region === region))
        .map((p) => p.sums),
    );
  assert.equal(hist(good).requests, 210);
  assert.equal(hist(good, "us").requests, 100);
  assert.equal(hist(bad).errors, 20);
  assert.equal(hist(bad).latency[6], 100);
  assert.ok(history.every((p) => p.atMs % MINUTE_MS === 0));
  // Per instance: what each answered, once (the retried report added nothing), apart from the revision's row.
  const inst = (name: string) => mergeSums(history.filter((p) => p.instance === name).map((p) => p.sums));
  assert.equal(inst("shop-7f9c-a1").requests, 65);
  assert.equal(inst("shop-7f9c-a1").latency[3], 65);
  assert.equal(inst("shop-7f9c-b2").requests, 35);
  assert.ok(!history.some((p) => p.instance === "shop-other"));

  // By region, and since a time: windows whose end is at or after it.
  s = await source.samples(env, [good], 0, ["us"]);
  assert.equal(s.get(good)?.requests, 100);
  s = await source.samples(env, [good], t0 + 15_000);
  assert.equal(s.get(good)?.requests, 10);
  assert.deepEqual(s.get(good)?.regions, ["eu"]);
  assert.equal((await source.samples(env, [good], 0, [])).size, 0);

  // Another region's name: refused.
  await expectCode(
    eu.reportMeasurements(report("us", t0, t0 + 10_000, [{ env, dep: good, c: [1, 0, 0, 0] }])),
    Code.PermissionDenied,
    /bound to region "eu"/,
  );
  // An environment without a sentinel in the token's region.
  await expectCode(
    ctrl
      .client(ClusterService, tokens.ap)
      .reportMeasurements(report("ap", t0, t0 + 10_000, [{ env, dep: good, c: [1, 0, 0, 0] }])),
    Code.PermissionDenied,
    /revisions\[0\]\.environment_id: .*no sentinel in region ap/,
  );
  // Another workspace's revision under this environment, after a valid entry: nothing stored.
  await expectCode(
    eu.reportMeasurements(
      report("eu", t0 + 20_000, t0 + 25_000, [
        { env, dep: good, c: [1, 0, 0, 0] },
        { env, dep: evilDep, c: [1_000, 0, 0, 0] },
      ]),
    ),
    Code.PermissionDenied,
    /revisions\[1\]\.deployment_id/,
  );
  // An instance entry naming another workspace's revision: refused as well.
  await expectCode(
    eu.reportMeasurements(
      report(
        "eu",
        t0 + 20_000,
        t0 + 25_000,
        [{ env, dep: good, c: [1, 0, 0, 0] }],
        [{ env, dep: evilDep, instance: "evil-1", c: [1, 0, 0, 0] }],
      ),
    ),
    Code.PermissionDenied,
    /instances\[0\]\.deployment_id/,
  );
  assert.equal(
    (await source.samples(env, [good], t0 + 20_000)).get(good)?.requests,
    10,
    "a refused report stores nothing",
  );
  // No token of an agent at all.
  await expectCode(
    ctrl.client(ClusterService, admin).reportMeasurements(report("eu", t0, t0 + 1, [])),
    Code.PermissionDenied,
  );

  // Malformed: the field is named.
  const bad1 = (entries: Entry[], from = t0, to = t0 + 1_000): Promise<unknown> =>
    eu.reportMeasurements(report("eu", from, to, entries));
  await expectCode(
    bad1([{ env, dep: good, c: [1, 0, 0, 0], lat: [1, 2, 3] }]),
    Code.InvalidArgument,
    /revisions\[0\]\.latency_buckets: must have 15 entries/,
  );
  await expectCode(bad1([], t0, t0), Code.InvalidArgument, /to_unix_ms: must be after from_unix_ms/);
  await expectCode(
    eu.reportMeasurements(
      report(
        "eu",
        t0,
        t0 + 1_000,
        [{ env, dep: good, c: [1, 0, 0, 0] }],
        [{ env, dep: good, instance: "Not A Pod", c: [1, 0, 0, 0] }],
      ),
    ),
    Code.InvalidArgument,
    /instances\[0\]\.instance: must be a pod's name/,
  );
  await expectCode(bad1([], t0 - 7_200_000, t0), Code.InvalidArgument, /from_unix_ms/);
  await expectCode(
    bad1([], Date.now() + 3_600_000, Date.now() + 3_600_500),
    Code.InvalidArgument,
    /to_unix_ms: is in the future/,
  );
  await expectCode(
    bad1([], Date.now() - 7_200_000, Date.now() - 7_100_000),
    Code.InvalidArgument,
    /to_unix_ms: is older than the retention/,
  );
  await expectCode(
    bad1([{ env: "nope", dep: good, c: [1, 0, 0, 0] }]),
    Code.InvalidArgument,
    /revisions\[0\]\.environment_id: must be an id/,
  );
  await expectCode(
    bad1([
      { env, dep: good, c: [1, 0, 0, 0] },
      { env, dep: good, c: [1, 0, 0, 0] },
    ]),
    Code.InvalidArgument,
    /revisions\[1\]\.deployment_id: is repeated/,
  );
  await expectCode(
    bad1([{ env, dep: good, c: [2e12, 0, 0, 0] }]),
    Code.InvalidArgument,
    /revisions\[0\]\.responses_2xx/,
  );
  const many = Array.from({ length: 2_001 }, (_, i) => ({
    env,
    dep: `dep_x${i}`,
    c: [1, 0, 0, 0] as [number, number, number, number],
  }));
  await expectCode(bad1(many), Code.InvalidArgument, /revisions: must have at most 2000 entries/);
  assert.equal((await source.samples(env, [good], 0)).get(good)?.requests, 210, "refused reports stored nothing");

  // Pruning by age: the windows that ended before the bound go.
  assert.equal(await pruneMeasurements(ctrl.store, t0 + 15_000), 3);
  assert.equal((await source.samples(env, [good, bad], 0)).get(good)?.requests, 10);

  // Deleting the environment purges its rows; the other workspace's stay.
  await eu.reportMeasurements(
    report("eu", t0 + 20_000, t0 + 25_000, [{ env: envs.evil ?? "", dep: evilDep, c: [7, 0, 0, 0] }]),
  );
  await ctrl.client(EnvironmentService, admin).deleteEnvironment({
    workspace: "acme",
    project: "shop",
    environment: "production",
    confirm: "production",
    forceRegions: ["*"],
  });
  const deadline = Date.now() + 20_000;
  for (;;) {
    const rows = await ctrl.store.db.selectFrom("measurements").select(["environment_id"]).execute();
    if (!rows.some((r) => r.environment_id === env)) {
      assert.deepEqual(
        rows.map((r) => r.environment_id),
        [envs.evil],
      );
      break;
    }
    assert.ok(Date.now() < deadline, "the deleted environment's measurements were not purged");
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.deepEqual(await readPoints(ctrl.store.db, { environmentId: env, stepMs: MINUTE_MS, fromMs: 0 }), []);
  assert.equal(
    (await readPoints(ctrl.store.db, { environmentId: envs.evil ?? "", stepMs: MINUTE_MS, fromMs: 0 }))[0]?.sums
      .requests,
    7,
  );
}

describe("measurements (SQLite)", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { deletionSweepIntervalMs: 200 });
  });
  after(async () => {
    await ctrl?.close();
    dir.remove();
  });
  it("stores, adds up, authorizes, validates, prunes and purges", () => scenario(ctrl));
});

describe("measurements (PostgreSQL)", () => {
  let pg: TestPostgres;
  let ctrl: TestCtrl;
  before(async () => {
    pg = await startPostgres();
    ctrl = await startTestCtrl(await pg.newDatabase(), { deletionSweepIntervalMs: 200 });
  });
  after(async () => {
    await ctrl?.close();
    await pg?.stop();
  });
  it("stores, adds up, authorizes, validates, prunes and purges", () => scenario(ctrl));
});

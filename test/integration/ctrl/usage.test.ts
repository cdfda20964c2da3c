// Instance usage through the real ctrl (HTTP/2), on SQLite and PostgreSQL: an agent's
// ReportUsage (CPU, memory and restarts per pod and minute) reaches the metrics history, and
// GetMetricsHistory serves it per instance (means over the readings); per instance and minute the
// report with the most readings is kept, so a repeat, a retry or a late partial report changes
// nothing; an agent reports only for environments that run in its own region and their own
// revisions (permission_denied naming the field); malformed reports are invalid_argument naming
// the field; a refused report stores nothing; an environment keeps at most 32 instance series a
// minute, apart from its revisions' series.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { readPoints } from "../../../src/ctrl/history/store.js";
import { MAX_INSTANCE_SERIES_PER_ENVIRONMENT, MINUTE_MS } from "../../../src/ctrl/history/sums.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import {
  ClusterService,
  ReportUsageRequestSchema,
  type ReportUsageRequest,
} from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { MetricsService } from "../../../src/gen/krane/ctrl/v1/live_pb.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

interface Use {
  env: string;
  dep: string;
  pod: string;
  cpu?: number;
  mem?: number;
  n?: number;
  restarts?: number;
}

function report(region: string, minuteMs: number, uses: Use[]): ReportUsageRequest {
  return create(ReportUsageRequestSchema, {
    region,
    minutes: [
      {
        minuteUnixMs: BigInt(minuteMs),
        instances: uses.map((u) => ({
          environmentId: u.env,
          deploymentId: u.dep,
          instance: u.pod,
          cpuMillicoresSum: u.cpu ?? 0,
          memoryBytesSum: u.mem ?? 0,
          readings: u.n ?? 0,
          restarts: u.restarts ?? 0,
        })),
      },
    ],
  });
}

async function scenario(ctrl: TestCtrl): Promise<void> {
  const admin = ctrl.adminToken;
  for (const r of ["eu", "ap"]) await ctrl.client(RegionService, admin).createRegion({ name: r });
  const envs: Record<string, string> = {};
  const deps: Record<string, string> = {};
  for (const ws of ["acme", "evil"]) {
    await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: ws });
    await ctrl.client(ProjectService, admin).createProject({ workspace: ws, slug: "shop" });
    const { environment } = await ctrl.client(EnvironmentService, admin).createEnvironment({
      workspace: ws,
      project: "shop",
      slug: "production",
      regions: [{ region: "eu", replicas: 2 }],
    });
    envs[ws] = environment?.id ?? "";
    const { deployment } = await ctrl.client(DeploymentService, admin).createDeployment({
      workspace: ws,
      project: "shop",
      environment: "production",
      image: "registry.example.com/shop:1",
    });
    deps[ws] = deployment?.id ?? "";
  }
  const env = envs.acme ?? "";
  const dep = deps.acme ?? "";
  assert.ok(env && dep && envs.evil && deps.evil);
  const eu = ctrl.client(ClusterService, await ctrl.agentToken("eu"));
  const ap = ctrl.client(ClusterService, await ctrl.agentToken("ap"));
  const now = Date.now();
  const m0 = now - (now % MINUTE_MS) - 2 * MINUTE_MS;

  // A partial minute, then the same minute fuller (as the agent sends it while it fills).
  const partial = report("eu", m0, [
    { env, dep, pod: "shop-a", cpu: 300, mem: 3e8, n: 2 },
    { env, dep, pod: "shop-b", restarts: 1 },
  ]);
  assert.equal((await eu.reportUsage(partial)).stored, 2);
  const fuller = report("eu", m0, [
    { env, dep, pod: "shop-a", cpu: 600, mem: 6e8, n: 4 },
    { env, dep, pod: "shop-b", restarts: 2 },
  ]);
  assert.equal((await eu.reportUsage(fuller)).stored, 2);
  // The same report again, and the partial one arriving late: nothing changes.
  assert.equal((await eu.reportUsage(fuller)).stored, 0);
  assert.equal((await eu.reportUsage(partial)).stored, 0);

  const metrics = ctrl.client(MetricsService, admin);
  const history = await metrics.getMetricsHistory({
    workspace: "acme",
    project: "shop",
    environment: "production",
    sinceUnixMs: BigInt(m0 - MINUTE_MS),
  });
  const a = history.series.find((s) => s.instance === "shop-a");
  const b = history.series.find((s) => s.instance === "shop-b");
  assert.equal(a?.region, "eu");
  assert.equal(a?.deploymentId, dep);
  assert.equal(a?.points.length, 1);
  assert.equal(a?.points[0]?.cpuMillicores, 150, "the mean over 4 readings");
  assert.equal(a?.points[0]?.memoryBytes, 1.5e8);
  assert.equal(b?.total?.restarts, 2n);
  assert.equal(b?.points[0]?.cpuMillicores, undefined, "no reading: no CPU figure, never 0");
  const byInstance = await metrics.getMetricsHistory({
    workspace: "acme",
    project: "shop",
    environment: "production",
    instance: "shop-a",
    sinceUnixMs: BigInt(m0 - MINUTE_MS),
  });
  assert.deepEqual(
    byInstance.series.map((s) => s.instance),
    ["shop-a"],
  );

  const stored = async () =>
    JSON.stringify(await readPoints(ctrl.store.db, { environmentId: env, stepMs: MINUTE_MS, fromMs: 0 }));
  const before = await stored();
  // Another region's agent: the environment does not run there.
  await expectCode(
    ap.reportUsage(report("ap", m0, [{ env, dep, pod: "shop-a", cpu: 1, n: 1 }])),
    Code.PermissionDenied,
    /minutes\[0\]\.instances\[0\]\.environment_id: environment env_\w+ does not run in region ap/,
  );
  // Another workspace's revision under this environment, after a valid entry: nothing stored.
  await expectCode(
    eu.reportUsage(
      report("eu", m0 + MINUTE_MS, [
        { env, dep, pod: "shop-a", cpu: 1, n: 1 },
        { env, dep: deps.evil ?? "", pod: "x", cpu: 1, n: 1 },
      ]),
    ),
    Code.PermissionDenied,
    /minutes\[0\]\.instances\[1\]\.deployment_id: dep_\w+ is not a revision of environment/,
  );
  // A token for eu naming another region.
  await expectCode(eu.reportUsage(report("ap", m0, [])), Code.PermissionDenied, /region/);
  // Malformed.
  const bad: [ReportUsageRequest, RegExp][] = [
    [
      report("eu", m0 + 1, [{ env, dep, pod: "shop-a" }]),
      /minutes\[0\]\.minute_unix_ms: must be the start of a minute/,
    ],
    [
      report("eu", m0 + 10 * MINUTE_MS, [{ env, dep, pod: "shop-a" }]),
      /minutes\[0\]\.minute_unix_ms: is in the future/,
    ],
    [report("eu", m0, [{ env, dep, pod: "Shop_A" }]), /minutes\[0\]\.instances\[0\]\.instance: must be a pod's name/],
    [
      report("eu", m0, [{ env, dep, pod: "shop-a", cpu: Number.NaN, n: 1 }]),
      /minutes\[0\]\.instances\[0\]\.cpu_millicores_sum: must be a number/,
    ],
    [report("eu", m0, [{ env, dep, pod: "shop-a", mem: -1, n: 1 }]), /instances\[0\]\.memory_bytes_sum/],
    [
      report("eu", m0, [
        { env, dep, pod: "shop-a" },
        { env, dep, pod: "shop-a" },
      ]),
      /minutes\[0\]\.instances\[1\]\.instance: is repeated/,
    ],
    [
      create(ReportUsageRequestSchema, {
        region: "eu",
        minutes: Array.from({ length: 11 }, (_, i) => ({ minuteUnixMs: BigInt(m0 - i * MINUTE_MS) })),
      }),
      /minutes: must have at most 10 entries/,
    ],
  ];
  for (const [req, message] of bad) await expectCode(eu.reportUsage(req), Code.InvalidArgument, message);
  assert.equal(await stored(), before, "refused reports stored nothing");

  // The instance series bound, apart from the revisions' series.
  const many = Array.from({ length: MAX_INSTANCE_SERIES_PER_ENVIRONMENT + 8 }, (_, i) => ({
    env,
    dep,
    pod: `shop-${i}`,
    cpu: 1,
    n: 1,
  }));
  assert.equal((await eu.reportUsage(report("eu", m0 + MINUTE_MS, many))).stored, MAX_INSTANCE_SERIES_PER_ENVIRONMENT);
  const minute1 = (await readPoints(ctrl.store.db, { environmentId: env, stepMs: MINUTE_MS, fromMs: 0 })).filter(
    (p) => p.atMs === m0 + MINUTE_MS,
  );
  assert.equal(minute1.length, MAX_INSTANCE_SERIES_PER_ENVIRONMENT);
}

describe("instance usage (SQLite)", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"));
  });
  after(async () => {
    await ctrl?.close();
    dir.remove();
  });
  it("stores, keeps the fullest report, authorizes, validates and bounds", () => scenario(ctrl));
});

describe("instance usage (PostgreSQL)", () => {
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
  it("stores, keeps the fullest report, authorizes, validates and bounds", () => scenario(ctrl));
});

// PostgreSQL down under a real `krane ctrl serve`: every method (enumerated from the generated
// descriptors; each needs a valid request in the table below, so a new method fails this test
// until it has one) answers unavailable naming the database, internal never; ctrl logs the
// outage once when it starts and once when it ends, not per call; and once PostgreSQL is back,
// the database holds exactly what it held before (nothing half-applied).
import { randomBytes } from "node:crypto";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import pg from "pg";
import {
  file_krane_ctrl_v1_api,
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
  ApiTokenService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { file_krane_ctrl_v1_cluster } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { file_krane_ctrl_v1_rollout } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { file_krane_ctrl_v1_config } from "../../../src/gen/krane/ctrl/v1/config_pb.js";
import { file_krane_ctrl_v1_exposure } from "../../../src/gen/krane/ctrl/v1/exposure_pb.js";
import { file_krane_ctrl_v1_job } from "../../../src/gen/krane/ctrl/v1/job_pb.js";
import { file_krane_ctrl_v1_release } from "../../../src/gen/krane/ctrl/v1/release_pb.js";
import { file_krane_ctrl_v1_quota } from "../../../src/gen/krane/ctrl/v1/quota_pb.js";
import { file_krane_ctrl_v1_alerts } from "../../../src/gen/krane/ctrl/v1/alerts_pb.js";
import { file_krane_ctrl_v1_keys } from "../../../src/gen/krane/ctrl/v1/keys_pb.js";
import { file_krane_ctrl_v1_repository } from "../../../src/gen/krane/ctrl/v1/repository_pb.js";
import { generateToken } from "../../../src/ctrl/domain/tokens.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { spawnCtrl, type CtrlProcess } from "./process.js";
import { startTestCtrl, tempDir, transportFor } from "./support.js";
import SQLite from "better-sqlite3";

const services: DescService[] = [
  file_krane_ctrl_v1_api,
  file_krane_ctrl_v1_cluster,
  file_krane_ctrl_v1_rollout,
  file_krane_ctrl_v1_config,
  file_krane_ctrl_v1_release,
  file_krane_ctrl_v1_job,
  file_krane_ctrl_v1_exposure,
  file_krane_ctrl_v1_quota,
  file_krane_ctrl_v1_alerts,
  file_krane_ctrl_v1_keys,
  file_krane_ctrl_v1_repository,
].flatMap((f) => f.services);
const dir = tempDir();
const admin = generateToken("user");
let postgres: TestPostgres;
let url: string;
let ctrl: CtrlProcess;
let agent: string;
let deploymentId: string;
let environmentId: string;
let spareTokenId: string;

const target = { workspace: "acme", project: "web", environment: "prod" };

/** A request that passes validation for every method: during the outage, only the database can fail it. */
function requestFor(m: DescMethod): Record<string, unknown> | undefined {
  const table: Record<string, Record<string, unknown>> = {
    CreateWorkspace: { slug: "outage", name: "Outage" },
    GetWorkspace: { workspace: "acme" },
    ListWorkspaces: {},
    CreateProject: { workspace: "acme", slug: "outage" },
    GetProject: { workspace: "acme", project: "web" },
    ListProjects: { workspace: "acme" },
    CreateEnvironment: {
      workspace: "acme",
      project: "web",
      slug: "outage",
      regions: [{ region: "local", replicas: 1 }],
    },
    GetEnvironment: target,
    ListEnvironments: { workspace: "acme", project: "web" },
    UpdateEnvironment: { ...target, regions: [{ region: "local", replicas: 3 }] },
    CreateDeployment: { ...target, image: "registry.example.com/web:2" },
    GetDeployment: { deploymentId },
    ListDeployments: target,
    DeleteDeployment: { deploymentId },
    CreateRegion: { name: "outage" },
    ListRegions: {},
    AddRegistry: { workspace: "acme", host: "registry.example.com", username: "ci", password: "outage" },
    ListRegistries: { workspace: "acme" },
    RemoveRegistry: { workspace: "acme", host: "registry.example.com" },
    GetQuota: { workspace: "acme" },
    SetQuota: { workspace: "acme", values: { build_minutes: "600" } },
    AddAlertRule: { ...target, name: "outage", metric: "error_rate", op: ">", threshold: 2, forSeconds: 300 },
    ListAlertRules: target,
    RemoveAlertRule: { ...target, name: "outage" },
    GetLogRetention: { workspace: "acme" },
    StreamRequests: target,
    SetLogRetention: { workspace: "acme", days: 30 },
    CreateApiKey: { ...target, name: "outage" },
    ListApiKeys: target,
    RevokeApiKey: { ...target, keyId: "key_0123456789abcdefghij" },
    ConnectRepository: {
      workspace: "acme",
      project: "web",
      provider: "github",
      url: "https://git.example.com/acme/web.git",
      webhookSecret: "s".repeat(32),
      branches: ["main=prod"],
    },
    ListRepositories: { workspace: "acme" },
    GetRepository: { workspace: "acme", project: "web" },
    UpdateRepository: { workspace: "acme", project: "web", branches: ["main=prod"] },
    DisconnectRepository: { workspace: "acme", project: "web" },
    CreateClusterToken: { region: "local", clusterName: "second" },
    ListClusters: { region: "local" },
    RevokeClusterToken: { region: "local", clusterName: "default" },
    CreateApiToken: { name: "outage" },
    ListApiTokens: {},
    RevokeApiToken: { tokenId: spareTokenId },
    GetEnvironmentStatus: target,
    WatchDeployments: { region: "local", versionLastSeen: 0n },
    WatchSentinels: { region: "local", versionLastSeen: 0n },
    GetDesiredDeploymentState: { region: "local", deploymentId },
    GetDesiredDeploymentStates: { region: "local", deploymentIds: [deploymentId] },
    GetDesiredSentinelState: { region: "local", sentinelId: "snt_none" },
    GetDesiredSentinelStates: { region: "local", sentinelIds: ["snt_none"] },
    ReportDeploymentStatus: {
      region: "local",
      change: { case: "delete", value: { deploymentId, k8sName: "web-prod-x" } },
    },
    ReportSentinelStatus: {
      region: "local",
      change: { case: "delete", value: { sentinelId: "snt_none", k8sName: "snt-x" } },
    },
    Heartbeat: { region: "local", agentId: "agent-0", build: "test", deploymentsVersion: 1n },
    Scale: { ...target, region: "local", replicas: 2 },
    Pause: target,
    Resume: target,
    Undo: target,
    Rollback: target,
    Restart: target,
    Promote: target,
    Abort: target,
    History: target,
    GetRolloutStatus: target,
    DeleteWorkspace: { workspace: "acme", confirm: "acme" },
    DeleteProject: { workspace: "acme", project: "web", confirm: "web" },
    DeleteEnvironment: { ...target, confirm: "prod" },
    WatchGateways: { region: "local", versionLastSeen: 0n },
    GetDesiredGatewayState: { region: "local", gatewayId: "env_none" },
    GetDesiredGatewayStates: { region: "local", gatewayIds: ["env_none"] },
    ReportGatewayStatus: { region: "local", change: { case: "delete", value: { gatewayId: "env_none" } } },
    WatchReleases: { region: "local", versionLastSeen: 0n },
    GetDesiredReleaseState: { region: "local", releaseId: "rel_none" },
    GetDesiredReleaseStates: { region: "local", releaseIds: ["rel_none"] },
    ReportReleaseStatus: { region: "local", change: { case: "delete", value: { releaseId: "rel_none" } } },
    WatchJobs: { region: "local", versionLastSeen: 0n },
    GetDesiredJobState: { region: "local", jobId: "job_none" },
    GetDesiredJobStates: { region: "local", jobIds: ["job_none"] },
    ReportJobStatus: { region: "local", change: { case: "delete", value: { jobId: "job_none", k8sName: "job-x" } } },
    WatchBuilds: { region: "local", versionLastSeen: 0n },
    GetDesiredBuildState: { region: "local", buildId: "bld_none" },
    GetDesiredBuildStates: { region: "local", buildIds: ["bld_none"] },
    ReportBuildStatus: { region: "local", change: { case: "delete", value: { buildId: "bld_none" } } },
    GetBuildSource: { region: "local", buildId: "bld_none" },
    GetBuildPushAuthorization: { region: "local", buildId: "bld_none" },
    ReportBuildProgress: { region: "local", buildId: "bld_none", lines: ["a line"] },
    GetSecretValues: { region: "local", owner: { case: "deploymentId", value: deploymentId } },
    ReportMeasurements: {
      region: "local",
      fromUnixMs: BigInt(Date.now() - 10_000),
      toUnixMs: BigInt(Date.now()),
      revisions: [{ environmentId, deploymentId, responses2xx: 1n }],
    },
    ReportUsage: {
      region: "local",
      minutes: [
        {
          minuteUnixMs: BigInt(Date.now() - (Date.now() % 60_000)),
          instances: [{ environmentId, deploymentId, instance: "web-1", cpuMillicoresSum: 5, readings: 1 }],
        },
      ],
    },
    ReportAutoscale: {
      region: "local",
      environmentId,
      replicas: 2,
      reason: "2 in flight per instance",
      decidedAtUnixMs: BigInt(Date.now()),
    },
    SetConfig: { ...target, values: [{ key: "MODE", value: "outage" }] },
    UnsetConfig: { ...target, keys: ["MODE"] },
    ListConfig: target,
    SetSecrets: { ...target, secrets: [{ key: "TOKEN", source: { case: "value", value: "s3cret" } }] },
    UnsetSecrets: { ...target, keys: ["TOKEN"] },
    ListSecrets: target,
    ApplyRelease: {
      ...target,
      files: [{ name: "cm.yaml", content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {a: b}\n" }],
    },
    GetRelease: { ...target, name: "default" },
    ListReleases: target,
    DeleteRelease: { ...target, name: "default" },
    PutJob: { ...target, spec: { name: "nightly", schedule: "@hourly" } },
    ListJobs: target,
    DeleteJob: { ...target, name: "nightly" },
    SetEndpoint: { ...target, visibility: "public" },
    ListEndpoints: target,
    DeleteEndpoint: { ...target, visibility: "public" },
    AddDomain: { ...target, hostname: "www.outage.test" },
    ListDomains: target,
    VerifyDomain: { ...target, hostname: "www.outage.test" },
    RemoveDomain: { ...target, hostname: "www.outage.test" },
    AddPolicy: { ...target, policy: { name: "office", kind: { case: "ip", value: { allow: ["192.0.2.0/24"] } } } },
    ListPolicies: target,
    MovePolicy: { ...target, name: "office", position: 0 },
    RemovePolicy: { ...target, name: "office" },
  };
  return table[m.name];
}

type AnyCall = (
  req: Record<string, unknown>,
  opts?: { timeoutMs?: number },
) => Promise<unknown> | AsyncIterable<unknown>;

async function call(m: DescMethod): Promise<ConnectError | undefined> {
  const token = m.parent.typeName === "krane.ctrl.v1.ClusterService" ? agent : admin;
  const client = createClient(m.parent, transportFor(ctrl.url, token)) as unknown as Record<string, AnyCall>;
  const fn = client[m.localName];
  assert.ok(fn, m.name);
  const req = requestFor(m);
  assert.ok(req, `no request for ${m.parent.name}/${m.name} in the table`);
  try {
    const res = fn.call(client, req, { timeoutMs: 20_000 });
    if (m.methodKind === "server_streaming") {
      for await (const _ of res as AsyncIterable<unknown>) break;
    } else await res;
    return undefined;
  } catch (err) {
    return ConnectError.from(err);
  }
}

/** Every row of every table, volatile bookkeeping columns left out, in a stable order. */
async function databaseContents(): Promise<Record<string, string[]>> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const tables = await c.query<{ table_name: string }>(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name",
    );
    const out: Record<string, string[]> = {};
    for (const { table_name } of tables.rows) {
      const rows = await c.query<Record<string, unknown>>(`SELECT * FROM "${table_name}"`);
      out[table_name] = rows.rows
        .map((r) =>
          JSON.stringify(Object.fromEntries(Object.entries(r).filter(([k]) => !/last_used|heartbeat/.test(k)))),
        )
        .sort();
    }
    return out;
  } finally {
    await c.end();
  }
}

before(async () => {
  postgres = await startPostgres();
  url = await postgres.newDatabase();
  const tokenFile = join(dir.path, "admin-token");
  writeFileSync(tokenFile, `${admin}\n`, { mode: 0o600 });
  // A master key, so the secret methods reach the database too.
  ctrl = await spawnCtrl(["--database", url, "--admin-token-file", tokenFile], {
    KRANE_MASTER_KEY: randomBytes(32).toString("base64"),
  });
  const t = transportFor(ctrl.url, admin);
  await createClient(RegionService, t).createRegion({ name: "local" });
  agent = (await createClient(RegionService, t).createClusterToken({ region: "local", clusterName: "default" })).token;
  await createClient(WorkspaceService, t).createWorkspace({ slug: "acme" });
  await createClient(ProjectService, t).createProject({ workspace: "acme", slug: "web" });
  const { environment } = await createClient(EnvironmentService, t).createEnvironment({
    workspace: "acme",
    project: "web",
    slug: "prod",
    regions: [{ region: "local", replicas: 1 }],
  });
  environmentId = environment?.id ?? "";
  const { deployment } = await createClient(DeploymentService, t).createDeployment({
    ...target,
    image: "registry.example.com/web:1",
  });
  deploymentId = deployment?.id ?? "";
  spareTokenId = (await createClient(ApiTokenService, t).createApiToken({ name: "spare" })).apiToken?.id ?? "";
});

after(async () => {
  await ctrl?.stop();
  await postgres?.stop();
  dir.remove();
});

test("PostgreSQL stopped: every method answers unavailable naming the database; logged once per transition; nothing half-applied", async () => {
  const methods = services.flatMap((s) => s.methods);
  const missing = methods.filter((m) => requestFor(m) === undefined).map((m) => `${m.parent.name}/${m.name}`);
  assert.deepEqual(missing, [], "methods without a request in the table");
  const before = await databaseContents();

  await postgres.halt();
  const wrong: string[] = [];
  const started = Date.now();
  for (const m of methods) {
    const err = await call(m);
    const where = `${m.parent.name}/${m.name}`;
    if (!err) wrong.push(`${where}: succeeded`);
    else if (err.code !== Code.Unavailable) wrong.push(`${where}: ${Code[err.code]} "${err.rawMessage}"`);
    else if (!/ctrl's database \(PostgreSQL\) is unavailable: .*the request was not applied/.test(err.rawMessage))
      wrong.push(`${where}: "${err.rawMessage}"`);
  }
  const outageMs = Date.now() - started;
  assert.deepEqual(wrong, [], `${wrong.length} of ${methods.length} methods answered otherwise`);

  await postgres.resume();
  // Back within a few seconds: the pool reconnects on demand.
  const back = Date.now() + 30_000;
  let answer: ConnectError | undefined;
  do {
    answer = await call(methods.find((m) => m.name === "ListWorkspaces") as DescMethod);
    if (answer) await new Promise((r) => setTimeout(r, 100));
  } while (answer && Date.now() < back);
  assert.equal(answer, undefined, `ctrl did not recover: ${answer?.rawMessage}`);
  const recovered = Date.now() + 10_000;
  while (!/database available again/.test(ctrl.stdout()) && Date.now() < recovered)
    await new Promise((r) => setTimeout(r, 100));

  assert.deepEqual(await databaseContents(), before, "the database changed while it was down");
  const log = ctrl
    .stdout()
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as { level: number; msg: string });
  assert.equal(
    log.filter((l) => l.msg.startsWith("database unavailable")).length,
    1,
    "the outage's start is logged once",
  );
  assert.equal(log.filter((l) => l.msg === "database available again").length, 1, "its end is logged once");
  assert.deepEqual(
    log.filter((l) => l.level >= 50).map((l) => l.msg),
    [],
    "nothing at error level",
  );
  console.log(
    `outage: ${methods.length} methods answered unavailable with PostgreSQL stopped (${outageMs} ms for all)`,
  );
});

test("SQLite locked by another process: a write answers unavailable naming SQLite, and is not applied", async () => {
  const file = join(dir.path, "locked.db");
  const local = await startTestCtrl(file);
  const holder = new SQLite(file);
  try {
    holder.exec("BEGIN EXCLUSIVE");
    const workspaces = local.client(WorkspaceService, local.adminToken);
    const err = await workspaces.createWorkspace({ slug: "locked" }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    assert.equal(err?.code, Code.Unavailable, err?.rawMessage);
    assert.match(
      err?.rawMessage ?? "",
      /^ctrl's database \(SQLite\) is unavailable: the database file is locked; the request was not applied/,
    );
    holder.exec("ROLLBACK");
    assert.deepEqual(
      (await workspaces.listWorkspaces({})).workspaces.map((w) => w.slug),
      [],
    );
  } finally {
    holder.close();
    await local.close();
  }
});

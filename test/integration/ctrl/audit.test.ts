// The audit log through the real ctrl (HTTP/2; SQLite and PostgreSQL): every accepted change has
// its event with who, from where, the request id and key, and a field-level diff (secrets only
// "changed"); refused calls — no token, a bad token, an agent token on the public API, an invalid
// request, another workspace's id — are recorded, those without a valid token in the
// installation's chain; the tokens themselves (admin, a new API token, the bad one) and secret
// values appear in no event, database file or dump; `krane audit` lists with filters and
// pagination; `krane audit verify` passes an intact chain and names the event that was edited,
// deleted or moved in the database.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Code } from "@connectrpc/connect";
import { sql } from "kysely";
import {
  ApiTokenService,
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { AuditService, type AuditEvent } from "../../../src/gen/krane/ctrl/v1/audit_pb.js";
import { ConfigService } from "../../../src/gen/krane/ctrl/v1/config_pb.js";
import { Keyring } from "../../../src/ctrl/secrets/keyring.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { kraneAsync } from "./process.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const REF = { workspace: "acme", project: "shop", environment: "production" };

async function events(
  ctrl: TestCtrl,
  filter: { workspace?: string; installation?: boolean; method?: string },
): Promise<AuditEvent[]> {
  const client = ctrl.client(AuditService, ctrl.adminToken);
  const out: AuditEvent[] = [];
  let pageToken = "";
  do {
    const page = await client.listAuditEvents({
      filter: {
        workspace: filter.workspace ?? "",
        installation: filter.installation ?? false,
        method: filter.method ?? "",
      },
      pageSize: 2,
      pageToken,
    });
    out.push(...page.events);
    pageToken = page.nextPageToken;
  } while (pageToken !== "");
  return out;
}

function pgDump(url: string): string {
  const root = "/usr/lib/postgresql";
  const v = readdirSync(root)
    .filter((x) => existsSync(join(root, x, "bin", "pg_dump")))
    .sort((a, b) => Number(b) - Number(a))[0];
  if (v === undefined) throw new Error("pg_dump not found");
  return execFileSync(join(root, v, "bin", "pg_dump"), ["--data-only", "--inserts", url], {
    encoding: "utf8",
    maxBuffer: 256 * 1024 * 1024,
  });
}

async function scenario(ctrl: TestCtrl, dump: () => Promise<string>): Promise<void> {
  const admin = ctrl.adminToken;
  const secretValue = `krane-secret-${randomBytes(12).toString("hex")}`;
  const badToken = `krane_user_${randomBytes(24).toString("base64url")}`;
  await ctrl.client(RegionService, admin).createRegion({ name: "eu" });
  await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: REF.workspace });
  await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: "other" });
  const { project: otherProject } = await ctrl
    .client(ProjectService, admin)
    .createProject({ workspace: "other", slug: "secretive" });
  await ctrl.client(ProjectService, admin).createProject({ workspace: REF.workspace, slug: REF.project });
  const envs = ctrl.client(EnvironmentService, admin);
  await envs.createEnvironment({ ...REF, slug: REF.environment, regions: [{ region: "eu", replicas: 2 }] });
  // Keyed, with a request id of the caller's, and a user agent.
  await envs.updateEnvironment(
    { ...REF, regions: [{ region: "eu", replicas: 3 }], rollout: { maxSurge: "50%" } },
    { headers: { "idempotency-key": "update-1", "x-request-id": "ci-run-42", "user-agent": "ci-bot/1.0" } },
  );
  await ctrl.client(ConfigService, admin).setConfig({ ...REF, values: [{ key: "LOG_LEVEL", value: "debug" }] });
  await ctrl
    .client(ConfigService, admin)
    .setSecrets({ ...REF, secrets: [{ key: "DB_PASSWORD", source: { case: "value", value: secretValue } }] });
  await ctrl
    .client(ConfigService, admin)
    .setSecrets({ ...REF, secrets: [{ key: "DB_PASSWORD", source: { case: "value", value: `${secretValue}-2` } }] });
  const { deployment } = await ctrl
    .client(DeploymentService, admin)
    .createDeployment({ ...REF, image: "registry.example.com/shop:1" });
  assert.ok(deployment);
  const { token: newToken } = await ctrl.client(ApiTokenService, admin).createApiToken({ name: "ci-deploy" });

  // Refused: no token, a bad token (a write and a read), an agent's token on the public API, an
  // invalid request, another workspace's project.
  await expectCode(ctrl.client(WorkspaceService, null).createWorkspace({ slug: "sneaky" }), Code.Unauthenticated);
  await expectCode(
    ctrl.client(ProjectService, badToken).createProject({ workspace: "acme", slug: "x" }),
    Code.Unauthenticated,
  );
  await expectCode(ctrl.client(ProjectService, badToken).listProjects({ workspace: "acme" }), Code.Unauthenticated);
  const agent = await ctrl.agentToken("eu");
  await expectCode(ctrl.client(WorkspaceService, agent).listWorkspaces({}), Code.PermissionDenied);
  await expectCode(envs.updateEnvironment({ ...REF, regions: [{ region: "eu", replicas: -1 }] }), Code.InvalidArgument);
  assert.ok(otherProject);
  await expectCode(
    envs.updateEnvironment({ workspace: "acme", project: otherProject.id, environment: "production", regions: [] }),
    Code.NotFound,
  );

  const acme = await events(ctrl, { workspace: "acme" });
  const byMethod = (m: string): AuditEvent[] => acme.filter((e) => e.method === m);

  // Numbered 1, 2, 3 … in the workspace's chain.
  assert.deepEqual(
    acme.map((e) => Number(e.seq)),
    acme.map((_, i) => i + 1),
  );
  const [created] = byMethod("WorkspaceService/CreateWorkspace");
  assert.ok(created);
  assert.equal(created.actor?.kind, "user");
  assert.equal(created.actor?.name, "admin");
  assert.match(created.actor?.id ?? "", /^tok_/);
  assert.equal(created.clientIp, "127.0.0.1");
  assert.match(created.requestId, /^req_/);
  assert.deepEqual(
    created.changes.map((c) => [c.field, c.op, c.afterJson]),
    [
      ["workspace.deleting", "added", "false"],
      ["workspace.name", "added", '"acme"'],
      ["workspace.slug", "added", '"acme"'],
    ],
  );

  const [update] = byMethod("EnvironmentService/UpdateEnvironment").filter((e) => e.code === "ok");
  assert.ok(update);
  assert.equal(update.requestId, "ci-run-42");
  assert.equal(update.idempotencyKey, "update-1");
  assert.equal(update.userAgent.startsWith("ci-bot/1.0"), true, update.userAgent);
  assert.deepEqual(
    update.changes.map((c) => [c.field, c.beforeJson, c.afterJson]),
    [
      ["environment.regions.eu", "2", "3"],
      ["environment.rollout.max_surge", '"25%"', '"50%"'],
    ],
  );
  assert.equal(update.targets.length, 3, "workspace, project, environment");

  const secrets = byMethod("ConfigService/SetSecrets");
  assert.equal(secrets.length, 2);
  assert.deepEqual(
    secrets.map((e) =>
      e.changes
        .filter((c) => c.field.startsWith("environment.secrets"))
        .map((c) => [c.field, c.op, c.beforeJson, c.afterJson]),
    ),
    [[["environment.secrets.DB_PASSWORD", "added", "", ""]], [["environment.secrets.DB_PASSWORD", "changed", "", ""]]],
  );
  const [deploy] = byMethod("DeploymentService/CreateDeployment");
  assert.ok(deploy);
  assert.equal(deploy.targets[deploy.targets.length - 1], deployment.id);
  assert.ok(
    deploy.changes.some((c) => c.field === "deployment.image" && c.afterJson === '"registry.example.com/shop:1"'),
  );

  // Refusals of a caller with a valid token go to the workspace the request names.
  const invalid = acme.find((e) => e.code === "invalid_argument");
  assert.ok(invalid, "the invalid update is recorded");
  assert.match(invalid.message, /regions\[0\]\.replicas/);
  assert.deepEqual(invalid.changes, []);
  const foreign = acme.find((e) => e.code === "not_found");
  assert.ok(foreign, "the update naming another workspace's project is recorded");
  assert.match(foreign.message, new RegExp(otherProject.id));

  // Refusals without a valid token go to the installation's chain, with nobody named.
  const installation = await events(ctrl, { installation: true });
  const anonymous = installation.filter((e) => e.code === "unauthenticated");
  assert.deepEqual(anonymous.map((e) => e.method).sort(), [
    "ProjectService/CreateProject",
    "ProjectService/ListProjects",
    "WorkspaceService/CreateWorkspace",
  ]);
  for (const e of anonymous) {
    assert.equal(e.actor?.kind, "anonymous");
    assert.equal(e.actor?.id, "");
    assert.deepEqual(e.targets, [], "a claim of an unknown caller names no target");
  }
  const denied = installation.find((e) => e.code === "permission_denied");
  assert.ok(denied, "the agent token on the public API is recorded");
  assert.equal(denied.actor?.kind, "agent");
  assert.equal(denied.method, "WorkspaceService/ListWorkspaces");
  assert.ok(installation.some((e) => e.method === "ApiTokenService/CreateApiToken" && e.code === "ok"));
  assert.ok(installation.some((e) => e.method === "RegionService/CreateRegion" && e.code === "ok"));

  // Filters: a method, a target, refused only.
  const onlyUpdates = await events(ctrl, { workspace: "acme", method: "UpdateEnvironment" });
  assert.equal(onlyUpdates.length, 3);
  const aboutDeployment = await ctrl.client(AuditService, admin).listAuditEvents({
    filter: { workspace: "acme", target: deployment.id },
  });
  assert.deepEqual(
    aboutDeployment.events.map((e) => e.method),
    ["DeploymentService/CreateDeployment"],
  );

  // No token and no secret value anywhere: not in an event, not in the database.
  const everything = JSON.stringify(
    [...acme, ...installation].map((e) => ({ ...e, seq: String(e.seq), atUnixMs: String(e.atUnixMs) })),
  );
  const stored = await dump();
  for (const [what, text] of [
    ["the events", everything],
    ["the database", stored],
  ] as const) {
    for (const [name, value] of [
      ["the admin token", admin],
      ["the new API token", newToken],
      ["the bad token", badToken],
      ["the agent token", agent],
      ["the secret value", secretValue],
    ] as const)
      assert.ok(!text.includes(value), `${what} hold ${name}`);
  }
}

async function verify(ctrl: TestCtrl, workspace: string): Promise<{ status: number | null; stdout: string }> {
  const r = await kraneAsync(["audit", "verify", "--workspace", workspace, "--retry-for", "0"], {
    KRANE_CTRL_URL: ctrl.url,
    KRANE_TOKEN: ctrl.adminToken,
  });
  return { status: r.status, stdout: r.stdout + r.stderr };
}

async function tampering(ctrl: TestCtrl): Promise<void> {
  const acme = await events(ctrl, { workspace: "acme" });
  assert.ok(acme.length >= 6);
  const ok = await verify(ctrl, "acme");
  assert.equal(ok.status, 0, ok.stdout);
  assert.match(ok.stdout, new RegExp(`^ok: ${acme.length} events`));

  const db = ctrl.store.db;
  // Edited: one event's recorded method.
  const victim = acme[2];
  assert.ok(victim);
  await db
    .updateTable("audit_events")
    .set({ method: "WorkspaceService/GetWorkspace" })
    .where("id", "=", victim.id)
    .execute();
  let r = await verify(ctrl, "acme");
  assert.equal(r.status, 1);
  assert.match(r.stdout, new RegExp(`event ${victim.id} \\(#3\\) does not match its hash: it was edited`));
  await db.updateTable("audit_events").set({ method: victim.method }).where("id", "=", victim.id).execute();
  assert.equal((await verify(ctrl, "acme")).status, 0, "restored");

  // Moved: two events swap their numbers (content intact).
  const [a, b] = [acme[3], acme[4]];
  assert.ok(a && b);
  await db.updateTable("audit_events").set({ seq: -1 }).where("id", "=", a.id).execute();
  await db.updateTable("audit_events").set({ seq: 4 }).where("id", "=", b.id).execute();
  await db.updateTable("audit_events").set({ seq: 5 }).where("id", "=", a.id).execute();
  r = await verify(ctrl, "acme");
  assert.equal(r.status, 1);
  assert.match(r.stdout, new RegExp(`event ${b.id} \\(#4\\) does not match its hash`));
  assert.match(r.stdout, new RegExp(`event ${a.id} \\(#5\\) does not match its hash`));
  await db.updateTable("audit_events").set({ seq: -1 }).where("id", "=", a.id).execute();
  await db.updateTable("audit_events").set({ seq: 5 }).where("id", "=", b.id).execute();
  await db.updateTable("audit_events").set({ seq: 4 }).where("id", "=", a.id).execute();

  // Deleted: one in the middle, then the newest.
  const gone = acme[1];
  assert.ok(gone);
  await db.deleteFrom("audit_events").where("id", "=", gone.id).execute();
  r = await verify(ctrl, "acme");
  assert.equal(r.status, 1);
  const third = acme[2];
  assert.ok(third);
  assert.match(
    r.stdout,
    new RegExp(`event #2 is missing between ${acme[0]?.id} \\(#1\\) and ${third.id} \\(#3\\): deleted`),
  );
  const last = acme[acme.length - 1];
  assert.ok(last);
  await db.deleteFrom("audit_events").where("id", "=", last.id).execute();
  r = await verify(ctrl, "acme");
  assert.match(r.stdout, new RegExp(`events #${acme.length}–#${acme.length} are missing at the end of the chain`));
}

describe("audit log (SQLite)", () => {
  const dir = tempDir("krane-audit-");
  let ctrl: TestCtrl;
  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { keyring: new Keyring(randomBytes(32)) });
  });
  after(async () => {
    await ctrl?.close();
    dir.remove();
  });
  it("records every change with its diff and every refusal; no token or secret anywhere", async () => {
    await scenario(ctrl, async () => {
      // The database file and its WAL, as bytes on disk.
      await sql`PRAGMA wal_checkpoint(PASSIVE)`.execute(ctrl.store.db);
      return readdirSync(dir.path)
        .filter((f) => f.startsWith("ctrl.db"))
        .map((f) => readFileSync(join(dir.path, f)).toString("latin1"))
        .join("\n");
    });
  });
  it("krane audit verify names the event edited, moved or deleted", async () => {
    await tampering(ctrl);
  });
});

describe("audit log (PostgreSQL)", () => {
  let server: TestPostgres;
  let ctrl: TestCtrl;
  let url: string;
  before(async () => {
    server = await startPostgres();
    url = await server.newDatabase();
    ctrl = await startTestCtrl(url, { keyring: new Keyring(randomBytes(32)) });
  });
  after(async () => {
    await ctrl?.close();
    await server?.stop();
  });
  it("records every change with its diff and every refusal; no token or secret anywhere", async () => {
    await scenario(ctrl, async () => pgDump(url));
  });
  it("krane audit verify names the event edited, moved or deleted", async () => {
    await tampering(ctrl);
  });
});

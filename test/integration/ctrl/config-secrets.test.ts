// Configuration and secrets through the real ctrl (HTTP/2, SQLite and PostgreSQL): each change is
// a new revision that keeps its own values; secret values are sealed before they are stored, so
// they appear in no database file or dump, no outbox payload, no API answer and no log line; the
// only way out is GetSecretValues, for an agent of a region where the revision is desired; undo
// goes back to a revision with its own configuration; the master key can be rotated.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { Writable } from "node:stream";
import { after, before, describe, it } from "node:test";
import { Code } from "@connectrpc/connect";
import { toJsonString } from "@bufbuild/protobuf";
import { pino } from "pino";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { ClusterService } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import {
  ConfigService,
  ListSecretsResponseSchema,
  SetSecretsResponseSchema,
} from "../../../src/gen/krane/ctrl/v1/config_pb.js";
import { ReleaseService } from "../../../src/gen/krane/ctrl/v1/release_pb.js";
import { RolloutService } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { Keyring } from "../../../src/ctrl/secrets/keyring.js";
import { rotateDataKeys } from "../../../src/ctrl/domain/data-keys.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const REF = { workspace: "acme", project: "shop", environment: "production" };

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

async function scenario(ctrl: TestCtrl, logs: string[], dump: () => string): Promise<void> {
  const admin = ctrl.adminToken;
  const marker = `krane-secret-${randomBytes(12).toString("hex")}`;
  const markers = [marker, Buffer.from(marker).toString("base64"), Buffer.from(marker).toString("hex")];
  const clean = (what: string, text: string): void => {
    for (const m of markers) assert.ok(!text.includes(m), `${what} holds the secret value`);
  };
  await ctrl.client(RegionService, admin).createRegion({ name: "eu" });
  await ctrl.client(RegionService, admin).createRegion({ name: "us" });
  await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: REF.workspace });
  await ctrl.client(ProjectService, admin).createProject({ workspace: REF.workspace, slug: REF.project });
  await ctrl
    .client(EnvironmentService, admin)
    .createEnvironment({ ...REF, slug: REF.environment, regions: [{ region: "eu", replicas: 2 }] });
  const config = ctrl.client(ConfigService, admin);

  // Before the first deployment only the working set changes.
  const first = await config.setConfig({ ...REF, values: [{ key: "LOG_LEVEL", value: "info" }] });
  assert.equal(first.change?.changed, true);
  assert.equal(first.change?.deployment, undefined);
  const { deployment: d1 } = await ctrl
    .client(DeploymentService, admin)
    .createDeployment({ ...REF, image: "registry.example.com/shop:1" });
  assert.ok(d1);

  // A change makes a revision; the same values again make none.
  const c2 = await config.setConfig({ ...REF, values: [{ key: "LOG_LEVEL", value: "debug" }] });
  assert.equal(c2.change?.deployment?.revision, 2n);
  assert.equal(c2.change?.deployment?.image, "registry.example.com/shop:1", "a copy of the running revision");
  assert.equal(
    (await config.setConfig({ ...REF, values: [{ key: "LOG_LEVEL", value: "debug" }] })).change?.changed,
    false,
  );

  const s3 = await config.setSecrets({
    ...REF,
    secrets: [{ key: "DB_PASSWORD", source: { case: "value", value: marker } }],
  });
  const d3 = s3.change?.deployment;
  assert.equal(d3?.revision, 3n);
  clean("the SetSecrets answer", toJsonString(SetSecretsResponseSchema, s3));
  const listed = await config.listSecrets(REF);
  assert.deepEqual(
    listed.entries.map((e) => [e.key, e.source]),
    [["DB_PASSWORD", "value"]],
  );
  clean("ListSecrets", toJsonString(ListSecretsResponseSchema, listed));

  // Refused input changes nothing and does not echo the value.
  await expectCode(
    config.setSecrets({ ...REF, secrets: [{ key: "LOG_LEVEL", source: { case: "value", value: marker } }] }),
    Code.InvalidArgument,
    /secrets\[0\]\.key: "LOG_LEVEL" is a config value/,
  );
  await expectCode(
    config.setSecrets({ ...REF, secrets: [{ key: "BIN", source: { case: "value", value: `${marker}\u0000` } }] }),
    Code.InvalidArgument,
    /^secrets\[0\]\.value: must be text/,
  );
  await expectCode(
    config.setConfig({ ...REF, values: [{ key: "9LIVES", value: "x" }] }),
    Code.InvalidArgument,
    /values\[0\]\.key/,
  );

  // The agent of a region where the revision is desired gets its keys in the stream and the values on request.
  const eu = ctrl.client(ClusterService, await ctrl.agentToken("eu"));
  const state = await eu.getDesiredDeploymentState({ region: "eu", deploymentId: d3?.id ?? "" });
  assert.equal(state.state.case, "apply");
  const apply = state.state.case === "apply" ? state.state.value : undefined;
  assert.deepEqual(apply?.secrets?.keys, ["DB_PASSWORD"]);
  assert.match(apply?.secrets?.secretName ?? "", new RegExp(`^${d3?.k8sName}-secrets-[0-9a-f]{10}$`));
  assert.deepEqual(
    apply?.config?.values.map((v) => [v.name, v.value]),
    [["LOG_LEVEL", "debug"]],
  );
  const values = await eu.getSecretValues({ region: "eu", owner: { case: "deploymentId", value: d3?.id ?? "" } });
  assert.deepEqual(
    values.values.map((v) => [v.key, Buffer.from(v.value).toString()]),
    [["DB_PASSWORD", marker]],
  );
  // Another region's agent may not have them, nor may a user token call ClusterService.
  const us = ctrl.client(ClusterService, await ctrl.agentToken("us"));
  await expectCode(
    us.getSecretValues({ region: "us", owner: { case: "deploymentId", value: d3?.id ?? "" } }),
    Code.PermissionDenied,
  );
  await expectCode(
    us.getSecretValues({ region: "eu", owner: { case: "deploymentId", value: d3?.id ?? "" } }),
    Code.PermissionDenied,
  );

  // A release's Secrets: sealed the same way; the agent of a region where the release is desired
  // gets every sealed object of the version in one call, and nobody else does.
  const rel = await ctrl.client(ReleaseService, admin).applyRelease({
    ...REF,
    files: [
      {
        name: "s.yaml",
        content: `apiVersion: v1\nkind: Secret\nmetadata: {name: a}\nstringData: {token: ${marker}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata: {x: y}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: c}\ndata: {k: ${Buffer.from("v").toString("base64")}}`,
      },
    ],
  });
  clean("the ApplyRelease answer", JSON.stringify(rel.release?.objects.map((o) => o.name)));
  const releaseVersion = { releaseId: rel.release?.id ?? "", version: rel.release?.version ?? 0n };
  const relValues = await eu.getSecretValues({
    region: "eu",
    owner: { case: "releaseVersion", value: releaseVersion },
  });
  assert.deepEqual(
    relValues.releaseObjects.map((o) => o.values.map((v) => [v.key, Buffer.from(v.value).toString()])),
    [[["token", marker]], [["k", "v"]]],
    "both Secrets, in manifest order, and not the ConfigMap",
  );
  await expectCode(
    us.getSecretValues({ region: "us", owner: { case: "releaseVersion", value: releaseVersion } }),
    Code.PermissionDenied,
  );
  await expectCode(
    eu.getSecretValues({ region: "eu", owner: { case: "releaseVersion", value: { ...releaseVersion, version: 2n } } }),
    Code.FailedPrecondition,
  );

  // Undo: back to revision 2, which has its own configuration and no secret.
  await ctrl.client(RolloutService, admin).undo({ ...REF });
  const status = await ctrl.client(RolloutService, admin).getRolloutStatus(REF);
  const target = status.status?.regions[0]?.targetDeploymentId;
  assert.equal(target, c2.change?.deployment?.id, "undo targets the previous revision");
  const back = await eu.getDesiredDeploymentState({ region: "eu", deploymentId: target ?? "" });
  const backApply = back.state.case === "apply" ? back.state.value : undefined;
  assert.deepEqual(
    backApply?.config?.values.map((v) => [v.name, v.value]),
    [["LOG_LEVEL", "debug"]],
  );
  assert.equal(backApply?.secrets, undefined, "revision 2 had no secret");

  // Nothing at rest or in the logs holds the value.
  clean("the database", dump());
  clean("ctrl's log", logs.join("\n"));

  // Rotating the master key rewraps the data key; the values still open under the new key only.
  const newKey = randomBytes(32);
  const rotated = await rotateDataKeys(ctrl.store, new Keyring(newKey, [currentKey]));
  assert.deepEqual(rotated, { rewrapped: 1, total: 1 });
  const { secretValuesFor } = await import("../../../src/ctrl/domain/secret-values.js");
  const again = await secretValuesFor(ctrl.store.db, new Keyring(newKey), "eu", {
    type: "deployment",
    id: d3?.id ?? "",
  });
  assert.equal(again[0]?.value.toString(), marker);
  await assert.rejects(
    secretValuesFor(ctrl.store.db, new Keyring(currentKey), "eu", { type: "deployment", id: d3?.id ?? "" }),
    /not given/,
  );
}

let currentKey: Buffer;

function logSink(lines: string[]): pino.Logger {
  return pino(
    { level: "debug" },
    new Writable({ write: (chunk: Buffer, _e, cb) => (lines.push(chunk.toString()), cb()) }),
  );
}

describe("config and secrets (SQLite)", () => {
  const dir = tempDir();
  const logs: string[] = [];
  let ctrl: TestCtrl;
  before(async () => {
    currentKey = randomBytes(32);
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { keyring: new Keyring(currentKey), logger: logSink(logs) });
  });
  after(async () => {
    await ctrl?.close();
    dir.remove();
  });
  it("values reach only an agent of their region; nothing at rest, in answers or logs holds them", async () => {
    await scenario(ctrl, logs, () => {
      const files = readdirSync(dir.path).filter((f) => f.startsWith("ctrl.db"));
      return files.map((f) => readFileSync(join(dir.path, f)).toString("latin1")).join("\n");
    });
  });
});

describe("config and secrets (PostgreSQL)", () => {
  let server: TestPostgres;
  let ctrl: TestCtrl;
  let url: string;
  const logs: string[] = [];
  before(async () => {
    server = await startPostgres();
    url = await server.newDatabase();
    currentKey = randomBytes(32);
    ctrl = await startTestCtrl(url, { keyring: new Keyring(currentKey), logger: logSink(logs) });
  });
  after(async () => {
    await ctrl?.close();
    await server?.stop();
  });
  it("values reach only an agent of their region; nothing in a pg_dump, answers or logs holds them", async () => {
    await scenario(ctrl, logs, () => pgDump(url));
  });
});

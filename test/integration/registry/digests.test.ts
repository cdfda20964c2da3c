// Deploys pinned to digests, against the distribution project's real registry on this machine
// (test/support/registry.ts: htpasswd auth, TLS from a CA of its own; and the same registry
// taking Bearer tokens from a token service, the flow of GHCR and Docker Hub).
//
// The registry client: the right credential gets the tag's digest (HEAD with the index and
// manifest types, Docker-Content-Digest), a wrong one or none is 401 "unauthorized", a tag or a
// digest the registry lacks is "not_found". Through ctrl (in-process, its API over HTTP/2): a
// deploy records the digest the tag names now and its pods' payload runs image@digest; once the
// tag moves, a restart (a copy of the revision) and the revision's payload still run the old
// digest while a new deploy gets the new one; a wrong credential, an unreachable registry and a
// digest the registry does not have each refuse the deploy naming the registry or the field,
// with no revision recorded. The pull Secret: every desired revision names it with a version
// that follows the credentials (re-rendered on add and remove, none after the last), its
// content goes only to an agent of a region where the revision is desired, and no payload holds
// a password. Credentials (RegistryService): the password is in no API answer,
// audit event or database file, survives a master key rotation, and bad input names its field.
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { after, before, describe, it } from "node:test";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { create, fromBinary, toJson } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { Store } from "../../../src/ctrl/db/store.js";
import { rewrapRegistryKeys } from "../../../src/ctrl/domain/registries.js";
import { Keyring } from "../../../src/ctrl/secrets/keyring.js";
import { RegistryClient, RegistryError } from "../../../src/ctrl/images/registry-client.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  ListRegistriesResponseSchema,
  RegionService,
  RegistryService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { AuditService, ListAuditEventsResponseSchema } from "../../../src/gen/krane/ctrl/v1/audit_pb.js";
import {
  ApplyDeploymentSchema,
  ClusterService,
  type ApplyDeployment,
} from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { dockerConfigJson, PULL_SECRET_KEY, PULL_SECRET_NAME } from "../../../src/contracts/images.js";
import { RolloutService } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { startTestRegistry, type TestRegistry } from "../../support/registry.js";
import { KRANE_BIN } from "../ctrl/process.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "../ctrl/support.js";

const REF = { workspace: "acme", project: "shop", environment: "production" };

async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/** The real `krane` CLI (dist/) with `input` on its stdin. */
async function cli(
  args: string[],
  env: NodeJS.ProcessEnv,
  input: string,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [KRANE_BIN, ...args, "--retry-for", "0"], {
    env: { ...process.env, ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  child.stdin.end(input);
  const [status] = (await once(child, "exit")) as [number | null];
  return { status, stdout, stderr };
}

async function reason(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    if (e instanceof RegistryError) return `${e.reason} ${e.status ?? ""}`.trim();
    throw e;
  }
  return "resolved";
}

describe("image digests against a real registry", () => {
  const dir = tempDir("krane-registry-");
  let basic: TestRegistry;
  let token: TestRegistry;

  before(async () => {
    basic = await startTestRegistry({ dir: dir.path });
    token = await startTestRegistry({ dir: dir.path, auth: "token" });
  });
  after(async () => {
    await basic?.stop();
    await token?.stop();
    dir.remove();
  });

  for (const auth of ["htpasswd", "token"] as const) {
    it(`the client follows the ${auth} challenge: right, wrong and no credential, missing tag and digest`, async () => {
      const reg = auth === "htpasswd" ? basic : token;
      const user = reg.users[0]!;
      const d1 = await reg.pushTiny("team/app", "v1", `${auth}-1`);
      const client = new RegistryClient({ ca: [reg.caPem], privateHosts: ["127.0.0.1"] });
      try {
        assert.equal(await client.manifestDigest(reg.host, "team/app", "v1", user), d1);
        assert.equal(await client.manifestDigest(reg.host, "team/app", d1, user), d1);
        assert.equal(
          await reason(client.manifestDigest(reg.host, "team/app", "v1", { ...user, password: "wrong" })),
          "unauthorized 401",
        );
        assert.equal(await reason(client.manifestDigest(reg.host, "team/app", "v1", undefined)), "unauthorized 401");
        assert.equal(await reason(client.manifestDigest(reg.host, "team/app", "nope", user)), "not_found 404");
        assert.equal(
          await reason(client.manifestDigest(reg.host, "team/app", `sha256:${"0".repeat(64)}`, user)),
          "not_found 404",
        );
      } finally {
        await client.close();
      }
      // Without the registry's CA nothing is sent: TLS fails first.
      const untrusting = new RegistryClient({ privateHosts: ["127.0.0.1"] });
      try {
        assert.equal(await reason(untrusting.manifestDigest(reg.host, "team/app", "v1", user)), "unreachable");
      } finally {
        await untrusting.close();
      }
    });
  }

  describe("through ctrl", () => {
    let ctrl: TestCtrl;
    const db = tempDir("krane-registry-ctrl-");
    const masterKey = randomBytes(32);
    const keyring = new Keyring(masterKey);

    before(async () => {
      ctrl = await startTestCtrl(`${db.path}/ctrl.db`, {
        keyring,
        images: { localHosts: [], ca: [basic.caPem], privateHosts: ["127.0.0.1"] },
      });
      const admin = ctrl.adminToken;
      await ctrl.client(RegionService, admin).createRegion({ name: "eu" });
      await ctrl.client(RegionService, admin).createRegion({ name: "us" });
      await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: REF.workspace });
      await ctrl.client(ProjectService, admin).createProject({ workspace: REF.workspace, slug: REF.project });
      await ctrl
        .client(EnvironmentService, admin)
        .createEnvironment({ ...REF, slug: REF.environment, regions: [{ region: "eu", replicas: 1 }] });
    });
    after(async () => {
      await ctrl?.close();
      db.remove();
    });

    const revisions = async (): Promise<number> =>
      (await ctrl.client(DeploymentService, ctrl.adminToken).listDeployments({ workspace: REF.workspace })).deployments
        .length;

    /** The image of the revision's desired payload in region eu (what its pods run). */
    const payloadImage = async (deploymentId: string): Promise<string> => {
      for (let i = 0; i < 100; i++) {
        const row = await ctrl.store.db
          .selectFrom("desired_objects")
          .select("payload")
          .where("kind", "=", "deployment")
          .where("object_id", "=", deploymentId)
          .executeTakeFirst();
        if (row) return fromBinary(ApplyDeploymentSchema, row.payload).image;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`${deploymentId} never became desired`);
    };

    it("pins the tag's digest once; the tag moves: a restart still runs the old bytes, a new deploy the new", async () => {
      const deploys = ctrl.client(DeploymentService, ctrl.adminToken);
      const image = `${basic.host}/shop/web:stable`;
      const d1 = await basic.pushTiny("shop/web", "stable", "one");

      // No credential in the workspace: the registry asks for one, the deploy is refused.
      await expectCode(
        deploys.createDeployment({ ...REF, image }),
        Code.FailedPrecondition,
        new RegExp(`registry ${basic.host.replace(/\./g, "\\.")} refused access to shop/web:stable.*401`),
      );
      // A wrong one: refused the same way, nothing recorded.
      const registries = ctrl.client(RegistryService, ctrl.adminToken);
      const user = basic.users[0]!;
      const added = await registries.addRegistry({
        workspace: REF.workspace,
        host: basic.host,
        username: user.username,
        password: "wrong-password",
      });
      assert.equal(added.replaced, false);
      await expectCode(deploys.createDeployment({ ...REF, image }), Code.FailedPrecondition, /refused the credential/);
      assert.equal(await revisions(), 0);

      const right = await registries.addRegistry({
        workspace: REF.workspace,
        host: basic.host.toUpperCase(),
        username: user.username,
        password: user.password,
      });
      assert.equal(right.replaced, true, "the host is canonical: the same registry's credential is replaced");
      const first = (await deploys.createDeployment({ ...REF, image })).deployment!;
      assert.equal(first.image, image, "the image as given is kept");
      assert.equal(first.imageDigest, d1);
      assert.equal(await payloadImage(first.id), `${basic.host}/shop/web@${d1}`);

      // The tag moves.
      const d2 = await basic.pushTiny("shop/web", "stable", "two");
      assert.notEqual(d2, d1);
      const { deploymentId: restarted } = await ctrl.client(RolloutService, ctrl.adminToken).restart({ ...REF });
      const copy = (await deploys.getDeployment({ deploymentId: restarted })).deployment!;
      assert.equal(copy.imageDigest, d1, "a copy of the revision runs the bytes it ran");
      assert.equal(await payloadImage(first.id), `${basic.host}/shop/web@${d1}`);
      const second = (await deploys.createDeployment({ ...REF, image })).deployment!;
      assert.equal(second.imageDigest, d2);

      // By digest: taken as is (the registry is asked only that it has it).
      const byDigest = (await deploys.createDeployment({ ...REF, image: `${basic.host}/shop/web@${d1}` })).deployment!;
      assert.equal(byDigest.imageDigest, d1);
      const before = await revisions();
      await expectCode(
        deploys.createDeployment({ ...REF, image: `${basic.host}/shop/web@sha256:${"0".repeat(64)}` }),
        Code.InvalidArgument,
        /^.*image: registry .* has no image shop\/web@sha256:0+/,
      );
      await expectCode(
        deploys.createDeployment({ ...REF, image: `${basic.host}/shop/web:never-pushed` }),
        Code.InvalidArgument,
        /image: registry .* has no image shop\/web:never-pushed/,
      );
      const port = await closedPort();
      await expectCode(
        deploys.createDeployment({ ...REF, image: `127.0.0.1:${port}/shop/web:1` }),
        Code.FailedPrecondition,
        new RegExp(`registry 127\\.0\\.0\\.1:${port} could not be reached.*nothing was recorded`),
      );
      assert.equal(await revisions(), before, "a refused deploy records nothing");
    });

    /** Every desired deployment payload in region eu. */
    const desiredPayloads = async (): Promise<ApplyDeployment[]> =>
      (
        await ctrl.store.db
          .selectFrom("desired_objects")
          .select("payload")
          .where("kind", "=", "deployment")
          .where("region", "=", "eu")
          .execute()
      ).map((r) => fromBinary(ApplyDeploymentSchema, r.payload));

    it("the pull Secret: payloads name it with a version; its content only for an agent where one is desired", async () => {
      const user = basic.users[0]!;
      const payloads = await desiredPayloads();
      assert.ok(payloads.length > 0);
      const version = payloads[0]!.pullSecret?.version ?? "";
      assert.match(version, /^[0-9a-f]{16}$/);
      for (const p of payloads) assert.deepEqual(p.pullSecret, payloads[0]!.pullSecret);
      assert.equal(payloads[0]!.pullSecret?.secretName, PULL_SECRET_NAME);
      const id = payloads[0]!.deploymentId;

      // Only an agent of a region where the revision is desired gets the content.
      const eu = ctrl.client(ClusterService, await ctrl.agentToken("eu"));
      const got = await eu.getSecretValues({ region: "eu", owner: { case: "deploymentPullSecret", value: id } });
      assert.deepEqual(
        got.values.map((v) => [v.key, JSON.parse(Buffer.from(v.value).toString()) as unknown]),
        [
          [
            PULL_SECRET_KEY,
            JSON.parse(dockerConfigJson([{ host: basic.host, username: user.username, password: user.password }])),
          ],
        ],
      );
      const us = ctrl.client(ClusterService, await ctrl.agentToken("us"));
      await expectCode(
        us.getSecretValues({ region: "us", owner: { case: "deploymentPullSecret", value: id } }),
        Code.PermissionDenied,
      );
      await expectCode(
        us.getSecretValues({ region: "eu", owner: { case: "deploymentPullSecret", value: id } }),
        Code.PermissionDenied,
      );
      await expectCode(
        eu.getSecretValues({ region: "eu", owner: { case: "jobPullSecret", value: "job_nothere" } }),
        Code.PermissionDenied,
      );

      // A second registry: every desired revision is re-rendered with a new version and the
      // content holds both; removing it goes back to the first (the version names the rows).
      const registries = ctrl.client(RegistryService, ctrl.adminToken);
      await registries.addRegistry({
        workspace: REF.workspace,
        host: "ghcr.io",
        username: "bot",
        password: "gh-token",
      });
      const after = await desiredPayloads();
      const v2 = after[0]!.pullSecret?.version ?? "";
      assert.notEqual(v2, version);
      for (const p of after) assert.equal(p.pullSecret?.version, v2);
      const both = await eu.getSecretValues({ region: "eu", owner: { case: "deploymentPullSecret", value: id } });
      const auths = (JSON.parse(Buffer.from(both.values[0]!.value).toString()) as { auths: Record<string, unknown> })
        .auths;
      assert.deepEqual(Object.keys(auths), [basic.host, "ghcr.io"]);
      await registries.removeRegistry({ workspace: REF.workspace, host: "ghcr.io" });
      for (const p of await desiredPayloads()) assert.equal(p.pullSecret?.version, version);

      // Nothing streamed or stored as desired state holds a password.
      const rows = [
        ...(await ctrl.store.db.selectFrom("outbox").select("payload").execute()),
        ...(await ctrl.store.db.selectFrom("desired_objects").select("payload").execute()),
      ];
      for (const r of rows)
        for (const secret of [user.password, "gh-token"])
          assert.ok(!Buffer.from(r.payload).includes(Buffer.from(secret)), "a payload holds a password");
    });

    it("credentials: listed without the password, audited without it, sealed in the database; bad input named", async () => {
      const registries = ctrl.client(RegistryService, ctrl.adminToken);
      const user = basic.users[0]!;
      const listed = await registries.listRegistries({ workspace: REF.workspace });
      assert.deepEqual(
        listed.registries.map((r) => [r.host, r.username]),
        [[basic.host, user.username]],
      );
      assert.ok(!JSON.stringify(toJson(ListRegistriesResponseSchema, listed)).includes(user.password));
      const { events } = await ctrl
        .client(AuditService, ctrl.adminToken)
        .listAuditEvents({ filter: { workspace: REF.workspace, method: "RegistryService/" }, pageSize: 100 });
      // The wrong and the right password, and the second registry of the pull Secret's test.
      assert.equal(events.filter((e) => e.method === "RegistryService/AddRegistry").length, 3);
      const auditText = JSON.stringify(
        toJson(ListAuditEventsResponseSchema, create(ListAuditEventsResponseSchema, { events })),
      );
      assert.match(auditText, /registries/, "the change is in the diff");
      assert.ok(
        !auditText.includes(user.password) && !auditText.includes("wrong-password") && !auditText.includes("gh-token"),
        "no password in the audit log",
      );
      await ctrl.close();
      for (const f of readdirSync(db.path)) {
        const bytes = readFileSync(join(db.path, f));
        assert.ok(!bytes.includes(Buffer.from(user.password)), `${f} holds the password in plain text`);
      }
      // `krane ctrl rotate-key`: the credentials' keys move to the new master key; a ctrl given
      // only the new key still opens them (the deploy below resolves with the credential).
      const newKey = randomBytes(32);
      const store = await Store.open({ url: `${db.path}/ctrl.db` });
      try {
        assert.deepEqual(await rewrapRegistryKeys(store, new Keyring(newKey, [masterKey])), { rewrapped: 1, total: 1 });
      } finally {
        await store.close();
      }
      ctrl = await startTestCtrl(`${db.path}/ctrl.db`, {
        keyring: new Keyring(newKey),
        images: { localHosts: [], ca: [basic.caPem], privateHosts: ["127.0.0.1"] },
      });
      const pinned = (
        await ctrl
          .client(DeploymentService, ctrl.adminToken)
          .createDeployment({ ...REF, image: `${basic.host}/shop/web:stable` })
      ).deployment!;
      assert.match(pinned.imageDigest, /^sha256:/);
      const again = ctrl.client(RegistryService, ctrl.adminToken);

      for (const [req, field] of [
        [{ host: "https://ghcr.io", username: "u", password: "p" }, "host"],
        [{ host: "ghcr.io/acme", username: "u", password: "p" }, "host"],
        [{ host: "ghcr.io", username: "a:b", password: "p" }, "username"],
        [{ host: "ghcr.io", username: "", password: "p" }, "username"],
        [{ host: "ghcr.io", username: "u", password: "" }, "password"],
        [{ host: "ghcr.io", username: "u", password: "line\nbreak" }, "password"],
      ] as const)
        await expectCode(
          again.addRegistry({ workspace: REF.workspace, ...req }),
          Code.InvalidArgument,
          new RegExp(`^.*${field}: `),
        );

      // The CLI reads the password from stdin (one trailing line break dropped) and prints none.
      const env = { KRANE_CTRL_URL: ctrl.url, KRANE_TOKEN: ctrl.adminToken, KRANE_WORKSPACE: REF.workspace };
      const add = await cli(
        ["registry", "add", basic.host, "--username", user.username, "--password-stdin"],
        env,
        `${user.password}\n`,
      );
      assert.equal(add.status, 0, add.stderr);
      assert.equal(add.stdout, `replaced ${basic.host}\n`);
      const list = await cli(["registry", "list"], env, "");
      assert.equal(list.status, 0, list.stderr);
      assert.match(list.stdout, new RegExp(`${basic.host.replace(/\./g, "\\.")}[\\s│]+${user.username}\\s`));
      assert.ok(!(add.stdout + add.stderr + list.stdout + list.stderr).includes(user.password));
      // What the CLI stored is the password without the line break: the deploy still resolves.
      const viaCli = (
        await ctrl
          .client(DeploymentService, ctrl.adminToken)
          .createDeployment({ ...REF, image: `${basic.host}/shop/web:stable` })
      ).deployment!;
      assert.equal(viaCli.imageDigest, pinned.imageDigest);
      const removed = await cli(["registry", "remove", basic.host], env, "");
      assert.equal(removed.status, 0, removed.stderr);
      await expectCode(again.removeRegistry({ workspace: REF.workspace, host: basic.host }), Code.NotFound);
      assert.deepEqual((await again.listRegistries({ workspace: REF.workspace })).registries, []);
      // The last credential gone: the payloads name no pull Secret (the agents delete it).
      const left = await desiredPayloads();
      assert.ok(left.length > 0);
      for (const p of left) assert.equal(p.pullSecret, undefined);
    });
  });
});

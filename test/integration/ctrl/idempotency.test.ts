// Idempotency keys on a real ctrl over HTTP/2, on SQLite and on PostgreSQL: a repeated create
// (the client retrying after a lost answer) gets the first answer and makes no second revision,
// also when the repeats race each other; a different request under the same key is refused; keys
// are per caller and method; a delete repeated after it succeeded answers as the first time; a
// new token's answer is replayed to its caller but stored only sealed; reads and refused calls
// record nothing; a claim whose answer was lost (a crash between commit and answer) is answered
// from the state the change left where the method can be, else reported applied, never applied
// again; and
// forgotten keys (past retention) no longer match.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import {
  ApiTokenService,
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { RolloutService } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { IDEMPOTENCY_KEY_HEADER, IDEMPOTENCY_REPLAYED_HEADER } from "../../../src/contracts/headers.js";
import { pruneIdempotencyKeys } from "../../../src/ctrl/server/idempotency.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const target = { workspace: "acme", project: "web", environment: "prod" };

function keyed(
  key: string,
  replayed?: { value: string | null },
): { headers: Record<string, string>; onHeader?: (h: Headers) => void } {
  return {
    headers: { [IDEMPOTENCY_KEY_HEADER]: key },
    onHeader: replayed ? (h) => (replayed.value = h.get(IDEMPOTENCY_REPLAYED_HEADER)) : undefined,
  };
}

function suite(name: string, database: () => Promise<string>): void {
  describe(`idempotency keys on ${name}`, () => {
    let ctrl: TestCtrl;
    const revisions = async (): Promise<number> =>
      (await ctrl.client(DeploymentService, ctrl.adminToken).listDeployments({ ...target, pageSize: 1000 })).deployments
        .length;
    const keysStored = async (): Promise<number> =>
      Number(
        (
          await ctrl.store.db
            .selectFrom("idempotency_keys")
            .select((eb) => eb.fn.countAll().as("n"))
            .executeTakeFirstOrThrow()
        ).n,
      );

    before(async () => {
      ctrl = await startTestCtrl(await database(), { rolloutSweepIntervalMs: 0 });
      const t = ctrl.adminToken;
      await ctrl.client(RegionService, t).createRegion({ name: "eu" });
      await ctrl.client(WorkspaceService, t).createWorkspace({ slug: "acme" });
      await ctrl.client(ProjectService, t).createProject({ workspace: "acme", slug: "web" });
      await ctrl
        .client(EnvironmentService, t)
        .createEnvironment({ ...target, slug: "prod", regions: [{ region: "eu", replicas: 1 }] });
    });
    after(async () => {
      await ctrl?.close();
    });

    it("a repeated create gets the first answer, marked replayed, and makes no second revision", async () => {
      const deployments = ctrl.client(DeploymentService, ctrl.adminToken);
      const before = await revisions();
      const first = { value: null as string | null };
      const a = await deployments.createDeployment(
        { ...target, image: "registry.example.com/web:1" },
        keyed("deploy-1", first),
      );
      const again = { value: null as string | null };
      const b = await deployments.createDeployment(
        { ...target, image: "registry.example.com/web:1" },
        keyed("deploy-1", again),
      );
      assert.equal(first.value, null);
      assert.equal(again.value, "true");
      assert.equal(b.deployment?.id, a.deployment?.id);
      assert.equal(b.deployment?.revision, a.deployment?.revision);
      assert.equal(await revisions(), before + 1);
      // Another key is another request.
      await deployments.createDeployment({ ...target, image: "registry.example.com/web:1" }, keyed("deploy-2"));
      assert.equal(await revisions(), before + 2);
    });

    it("a different request under a used key is refused; the key is per method and per caller", async () => {
      const deployments = ctrl.client(DeploymentService, ctrl.adminToken);
      await deployments.createDeployment({ ...target, image: "registry.example.com/web:3" }, keyed("shared"));
      const before = await revisions();
      await expectCode(
        deployments.createDeployment({ ...target, image: "registry.example.com/web:4" }, keyed("shared")),
        Code.InvalidArgument,
        /^Idempotency-Key "shared" was used for a different CreateDeployment request/,
      );
      assert.equal(await revisions(), before, "the refused request changed nothing");
      // The same key on another method, and from another caller, is a key of its own.
      await ctrl
        .client(RolloutService, ctrl.adminToken)
        .scale({ ...target, region: "eu", replicas: 2 }, keyed("shared"));
      const other = (await ctrl.client(ApiTokenService, ctrl.adminToken).createApiToken({ name: "ci" })).token;
      const theirs = await ctrl
        .client(DeploymentService, other)
        .createDeployment({ ...target, image: "registry.example.com/web:4" }, keyed("shared"));
      assert.equal(await revisions(), before + 1);
      assert.equal(theirs.deployment?.image, "registry.example.com/web:4");
    });

    it("repeats racing each other make one revision and all get its answer", async () => {
      const deployments = ctrl.client(DeploymentService, ctrl.adminToken);
      const before = await revisions();
      const answers = await Promise.all(
        Array.from({ length: 12 }, () =>
          deployments.createDeployment({ ...target, image: "registry.example.com/web:race" }, keyed("race")),
        ),
      );
      assert.equal(new Set(answers.map((a) => a.deployment?.id)).size, 1);
      assert.equal(await revisions(), before + 1);
    });

    it("a delete repeated after it succeeded answers as the first time, not not_found", async () => {
      const deployments = ctrl.client(DeploymentService, ctrl.adminToken);
      const { deployment } = await deployments.createDeployment({ ...target, image: "registry.example.com/web:del" });
      const id = deployment?.id ?? "";
      await deployments.deleteDeployment({ deploymentId: id }, keyed("del-1"));
      const again = { value: null as string | null };
      await deployments.deleteDeployment({ deploymentId: id }, keyed("del-1", again));
      assert.equal(again.value, "true");
      await expectCode(deployments.deleteDeployment({ deploymentId: id }, keyed("del-2")), Code.NotFound);
    });

    it("a new token's answer is replayed to its caller, and stored only sealed", async () => {
      const tokens = ctrl.client(ApiTokenService, ctrl.adminToken);
      const a = await tokens.createApiToken({ name: "deploy-bot" }, keyed("tok-1"));
      const b = await tokens.createApiToken({ name: "deploy-bot" }, keyed("tok-1"));
      assert.equal(b.token, a.token);
      const rows = await ctrl.store.db
        .selectFrom("idempotency_keys")
        .select(["answer"])
        .where("idempotency_key", "=", "tok-1")
        .execute();
      assert.equal(rows.length, 1);
      const stored = Buffer.from(rows[0]?.answer ?? new Uint8Array());
      assert.ok(stored.length > 0);
      assert.equal(stored.indexOf(Buffer.from(a.token)), -1, "the token is not in the database");
      assert.equal(stored.indexOf(Buffer.from(a.token.slice(11, 30))), -1, "nor a part of it");
    });

    it("reads and refused calls record nothing; a corrected request may reuse the key", async () => {
      const count = await keysStored();
      await ctrl.client(WorkspaceService, ctrl.adminToken).listWorkspaces({}, keyed("read-1"));
      await ctrl.client(DeploymentService, ctrl.adminToken).listDeployments(target, keyed("read-1"));
      await expectCode(
        ctrl.client(DeploymentService, ctrl.adminToken).createDeployment({ ...target, image: "" }, keyed("fix-me")),
        Code.InvalidArgument,
        /^image: /,
      );
      await expectCode(
        ctrl.client(WorkspaceService, ctrl.adminToken).createWorkspace({ slug: "acme" }, keyed("exists")),
        Code.AlreadyExists,
      );
      assert.equal(await keysStored(), count);
      const ok = await ctrl
        .client(DeploymentService, ctrl.adminToken)
        .createDeployment({ ...target, image: "registry.example.com/web:fixed" }, keyed("fix-me"));
      assert.equal(ok.deployment?.image, "registry.example.com/web:fixed");
      assert.equal(await keysStored(), count + 1);
    });

    it("a malformed key is invalid_argument naming the header", async () => {
      await expectCode(
        ctrl.client(WorkspaceService, ctrl.adminToken).createWorkspace({ slug: "x" }, keyed("has space")),
        Code.InvalidArgument,
        /^Idempotency-Key header: /,
      );
      await expectCode(
        ctrl.client(WorkspaceService, ctrl.adminToken).createWorkspace({ slug: "x" }, keyed("k".repeat(256))),
        Code.InvalidArgument,
        /^Idempotency-Key header: /,
      );
    });

    it("a claim whose answer was lost is answered from the state the change left, never applied again", async () => {
      const t = ctrl.adminToken;
      const deployments = ctrl.client(DeploymentService, t);
      const a = await deployments.createDeployment(
        { ...target, image: "registry.example.com/web:lost" },
        keyed("lost-1"),
      );
      const b = await deployments.createDeployment(
        { ...target, image: "registry.example.com/web:lost" },
        keyed("lost-2"),
      );
      await ctrl
        .client(EnvironmentService, t)
        .updateEnvironment({ ...target, regions: [{ region: "eu", replicas: 2 }] }, keyed("lost-3"));
      await ctrl.client(ApiTokenService, t).createApiToken({ name: "lost" }, keyed("lost-4"));
      // The new revision's id was kept with the claim, in the change's own transaction.
      const subjects = await ctrl.store.db
        .selectFrom("idempotency_keys")
        .select(["idempotency_key", "subject"])
        .where("idempotency_key", "in", ["lost-1", "lost-2"])
        .orderBy("idempotency_key")
        .execute();
      assert.deepEqual(
        subjects.map((r) => r.subject),
        [a.deployment?.id, b.deployment?.id],
      );
      const before = await revisions();
      // As a crash between the commit and the answer leaves them: no answer, by this process
      // (ended here) or by another (polled for, then given up on). The answer is recorded before
      // it is sent, so the client never had one.
      const lose = (key: string, owner?: string): Promise<unknown> =>
        ctrl.store.db
          .updateTable("idempotency_keys")
          .set({ answer: null, answered_at: null, ...(owner ? { owner } : {}) })
          .where("idempotency_key", "=", key)
          .execute();
      await lose("lost-1");
      await lose("lost-2", "a-ctrl-that-died");
      await lose("lost-3");
      await lose("lost-4");
      const replayed = { value: null as string | null };
      const again1 = await deployments.createDeployment(
        { ...target, image: "registry.example.com/web:lost" },
        keyed("lost-1", replayed),
      );
      assert.equal(again1.deployment?.id, a.deployment?.id, "answered with the revision the first attempt made");
      assert.equal(again1.deployment?.revision, a.deployment?.revision);
      assert.equal(replayed.value, "true");
      const again2 = await deployments.createDeployment(
        { ...target, image: "registry.example.com/web:lost" },
        keyed("lost-2"),
      );
      assert.equal(again2.deployment?.id, b.deployment?.id);
      // That answer is now the recorded one: a further repeat gets it as is.
      const recorded = await ctrl.store.db
        .selectFrom("idempotency_keys")
        .select("answer")
        .where("idempotency_key", "=", "lost-1")
        .executeTakeFirstOrThrow();
      assert.notEqual(recorded.answer, null);
      assert.equal(
        (await deployments.createDeployment({ ...target, image: "registry.example.com/web:lost" }, keyed("lost-1")))
          .deployment?.id,
        a.deployment?.id,
      );
      const env = await ctrl
        .client(EnvironmentService, t)
        .updateEnvironment({ ...target, regions: [{ region: "eu", replicas: 2 }] }, keyed("lost-3"));
      assert.deepEqual(
        env.environment?.regions.map((r) => [r.region, r.replicas]),
        [["eu", 2]],
      );
      // A new token's secret is stored nowhere, so its answer cannot be rebuilt: applied, said so.
      await expectCode(
        ctrl.client(ApiTokenService, t).createApiToken({ name: "lost" }, keyed("lost-4")),
        Code.AlreadyExists,
        /was applied at .*, but its answer was lost/,
      );
      assert.equal(await revisions(), before, "nothing applied twice");
    });

    it("keys past their retention are forgotten", async () => {
      const deployments = ctrl.client(DeploymentService, ctrl.adminToken);
      await deployments.createDeployment({ ...target, image: "registry.example.com/web:old" }, keyed("old"));
      const before = await revisions();
      assert.ok((await pruneIdempotencyKeys(ctrl.store.db, Date.now() + 1)) > 0);
      assert.equal(await keysStored(), 0);
      await deployments.createDeployment({ ...target, image: "registry.example.com/web:old" }, keyed("old"));
      assert.equal(await revisions(), before + 1);
    });
  });
}

const dir = tempDir();
let postgres: TestPostgres | undefined;
after(async () => {
  await postgres?.stop();
  dir.remove();
});

suite("SQLite", async () => join(dir.path, "keys.db"));
suite("PostgreSQL", async () => {
  postgres ??= await startPostgres();
  return postgres.newDatabase();
});

// User API tokens (create, list, revoke; the last one cannot go) and cluster token revocation,
// through the real HTTP/2 server on SQLite and on PostgreSQL. Revocation must take effect at
// once in the serving process: the auth cache (5 s) would otherwise keep a revoked token alive,
// so every "refused at once" below fails without the invalidation.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it, type TestContext } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { ApiTokenService, RegionService, WorkspaceService } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { ClusterService } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { generateToken, hashToken, revokeApiToken } from "../../../src/ctrl/domain/tokens.js";
import type { CtrlConfig } from "../../../src/ctrl/server/server.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { watchDeployments } from "./region-watch.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>(
    (_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)),
  );
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polls `call` until it fails with `code`; returns how long that took. */
async function refusedWithin(call: () => Promise<unknown>, code: Code, ms: number): Promise<number> {
  const started = Date.now();
  for (;;) {
    try {
      await call();
    } catch (err) {
      assert.equal(Code[ConnectError.from(err).code], Code[code]);
      return Date.now() - started;
    }
    if (Date.now() - started > ms) throw new Error(`still accepted after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface Backend {
  /** A fresh, empty database. */
  newUrl(): Promise<string>;
}

function suite(backend: Backend): void {
  /** A ctrl on a fresh database, closed when the test ends. */
  const start = async (t: TestContext, extra: Partial<CtrlConfig> = {}): Promise<TestCtrl> => {
    const url = await backend.newUrl();
    const ctrl = await startTestCtrl(url, extra);
    t.after(() => ctrl.close());
    return ctrl;
  };

  it("creates, lists and revokes user tokens; a revoked token is refused at once", async (t) => {
    const ctrl = await start(t);
    const admin = ctrl.client(ApiTokenService, ctrl.adminToken);
    const created = await admin.createApiToken({ name: "ci-deploy" });
    assert.match(created.token, /^krane_user_[A-Za-z0-9_-]{43}$/);
    assert.match(created.apiToken?.id ?? "", /^tok_/);
    assert.equal(created.apiToken?.name, "ci-deploy");
    assert.equal(created.apiToken?.lastUsedAtUnixMs, 0n);
    const id = created.apiToken?.id ?? "";
    // Only the digest is stored.
    const stored = await ctrl.store.db
      .selectFrom("api_tokens")
      .select("token_hash")
      .where("id", "=", id)
      .executeTakeFirstOrThrow();
    assert.equal(stored.token_hash, hashToken(created.token));

    // The new token works, knows itself, and its use is recorded.
    const ci = ctrl.client(ApiTokenService, created.token);
    await ctrl.client(WorkspaceService, created.token).listWorkspaces({});
    const listed = await ci.listApiTokens({});
    assert.deepEqual(
      listed.apiTokens.map((t) => [t.name, t.current]),
      [
        ["admin", false],
        ["ci-deploy", true],
      ],
    );
    const mine = listed.apiTokens.find((t) => t.id === id);
    assert.ok(mine && mine.lastUsedAtUnixMs > 0n && mine.createdAtUnixMs > 0n);
    // The admin call above was recorded too.
    assert.ok((listed.apiTokens.find((t) => t.name === "admin")?.lastUsedAtUnixMs ?? 0n) > 0n);

    const revoked = await admin.revokeApiToken({ tokenId: id });
    assert.equal(revoked.apiToken?.name, "ci-deploy");
    // Its lookup was cached a moment ago; it is refused anyway.
    await expectCode(ctrl.client(WorkspaceService, created.token).listWorkspaces({}), Code.Unauthenticated);
    assert.deepEqual(
      (await admin.listApiTokens({})).apiTokens.map((t) => t.name),
      ["admin"],
    );
    await expectCode(admin.revokeApiToken({ tokenId: id }), Code.NotFound);

    // A token may revoke itself while it is not the last one.
    const self = await admin.createApiToken({ name: "short-lived" });
    await ctrl.client(ApiTokenService, self.token).revokeApiToken({ tokenId: self.apiToken?.id ?? "" });
    await expectCode(ctrl.client(ApiTokenService, self.token).listApiTokens({}), Code.Unauthenticated);
  });

  it("a revoked admin token stays revoked when ctrl starts again with it in its configuration", async (t) => {
    const url = await backend.newUrl();
    const configured = generateToken("user");
    const bootstrapAdmin = { token: configured, file: "/nonexistent/admin-token" };
    const first = await startTestCtrl(url, { bootstrapAdmin });
    const tokens = first.client(ApiTokenService, configured);
    const listed = await tokens.listApiTokens({});
    const mine = listed.apiTokens.find((x) => x.current);
    assert.equal(mine?.name, "admin");
    await tokens.revokeApiToken({ tokenId: mine?.id ?? "" });
    await first.close();

    const second = await startTestCtrl(url, { bootstrapAdmin });
    t.after(() => second.close());
    await expectCode(second.client(WorkspaceService, configured).listWorkspaces({}), Code.Unauthenticated);
    // Only the test's own admin tokens (one per start) are left.
    assert.deepEqual(
      (await second.client(ApiTokenService, second.adminToken).listApiTokens({})).apiTokens.map((x) => x.name),
      ["admin", "admin"],
    );
  });

  it("records a token's use at most once per interval", async (t) => {
    const ctrl = await start(t, { auth: { usageIntervalMs: 60_000 } });
    const admin = ctrl.client(ApiTokenService, ctrl.adminToken);
    const { token, apiToken } = await admin.createApiToken({ name: "usage" });
    const usedAt = async (): Promise<bigint> =>
      (await admin.listApiTokens({})).apiTokens.find((t) => t.id === apiToken?.id)?.lastUsedAtUnixMs ?? -1n;
    assert.equal(await usedAt(), 0n);
    await ctrl.client(WorkspaceService, token).listWorkspaces({});
    const first = await usedAt();
    assert.ok(first > 0n);
    await new Promise((r) => setTimeout(r, 20));
    await ctrl.client(WorkspaceService, token).listWorkspaces({});
    assert.equal(await usedAt(), first, "a second use within the interval is not written");
  });

  it("refuses bad names and ids, duplicate names, and revoking the last token (even when two revocations race)", async (t) => {
    const ctrl = await start(t);
    const admin = ctrl.client(ApiTokenService, ctrl.adminToken);
    await expectCode(admin.createApiToken({ name: "" }), Code.InvalidArgument, /^name: is required/);
    await expectCode(admin.createApiToken({ name: "CI_Token" }), Code.InvalidArgument, /^name: /);
    await expectCode(admin.createApiToken({ name: "a".repeat(41) }), Code.InvalidArgument, /^name: /);
    await expectCode(admin.createApiToken({ name: "admin" }), Code.AlreadyExists, /api token "admin"/);
    await expectCode(admin.revokeApiToken({ tokenId: "" }), Code.InvalidArgument, /^token_id: /);
    await expectCode(admin.revokeApiToken({ tokenId: "dep_abc" }), Code.InvalidArgument, /^token_id: /);
    await expectCode(admin.revokeApiToken({ tokenId: "tok_doesnotexist" }), Code.NotFound);
    assert.equal((await admin.listApiTokens({})).apiTokens.length, 1, "refused requests created nothing");

    // Only admin: it cannot revoke itself.
    const [only] = (await admin.listApiTokens({})).apiTokens;
    await expectCode(
      admin.revokeApiToken({ tokenId: only?.id ?? "" }),
      Code.FailedPrecondition,
      /last installation token/,
    );
    await admin.listApiTokens({});

    // Two tokens, both revoked at the same moment: exactly one revocation may succeed.
    const other = await admin.createApiToken({ name: "other" });
    const results = await Promise.allSettled([
      revokeApiToken(ctrl.store, only?.id ?? ""),
      revokeApiToken(ctrl.store, other.apiToken?.id ?? ""),
    ]);
    assert.deepEqual(results.map((r) => r.status).sort(), ["fulfilled", "rejected"]);
    const refused = results.find((r) => r.status === "rejected");
    assert.match(String(refused?.status === "rejected" ? refused.reason : ""), /last installation token/);
    assert.equal(
      await ctrl.store.db
        .selectFrom("api_tokens")
        .select("id")
        .execute()
        .then((r) => r.length),
      1,
    );
  });

  it("revoking a cluster token refuses its calls and ends its open streams at once; the cluster stays; a new token works", async (t) => {
    const ctrl = await start(t);
    const regions = ctrl.client(RegionService, ctrl.adminToken);
    await regions.createRegion({ name: "eu" });
    const leaked = await ctrl.agentToken("eu");
    const neighbour = await ctrl.agentToken("eu", "b");
    await ctrl.client(ClusterService, leaked).heartbeat({ region: "eu", agentId: "agent-a" });
    const stream = watchDeployments(ctrl, leaked, "eu");
    const other = watchDeployments(ctrl, neighbour, "eu");
    await stream.synced();
    await other.synced();

    const { cluster } = await regions.revokeClusterToken({ region: "eu" });
    assert.equal(cluster?.name, "default");
    assert.equal(cluster?.tokenRevoked, true);
    await expectCode(ctrl.client(ClusterService, leaked).heartbeat({ region: "eu" }), Code.Unauthenticated);
    const end = await within(stream.ended, 3000, "the revoked token's stream ending");
    assert.equal(end === null ? "clean end" : Code[end.code], Code[Code.Unauthenticated]);
    // Another cluster of the region is untouched.
    assert.deepEqual(await other.quiet(200), []);
    await ctrl.client(ClusterService, neighbour).heartbeat({ region: "eu" });

    const listed = (await regions.listClusters({ region: "eu" })).clusters.find((c) => c.name === "default");
    assert.equal(listed?.tokenRevoked, true);
    assert.equal(listed?.agentId, "agent-a", "the cluster's record is kept");
    const stored = await ctrl.store.db
      .selectFrom("clusters")
      .select("token_hash")
      .where("id", "=", listed?.id ?? "")
      .executeTakeFirstOrThrow();
    assert.notEqual(stored.token_hash, hashToken(leaked));

    // Idempotent, and undone only by a new token.
    await regions.revokeClusterToken({ region: "eu", clusterName: "default" });
    const fresh = await regions.createClusterToken({ region: "eu" });
    assert.equal(fresh.cluster?.tokenRevoked, false);
    await ctrl.client(ClusterService, fresh.token).heartbeat({ region: "eu" });
    await expectCode(ctrl.client(ClusterService, leaked).heartbeat({ region: "eu" }), Code.Unauthenticated);

    await expectCode(regions.revokeClusterToken({ region: "eu", clusterName: "nope" }), Code.NotFound);
    await expectCode(regions.revokeClusterToken({ region: "mars" }), Code.NotFound);
    await expectCode(
      regions.revokeClusterToken({ region: "eu", clusterName: "Bad Name" }),
      Code.InvalidArgument,
      /^cluster_name: /,
    );
    await expectCode(regions.revokeClusterToken({ region: "" }), Code.InvalidArgument, /^region: /);
    other.close();
  });

  it("rotating a cluster token ends the old token's streams, not the new one's", async (t) => {
    const ctrl = await start(t);
    const regions = ctrl.client(RegionService, ctrl.adminToken);
    const first = await regions.createClusterToken({ region: "eu" });
    const old = watchDeployments(ctrl, first.token, "eu");
    await old.synced();
    const second = await regions.createClusterToken({ region: "eu" });
    const current = watchDeployments(ctrl, second.token, "eu");
    await current.synced();
    const end = await within(old.ended, 3000, "the old token's stream ending");
    assert.equal(end === null ? "clean end" : Code[end.code], Code[Code.Unauthenticated]);
    await regions.createRegion({ name: "us" }); // any later call: the new stream is still open
    assert.deepEqual(await current.quiet(200), []);
    await ctrl.client(ClusterService, second.token).heartbeat({ region: "eu" });
    current.close();
    assert.equal(Code[(await current.ended)?.code ?? Code.Unknown], Code[Code.Canceled]);
  });
}

describe("API and cluster tokens (SQLite)", () => {
  const dir = tempDir();
  let n = 0;
  after(() => dir.remove());
  suite({ newUrl: async () => join(dir.path, `ctrl-${++n}.db`) });
});

describe("API and cluster tokens (PostgreSQL)", () => {
  let pg: TestPostgres;
  before(async () => {
    pg = await startPostgres();
  });
  after(async () => {
    await pg.stop();
  });
  suite({ newUrl: () => pg.newDatabase() });

  it("another ctrl replica refuses a revoked token within its cache lifetime and ends its streams at its next re-check", async () => {
    const url = await pg.newDatabase();
    const auth = { cacheTtlMs: 500, streamRecheckMs: 300 };
    const a = await startTestCtrl(url, { auth });
    const b = await startTestCtrl(url, { auth });
    try {
      const regions = a.client(RegionService, a.adminToken);
      await regions.createRegion({ name: "eu" });
      const { token } = await regions.createClusterToken({ region: "eu" });
      const onB = watchDeployments(b, token, "eu");
      await onB.synced();
      await b.client(ClusterService, token).heartbeat({ region: "eu" });
      const user = await a.client(ApiTokenService, a.adminToken).createApiToken({ name: "ci" });
      await b.client(WorkspaceService, user.token).listWorkspaces({});

      await regions.revokeClusterToken({ region: "eu" });
      await a.client(ApiTokenService, a.adminToken).revokeApiToken({ tokenId: user.apiToken?.id ?? "" });
      const end = await within(onB.ended, 3000, "B ending the revoked token's stream");
      assert.equal(end === null ? "clean end" : Code[end.code], Code[Code.Unauthenticated]);
      assert.ok(
        (await refusedWithin(
          () => b.client(ClusterService, token).heartbeat({ region: "eu" }),
          Code.Unauthenticated,
          2000,
        )) <= 2000,
      );
      assert.ok(
        (await refusedWithin(
          () => b.client(WorkspaceService, user.token).listWorkspaces({}),
          Code.Unauthenticated,
          2000,
        )) <= 2000,
      );
    } finally {
      await b.close();
      await a.close();
    }
  });
});

// API keys end to end, real parts only: ctrl (SQLite, HTTP/2) issues keys through ApiKeyService,
// the agent (its RBAC ServiceAccount) carries the environment's key digests into the routing
// document, and krane's own sentinel, two pods of it on the real local cluster, checks each request
// against the document without calling ctrl. A created key is let through at both; a missing key,
// another workspace's key and an expired key are refused (401); a key past its own limit gets 429;
// a revoked key is refused at both pods (the time from the revoke to the refusal at each is
// measured and reported, not asserted). A workspace's token reaches no key of another workspace
// (not_found), and ctrl's table holds digests only.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import { Pool } from "undici";
import { Agent } from "../../../src/agent/agent.js";
import { hashApiKey } from "../../../src/contracts/api-keys.js";
import {
  ApiTokenService,
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { InstanceStatus } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { PolicyService } from "../../../src/gen/krane/ctrl/v1/exposure_pb.js";
import { ApiKeyService } from "../../../src/gen/krane/ctrl/v1/keys_pb.js";
import type { KubeClient } from "../../../src/kube/client.js";
import { applySentinelRbac } from "../../../src/sentinel/rbac.js";
import { eventually, useCluster } from "../../support/cluster.js";
import { adminKube, routingAgent } from "../agent/support.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "../ctrl/support.js";
import { hit, runningSentinel, type Hit } from "./support.js";

const handle = useCluster({ standins: true });
const REGION = "local";
const REF = { workspace: "acme", project: "shop", environment: "production" };
const OTHER = { workspace: "globex", project: "shop", environment: "production" };
const dir = tempDir("krane-api-keys-");
let ctrl: TestCtrl;
let agent: Agent;
let kube: KubeClient;
let pools: Pool[] = [];

const withKey = (pool: Pool, key: string): Promise<Hit> => hit(pool, "/", { "x-api-key": key });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Until every sentinel pod lets `key` through (the version carrying it is served everywhere). */
async function acceptedEverywhere(key: string): Promise<void> {
  for (const [i, pool] of pools.entries())
    await eventually(
      `sentinel ${i} to accept the key`,
      async () => ((await withKey(pool, key)).answer?.pod ? true : undefined),
      120_000,
    );
}

describe("API keys issued by ctrl, checked by the environment's sentinels", () => {
  before(
    async () => {
      const cluster = await handle.ready();
      await applySentinelRbac(cluster.kubeConfig());
      kube = adminKube(cluster);
      ctrl = await startTestCtrl(join(dir.path, "ctrl.db"));
      const t = ctrl.adminToken;
      await ctrl.client(RegionService, t).createRegion({ name: REGION });
      for (const ref of [REF, OTHER]) {
        await ctrl.client(WorkspaceService, t).createWorkspace({ slug: ref.workspace });
        await ctrl.client(ProjectService, t).createProject({ workspace: ref.workspace, slug: ref.project });
      }
      const { environment } = await ctrl.client(EnvironmentService, t).createEnvironment({
        ...REF,
        slug: REF.environment,
        regions: [{ region: REGION, replicas: 1 }],
        sentinel: { image: "", replicas: 2 },
      });
      // The other workspace's environment runs nothing: only its keys matter here.
      await ctrl.client(EnvironmentService, t).createEnvironment({ ...OTHER, slug: OTHER.environment, regions: [] });
      agent = await routingAgent(cluster, ctrl, REGION, { sentinelObserveIntervalMs: 500 });
      await agent.start();
      const { deployment } = await ctrl
        .client(DeploymentService, t)
        .createDeployment({ ...REF, image: "registry.example.com/shop:1", port: 8080 });
      await eventually(
        "a running instance",
        async () => {
          const s = await ctrl.client(StatusService, t).getEnvironmentStatus(REF);
          const d = s.deployments.find((x) => x.deployment?.id === deployment?.id);
          return (d?.regions[0]?.instances ?? []).some((i) => i.status === InstanceStatus.RUNNING) ? true : undefined;
        },
        180_000,
      );
      const envId = environment?.id ?? "";
      const first = await runningSentinel(cluster, kube, envId);
      const second = await runningSentinel(cluster, kube, envId, first.name);
      pools = [first, second].map((s) => new Pool(s.url, { connections: 2, keepAliveTimeout: 10_000 }));
    },
    { timeout: 15 * 60_000 },
  );

  after(async () => {
    for (const p of pools) await p.close();
    await agent?.stop();
    await ctrl?.close();
    kube?.close();
    dir.remove();
  });

  test(
    "accepted, refused when missing, unknown, another workspace's, expired, revoked; a key's own limit",
    { timeout: 600_000 },
    async (t) => {
      const admin = ctrl.adminToken;
      const keys = ctrl.client(ApiKeyService, admin);
      await ctrl.client(PolicyService, admin).addPolicy({
        ...REF,
        policy: { name: "keys", kind: { case: "apiKey", value: { header: "", forwardHeader: "" } } },
      });
      const app = await keys.createApiKey({ ...REF, name: "mobile app", metadata: { plan: "pro" } });
      const limited = await keys.createApiKey({ ...REF, name: "trial", rateLimit: 3n, rateWindowSeconds: 3600n });
      const expiresAt = Date.now() + 20_000;
      const shortLived = await keys.createApiKey({ ...REF, name: "demo", expiresAtUnixMs: BigInt(expiresAt) });
      const foreign = await keys.createApiKey({ ...OTHER, name: "globex app" });
      assert.match(app.secret, /^krane_[A-Za-z0-9_-]{43}$/);
      assert.ok(shortLived.routingVersion > app.routingVersion, "each create is a new routing version");

      await acceptedEverywhere(shortLived.secret);
      await acceptedEverywhere(app.secret);
      for (const pool of pools) {
        const none = await hit(pool, "/");
        assert.deepEqual([none.status, none.cause, none.answer?.pod], [401, "policy-apikey", undefined]);
        const other = await withKey(pool, foreign.secret);
        assert.deepEqual([other.status, other.cause], [401, "policy-apikey"], "another workspace's key");
        const made = await withKey(pool, `krane_${"A".repeat(43)}`);
        assert.equal(made.status, 401, "a key ctrl never made");
      }

      // The key's own limit, counted at each sentinel: 3 pass, the 4th gets 429.
      const at = pools[0] as Pool;
      const passed = [];
      for (let i = 0; i < 3; i++) passed.push((await withKey(at, limited.secret)).status);
      assert.deepEqual(passed, [200, 200, 200]);
      const over = await withKey(at, limited.secret);
      assert.deepEqual([over.status, over.cause], [429, "policy-ratelimit"]);
      assert.ok(Number(over.headers["retry-after"]) >= 1, "Retry-After");

      // The expired key: refused once its time has passed, without a new routing version.
      await sleep(Math.max(0, expiresAt - Date.now()) + 100);
      for (const pool of pools) assert.equal((await withKey(pool, shortLived.secret)).status, 401, "an expired key");

      // Revoked: each sentinel refuses it once it serves the version the revoke made.
      const start = Date.now();
      const revoked = await keys.revokeApiKey({ ...REF, keyId: app.key?.id ?? "" });
      assert.ok(revoked.key && revoked.key.revokedAtUnixMs > 0n);
      const took: number[] = [];
      for (const [i, pool] of pools.entries()) {
        await eventually(
          `sentinel ${i} to refuse the revoked key`,
          async () => ((await withKey(pool, app.secret)).status === 401 ? true : undefined),
          60_000,
        );
        took.push(Date.now() - start);
      }
      t.diagnostic(`revoked key refused at the two sentinels after ${took.join(" ms and ")} ms`);
      assert.equal((await withKey(pools[1] as Pool, limited.secret)).status, 200, "the other keys still pass");

      // ctrl's table holds the digests only; the list never shows a key.
      const rows = await ctrl.store.db.selectFrom("api_keys").selectAll().execute();
      const text = JSON.stringify(rows);
      for (const k of [app, limited, shortLived, foreign]) {
        assert.ok(!text.includes(k.secret), "no key in plain text");
        assert.ok(rows.some((r) => r.digest === hashApiKey(k.secret)));
      }
      const listed = await keys.listApiKeys(REF);
      assert.deepEqual(
        listed.keys.map((k) => [k.name, k.revokedAtUnixMs > 0n]),
        [
          ["demo", false],
          ["trial", false],
          ["mobile app", true],
        ],
      );
    },
  );

  test("a workspace's token reaches no key of another workspace", { timeout: 120_000 }, async () => {
    const admin = ctrl.adminToken;
    const { token } = await ctrl
      .client(ApiTokenService, admin)
      .createApiToken({ name: "globex-ci", workspace: "globex" });
    const mine = await ctrl.client(ApiKeyService, admin).createApiKey({ ...REF, name: "acme only" });
    const theirs = ctrl.client(ApiKeyService, token);
    await expectCode(theirs.listApiKeys(REF), Code.NotFound);
    await expectCode(theirs.createApiKey({ ...REF, name: "sneaky" }), Code.NotFound);
    await expectCode(theirs.revokeApiKey({ ...REF, keyId: mine.key?.id ?? "" }), Code.NotFound);
    // Through its own environment: another environment's key is not there either.
    await expectCode(theirs.revokeApiKey({ ...OTHER, keyId: mine.key?.id ?? "" }), Code.NotFound);
    const still = await ctrl.client(ApiKeyService, admin).listApiKeys(REF);
    assert.ok(still.keys.some((k) => k.id === mine.key?.id && k.revokedAtUnixMs === 0n));
    assert.ok(!still.keys.some((k) => k.name === "sneaky"));
  });
});

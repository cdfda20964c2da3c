// CreateDeployment with inherit on a real ctrl over HTTP/2, on SQLite and on PostgreSQL: a deploy
// that gives only the image keeps every other setting of the current revision; a keyed repeat is
// answered with the first revision even after another deploy, never merged again; deploys racing
// each other on one environment each carry over what the one before wrote (none is lost); a
// `rollout restart` racing a deploy copies it or comes before it, never undoes it.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
  type Deployment,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { RolloutService } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { IDEMPOTENCY_KEY_HEADER } from "../../../src/contracts/headers.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const target = { workspace: "acme", project: "web", environment: "prod" };

const envOf = (d: Deployment | undefined): string[] => (d?.env ?? []).map((e) => `${e.name}=${e.value}`);

function suite(name: string, database: () => Promise<string>): void {
  describe(`deploys that carry settings over, on ${name}`, () => {
    let ctrl: TestCtrl;
    const deployments = () => ctrl.client(DeploymentService, ctrl.adminToken);
    // The highest revision (the list is by creation time, which racing deploys may not follow).
    const newest = async (): Promise<Deployment | undefined> =>
      (await deployments().listDeployments({ ...target, pageSize: 1000 })).deployments.reduce<Deployment | undefined>(
        (a, d) => (a === undefined || d.revision > a.revision ? d : a),
        undefined,
      );
    const count = async (): Promise<number> =>
      (await deployments().listDeployments({ ...target, pageSize: 1000 })).deployments.length;

    before(async () => {
      ctrl = await startTestCtrl(await database(), { rolloutSweepIntervalMs: 0 });
      const t = ctrl.adminToken;
      await ctrl.client(RegionService, t).createRegion({ name: "eu" });
      await ctrl.client(WorkspaceService, t).createWorkspace({ slug: "acme" });
      await ctrl.client(ProjectService, t).createProject({ workspace: "acme", slug: "web" });
      await ctrl
        .client(EnvironmentService, t)
        .createEnvironment({ ...target, slug: "prod", regions: [{ region: "eu", replicas: 3 }] });
      await deployments().createDeployment({
        ...target,
        image: "registry.example.com/web:1",
        command: ["node"],
        args: ["server.js"],
        port: 3000,
        protocol: "h2c",
        env: [{ name: "GREETING", value: "hi" }],
        cpuMillicores: 500n,
        memoryMib: 512n,
        healthCheck: { path: "/healthz", intervalSeconds: 5 },
        buildId: "build-1",
      });
    });
    after(async () => {
      await ctrl?.close();
    });

    it("a deploy giving only the image keeps the rest; without inherit, the defaults", async () => {
      const { deployment: d } = await deployments().createDeployment({
        ...target,
        image: "registry.example.com/web:2",
        inherit: true,
      });
      assert.equal(d?.image, "registry.example.com/web:2");
      assert.deepEqual(
        [d?.command, d?.args, d?.port, d?.protocol, envOf(d), d?.cpuMillicores, d?.memoryMib, d?.buildId],
        [["node"], ["server.js"], 3000, "h2c", ["GREETING=hi"], 500n, 512n, ""],
      );
      assert.equal(d?.healthCheck?.path, "/healthz");
      assert.equal(d?.healthCheck?.intervalSeconds, 5);

      const { deployment: fresh } = await deployments().createDeployment({
        ...target,
        image: "registry.example.com/web:3",
      });
      assert.deepEqual(
        [fresh?.port, fresh?.protocol, envOf(fresh), fresh?.cpuMillicores, fresh?.memoryMib, fresh?.healthCheck],
        [8080, "http1", [], 250n, 256n, undefined],
      );
      // Restore the settings for the tests below.
      await deployments().createDeployment({
        ...target,
        image: "registry.example.com/web:4",
        env: [{ name: "GREETING", value: "hi" }],
      });
    });

    it("a keyed repeat is answered with its first revision, even after another deploy", async () => {
      const keyed = { headers: { [IDEMPOTENCY_KEY_HEADER]: "ship-a" } };
      const ask = { ...target, image: "registry.example.com/web:a", inherit: true, env: [{ name: "A", value: "1" }] };
      const first = (await deployments().createDeployment(ask, keyed)).deployment;
      const other = (
        await deployments().createDeployment({
          ...target,
          image: "registry.example.com/web:b",
          inherit: true,
          envUnset: ["GREETING"],
        })
      ).deployment;
      const before = await count();
      const again = (await deployments().createDeployment(ask, keyed)).deployment;
      assert.equal(again?.id, first?.id);
      assert.deepEqual(envOf(again), ["GREETING=hi", "A=1"], "the first answer, not a merge over the newer revision");
      assert.equal(await count(), before, "nothing applied twice");
      assert.equal((await newest())?.id, other?.id);
      assert.deepEqual(envOf(other), ["A=1"]);
    });

    it("deploys racing on one environment each carry over what the one before wrote", async () => {
      const n = 8;
      const made = await Promise.all(
        Array.from({ length: n }, (_, i) =>
          deployments().createDeployment({
            ...target,
            image: `registry.example.com/web:race-${i}`,
            inherit: true,
            env: [{ name: `RACE_${i}`, value: String(i) }],
          }),
        ),
      );
      const revisions = made.map((m) => Number(m.deployment?.revision)).sort((a, b) => a - b);
      assert.equal(new Set(revisions).size, n, "distinct revisions");
      const last = await newest();
      assert.equal(Number(last?.revision), revisions[n - 1]);
      // Each revision has the variables of every revision before it: the newest has all of them.
      assert.deepEqual(
        envOf(last)
          .filter((e) => e.startsWith("RACE_"))
          .sort(),
        Array.from({ length: n }, (_, i) => `RACE_${i}=${i}`).sort(),
      );
      assert.ok(envOf(last).includes("A=1"), "and what was there before the race");
    });

    it("a restart racing a deploy never undoes it: the newest revision has the deploy's image", async () => {
      const rollouts = ctrl.client(RolloutService, ctrl.adminToken);
      for (let i = 0; i < 20; i++) {
        const image = `registry.example.com/web:restart-race-${i}`;
        await Promise.all([
          rollouts.restart(target),
          deployments().createDeployment({ ...target, image, inherit: true }),
        ]);
        assert.equal((await newest())?.image, image, `round ${i}`);
      }
    });
  });
}

const dir = tempDir();
let postgres: TestPostgres | undefined;
after(async () => {
  await postgres?.stop();
  dir.remove();
});

suite("SQLite", async () => join(dir.path, "inherit.db"));
suite("PostgreSQL", async () => {
  postgres ??= await startPostgres();
  return postgres.newDatabase();
});

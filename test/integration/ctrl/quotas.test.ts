// Quotas through the real HTTP/2 server on SQLite and PostgreSQL: GetQuota shows each limit
// beside the workspace's use (its environments at their maximum); every guarded change —
// replicas (UpdateEnvironment and Scale), a deploy's resources, an autoscaling max, a new environment, a preview, a krane.yaml
// apply — that would pass a quota is refused with resource_exhausted naming the quota and the
// amounts, and leaves nothing behind (no row, no stream version); a limit set below use is kept
// and shown as over, the workspace may shrink but not grow; concurrent creations admit exactly
// what fits.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { clone, fromBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { ProjectFileService } from "../../../src/gen/krane/ctrl/v1/apply_pb.js";
import { ApplyDeploymentSchema } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { PreviewService } from "../../../src/gen/krane/ctrl/v1/preview_pb.js";
import { EnvironmentFileSchema } from "../../../src/gen/krane/ctrl/v1/project_file_pb.js";
import { QuotaService } from "../../../src/gen/krane/ctrl/v1/quota_pb.js";
import { RolloutService } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const REF = { workspace: "acme", project: "shop", environment: "prod" };

/** Everything a guarded change writes: rows it adds or changes, and every stream's version. */
async function fingerprint(ctrl: TestCtrl): Promise<string> {
  const db = ctrl.store.db;
  const count = async (t: "environments" | "deployments" | "previews" | "desired_objects") =>
    Number(
      (
        await db
          .selectFrom(t)
          .select((eb) => eb.fn.countAll<number>().as("n"))
          .executeTakeFirstOrThrow()
      ).n,
    );
  return JSON.stringify({
    environments: await count("environments"),
    deployments: await count("deployments"),
    previews: await count("previews"),
    desired: await count("desired_objects"),
    regions: await db
      .selectFrom("environment_regions")
      .select(["environment_id", "region", "replicas", "autoscale"])
      .orderBy("environment_id")
      .orderBy("region")
      .execute(),
    autoscale: await db.selectFrom("environments").select(["id", "autoscale"]).orderBy("id").execute(),
    versions: await db.selectFrom("stream_versions").selectAll().orderBy("region").orderBy("kind").execute(),
  });
}

function suite(newDatabase: () => Promise<string>): void {
  let ctrl: TestCtrl;
  const quotas = () => ctrl.client(QuotaService, ctrl.adminToken);
  const envs = () => ctrl.client(EnvironmentService, ctrl.adminToken);
  const deploys = () => ctrl.client(DeploymentService, ctrl.adminToken);
  const table = async () =>
    Object.fromEntries(
      (await quotas().getQuota({ workspace: "acme" })).quotas.map((q) => [
        q.name,
        [q.used === undefined ? null : Number(q.used), q.limit === undefined ? null : Number(q.limit), q.own],
      ]),
    );
  /** Refused with resource_exhausted matching `message`, and nothing of it written. */
  const refused = async (p: () => Promise<unknown>, message: RegExp) => {
    const before = await fingerprint(ctrl);
    await expectCode(p(), Code.ResourceExhausted, message);
    assert.equal(await fingerprint(ctrl), before, "nothing of a refused change is kept");
  };

  before(async () => {
    ctrl = await startTestCtrl(await newDatabase());
    const admin = ctrl.adminToken;
    await ctrl.client(RegionService, admin).createRegion({ name: "eu" });
    await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: "acme" });
    await ctrl.client(ProjectService, admin).createProject({ workspace: "acme", slug: "shop" });
    await envs().createEnvironment({
      workspace: "acme",
      project: "shop",
      slug: "prod",
      regions: [{ region: "eu", replicas: 2 }],
      sentinel: { image: "" },
    });
    await deploys().createDeployment({
      ...REF,
      image: "registry.example.com/web:1",
      port: 8080,
      cpuMillicores: 500n,
      memoryMib: 256n,
    });
  });
  after(() => ctrl.close());

  it("shows use at the environments' maximum against the defaults (unlimited, previews 10)", async () => {
    assert.deepEqual(await table(), {
      cpu: [1000, null, false],
      memory: [512, null, false],
      instances: [2, null, false],
      environments: [1, null, false],
      previews: [0, 10, false],
      build_minutes: [0, null, false],
    });
  });

  it("refuses bad values naming the field, and sets only the quotas named", async () => {
    await expectCode(
      quotas().setQuota({ workspace: "acme", values: { gpus: "1" } }),
      Code.InvalidArgument,
      /values\.gpus/,
    );
    await expectCode(
      quotas().setQuota({ workspace: "acme", values: { memory: "4GB" } }),
      Code.InvalidArgument,
      /values\.memory: "4GB" is not a memory amount/,
    );
    await expectCode(quotas().setQuota({ workspace: "acme", values: {} }), Code.InvalidArgument, /values: /);
    await quotas().setQuota({
      workspace: "acme",
      values: { cpu: "1500m", memory: "1Gi", instances: "3", build_minutes: "600" },
    });
    const t = await table();
    assert.deepEqual(t.cpu, [1000, 1500, true]);
    assert.deepEqual(t.memory, [512, 1024, true]);
    assert.deepEqual(t.instances, [2, 3, true]);
    assert.deepEqual(t.environments, [1, null, false]);
    assert.deepEqual(t.build_minutes, [0, 600, true], "no build ran: none used");
  });

  it("carries the quota in every desired revision's payload, rendered again when it is set", async () => {
    // What the agent backs with the namespace's ResourceQuota (src/agent/deployments/quota.ts).
    const carried = async () =>
      (
        await ctrl.store.db.selectFrom("desired_objects").select("payload").where("kind", "=", "deployment").execute()
      ).map((r) => {
        const q = fromBinary(ApplyDeploymentSchema, r.payload).workspaceQuota;
        return [q?.cpuMillicores, q?.memoryMib, q?.instances];
      });
    // The rollout driver makes the revision desired in the background.
    for (let i = 0; i < 200 && (await carried()).length === 0; i++) await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(await carried(), [[1500n, 1024n, 3n]]);
    await quotas().setQuota({ workspace: "acme", values: { cpu: "2", memory: "unlimited" } });
    assert.deepEqual(await carried(), [[2000n, undefined, 3n]]);
    await quotas().setQuota({ workspace: "acme", values: { cpu: "1500m", memory: "1Gi" } });
    assert.deepEqual(await carried(), [[1500n, 1024n, 3n]]);
  });

  it("refuses each guarded change past a quota, naming it and the amounts, and keeps nothing of it", async () => {
    // Replicas: 4 × 500m.
    await refused(
      () => envs().updateEnvironment({ ...REF, regions: [{ region: "eu", replicas: 4 }] }),
      /workspace "acme" would pass its cpu quota: it uses 1000m, this change asks 1000m more, the limit is 1500m/,
    );
    await refused(
      () => ctrl.client(RolloutService, ctrl.adminToken).scale({ ...REF, region: "eu", replicas: 4 }),
      /cpu quota: it uses 1000m, this change asks 1000m more, the limit is 1500m/,
    );
    // A deploy's resources: 2 × 1000m.
    await refused(
      () =>
        deploys().createDeployment({
          ...REF,
          image: "registry.example.com/web:2",
          inherit: true,
          cpuMillicores: 1000n,
        }),
      /cpu quota: it uses 1000m, this change asks 1000m more, the limit is 1500m/,
    );
    // Memory: 2 × 768 MiB.
    await refused(
      () => deploys().createDeployment({ ...REF, image: "registry.example.com/web:2", inherit: true, memoryMib: 768n }),
      /memory quota: it uses 512 MiB, this change asks 1024 MiB more, the limit is 1024 MiB/,
    );
    // An autoscaling max counts whatever runs now: up to 5 × 500m.
    await refused(
      () => envs().updateEnvironment({ ...REF, autoscale: { minReplicas: 1, maxReplicas: 5, concurrencyTarget: 10 } }),
      /cpu quota: it uses 1000m, this change asks 1500m more, the limit is 1500m/,
    );
    // A new environment's instances (nothing deployed yet: no CPU).
    await refused(
      () =>
        envs().createEnvironment({
          workspace: "acme",
          project: "shop",
          slug: "staging",
          regions: [{ region: "eu", replicas: 2 }],
        }),
      /instances quota: it uses 2, this change asks 2 more, the limit is 3/,
    );
    // krane.yaml: the whole apply.
    const files = ctrl.client(ProjectFileService, ctrl.adminToken);
    const plan = await files.planEnvironment({ ...REF, desired: {} });
    assert.ok(plan.current);
    const desired = clone(EnvironmentFileSchema, plan.current);
    const eu = desired.regions.eu;
    assert.ok(eu);
    eu.replicas = 3;
    desired.config.LEVEL = "debug";
    await quotas().setQuota({ workspace: "acme", values: { instances: "2" } });
    await refused(
      () => files.applyEnvironment({ ...REF, desired, plannedFrom: plan.current }),
      /instances quota: it uses 2, this change asks 1 more, the limit is 2/,
    );
    // Environments, and previews.
    await quotas().setQuota({ workspace: "acme", values: { instances: "3", environments: "1", previews: "0" } });
    await refused(
      () => envs().createEnvironment({ workspace: "acme", project: "shop", slug: "staging" }),
      /environments quota: it uses 1, this change asks 1 more, the limit is 1/,
    );
    await refused(
      () =>
        ctrl.client(PreviewService, ctrl.adminToken).createPreview({
          workspace: "acme",
          project: "shop",
          baseEnvironment: "prod",
          name: "pr-1",
          image: "registry.example.com/web:pr-1",
        }),
      /previews quota: it uses 0, this change asks 1 more, the limit is 0/,
    );
    // What fits goes through: a preview (one instance of 500m) with room for it.
    await quotas().setQuota({ workspace: "acme", values: { previews: "1" } });
    await ctrl.client(PreviewService, ctrl.adminToken).createPreview({
      workspace: "acme",
      project: "shop",
      baseEnvironment: "prod",
      name: "pr-1",
      image: "registry.example.com/web:pr-1",
    });
    const t = await table();
    assert.deepEqual(
      [t.cpu, t.instances, t.previews],
      [
        [1500, 1500, true],
        [3, 3, true],
        [1, 1, true],
      ],
    );
    await ctrl
      .client(PreviewService, ctrl.adminToken)
      .deletePreview({ workspace: "acme", project: "shop", name: "pr-1" });
  });

  it("keeps a limit below use, shown as over: the workspace may shrink, never grow", async () => {
    await quotas().setQuota({ workspace: "acme", values: { cpu: "500m" } });
    assert.deepEqual((await table()).cpu, [1000, 500, true]);
    await envs().updateEnvironment({ ...REF, regions: [{ region: "eu", replicas: 1 }] });
    assert.deepEqual((await table()).cpu, [500, 500, true]);
    await refused(
      () => envs().updateEnvironment({ ...REF, regions: [{ region: "eu", replicas: 2 }] }),
      /cpu quota: it uses 500m, this change asks 500m more, the limit is 500m/,
    );
    await quotas().setQuota({
      workspace: "acme",
      values: { cpu: "default", memory: "unlimited", instances: "unlimited" },
    });
    await envs().updateEnvironment({ ...REF, regions: [{ region: "eu", replicas: 2 }] });
    assert.deepEqual((await table()).cpu, [1000, null, false]);
  });

  it("admits exactly what fits of concurrent creations", async () => {
    // Room for exactly two more environments of one replica each.
    await quotas().setQuota({ workspace: "acme", values: { instances: "4", environments: "unlimited" } });
    const results = await Promise.allSettled(
      [1, 2, 3, 4, 5].map((n) =>
        envs().createEnvironment({
          workspace: "acme",
          project: "shop",
          slug: `burst-${n}`,
          regions: [{ region: "eu", replicas: 1 }],
        }),
      ),
    );
    const ok = results.filter((r) => r.status === "fulfilled").length;
    const exhausted = results.filter(
      (r) => r.status === "rejected" && ConnectError.from(r.reason).code === Code.ResourceExhausted,
    ).length;
    assert.deepEqual([ok, exhausted], [2, 3], JSON.stringify(results.map((r) => r.status)));
    assert.deepEqual((await table()).instances, [4, 4, true]);
  });
}

describe("quotas (SQLite)", () => {
  const dir = tempDir();
  after(() => dir.remove());
  suite(async () => join(dir.path, "ctrl.db"));
});

describe("quotas (PostgreSQL)", () => {
  let pg: TestPostgres;
  before(async () => {
    pg = await startPostgres();
  });
  after(async () => {
    await pg.stop();
  });
  suite(() => pg.newDatabase());
});

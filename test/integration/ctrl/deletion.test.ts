// Deleting environments, projects and workspaces through the real ctrl (SQLite, HTTP/2), generic
// over the kind registry: every kind's objects of the deleted environments leave each region's
// desired state with their Delete messages; the deletion finishes when each region's agent has
// confirmed (reports "delete"), or when an operator forces past a region whose agent is gone;
// then no row is left but the audit log's. Refused confirmations, a wrong slug, and changes to
// an environment being deleted change nothing.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Code } from "@connectrpc/connect";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { ClusterService } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { ConfigService } from "../../../src/gen/krane/ctrl/v1/config_pb.js";
import { JobService } from "../../../src/gen/krane/ctrl/v1/job_pb.js";
import { ReleaseService } from "../../../src/gen/krane/ctrl/v1/release_pb.js";
import { Keyring } from "../../../src/ctrl/secrets/keyring.js";
import { DAY_MS, logRetention, setLogRetention, storeLines, type StoredLine } from "../../../src/ctrl/logs/history.js";
import { eventually } from "../../support/cluster.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const WS = "acme";
const PROJECT = "shop";

describe("deletion", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      keyring: new Keyring(randomBytes(32)),
      deletionSweepIntervalMs: 200,
    });
  });
  after(async () => {
    await ctrl?.close();
    dir.remove();
  });

  async function setup(): Promise<string[]> {
    const admin = ctrl.adminToken;
    for (const r of ["eu", "us"]) {
      await ctrl.client(RegionService, admin).createRegion({ name: r });
      await ctrl.agentToken(r); // a registered cluster: its agent is waited for
    }
    await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: WS });
    await ctrl.client(ProjectService, admin).createProject({ workspace: WS, slug: PROJECT });
    const ids: string[] = [];
    for (const env of ["production", "staging"]) {
      const ref = { workspace: WS, project: PROJECT, environment: env };
      const { environment } = await ctrl.client(EnvironmentService, admin).createEnvironment({
        workspace: WS,
        project: PROJECT,
        slug: env,
        regions: [
          { region: "eu", replicas: 1 },
          { region: "us", replicas: 1 },
        ],
        sentinel: { image: "registry.example.com/sentinel:1", replicas: 1, cpuMillicores: 0n, memoryMib: 0n },
      });
      ids.push(environment?.id ?? "");
      await ctrl.client(DeploymentService, admin).createDeployment({ ...ref, image: "registry.example.com/shop:1" });
      await ctrl
        .client(ConfigService, admin)
        .setSecrets({ ...ref, secrets: [{ key: "TOKEN", source: { case: "value", value: "s3cret" } }] });
      await ctrl.client(ReleaseService, admin).applyRelease({
        ...ref,
        files: [
          { name: "cm.yaml", content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {a: b}\n" },
        ],
      });
      await ctrl.client(JobService, admin).putJob({ ...ref, spec: { name: "report", schedule: "@hourly" } as never });
    }
    return ids;
  }

  async function pending(region: string): Promise<{ kind: string; object_id: string }[]> {
    return ctrl.store.db
      .selectFrom("pending_deletions")
      .select(["kind", "object_id"])
      .where("region", "=", region)
      .execute();
  }

  /** What an agent sends once it has deleted an object, for every kind. */
  async function confirm(region: string): Promise<number> {
    const agent = ctrl.client(ClusterService, await ctrl.agentToken(region, "default"));
    const rows = await pending(region);
    for (const r of rows) {
      if (r.kind === "deployment")
        await agent.reportDeploymentStatus({
          region,
          change: { case: "delete", value: { deploymentId: r.object_id, k8sName: "" } },
        });
      else if (r.kind === "sentinel")
        await agent.reportSentinelStatus({
          region,
          change: { case: "delete", value: { sentinelId: r.object_id, k8sName: "" } },
        });
      else if (r.kind === "release")
        await agent.reportReleaseStatus({ region, change: { case: "delete", value: { releaseId: r.object_id } } });
      else if (r.kind === "job")
        await agent.reportJobStatus({ region, change: { case: "delete", value: { jobId: r.object_id, k8sName: "" } } });
      else throw new Error(`a kind this test does not know: ${r.kind}`);
    }
    return rows.length;
  }

  async function rowsOf(envIds: string[]): Promise<Record<string, number>> {
    const db = ctrl.store.db;
    const count = async (
      table:
        | "deployments"
        | "sentinels"
        | "releases"
        | "jobs"
        | "environment_secrets"
        | "data_keys"
        | "desired_objects"
        | "rollouts"
        | "environments",
    ): Promise<number> => {
      const col = table === "environments" ? "id" : "environment_id";
      const r = await db
        .selectFrom(table)
        .select(db.fn.countAll<number>().as("n"))
        .where(col, "in", envIds)
        .executeTakeFirstOrThrow();
      return Number(r.n);
    };
    const out: Record<string, number> = {};
    for (const t of [
      "deployments",
      "sentinels",
      "releases",
      "jobs",
      "environment_secrets",
      "data_keys",
      "desired_objects",
      "rollouts",
      "environments",
    ] as const)
      out[t] = await count(t);
    return out;
  }

  it("a project with two environments in two regions: deletes streamed for every kind, done when agents confirm or an operator forces", async () => {
    const envIds = await setup();
    const admin = ctrl.adminToken;
    const projects = ctrl.client(ProjectService, admin);
    // Kept log lines of both environments, the workspace's retention, and another workspace's line.
    const wsId = (
      await ctrl.store.db.selectFrom("workspaces").select("id").where("slug", "=", WS).executeTakeFirstOrThrow()
    ).id;
    const logLine = (environmentId: string, workspaceId: string, ns: number): StoredLine => ({
      environmentId,
      workspaceId,
      region: "eu",
      instance: "web-1",
      ns: BigInt(ns),
      deploymentId: "",
      revision: 1,
      stream: "",
      line: "kept",
    });
    await storeLines(ctrl.store.db, [
      ...envIds.map((id, i) => logLine(id, wsId, i + 1)),
      logLine("env_other", "ws_other", 1),
    ]);
    await setLogRetention(ctrl.store.db, wsId, DAY_MS, Date.now());
    const logsOf = async (): Promise<string[]> =>
      (await ctrl.store.db.selectFrom("log_lines").select("workspace_id").execute()).map((r) => r.workspace_id).sort();
    // Desired in both regions before: deployments, sentinels, releases, jobs.
    const kinds = await ctrl.store.db
      .selectFrom("desired_objects")
      .select(["kind", "region"])
      .where("environment_id", "in", envIds)
      .execute();
    assert.deepEqual(new Set(kinds.map((k) => k.kind)), new Set(["deployment", "sentinel", "release", "job"]));

    await expectCode(
      projects.deleteProject({ workspace: WS, project: PROJECT, confirm: "other", forceRegions: [] }),
      Code.InvalidArgument,
      /confirm: must repeat the project's slug "shop"/,
    );
    assert.equal((await rowsOf(envIds)).desired_objects, kinds.length, "a refused delete changes nothing");

    const { deletion } = await projects.deleteProject({
      workspace: WS,
      project: PROJECT,
      confirm: PROJECT,
      forceRegions: [],
    });
    assert.equal(deletion?.done, false);
    assert.deepEqual(
      deletion?.regions.map((r) => r.region),
      ["eu", "us"],
    );
    for (const r of deletion?.regions ?? []) {
      // Two revisions of each environment are desired (the secret made the second), one sentinel,
      // release and job per environment: exactly what was desired there.
      const expected = ["deployment", "job", "release", "sentinel"].map((k) => [
        k,
        kinds.filter((x) => x.kind === k && x.region === r.region).length,
      ]);
      assert.deepEqual(
        r.kinds.map((k) => [k.kind, k.count]),
        expected,
      );
      assert.equal(expected[0]?.[1], 4);
    }
    assert.equal((await rowsOf(envIds)).desired_objects, 0, "every object left every region's desired state at once");
    // Each delete went to the outbox with its kind's Delete message.
    const deletes = await ctrl.store.db
      .selectFrom("outbox")
      .select(["kind", "region"])
      .where("op", "=", "delete")
      .execute();
    assert.equal(deletes.length, kinds.length);

    // The environment is frozen meanwhile.
    await expectCode(
      ctrl
        .client(DeploymentService, admin)
        .createDeployment({ workspace: WS, project: PROJECT, environment: "production", image: "x:1" }),
      Code.FailedPrecondition,
      /being deleted/,
    );

    // eu's agent confirms everything; us's agent is gone.
    assert.equal(await confirm("eu"), 10);
    const mid = await projects.deleteProject({ workspace: WS, project: PROJECT, confirm: PROJECT, forceRegions: [] });
    assert.deepEqual(
      mid.deletion?.regions.map((r) => [r.region, r.remaining]),
      [["us", 10]],
    );
    assert.equal((await rowsOf(envIds)).environments, 2, "nothing purged while a region is pending");

    const forced = await projects.deleteProject({
      workspace: WS,
      project: PROJECT,
      confirm: PROJECT,
      forceRegions: ["us"],
    });
    assert.equal(forced.deletion?.done, true);
    assert.deepEqual(await rowsOf(envIds), {
      deployments: 0,
      sentinels: 0,
      releases: 0,
      jobs: 0,
      environment_secrets: 0,
      data_keys: 0,
      desired_objects: 0,
      rollouts: 0,
      environments: 0,
    });
    await expectCode(projects.getProject({ workspace: WS, project: PROJECT }), Code.NotFound);
    // The purges are ctrl's own events in the workspace's audit chain, beside the call that asked.
    const audit = await ctrl.store.db.selectFrom("audit_events").select(["method", "code"]).orderBy("seq").execute();
    assert.deepEqual(
      audit.filter((a) => a.method.startsWith("system/")).map((a) => a.method),
      ["system/EnvironmentPurged", "system/EnvironmentPurged", "system/ProjectPurged"],
    );
    assert.ok(audit.some((a) => a.method === "ProjectService/DeleteProject" && a.code === "ok"));

    // The environments' kept lines went with them (not waiting for their retention).
    assert.deepEqual(await logsOf(), ["ws_other"]);
    assert.equal((await logRetention(ctrl.store.db, wsId)).own, true);

    // The workspace goes once its last project is gone.
    const ws = await ctrl
      .client(WorkspaceService, admin)
      .deleteWorkspace({ workspace: WS, confirm: WS, forceRegions: [] });
    assert.equal(ws.deletion?.done, true);
    await expectCode(ctrl.client(WorkspaceService, admin).getWorkspace({ workspace: WS }), Code.NotFound);
    // Its log retention went with it; another workspace's lines stay.
    assert.deepEqual(await logsOf(), ["ws_other"]);
    assert.equal((await logRetention(ctrl.store.db, wsId)).own, false);
  });

  it("a kind no agent of a region runs (its heartbeat says so) is not waited for; an agent that never said is waited for in full", async () => {
    const admin = ctrl.adminToken;
    const ws = "beta";
    const ref = { workspace: ws, project: "app", environment: "live" };
    const beat = async (region: string, kinds: string[] | undefined): Promise<void> => {
      await ctrl.client(ClusterService, await ctrl.agentToken(region)).heartbeat({
        region,
        agentId: `agent-${region}`,
        build: "test",
        cursors: kinds?.map((kind) => ({ kind, version: 0n })),
      });
    };
    for (const r of ["ap", "sa", "af"]) await ctrl.client(RegionService, admin).createRegion({ name: r });
    // ap runs no release controller; sa's agent is older than the per-kind cursors; af runs all.
    await beat("ap", ["deployments", "sentinels", "jobs", "a-kind-this-ctrl-does-not-know"]);
    await beat("sa", undefined);
    await beat("af", ["deployments", "sentinels", "releases", "jobs"]);
    await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: ws });
    await ctrl.client(ProjectService, admin).createProject({ workspace: ws, slug: ref.project });
    const { environment } = await ctrl.client(EnvironmentService, admin).createEnvironment({
      workspace: ws,
      project: ref.project,
      slug: ref.environment,
      regions: ["ap", "sa", "af"].map((region) => ({ region, replicas: 1 })),
      sentinel: { image: "registry.example.com/sentinel:1", replicas: 1, cpuMillicores: 0n, memoryMib: 0n },
    });
    const envId = environment?.id ?? "";
    await ctrl.client(DeploymentService, admin).createDeployment({ ...ref, image: "registry.example.com/app:1" });
    await ctrl.client(ReleaseService, admin).applyRelease({
      ...ref,
      files: [{ name: "cm.yaml", content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {a: b}\n" }],
    });
    await ctrl.client(JobService, admin).putJob({ ...ref, spec: { name: "report", schedule: "@hourly" } as never });

    const kindsIn = async (region: string): Promise<string[]> =>
      [...new Set((await pending(region)).map((p) => p.kind))].sort();
    const { deletion } = await ctrl
      .client(EnvironmentService, admin)
      .deleteEnvironment({ ...ref, confirm: ref.environment, forceRegions: [] });
    assert.equal(deletion?.done, false);
    assert.deepEqual(await kindsIn("ap"), ["deployment", "job", "sentinel"], "ap runs no releases: not waited for");
    assert.deepEqual(await kindsIn("sa"), ["deployment", "job", "release", "sentinel"], "sa never said: every kind");
    assert.deepEqual(await kindsIn("af"), ["deployment", "job", "release", "sentinel"]);
    // The release's Delete still went to ap's stream: an agent that runs the kind later collects it.
    const apDeletes = await ctrl.store.db
      .selectFrom("outbox")
      .select("kind")
      .where("op", "=", "delete")
      .where("region", "=", "ap")
      .where("kind", "=", "release")
      .execute();
    assert.equal(apDeletes.length, 1);

    // af's agent stops running jobs while the deletion is pending: the sweep stops waiting for them.
    await beat("af", ["deployments", "sentinels", "releases"]);
    await eventually("af's job deletion no longer pending", async () =>
      (await kindsIn("af")).includes("job") ? undefined : true,
    );
    // The same agent heartbeating without any cursors (downgraded) does not forget what it said.
    await beat("af", undefined);
    assert.deepEqual(await kindsIn("af"), ["deployment", "release", "sentinel"]);

    // Every agent confirms what it runs: the deletion finishes with no region forced.
    for (const r of ["ap", "sa", "af"]) await confirm(r);
    await eventually("the environment purged", async () => {
      const rows = await rowsOf([envId]);
      return rows.environments === 0 && rows.desired_objects === 0 ? true : undefined;
    });
    const done = await ctrl
      .client(EnvironmentService, admin)
      .deleteEnvironment({ ...ref, confirm: ref.environment, forceRegions: [] })
      .catch(() => undefined);
    assert.ok(done === undefined || done.deletion?.done === true);
  });
});

// Repository builds' commit statuses through the real ctrl (its BuildStatusReporter) to a local
// server speaking GitHub's commit-status API over real HTTP: a queued build of a pushed commit
// shows "pending" under the environment's context; its failure shows "failure" with the reason,
// posted after the provider answered 502 twice (retried, not lost); each state is posted once.
// The build is queued through the domain as the push webhook does (repository-push.test.ts drives
// the webhook itself with BuildKit; no build worker runs here, so the build stays queued).
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { finishBuild, queueBuildIn } from "../../../src/ctrl/domain/builds.js";
import { Keyring } from "../../../src/ctrl/secrets/keyring.js";
import {
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { RepositoryService } from "../../../src/gen/krane/ctrl/v1/repository_pb.js";
import { startFakeProviders, type FakeProviders, type PostedStatus } from "../../support/git-providers.js";
import { startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const STATUS_TOKEN = "ghp_status0123456789";
const SHA = "0123456789abcdef0123456789abcdef01234567";

async function eventually<T>(what: string, f: () => T | undefined, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v !== undefined) return v;
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("repository builds' commit statuses", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  let gh: FakeProviders;
  before(async () => {
    gh = await startFakeProviders({
      githubToken: STATUS_TOKEN,
      gitlabToken: "unused",
      githubRepos: ["acme/app"],
      gitlabProjects: [],
    });
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      keyring: new Keyring(randomBytes(32)),
      previews: { statusSweepIntervalMs: 100 },
    });
  });
  after(async () => {
    await ctrl?.close();
    await gh?.close();
    dir.remove();
  });

  it("pending while queued, failure with the reason once it failed; retried through a provider outage", async () => {
    const admin = ctrl.adminToken;
    await ctrl.client(RegionService, admin).createRegion({ name: "eu" });
    const { workspace } = await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: "acme" });
    const { project } = await ctrl.client(ProjectService, admin).createProject({ workspace: "acme", slug: "shop" });
    const { environment } = await ctrl.client(EnvironmentService, admin).createEnvironment({
      workspace: "acme",
      project: "shop",
      slug: "production",
      regions: [{ region: "eu", replicas: 1 }],
    });
    const { repository } = await ctrl.client(RepositoryService, admin).connectRepository({
      workspace: "acme",
      project: "shop",
      provider: "github",
      url: "https://git.example.com/acme/app.git",
      webhookSecret: "s".repeat(32),
      statusApiUrl: gh.githubUrl,
      statusToken: STATUS_TOKEN,
      branches: ["main=production"],
    });
    assert.ok(workspace && project && environment && repository);
    const { build } = await ctrl.store.write((tx) =>
      queueBuildIn(tx, {
        workspaceId: workspace.id,
        projectId: project.id,
        environmentId: environment.id,
        production: true,
        sourceDigest: "",
        dockerfile: undefined,
        deploy: true,
        git: { repositoryId: repository.id, branch: "main", commit: SHA },
      }),
    );
    const ours = (state: string) => (s: PostedStatus) =>
      s.sha === SHA && s.context === "krane/build (production)" && s.state === state;
    const pending = await eventually("the pending status", () => gh.statuses.find(ours("pending")));
    assert.equal(pending.repository, "acme/app");
    assert.match(pending.description, /queued for production/);

    // The provider fails twice; the failure is posted anyway, with the build's reason.
    gh.failNext(2);
    assert.equal(await finishBuild(ctrl.store, build.id, { state: "failed", error: "npm ci exited 1" }), true);
    const failure = await eventually("the failure status", () => gh.statuses.find(ours("failure")));
    assert.match(failure.description, /failed: npm ci exited 1/);
    // Sweeps go on (every 100 ms): nothing is posted twice.
    await new Promise((r) => setTimeout(r, 1_500));
    assert.deepEqual(
      gh.statuses.filter((s) => s.sha === SHA).map((s) => s.state),
      ["pending", "failure"],
    );
    const row = await ctrl.store.db
      .selectFrom("builds")
      .select(["status_due_at"])
      .where("id", "=", build.id)
      .executeTakeFirstOrThrow();
    assert.equal(row.status_due_at, null, "nothing is due once the last state was posted");
  });
});

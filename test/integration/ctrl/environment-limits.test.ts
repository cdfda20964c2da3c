// Releases and cron jobs are bounded per environment (100 each), so listing them is one bounded
// answer: the 101st is refused naming the limit and the field, nothing of it is stored, and
// changing an existing one still works. Real ctrl (SQLite, HTTP/2).
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Code } from "@connectrpc/connect";
import {
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { JobService } from "../../../src/gen/krane/ctrl/v1/job_pb.js";
import { ReleaseService } from "../../../src/gen/krane/ctrl/v1/release_pb.js";
import {
  MAX_JOBS_PER_ENVIRONMENT,
  MAX_RELEASES_PER_ENVIRONMENT,
} from "../../../src/ctrl/domain/environment-objects.js";
import { Keyring } from "../../../src/ctrl/secrets/keyring.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const ref = { workspace: "acme", project: "shop", environment: "production" };
const dir = tempDir();
let ctrl: TestCtrl;

before(async () => {
  ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { keyring: new Keyring(randomBytes(32)) });
  const t = ctrl.adminToken;
  await ctrl.client(RegionService, t).createRegion({ name: "eu" });
  await ctrl.client(WorkspaceService, t).createWorkspace({ slug: ref.workspace });
  await ctrl.client(ProjectService, t).createProject({ workspace: ref.workspace, slug: ref.project });
  await ctrl.client(EnvironmentService, t).createEnvironment({
    workspace: ref.workspace,
    project: ref.project,
    slug: ref.environment,
    regions: [{ region: "eu", replicas: 1 }],
  });
});

after(async () => {
  await ctrl?.close();
  dir.remove();
});

const manifest = (n: number): { name: string; content: string } => ({
  name: "cm.yaml",
  content: `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-${n}}\ndata: {a: "${n}"}\n`,
});

test(`at most ${MAX_RELEASES_PER_ENVIRONMENT} releases per environment`, async () => {
  const releases = ctrl.client(ReleaseService, ctrl.adminToken);
  for (let i = 0; i < MAX_RELEASES_PER_ENVIRONMENT; i++)
    await releases.applyRelease({ ...ref, name: `r${i}`, files: [manifest(i)] });
  await expectCode(
    releases.applyRelease({ ...ref, name: "one-more", files: [manifest(999)] }),
    Code.FailedPrecondition,
    /at most 100 releases/,
  );
  const { releases: listed } = await releases.listReleases(ref);
  assert.equal(listed.length, MAX_RELEASES_PER_ENVIRONMENT);
  assert.ok(!listed.some((r) => r.name === "one-more"), "the refused release is not stored");
  // A new version of an existing release is not a new release.
  await releases.applyRelease({ ...ref, name: "r0", files: [manifest(1000)] });
});

test(`at most ${MAX_JOBS_PER_ENVIRONMENT} cron jobs per environment`, async () => {
  const jobs = ctrl.client(JobService, ctrl.adminToken);
  for (let i = 0; i < MAX_JOBS_PER_ENVIRONMENT; i++)
    await jobs.putJob({ ...ref, spec: { name: `j${i}`, schedule: "@hourly" } });
  await expectCode(
    jobs.putJob({ ...ref, spec: { name: "one-more", schedule: "@hourly" } }),
    Code.FailedPrecondition,
    /at most 100 jobs/,
  );
  const { jobs: listed } = await jobs.listJobs(ref);
  assert.equal(listed.length, MAX_JOBS_PER_ENVIRONMENT);
  await jobs.putJob({ ...ref, spec: { name: "j0", schedule: "@daily" } });
});

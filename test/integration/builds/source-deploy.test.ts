// From a directory to a revision, through a real ctrl (in-process, its API over HTTP/2), real
// BuildKit (ctrl's build worker, tools/buildkit), krane's bases and the real `registry` binary
// (htpasswd, TLS): `krane deploy --source` of a Node.js app without a Dockerfile uploads it,
// builds it, pushes it and records a revision whose image is the pushed digest; `krane build`
// prints image@digest. A newer build of an environment cancels its queued older one; a failing
// build names its failing step and that step's last lines; a token of another workspace can
// neither see nor cancel a build. The source's krane.yaml applies with the revision its build
// makes, or fails the build naming the file's line, nothing deployed.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Code } from "@connectrpc/connect";
import { packSourceDir } from "../../../src/builds/source-dir.js";
import { ensureBases } from "../../../src/cluster/bases.js";
import { ensureBuildkit } from "../../../src/cluster/build.js";
import { RegistryClient } from "../../../src/ctrl/images/registry-client.js";
import {
  ApiTokenService,
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { ProjectFileService } from "../../../src/gen/krane/ctrl/v1/apply_pb.js";
import { QuotaService } from "../../../src/gen/krane/ctrl/v1/quota_pb.js";
import { BuildService, type Build } from "../../../src/gen/krane/ctrl/v1/build_pb.js";
import { startTestRegistry, type TestRegistry } from "../../support/registry.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "../ctrl/support.js";
import { buildsSkip, runKrane, writeSource } from "../../support/build-tools.js";

const skip = buildsSkip;

const WS = "acme";
const PROJECT = "shop";

const nodeApp = {
  "package.json": JSON.stringify({ name: "app", scripts: { start: "node server.js" } }),
  "server.js": 'require("http").createServer((q, s) => s.end("hi")).listen(process.env.PORT);\n',
  ".gitignore": "node_modules/\n",
};

describe("builds from source through ctrl", { skip }, () => {
  const dir = tempDir("krane-source-deploy-");
  let registry: TestRegistry;
  let ctrl: TestCtrl;
  let otherToken = "";

  const source = (name: string, files: Record<string, string>): string => writeSource(dir.path, name, files);
  const cli = (args: string[]): ReturnType<typeof runKrane> =>
    runKrane({ url: ctrl.url, token: ctrl.adminToken, workspace: WS }, args);

  const builds = () => ctrl.client(BuildService, ctrl.adminToken);

  async function upload(src: string): Promise<string> {
    const packed = await packSourceDir(src, { maxBytes: 1 << 24, maxArchiveBytes: 1 << 24 });
    await builds().uploadSource({
      workspace: WS,
      project: PROJECT,
      digest: packed.digest,
      size: BigInt(packed.archive.length),
      offset: 0n,
      data: packed.archive,
    });
    return packed.digest;
  }

  /** The build once `done` holds (polled; a bound so a stuck build fails the test, not hangs it). */
  async function waitFor(id: string, done: (b: Build) => boolean): Promise<Build> {
    let last: Build | undefined;
    for (let i = 0; i < 3000; i++) {
      last = (await builds().getBuild({ workspace: WS, buildId: id })).build;
      if (last && done(last)) return last;
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`build ${id} stayed ${last?.state ?? "unknown"}`);
  }

  before(async () => {
    const bk = await ensureBuildkit((l) => console.log(l));
    const bases = await ensureBases((l) => console.log(l));
    registry = await startTestRegistry({ dir: dir.path });
    const user = registry.users[0];
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      builds: {
        registry: registry.host,
        username: user?.username,
        password: user?.password,
        ca: [registry.caPem],
        buildkitd: bk.buildkitd,
        buildctl: bk.buildctl,
        basesLayout: bases,
        stateDir: join(dir.path, "buildkit"),
        slots: 1,
      },
    });
    const admin = ctrl.adminToken;
    await ctrl.client(RegionService, admin).createRegion({ name: "eu" });
    for (const ws of [WS, "other"]) {
      await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: ws });
      await ctrl.client(ProjectService, admin).createProject({ workspace: ws, slug: PROJECT });
    }
    for (const [ws, env] of [
      [WS, "production"],
      [WS, "staging"],
      ["other", "staging"],
    ] as const)
      await ctrl
        .client(EnvironmentService, admin)
        .createEnvironment({ workspace: ws, project: PROJECT, slug: env, regions: [{ region: "eu", replicas: 1 }] });
    otherToken = (await ctrl.client(ApiTokenService, admin).createApiToken({ name: "ci", workspace: "other" })).token;
  });
  after(async () => {
    await ctrl?.close();
    await registry?.stop();
    dir.remove();
  });

  it("deploy --source of a Node.js app records a revision whose image is the digest pushed to the registry", async () => {
    const src = source("node", nodeApp);
    const res = await cli(["deploy", `${PROJECT}/production`, "--source", src, "-o", "json"]);
    assert.equal(res.status, 0, res.stderr);
    assert.match(res.stderr, /build plan: Node\.js/, "the build's log followed on stderr");
    const listed = await ctrl
      .client(BuildService, ctrl.adminToken)
      .listBuilds({ workspace: WS, project: PROJECT, environment: "production" });
    const b = listed.builds[0];
    assert.ok(b);
    assert.equal(b.state, "succeeded");
    assert.equal(b.image, `${registry.host}/${WS}/${PROJECT}:${b.id}`);
    // The registry holds that tag as that digest.
    const client = new RegistryClient({ ca: [registry.caPem], privateHosts: ["127.0.0.1"] });
    try {
      const user = registry.users[0]!;
      const held = await client.manifestDigest(registry.host, `${WS}/${PROJECT}`, b.id, user);
      assert.equal(held, b.imageDigest);
    } finally {
      await client.close();
    }
    const deps = await ctrl.client(DeploymentService, ctrl.adminToken).listDeployments({ workspace: WS });
    assert.equal(deps.deployments.length, 1);
    const d = deps.deployments[0]!;
    assert.equal(d.id, b.deploymentId);
    assert.equal(d.buildId, b.id);
    assert.equal(d.imageDigest, b.imageDigest);
    assert.equal(d.image, b.image);

    // `krane build` of the same source: no revision, image@digest on stdout (the same bytes).
    const built = await cli(["build", `${PROJECT}/staging`, "--source", src]);
    assert.equal(built.status, 0, built.stderr);
    assert.equal(built.stdout.trim(), `${registry.host}/${WS}/${PROJECT}@${b.imageDigest}`);
    assert.equal(
      (await ctrl.client(DeploymentService, ctrl.adminToken).listDeployments({ workspace: WS })).deployments.length,
      1,
    );
  });

  it("a newer build of an environment cancels its queued older one; the slot's build can be cancelled", async () => {
    // Holds the only slot: a staging build that sleeps.
    const slow = await upload(
      source("slow", { Dockerfile: "FROM krane.local/base/run:12\nRUN sleep 600\n", "a.txt": "slow\n" }),
    );
    const node = await upload(source("node", nodeApp));
    const running = (
      await builds().startBuild({ workspace: WS, project: PROJECT, environment: "staging", sourceDigest: slow })
    ).build!;
    await waitFor(running.id, (b) => b.state === "running");
    const older = (
      await builds().startBuild({
        workspace: WS,
        project: PROJECT,
        environment: "production",
        sourceDigest: node,
        deploy: true,
      })
    ).build!;
    assert.equal(older.state, "queued");
    const newer = await builds().startBuild({
      workspace: WS,
      project: PROJECT,
      environment: "production",
      sourceDigest: node,
      deploy: true,
    });
    assert.deepEqual(newer.cancelledBuildIds, [older.id]);
    const gone = (await builds().getBuild({ workspace: WS, buildId: older.id })).build!;
    assert.equal(gone.state, "cancelled");
    assert.match(gone.error, new RegExp(`superseded by build ${newer.build!.id}`));

    // Cancelling the running one frees the slot: the newer production build runs and deploys.
    const cancelled = await builds().cancelBuild({ workspace: WS, buildId: running.id });
    assert.equal(cancelled.build?.state, "cancelled");
    const done = await waitFor(newer.build!.id, (b) => b.state !== "queued" && b.state !== "running");
    assert.equal(done.state, "succeeded", done.error);
    assert.notEqual(done.deploymentId, "");
    // The cancelled one stays cancelled (its worker's outcome does not overwrite it).
    assert.equal((await builds().getBuild({ workspace: WS, buildId: running.id })).build?.state, "cancelled");
  });

  it("a failing build names its failing step and shows that step's last lines", async () => {
    const src = source("fails", {
      Dockerfile:
        'FROM krane.local/base/run:12\nRUN echo "compiling the thing" && echo "boom: missing semicolon" && exit 3\n',
    });
    const res = await cli(["build", `${PROJECT}/staging`, "--source", src]);
    assert.notEqual(res.status, 0);
    assert.match(res.stderr, /failed step: \[1\/2\] RUN echo "compiling the thing"/);
    assert.match(res.stderr, /boom: missing semicolon/);
    const id = /build (bld_[a-z0-9]+) failed/.exec(res.stderr)?.[1];
    assert.ok(id, res.stderr);
    const logs = await cli(["build", "logs", id]);
    assert.notEqual(logs.status, 0);
    assert.match(logs.stderr, /boom: missing semicolon/);
  });

  it("a token of another workspace can neither see nor cancel a build", async () => {
    const node = await upload(source("node", nodeApp));
    const b = (
      await builds().startBuild({ workspace: WS, project: PROJECT, environment: "staging", sourceDigest: node })
    ).build!;
    const evil = ctrl.client(BuildService, otherToken);
    await expectCode(evil.getBuild({ workspace: WS, buildId: b.id }), Code.NotFound);
    await expectCode(evil.getBuild({ workspace: "other", buildId: b.id }), Code.NotFound);
    await expectCode(evil.cancelBuild({ workspace: WS, buildId: b.id }), Code.NotFound);
    await expectCode(evil.cancelBuild({ workspace: "other", buildId: b.id }), Code.NotFound);
    await expectCode(evil.listBuilds({ workspace: WS, project: PROJECT, environment: "staging" }), Code.NotFound);
    // Nor build acme's upload in its own project of the same name: uploads belong to their project.
    await expectCode(
      evil.startBuild({ workspace: "other", project: PROJECT, environment: "staging", sourceDigest: node }),
      Code.FailedPrecondition,
      /no complete upload/,
    );
    const after = await waitFor(b.id, (x) => x.state !== "queued" && x.state !== "running");
    assert.equal(after.state, "succeeded", after.error);
  });

  it("the source's krane.yaml applies with the revision its build makes; a file refused fails the build at its line, nothing deployed", async () => {
    const deployments = async () =>
      (await ctrl.client(DeploymentService, ctrl.adminToken).listDeployments({ workspace: WS })).deployments;
    const exported = async () =>
      (await ctrl.client(ProjectFileService, ctrl.adminToken).exportProject({ workspace: WS, project: PROJECT })).file!;
    const before = await deployments();
    const stagingBefore = (await exported()).environments.staging;
    const withFile = source("with-file", {
      ...nodeApp,
      "krane.yaml": [
        "project: shop",
        "environments:",
        "  production:",
        "    config:",
        "      GREETING: hello",
        "    deployment:",
        "      port: 3000",
        "  staging:",
        "    config:",
        "      GREETING: not this one",
        "",
      ].join("\n"),
    });
    const ok = await cli(["deploy", `${PROJECT}/production`, "--source", withFile]);
    assert.equal(ok.status, 0, ok.stderr);
    assert.match(ok.stderr, /krane\.yaml: the deploy applies environments\.production/);
    const b = (await builds().listBuilds({ workspace: WS, project: PROJECT, environment: "production" })).builds[0]!;
    assert.equal(b.state, "succeeded");
    const after = await deployments();
    assert.equal(after.length, before.length + 1, "one revision for the build and the file together");
    const d = after.find((x) => x.id === b.deploymentId);
    assert.ok(d, "the build's revision");
    assert.equal(d.buildId, b.id);
    assert.equal(d.imageDigest, b.imageDigest);
    assert.equal(d.image, b.image, "the built image, not one the file or the old revision named");
    const file = await exported();
    assert.equal(file.environments.production?.config.GREETING, "hello");
    assert.equal(file.environments.production?.deployment?.port, 3000);
    assert.equal(file.environments.production?.deployment?.image, b.image);
    assert.deepEqual(file.environments.staging, stagingBefore, "another environment's part does not apply");

    // A region the file names that does not exist: refused when the deploy applies it, after the
    // build, with the file's line; no revision.
    const badRegion = source("bad-region", {
      ...nodeApp,
      "krane.yaml": "project: shop\nenvironments:\n  production:\n    regions:\n      mars: { replicas: 1 }\n",
    });
    const refused = await cli(["deploy", `${PROJECT}/production`, "--source", badRegion]);
    assert.notEqual(refused.status, 0);
    assert.match(
      refused.stderr,
      /krane\.yaml:5:13: environments\.production\.regions\.mars: region "mars" is not registered/,
    );
    // A file that does not decode: refused before anything is built.
    const badKey = source("bad-key", {
      ...nodeApp,
      "krane.yaml": "project: shop\nenvironments:\n  production:\n    confg: {}\n",
    });
    const early = await cli(["deploy", `${PROJECT}/production`, "--source", badKey]);
    assert.notEqual(early.status, 0);
    assert.match(early.stderr, /krane\.yaml:4:5: environments\.production\.confg: unknown key "confg"/);
    assert.doesNotMatch(early.stderr, /build plan:/, "nothing was built");
    assert.equal((await deployments()).length, after.length, "nothing deployed");
    assert.equal((await exported()).environments.production?.config.GREETING, "hello");
  });

  it("build minutes: counted in GetQuota; with none left StartBuild is refused, and a queued build fails naming the quota", async () => {
    const quotas = ctrl.client(QuotaService, ctrl.adminToken);
    const minutes = async (): Promise<bigint | undefined> =>
      (await quotas.getQuota({ workspace: WS })).quotas.find((q) => q.name === "build_minutes")?.used;
    const before = (await minutes()) ?? 0n;
    assert.ok(before >= 1n, `the builds above used minutes (GetQuota says ${before})`);
    // The slot held by a sleeping build; a production build queued behind it while minutes are left.
    const slow = await upload(
      source("slow-2", { Dockerfile: "FROM krane.local/base/run:12\nRUN sleep 600\n", "b.txt": "slow\n" }),
    );
    const node = await upload(source("node", nodeApp));
    const running = (
      await builds().startBuild({ workspace: WS, project: PROJECT, environment: "staging", sourceDigest: slow })
    ).build!;
    await waitFor(running.id, (b) => b.state === "running");
    const queued = (
      await builds().startBuild({ workspace: WS, project: PROJECT, environment: "production", sourceDigest: node })
    ).build!;
    assert.equal(queued.state, "queued");

    await quotas.setQuota({ workspace: WS, values: { build_minutes: "1" } });
    await expectCode(
      builds().startBuild({ workspace: WS, project: PROJECT, environment: "staging", sourceDigest: node }),
      Code.ResourceExhausted,
      /used its build_minutes quota: \d+ of 1 minutes this month/,
    );
    await builds().cancelBuild({ workspace: WS, buildId: running.id });
    const failed = await waitFor(queued.id, (b) => b.state !== "queued" && b.state !== "running");
    assert.equal(failed.state, "failed");
    assert.match(failed.error, /workspace "acme" has used its build_minutes quota/);
    assert.equal(failed.imageDigest, "", "nothing was built");
    await quotas.setQuota({ workspace: WS, values: { build_minutes: "default" } });
  });
});

// From a pull request to a preview, through a real ctrl (its webhook port over HTTP/1.1), a real
// git server (test/support/git-server.ts), real BuildKit and the real `registry`: a project
// connected to its repository with previews made from "staging"; a signed GitHub pull_request
// "opened" queues a build of exactly the head commit, which the worker fetches, builds and makes
// into preview pr-7 running that build, with the staging part of that commit's krane.yaml (its
// config) applied, and the commit status posted on the head; a "synchronize" with a new head
// builds again (an older build of the same pull request still open is cancelled) and gives the
// preview a new revision with the new file; "closed" deletes the preview. A bad signature, a pull
// request about another repository and a replayed delivery are refused and queue nothing.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ensureBases } from "../../../src/cluster/bases.js";
import { ensureBuildkit } from "../../../src/cluster/build.js";
import { githubSignature } from "../../../src/ctrl/previews/providers.js";
import { Keyring } from "../../../src/ctrl/secrets/keyring.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { BuildService, type Build } from "../../../src/gen/krane/ctrl/v1/build_pb.js";
import { ConfigService } from "../../../src/gen/krane/ctrl/v1/config_pb.js";
import { PreviewService } from "../../../src/gen/krane/ctrl/v1/preview_pb.js";
import { RepositoryService } from "../../../src/gen/krane/ctrl/v1/repository_pb.js";
import { startFakeProviders, type FakeProviders } from "../../support/git-providers.js";
import { startGitServer, type GitServer } from "../../support/git-server.js";
import { startTestRegistry, type TestRegistry } from "../../support/registry.js";
import { startTestCtrl, tempDir, type TestCtrl } from "../ctrl/support.js";
import { buildsSkip } from "../../support/build-tools.js";

const skip = buildsSkip;

const WS = "acme";
const PROJECT = "shop";
const TOKEN = `git-token-${randomBytes(8).toString("hex")}`;
const SECRET = `hook-secret-${randomBytes(8).toString("hex")}`;
const STATUS_TOKEN = "gh-status-token";

const nodeApp = {
  "package.json": JSON.stringify({ name: "app", scripts: { start: "node server.js" } }),
  "server.js": 'require("http").createServer((q, s) => s.end("hi")).listen(process.env.PORT);\n',
};

const kraneYaml = (staging: string): string =>
  `project: shop\nenvironments:\n  staging:\n    config:\n      GREETING: ${staging}\n  production:\n    config:\n      GREETING: production-only\n`;

describe("pull requests of a connected repository build previews", { skip }, () => {
  const dir = tempDir("krane-repository-pr-");
  let registry: TestRegistry;
  let git: GitServer;
  let providers: FakeProviders;
  let ctrl: TestCtrl;
  let hookUrl = "";
  let delivery = 0;

  const builds = () => ctrl.client(BuildService, ctrl.adminToken);

  function prBody(action: string, head: string, o: { repository?: string; number?: number } = {}): string {
    const repository = o.repository ?? "acme/app";
    return JSON.stringify({
      action,
      number: o.number ?? 7,
      pull_request: {
        number: o.number ?? 7,
        updated_at: new Date().toISOString(),
        head: { sha: head, ref: "feature", repo: { full_name: repository } },
        base: { ref: "main", repo: { full_name: repository } },
      },
      repository: { full_name: repository },
      sender: { login: "ada" },
    });
  }

  async function deliver(
    body: string,
    o: { secret?: string; id?: string } = {},
  ): Promise<{ status: number; json: Record<string, unknown> }> {
    const res = await fetch(hookUrl, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-github-event": "pull_request",
        "x-github-delivery": o.id ?? `pr-delivery-${++delivery}`,
        "x-hub-signature-256": githubSignature(o.secret ?? SECRET, body),
      },
      body,
    });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  }

  async function allBuilds(): Promise<Build[]> {
    return (await builds().listBuilds({ workspace: WS, project: PROJECT, environment: "staging" })).builds;
  }

  async function waitFor(id: string): Promise<Build> {
    let last: Build | undefined;
    for (let i = 0; i < 3000; i++) {
      last = (await builds().getBuild({ workspace: WS, buildId: id })).build;
      if (last && last.state !== "queued" && last.state !== "running") return last;
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`build ${id} stayed ${last?.state ?? "unknown"}`);
  }

  async function until<T>(what: string, f: () => Promise<T | undefined>): Promise<T> {
    for (let i = 0; i < 600; i++) {
      const v = await f();
      if (v !== undefined) return v;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`never: ${what}`);
  }

  async function greeting(environment: string): Promise<string[]> {
    const config = await ctrl
      .client(ConfigService, ctrl.adminToken)
      .listConfig({ workspace: WS, project: PROJECT, environment });
    return config.entries.map((e) => `${e.key}=${e.value}`);
  }

  /** The preview environment's newest revision. */
  async function previewRevision() {
    const { deployments } = await ctrl
      .client(DeploymentService, ctrl.adminToken)
      .listDeployments({ workspace: WS, project: PROJECT, environment: "pr-7" });
    return [...deployments].sort((a, b) => Number(b.revision - a.revision))[0];
  }

  const preview = async () =>
    (await ctrl.client(PreviewService, ctrl.adminToken).listPreviews({ workspace: WS })).previews.find(
      (p) => p.name === "pr-7",
    );

  before(async () => {
    const bk = await ensureBuildkit((l) => console.log(l));
    const bases = await ensureBases((l) => console.log(l));
    registry = await startTestRegistry({ dir: dir.path });
    git = await startGitServer(dir.path, { "x-access-token": TOKEN });
    providers = await startFakeProviders({
      githubToken: STATUS_TOKEN,
      gitlabToken: "unused",
      githubRepos: ["acme/app"],
      gitlabProjects: [],
    });
    const repoUrl = await git.createRepository("acme/app.git");
    const user = registry.users[0];
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      keyring: new Keyring(randomBytes(32)),
      exposure: { publicApex: "preview.test", scheme: "http" },
      previews: { webhookListen: { host: "127.0.0.1", port: 0 } },
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
        gitCaFile: git.caFile,
      },
    });
    const admin = ctrl.adminToken;
    await ctrl.client(RegionService, admin).createRegion({ name: "eu" });
    await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: WS });
    await ctrl.client(ProjectService, admin).createProject({ workspace: WS, slug: PROJECT });
    for (const env of ["production", "staging"])
      await ctrl
        .client(EnvironmentService, admin)
        .createEnvironment({ workspace: WS, project: PROJECT, slug: env, regions: [{ region: "eu", replicas: 1 }] });
    await ctrl.client(ConfigService, admin).setConfig({
      workspace: WS,
      project: PROJECT,
      environment: "staging",
      values: [{ key: "GREETING", value: "staging's own" }],
    });
    const { repository } = await ctrl.client(RepositoryService, admin).connectRepository({
      workspace: WS,
      project: PROJECT,
      provider: "github",
      url: repoUrl,
      token: TOKEN,
      webhookSecret: SECRET,
      branches: ["main=production"],
      previews: "staging",
      statusApiUrl: providers.githubUrl,
      statusToken: STATUS_TOKEN,
    });
    assert.ok(repository && ctrl.webhookUrl);
    assert.equal(repository.previews, "staging");
    assert.equal(repository.buildForks, false);
    hookUrl = `${ctrl.webhookUrl}${repository.webhookPath}`;
  });
  after(async () => {
    await ctrl?.close();
    await git?.close();
    await providers?.close();
    await registry?.stop();
    dir.remove();
  });

  it("opened builds the head commit into preview pr-7 with that commit's krane.yaml; the status is on the head", async () => {
    await git.commit("acme/app.git", "main", { ...nodeApp, "krane.yaml": kraneYaml("main") });
    const head = await git.commit("acme/app.git", "feature", { ...nodeApp, "krane.yaml": kraneYaml("pr-first") });
    const res = await deliver(prBody("opened", head));
    assert.equal(res.status, 200, JSON.stringify(res.json));
    assert.equal(res.json.preview, "pr-7");
    assert.equal(res.json.commit, head);
    const done = await waitFor(String(res.json.build));
    assert.equal(done.state, "succeeded", `${done.error}\n${done.failedOutput.join("\n")}`);
    assert.equal(done.commit, head);
    assert.equal(done.preview, "pr-7");
    assert.equal(done.environment, "staging", "a pull request's build is of its preview's base");
    const p = await preview();
    assert.ok(p, "the preview exists");
    assert.equal(p.state, "active");
    assert.equal(p.baseEnvironment, "staging");
    const revision = await previewRevision();
    assert.ok(revision, "the preview has a revision");
    assert.equal(revision.buildId, done.id, "the preview runs the build");
    assert.equal(revision.imageDigest, done.imageDigest);
    assert.deepEqual(await greeting("pr-7"), ["GREETING=pr-first"], "the head commit's staging part");
    assert.deepEqual(await greeting("staging"), ["GREETING=staging's own"], "the base is untouched");
    const posted = await until("a success status on the head", async () =>
      providers.statuses.find((s) => s.sha === head && s.state === "success"),
    );
    assert.equal(posted.context, "krane/build (pr-7)");
    assert.match(posted.targetUrl, /preview\.test/);
  });

  it("synchronize with a new head builds again, cancelling the older build of the pull request", async () => {
    const older = await git.commit("acme/app.git", "feature", { "krane.yaml": kraneYaml("pr-older") });
    const head = await git.commit("acme/app.git", "feature", { "krane.yaml": kraneYaml("pr-second") });
    const first = await deliver(prBody("synchronize", older));
    assert.equal(first.status, 200, JSON.stringify(first.json));
    const second = await deliver(prBody("synchronize", head));
    assert.equal(second.status, 200, JSON.stringify(second.json));
    assert.deepEqual(second.json.cancelled, [first.json.build], "the newer push cancels the older build");
    const cancelled = await waitFor(String(first.json.build));
    assert.equal(cancelled.state, "cancelled");
    const done = await waitFor(String(second.json.build));
    assert.equal(done.state, "succeeded", `${done.error}\n${done.failedOutput.join("\n")}`);
    const revision = await previewRevision();
    assert.equal(revision?.buildId, done.id);
    assert.deepEqual(await greeting("pr-7"), ["GREETING=pr-second"]);
    assert.equal((await preview())?.state, "active");
  });

  it("a bad signature, another repository and a replay are refused; nothing is queued", async () => {
    const head = await git.commit("acme/app.git", "feature", { "c.txt": `${Date.now()}\n` });
    const before = (await allBuilds()).length;
    const bad = await deliver(prBody("synchronize", head), { secret: "not-the-secret-at-all" });
    assert.equal(bad.status, 401);
    assert.match(String(bad.json.error), /X-Hub-Signature-256 does not match/);
    const other = await deliver(prBody("synchronize", head, { repository: "mallory/app" }));
    assert.equal(other.status, 403);
    assert.match(String(other.json.error), /about mallory\/app, not acme\/app/);
    assert.equal((await allBuilds()).length, before, "nothing queued");
    const ok = await deliver(prBody("synchronize", head), { id: "the-one-pr-delivery" });
    assert.equal(ok.status, 200, JSON.stringify(ok.json));
    const replay = await deliver(prBody("synchronize", head), { id: "the-one-pr-delivery" });
    assert.equal(replay.status, 409);
    assert.match(String(replay.json.error), /a replay/);
    assert.equal((await allBuilds()).length, before + 1, "one build of the one delivery");
    await waitFor(String(ok.json.build));
  });

  it("closed deletes the preview", async () => {
    const head = await git.commit("acme/app.git", "feature", { "d.txt": `${Date.now()}\n` });
    const res = await deliver(prBody("closed", head));
    assert.equal(res.status, 200, JSON.stringify(res.json));
    assert.equal(res.json.action, "delete");
    await until("the preview gone or being deleted", async () => {
      const p = await preview();
      return p === undefined || p.state === "deleting" ? true : undefined;
    });
    const again = await deliver(prBody("closed", head));
    assert.equal(again.status, 200, JSON.stringify(again.json));
    assert.ok(["none", "delete"].includes(String(again.json.action)));
  });
});

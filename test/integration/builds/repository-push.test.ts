// From a push to a revision, through a real ctrl (its webhook port over HTTP/1.1), a real git
// server (git http-backend behind HTTPS with Basic auth, test/support/git-server.ts), real BuildKit
// and the real `registry`: a project connected to its repository with a token; a signed GitHub
// push to a mapped branch queues a build of exactly the pushed commit, which the worker fetches
// with the token, builds, and deploys with that commit's krane.yaml applied; the revision names
// the build, and the build the commit. A bad signature, a replayed delivery, a push about another
// repository and one to an unmapped branch queue nothing, each saying why; a wrong token fails the
// build naming it, nothing deployed. The token and webhook secret appear in no API answer, audit
// event or log line.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { Writable } from "node:stream";
import { after, before, describe, it } from "node:test";
import { toJsonString } from "@bufbuild/protobuf";
import { pino } from "pino";
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
import { AuditService, ListAuditEventsResponseSchema } from "../../../src/gen/krane/ctrl/v1/audit_pb.js";
import { BuildService, type Build } from "../../../src/gen/krane/ctrl/v1/build_pb.js";
import { ConfigService } from "../../../src/gen/krane/ctrl/v1/config_pb.js";
import { RepositorySchema, RepositoryService } from "../../../src/gen/krane/ctrl/v1/repository_pb.js";
import { startGitServer, type GitServer } from "../../support/git-server.js";
import { startTestRegistry, type TestRegistry } from "../../support/registry.js";
import { startTestCtrl, tempDir, type TestCtrl } from "../ctrl/support.js";
import { buildsSkip } from "../../support/build-tools.js";

const skip = buildsSkip;

const WS = "acme";
const PROJECT = "shop";
const TOKEN = `git-token-${randomBytes(8).toString("hex")}`;
const SECRET = `hook-secret-${randomBytes(8).toString("hex")}`;

const nodeApp = {
  "package.json": JSON.stringify({ name: "app", scripts: { start: "node server.js" } }),
  "server.js": 'require("http").createServer((q, s) => s.end("hi")).listen(process.env.PORT);\n',
};

describe("builds from a repository's pushes", { skip }, () => {
  const dir = tempDir("krane-repository-push-");
  let registry: TestRegistry;
  let git: GitServer;
  let ctrl: TestCtrl;
  let repoUrl = "";
  let hookUrl = "";
  let delivery = 0;
  const logged: string[] = [];

  const builds = () => ctrl.client(BuildService, ctrl.adminToken);

  function pushBody(branch: string, commit: string, repository = "acme/app"): string {
    return JSON.stringify({
      ref: `refs/heads/${branch}`,
      after: commit,
      deleted: false,
      repository: { full_name: repository, pushed_at: Math.floor(Date.now() / 1000) },
      sender: { login: "ada" },
    });
  }

  async function deliver(
    body: string,
    o: { secret?: string; id?: string; event?: string } = {},
  ): Promise<{ status: number; json: Record<string, unknown> }> {
    const res = await fetch(hookUrl, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-github-event": o.event ?? "push",
        "x-github-delivery": o.id ?? `delivery-${++delivery}`,
        "x-hub-signature-256": githubSignature(o.secret ?? SECRET, body),
      },
      body,
    });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  }

  async function openBuilds(env: string): Promise<Build[]> {
    return (await builds().listBuilds({ workspace: WS, project: PROJECT, environment: env })).builds;
  }

  async function waitFor(id: string, done: (b: Build) => boolean): Promise<Build> {
    let last: Build | undefined;
    for (let i = 0; i < 3000; i++) {
      last = (await builds().getBuild({ workspace: WS, buildId: id })).build;
      if (last && done(last)) return last;
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`build ${id} stayed ${last?.state ?? "unknown"}`);
  }
  const finished = (b: Build) => b.state !== "queued" && b.state !== "running";

  before(async () => {
    const bk = await ensureBuildkit((l) => console.log(l));
    const bases = await ensureBases((l) => console.log(l));
    registry = await startTestRegistry({ dir: dir.path });
    git = await startGitServer(dir.path, { "x-access-token": TOKEN });
    repoUrl = await git.createRepository("acme/app.git");
    const user = registry.users[0];
    // Every log line ctrl writes, to check that no credential is in one.
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        logged.push(chunk.toString());
        done();
      },
    });
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      keyring: new Keyring(randomBytes(32)),
      logger: pino({ level: "debug" }, sink),
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
    const { repository } = await ctrl.client(RepositoryService, admin).connectRepository({
      workspace: WS,
      project: PROJECT,
      provider: "github",
      url: repoUrl,
      token: TOKEN,
      webhookSecret: SECRET,
      branches: ["main=production"],
    });
    assert.ok(repository && ctrl.webhookUrl);
    hookUrl = `${ctrl.webhookUrl}${repository.webhookPath}`;
  });
  after(async () => {
    await ctrl?.close();
    await git?.close();
    await registry?.stop();
    dir.remove();
  });

  it("a signed push builds exactly the pushed commit and deploys it with that commit's krane.yaml", async () => {
    const first = await git.commit("acme/app.git", "main", {
      ...nodeApp,
      "krane.yaml": "project: shop\nenvironments:\n  production:\n    config:\n      GREETING: first\n",
    });
    // A newer commit lands before the push of the first is delivered: the push names the newer one.
    const commit = await git.commit("acme/app.git", "main", {
      "krane.yaml": "project: shop\nenvironments:\n  production:\n    config:\n      GREETING: second\n",
    });
    assert.notEqual(first, commit);
    const res = await deliver(pushBody("main", commit));
    assert.equal(res.status, 200, JSON.stringify(res.json));
    assert.equal(res.json.commit, commit);
    assert.equal(res.json.environment, "production");
    const id = String(res.json.build);
    const done = await waitFor(id, finished);
    assert.equal(done.state, "succeeded", `${done.error}\n${done.failedOutput.join("\n")}`);
    assert.equal(done.commit, commit);
    assert.equal(done.branch, "main");
    const { deployments } = await ctrl.client(DeploymentService, ctrl.adminToken).listDeployments({ workspace: WS });
    const d = deployments.find((x) => x.id === done.deploymentId);
    assert.ok(d, "the build made a revision");
    assert.equal(d.buildId, id, "the revision names the build, which names the commit");
    assert.equal(d.imageDigest, done.imageDigest);
    const config = await ctrl
      .client(ConfigService, ctrl.adminToken)
      .listConfig({ workspace: WS, project: PROJECT, environment: "production" });
    assert.deepEqual(
      config.entries.map((e) => `${e.key}=${e.value}`),
      ["GREETING=second"],
      "the pushed commit's krane.yaml, not the older one's",
    );
  });

  it("a bad signature, a replay, another repository's push and an unmapped branch queue nothing, saying why", async () => {
    const commit = await git.commit("acme/app.git", "main", { "a.txt": `${Date.now()}\n` });
    const before = (await openBuilds("production")).length;
    const bad = await deliver(pushBody("main", commit), { secret: "not-the-secret-at-all" });
    assert.equal(bad.status, 401);
    assert.match(String(bad.json.error), /X-Hub-Signature-256 does not match/);
    const other = await deliver(pushBody("main", commit, "mallory/app"));
    assert.equal(other.status, 403);
    assert.match(String(other.json.error), /about mallory\/app, not acme\/app/);
    const unmapped = await deliver(pushBody("feature/x", commit));
    assert.equal(unmapped.status, 200);
    assert.match(String(unmapped.json.ignored), /branch "feature\/x" is mapped to no environment/);
    const tag = await deliver(pushBody("main", commit).replace("refs/heads/main", "refs/tags/v1"));
    assert.match(String(tag.json.ignored), /is not a branch/);
    assert.equal((await openBuilds("production")).length, before, "nothing queued");
    // The first delivery of an id queues; the same id again is a replay.
    const ok = await deliver(pushBody("main", commit), { id: "the-one-delivery" });
    assert.equal(ok.status, 200, JSON.stringify(ok.json));
    const replay = await deliver(pushBody("main", commit), { id: "the-one-delivery" });
    assert.equal(replay.status, 409);
    assert.match(String(replay.json.error), /a replay/);
    assert.equal((await openBuilds("production")).length, before + 1, "one build of the one delivery");
    await waitFor(String(ok.json.build), finished);
  });

  it("a wrong token fails the build naming it, nothing deployed; no credential is ever shown", async () => {
    const repos = ctrl.client(RepositoryService, ctrl.adminToken);
    await repos.disconnectRepository({ workspace: WS, project: PROJECT });
    const { repository } = await repos.connectRepository({
      workspace: WS,
      project: PROJECT,
      provider: "github",
      url: repoUrl,
      token: "wrong-token-1234567890",
      webhookSecret: SECRET,
      branches: ["main=production"],
    });
    assert.ok(repository);
    hookUrl = `${ctrl.webhookUrl}${repository.webhookPath}`;
    const deploymentsBefore = (await ctrl.client(DeploymentService, ctrl.adminToken).listDeployments({ workspace: WS }))
      .deployments.length;
    const commit = await git.commit("acme/app.git", "main", { "b.txt": `${Date.now()}\n` });
    const res = await deliver(pushBody("main", commit));
    assert.equal(res.status, 200, JSON.stringify(res.json));
    const failed = await waitFor(String(res.json.build), finished);
    assert.equal(failed.state, "failed");
    assert.match(failed.error, /refused the token/);
    assert.equal(
      (await ctrl.client(DeploymentService, ctrl.adminToken).listDeployments({ workspace: WS })).deployments.length,
      deploymentsBefore,
    );

    // Never in an answer, an audit event or a log line.
    const shown = toJsonString(
      RepositorySchema,
      (await repos.getRepository({ workspace: WS, project: PROJECT })).repository!,
    );
    const listed = JSON.stringify((await repos.listRepositories({ workspace: WS })).repositories.map((r) => r.url));
    const audits = ctrl.client(AuditService, ctrl.adminToken);
    const audit = [
      await audits.listAuditEvents({ filter: { workspace: WS }, pageSize: 1000 }),
      await audits.listAuditEvents({ filter: { installation: true }, pageSize: 1000 }),
    ]
      .map((r) => toJsonString(ListAuditEventsResponseSchema, r))
      .join("\n");
    const logs = logged.join("");
    const buildLog = (await builds().getBuild({ workspace: WS, buildId: failed.id, logFrom: 0 })).log.join("\n");
    for (const secret of [TOKEN, SECRET, "wrong-token-1234567890"])
      for (const [where, text] of [
        ["GetRepository", shown],
        ["ListRepositories", listed],
        ["the audit log", audit],
        ["ctrl's log", logs],
        ["the build's log", `${buildLog}\n${failed.error}`],
      ] as const)
        assert.ok(!text.includes(secret), `${where} shows a credential`);
    assert.match(audit, /RepositoryWebhook\/github/, "the refused deliveries are in the audit log");
  });
});

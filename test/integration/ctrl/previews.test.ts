// Preview environments through the real ctrl (HTTP/2 API, its HTTP/1.1 webhook listener, SQLite),
// with a local server implementing GitHub's and GitLab's commit-status APIs over real HTTP:
//   - a preview copies the base's configuration (secrets only when asked), runs in one region at
//     one replica at a generated hostname, and is desired nowhere else;
//   - the workspace's quotas: resource_exhausted naming the quota, for the count and the CPU;
//   - a TTL deletes the preview on its own (ctrl's upkeep), audited as ctrl's;
//   - GitHub: a signed "opened" creates pr-N and its status is posted; unsigned, wrongly signed,
//     replayed, stale or another repository's deliveries are refused (and audited); synchronize
//     makes a new revision; closed deletes everything it desired in every region;
//   - a fork's pull request gets no secrets and waits for `approve` when the workspace asks;
//   - GitLab with a signing token (webhook-signature) and with a secret token (X-Gitlab-Token);
//   - a body past the size limit gets a 413 naming it (declared or chunked), a signed but
//     malformed pull request event a 400 naming the field; other events stay ignored;
//   - a preview's image is pinned to its own digest, as a deploy's (a real registry with htpasswd
//     auth and TLS, test/support/registry.ts), when created through the API or a pull request,
//     pushed to, or approved; an image the registry lacks is refused with nothing recorded, and
//     `krane status` shows tag and digest. Images under registry.example.com run as named.
import assert from "node:assert/strict";
import { randomBytes, randomUUID } from "node:crypto";
import { request as httpRequest } from "node:http";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fromBinary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { RegistryService } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { AuditService } from "../../../src/gen/krane/ctrl/v1/audit_pb.js";
import { ApplyDeploymentSchema } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { ConfigService } from "../../../src/gen/krane/ctrl/v1/config_pb.js";
import { EndpointService } from "../../../src/gen/krane/ctrl/v1/exposure_pb.js";
import { PreviewService, type Preview } from "../../../src/gen/krane/ctrl/v1/preview_pb.js";
import { QuotaService } from "../../../src/gen/krane/ctrl/v1/quota_pb.js";
import { Keyring } from "../../../src/ctrl/secrets/keyring.js";
import { githubSignature } from "../../../src/ctrl/previews/providers.js";
import { MAX_BODY } from "../../../src/ctrl/previews/webhooks.js";
import {
  deliver,
  githubDelivery,
  gitlabDelivery,
  startFakeProviders,
  type FakeProviders,
} from "../../support/git-providers.js";
import { startTestRegistry, type TestRegistry } from "../../support/registry.js";
import { kraneAsync } from "./process.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const WS = "acme";
const BASE = { workspace: WS, project: "shop", environment: "production" };
const GH_SECRET = "gh-webhook-secret-0123456789";
const GL_SIGNING = `whsec_${randomBytes(32).toString("base64")}`;
const GL_TOKEN = "gl-secret-token-0123456789";
const sha = (n: number): string => n.toString(16).padEnd(40, "c");

async function until<T>(check: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("previews (SQLite)", () => {
  const dir = tempDir("krane-previews-");
  let ctrl: TestCtrl;
  let providers: FakeProviders;
  let registry: TestRegistry;
  let hooksUrl = "";
  const secretValue = `s3cret-${randomBytes(8).toString("hex")}`;

  const previews = () => ctrl.client(PreviewService, ctrl.adminToken);
  const desiredRegions = async (envId: string): Promise<string[]> =>
    (
      await ctrl.store.db
        .selectFrom("desired_objects")
        .select(["region", "kind"])
        .where("environment_id", "=", envId)
        .execute()
    ).map((r) => `${r.region}:${r.kind}`);
  const list = async (): Promise<Preview[]> => (await previews().listPreviews({ workspace: WS })).previews;

  before(async () => {
    providers = await startFakeProviders({
      githubToken: "gh-status-token",
      gitlabToken: "gl-status-token",
      githubRepos: ["acme/shop"],
      gitlabProjects: ["acme/shop", "42"],
    });
    registry = await startTestRegistry({ dir: dir.path });
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      keyring: new Keyring(randomBytes(32)),
      images: { localHosts: ["registry.example.com"], ca: [registry.caPem], privateHosts: ["127.0.0.1"] },
      exposure: { publicApex: "preview.test", scheme: "http" },
      rolloutSweepIntervalMs: 200,
      previews: {
        webhookListen: { host: "127.0.0.1", port: 0 },
        expiryIntervalMs: 200,
        statusSweepIntervalMs: 100,
        statusRecheckMs: 200,
      },
    });
    assert.ok(ctrl.webhookUrl);
    hooksUrl = ctrl.webhookUrl;
    const t = ctrl.adminToken;
    for (const name of ["eu", "us"]) await ctrl.client(RegionService, t).createRegion({ name });
    // Agents of both regions, so deletions wait for their confirmation as they would for real.
    await ctrl.agentToken("eu");
    await ctrl.agentToken("us");
    await ctrl.client(WorkspaceService, t).createWorkspace({ slug: WS });
    await ctrl.client(ProjectService, t).createProject({ workspace: WS, slug: BASE.project });
    const user = registry.users[0]!;
    await ctrl
      .client(RegistryService, t)
      .addRegistry({ workspace: WS, host: registry.host, username: user.username, password: user.password });
    await ctrl.client(EnvironmentService, t).createEnvironment({
      ...BASE,
      slug: BASE.environment,
      regions: [
        { region: "eu", replicas: 3 },
        { region: "us", replicas: 2 },
      ],
      sentinel: { image: "", replicas: 2, cpuMillicores: 100n, memoryMib: 128n },
    });
    await ctrl.client(ConfigService, t).setConfig({ ...BASE, values: [{ key: "MODE", value: "prod" }] });
    await ctrl
      .client(ConfigService, t)
      .setSecrets({ ...BASE, secrets: [{ key: "DB_PASSWORD", source: { case: "value", value: secretValue } }] });
    await ctrl
      .client(EndpointService, t)
      .setEndpoint({ ...BASE, visibility: "public", pathRouting: false, pathPrefix: "" });
    await ctrl.client(DeploymentService, t).createDeployment({
      ...BASE,
      image: "registry.example.com/shop:1",
      port: 8080,
      cpuMillicores: 200n,
      memoryMib: 256n,
    });
  });

  after(async () => {
    await ctrl?.close();
    await providers?.close();
    await registry?.stop();
    dir.remove();
  });

  it("copies the base's configuration, not its secrets unless asked, into one region at one replica", async () => {
    const { preview } = await previews().createPreview({
      workspace: WS,
      project: "shop",
      baseEnvironment: "production",
      name: "pr-1",
      image: "registry.example.com/shop:pr-1",
    });
    assert.ok(preview);
    assert.equal(preview.state, "active");
    assert.equal(preview.region, "eu", "the base's first region");
    assert.equal(preview.url, "http://pr-1-shop-acme.preview.test/");
    assert.equal(preview.withSecrets, false);
    assert.equal(preview.cpuMillicores, 200n, "one replica (200m): what the workspace's quotas count of it");
    const ref = { workspace: WS, project: "shop", environment: "pr-1" };
    const config = await ctrl.client(ConfigService, ctrl.adminToken).listConfig(ref);
    assert.deepEqual(
      config.entries.map((v) => `${v.key}=${v.value}`),
      ["MODE=prod"],
    );
    assert.deepEqual((await ctrl.client(ConfigService, ctrl.adminToken).listSecrets(ref)).entries, []);
    const { environment } = await ctrl.client(EnvironmentService, ctrl.adminToken).getEnvironment(ref);
    assert.deepEqual(
      environment?.regions.map((r) => `${r.region}=${r.replicas}`),
      ["eu=1"],
    );
    assert.equal(environment?.sentinel?.replicas, 1);
    // The rollout driver desires it in that region only: its revision at 1 replica, its sentinel, its route.
    await until(async () => {
      const d = await ctrl.store.db
        .selectFrom("desired_objects")
        .select(["region", "kind", "replicas"])
        .where("environment_id", "=", preview.environmentId)
        .execute();
      return d.some((x) => x.kind === "deployment" && x.replicas === 1) ? d : undefined;
    });
    const regions = new Set((await desiredRegions(preview.environmentId)).map((r) => r.split(":")[0]));
    assert.deepEqual([...regions], ["eu"]);

    const { preview: withSecrets } = await previews().createPreview({
      workspace: WS,
      project: "shop",
      baseEnvironment: "production",
      name: "pr-2",
      image: "registry.example.com/shop:pr-2",
      region: "us",
      withSecrets: true,
    });
    assert.equal(withSecrets?.region, "us");
    const secrets = await ctrl
      .client(ConfigService, ctrl.adminToken)
      .listSecrets({ workspace: WS, project: "shop", environment: "pr-2" });
    assert.deepEqual(
      secrets.entries.map((s) => s.key),
      ["DB_PASSWORD"],
    );
    // Sealed again under the preview's own data key: the base's key cannot open it.
    const [sealed] = await ctrl.store.db
      .selectFrom("environment_secrets")
      .select(["ciphertext"])
      .where("environment_id", "=", withSecrets?.environmentId ?? "")
      .execute();
    assert.ok(sealed?.ciphertext);
    assert.ok(!Buffer.from(sealed.ciphertext).toString("latin1").includes(secretValue));
    await expectCode(
      previews().createPreview({
        workspace: WS,
        project: "shop",
        baseEnvironment: "production",
        name: "pr-1",
        image: "registry.example.com/shop:x",
      }),
      Code.AlreadyExists,
    );
  });

  it("refuses a preview past the workspace's quotas, naming the quota", async () => {
    const quotas = () => ctrl.client(QuotaService, ctrl.adminToken);
    const attempt = () =>
      previews().createPreview({
        workspace: WS,
        project: "shop",
        baseEnvironment: "production",
        name: "pr-3",
        image: "registry.example.com/shop:3",
      });
    await quotas().setQuota({ workspace: WS, values: { previews: "2" } });
    await expectCode(
      attempt(),
      Code.ResourceExhausted,
      /previews quota: it uses 2, this change asks 1 more, the limit is 2/,
    );
    // Previews count in the workspace's CPU with its other environments: none left.
    const cpu = (await quotas().getQuota({ workspace: WS })).quotas.find((q) => q.name === "cpu");
    assert.ok(cpu?.used !== undefined && cpu.used > 0n);
    await quotas().setQuota({ workspace: WS, values: { previews: "default", cpu: `${cpu.used}m` } });
    await expectCode(
      attempt(),
      Code.ResourceExhausted,
      new RegExp(`cpu quota: it uses ${cpu.used}m, this change asks \\d+m more`),
    );
    const { previews: used } = await previews().getPreviewLimits({ workspace: WS });
    assert.equal(used, 2);
    // Nothing of the refused one was applied.
    assert.equal((await list()).length, 2);
    await expectCode(
      ctrl
        .client(EnvironmentService, ctrl.adminToken)
        .getEnvironment({ workspace: WS, project: "shop", environment: "pr-3" }),
      Code.NotFound,
    );
    await quotas().setQuota({ workspace: WS, values: { cpu: "default" } });
  });

  it("deletes a preview when its TTL passes, on its own", async () => {
    const { preview } = await previews().createPreview({
      workspace: WS,
      project: "shop",
      baseEnvironment: "production",
      name: "short",
      image: "registry.example.com/shop:short",
      ttlSeconds: 1n,
    });
    assert.ok(preview);
    await until(async () => (await desiredRegions(preview.environmentId)).length > 0 || undefined);
    const gone = await until(async () => {
      const p = (await list()).find((x) => x.name === "short");
      return p === undefined || p.state === "deleting" ? true : undefined;
    }, 10_000);
    assert.ok(gone);
    await until(async () => ((await desiredRegions(preview.environmentId)).length === 0 ? true : undefined));
    const { events } = await ctrl.client(AuditService, ctrl.adminToken).listAuditEvents({
      filter: { workspace: WS, method: "system/PreviewExpired" },
    });
    assert.equal(events.length, 1);
    assert.equal(events[0]?.actor?.kind, "system");
    assert.ok(events[0]?.changes.some((c) => c.field === "environment.deleting" && c.afterJson === "true"));
  });

  it("GitHub: a signed pull request makes, updates and deletes its preview; anything else is refused", async () => {
    const { hook } = await previews().createPreviewHook({
      workspace: WS,
      project: "shop",
      baseEnvironment: "production",
      provider: "github",
      repository: "acme/shop",
      secret: GH_SECRET,
      imageTemplate: "registry.example.com/shop:{short_sha}",
      statusApiUrl: providers.githubUrl,
      statusToken: "gh-status-token",
      withSecrets: true,
    });
    assert.ok(hook);
    assert.equal(hook.verification, "hmac-sha256");
    const url = `${hooksUrl}${hook.path}`;

    const opened = githubDelivery(GH_SECRET, { action: "opened", number: 7, sha: sha(7), repository: "acme/shop" });
    const r = await deliver(url, opened);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const pr7 = (await list()).find((p) => p.name === "pr-7");
    assert.ok(pr7);
    assert.equal(pr7.image, `registry.example.com/shop:${sha(7).slice(0, 7)}`);
    assert.equal(pr7.withSecrets, true, "not a fork: the hook's --with-secrets applies");
    assert.equal(pr7.pullRequest?.number, 7n);
    // Its state goes back to the pull request: deploying (no agent reports an instance here).
    const posted = await until(async () => providers.statuses.find((s) => s.sha === sha(7)));
    assert.equal(posted.state, "pending");
    assert.equal(posted.repository, "acme/shop");
    assert.equal(posted.targetUrl, "http://pr-7-shop-acme.preview.test/");
    assert.equal(posted.context, "krane/preview");

    // The same delivery again: a replay.
    assert.equal((await deliver(url, opened)).status, 409);
    // Unsigned, signed with another secret, a body changed after signing.
    assert.equal(
      (await deliver(url, { ...opened, headers: { ...opened.headers, "x-hub-signature-256": "" } })).status,
      401,
    );
    const { "x-hub-signature-256": _dropped, ...unsigned } = opened.headers;
    void _dropped;
    assert.equal((await deliver(url, { body: opened.body, headers: unsigned })).status, 401);
    const forged = githubDelivery("not-the-secret-0123456789", {
      action: "closed",
      number: 7,
      sha: sha(7),
      repository: "acme/shop",
    });
    assert.equal((await deliver(url, forged)).status, 401);
    assert.equal(
      (await deliver(url, { ...opened, body: opened.body.replace('"number":7', '"number":8') })).status,
      401,
    );
    // Signed, but stale (outside the replay window), or about another repository.
    const stale = githubDelivery(GH_SECRET, {
      action: "closed",
      number: 7,
      sha: sha(7),
      repository: "acme/shop",
      updatedAt: new Date(Date.now() - 60 * 60_000),
    });
    assert.equal((await deliver(url, stale)).status, 409);
    const elsewhere = githubDelivery(GH_SECRET, { action: "closed", number: 7, sha: sha(7), repository: "evil/shop" });
    assert.equal((await deliver(url, elsewhere)).status, 403);
    assert.equal((await list()).find((p) => p.name === "pr-7")?.state, "active", "none of them changed anything");

    // A push: a new revision with the new image.
    const pushed = await deliver(
      url,
      githubDelivery(GH_SECRET, { action: "synchronize", number: 7, sha: sha(77), repository: "acme/shop" }),
    );
    assert.equal(pushed.status, 200);
    const { deployments } = await ctrl
      .client(DeploymentService, ctrl.adminToken)
      .listDeployments({ workspace: WS, project: "shop", environment: "pr-7" });
    assert.deepEqual(
      deployments.map((d) => d.image),
      [`registry.example.com/shop:${sha(77).slice(0, 7)}`, `registry.example.com/shop:${sha(7).slice(0, 7)}`],
    );
    await until(async () => providers.statuses.find((s) => s.sha === sha(77)));

    // Closed: everything it desired goes, in every region.
    await until(async () => ((await desiredRegions(pr7.environmentId)).length > 0 ? true : undefined));
    const closed = await deliver(
      url,
      githubDelivery(GH_SECRET, { action: "closed", number: 7, sha: sha(77), repository: "acme/shop" }),
    );
    assert.equal(closed.status, 200);
    assert.deepEqual(await desiredRegions(pr7.environmentId), []);
    assert.equal((await list()).find((p) => p.name === "pr-7")?.state, "deleting");

    // Audited: the hook as the actor of each change; the refusals too.
    const { events } = await ctrl.client(AuditService, ctrl.adminToken).listAuditEvents({
      filter: { workspace: WS, method: "PreviewWebhook/github" },
    });
    const accepted = events.filter((e) => e.code === "ok");
    assert.equal(accepted.length, 3);
    for (const e of accepted) {
      assert.equal(e.actor?.kind, "webhook");
      assert.equal(e.actor?.id, hook.id);
      assert.match(e.actor?.name ?? "", /octocat/);
    }
    assert.deepEqual(
      events
        .filter((e) => e.code !== "ok")
        .map((e) => e.code)
        .sort(),
      ["already_exists", "failed_precondition", "permission_denied"],
    );
    const { events: unsignedEvents } = await ctrl.client(AuditService, ctrl.adminToken).listAuditEvents({
      filter: { installation: true, method: "PreviewWebhook/github" },
    });
    assert.equal(unsignedEvents.length, 4, "the unsigned and forged deliveries, in the installation's chain");
  });

  it("a fork gets no secrets and waits for approval when the workspace asks for it", async () => {
    const { hook } = await previews().createPreviewHook({
      workspace: WS,
      project: "shop",
      baseEnvironment: "production",
      provider: "github",
      repository: "acme/shop",
      secret: GH_SECRET,
      imageTemplate: "registry.example.com/shop:{sha}",
      statusApiUrl: providers.githubUrl,
      statusToken: "gh-status-token",
      withSecrets: true,
    });
    assert.ok(hook);
    const url = `${hooksUrl}${hook.path}`;
    const r = await deliver(
      url,
      githubDelivery(GH_SECRET, { action: "opened", number: 9, sha: sha(9), repository: "acme/shop", fork: true }),
    );
    assert.equal(r.status, 200);
    const waiting = (await list()).find((p) => p.name === "pr-9");
    assert.equal(waiting?.state, "awaiting_approval");
    assert.equal(waiting?.environmentId, "");
    assert.equal(waiting?.withSecrets, false);
    const status = await until(async () => providers.statuses.find((s) => s.sha === sha(9)));
    assert.match(status.description, /waiting for approval/);
    const { preview } = await previews().approvePreview({ workspace: WS, project: "shop", name: "pr-9" });
    assert.equal(preview?.state, "active");
    assert.deepEqual(
      (
        await ctrl
          .client(ConfigService, ctrl.adminToken)
          .listSecrets({ workspace: WS, project: "shop", environment: "pr-9" })
      ).entries,
      [],
      "a fork's preview never gets the base's secrets",
    );
    assert.equal(
      (
        await deliver(
          url,
          githubDelivery(GH_SECRET, { action: "closed", number: 9, sha: sha(9), repository: "acme/shop", fork: true }),
        )
      ).status,
      200,
    );
  });

  it("GitLab: a signing token (webhook-signature) or a secret token (X-Gitlab-Token)", async () => {
    for (const [secret, verification, iid] of [
      [GL_SIGNING, "signing-token", 11],
      [GL_TOKEN, "secret-token", 12],
    ] as const) {
      const { hook } = await previews().createPreviewHook({
        workspace: WS,
        project: "shop",
        baseEnvironment: "production",
        provider: "gitlab",
        repository: "acme/shop",
        secret,
        imageTemplate: "registry.example.com/shop:mr-{pr}",
        statusApiUrl: providers.gitlabUrl,
        statusToken: "gl-status-token",
      });
      assert.equal(hook?.verification, verification);
      const url = `${hooksUrl}${hook?.path ?? ""}`;
      const open = gitlabDelivery(secret, { action: "open", iid, sha: sha(iid), project: "acme/shop", projectId: 42 });
      const res = await deliver(url, open);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal((await deliver(url, open)).status, 409, "replayed");
      const wrong = gitlabDelivery(
        secret === GL_TOKEN ? "another-token-0123456789" : `whsec_${randomBytes(32).toString("base64")}`,
        {
          action: "close",
          iid,
          sha: sha(iid),
          project: "acme/shop",
          projectId: 42,
        },
      );
      assert.equal((await deliver(url, wrong)).status, 401);
      const p = (await list()).find((x) => x.name === `mr-${iid}`);
      assert.equal(p?.image, `registry.example.com/shop:mr-${iid}`);
      const posted = await until(async () =>
        providers.statuses.find((s) => s.provider === "gitlab" && s.sha === sha(iid)),
      );
      assert.equal(posted.state, "running", "GitLab's state for a preview being deployed");
      assert.equal(posted.repository, "acme/shop");
      const merged = await deliver(
        url,
        gitlabDelivery(secret, { action: "merge", iid, sha: sha(iid), project: "acme/shop", projectId: 42 }),
      );
      assert.equal(merged.status, 200);
      assert.equal((await list()).find((x) => x.name === `mr-${iid}`)?.state, "deleting");
    }
  });

  it("a body past the limit gets a 413 naming it; a malformed pull request event a 400 naming the field", async () => {
    const { hook } = await previews().createPreviewHook({
      workspace: WS,
      project: "shop",
      baseEnvironment: "production",
      provider: "github",
      repository: "acme/shop",
      secret: GH_SECRET,
      imageTemplate: "registry.example.com/shop:{short_sha}",
    });
    const url = new URL(`${hooksUrl}${hook?.path ?? ""}`);
    const signed = (body: string, event = "pull_request") => ({
      body,
      headers: {
        "content-type": "application/json",
        "x-github-event": event,
        "x-github-delivery": randomUUID(),
        "x-hub-signature-256": githubSignature(GH_SECRET, body),
      },
    });
    // Declared too large (Content-Length), and found too large (chunked, no length): either way
    // the sender reads a 413 that names the limit, not a reset connection.
    const big = signed(`{"pad":"${"x".repeat(MAX_BODY)}"}`);
    const declared = await deliver(url.href, big);
    assert.equal(declared.status, 413);
    assert.match(String(declared.body.error), /larger than the limit of 2 MiB \(2097152 bytes\)/);
    const chunked = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(url, { method: "POST", headers: big.headers }, (res) => {
        const parts: Buffer[] = [];
        res.on("data", (c: Buffer) => parts.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString() }));
      });
      req.on("error", reject);
      for (let i = 0; i < big.body.length; i += 64 * 1024) req.write(big.body.slice(i, i + 64 * 1024));
      req.end();
    });
    assert.equal(chunked.status, 413);
    assert.match(chunked.body, /larger than the limit of 2 MiB/);

    // Signed, but not what a pull_request event is: 400 naming what is wrong.
    const event = JSON.parse(
      githubDelivery(GH_SECRET, { action: "opened", number: 21, sha: sha(21), repository: "acme/shop" }).body,
    ) as Record<string, unknown> & { pull_request: Record<string, unknown> };
    const { pull_request: pr, ...withoutPr } = event;
    const malformed: [string, RegExp][] = [
      [JSON.stringify(withoutPr), /^pull_request: is missing/],
      [JSON.stringify({ ...event, number: "x", pull_request: { ...pr, number: "x" } }), /^number: /],
      [JSON.stringify({ ...event, pull_request: { ...pr, head: { ref: "x" } } }), /^pull_request\.head\.sha: /],
      [JSON.stringify({ ...event, action: undefined }), /^action: is missing/],
      ["[]", /^body: is not a JSON object/],
    ];
    for (const [body, message] of malformed) {
      const r = await deliver(url.href, signed(body));
      assert.equal(r.status, 400, body.slice(0, 80));
      assert.match(String(r.body.error), message);
    }
    // The signature still comes first: unsigned, the same body is a 401.
    const { "x-hub-signature-256": _sig, ...unsignedHeaders } = signed(JSON.stringify(withoutPr)).headers;
    void _sig;
    assert.equal((await deliver(url.href, { body: JSON.stringify(withoutPr), headers: unsignedHeaders })).status, 401);
    // Another event, or an action that changes no preview, stays ignored.
    const push = await deliver(url.href, signed(JSON.stringify({ ref: "refs/heads/main" }), "push"));
    assert.equal(push.status, 200);
    assert.match(String(push.body.ignored), /not a pull request event/);
    const labeled = await deliver(url.href, signed(JSON.stringify({ ...event, action: "labeled" })));
    assert.equal(labeled.status, 200);
    assert.match(String(labeled.body.ignored), /action "labeled" changes no preview/);
    assert.equal(
      (await list()).find((p) => p.name === "pr-21"),
      undefined,
      "none of them made a preview",
    );
  });

  /** The image and digest of each revision of the environment, newest first. */
  const revisionsOf = async (environmentId: string) =>
    ctrl.store.db
      .selectFrom("deployments")
      .select(["image", "image_digest"])
      .where("environment_id", "=", environmentId)
      .orderBy("revision", "desc")
      .execute();

  it("runs the preview's own image, pinned to its own digest, not the base revision's", async () => {
    // The base's running revision pinned to a digest (as a deploy with digest resolution does).
    const baseDigest = `sha256:${"ab".repeat(32)}`;
    await ctrl.store.db
      .updateTable("deployments")
      .set({ image_digest: baseDigest })
      .where("image", "=", "registry.example.com/shop:1")
      .execute();
    const image = `${registry.host}/shop/web:pr-digest`;
    const own = await registry.pushTiny("shop/web", "pr-digest", "pr-digest");
    const { preview } = await previews().createPreview({
      workspace: WS,
      project: "shop",
      baseEnvironment: "production",
      name: "pr-digest",
      image,
    });
    assert.ok(preview);
    assert.notEqual(own, baseDigest);
    assert.deepEqual(await revisionsOf(preview.environmentId), [{ image, image_digest: own }]);
    // What its pods run: the digest, even once the tag moves.
    const payload = await until(async () => {
      const row = await ctrl.store.db
        .selectFrom("desired_objects")
        .innerJoin("deployments", "deployments.id", "desired_objects.object_id")
        .select("desired_objects.payload")
        .where("desired_objects.kind", "=", "deployment")
        .where("deployments.environment_id", "=", preview.environmentId)
        .executeTakeFirst();
      return row && fromBinary(ApplyDeploymentSchema, row.payload);
    });
    assert.equal(payload.image, `${registry.host}/shop/web@${own}`);
    await registry.pushTiny("shop/web", "pr-digest", "moved");
    const shown = await kraneAsync(["status", "shop/pr-digest", "--retry-for", "0"], {
      KRANE_CTRL_URL: ctrl.url,
      KRANE_TOKEN: ctrl.adminToken,
      KRANE_WORKSPACE: WS,
    });
    assert.equal(shown.status, 0, shown.stderr);
    assert.ok(shown.stdout.includes(image), shown.stdout);
    assert.ok(shown.stdout.includes(own), `krane status shows the digest:\n${shown.stdout}`);

    // An image the registry does not have: refused naming the field, nothing recorded.
    await expectCode(
      previews().createPreview({
        workspace: WS,
        project: "shop",
        baseEnvironment: "production",
        name: "pr-missing",
        image: `${registry.host}/shop/web:never-pushed`,
      }),
      Code.InvalidArgument,
      /image: registry .* has no image shop\/web:never-pushed/,
    );
    assert.equal(
      (await list()).find((p) => p.name === "pr-missing"),
      undefined,
    );
    await previews().deletePreview({ workspace: WS, project: "shop", name: "pr-digest" });
  });

  it("a pull request's preview pins its image when opened, pushed to and approved", async () => {
    const { hook } = await previews().createPreviewHook({
      workspace: WS,
      project: "shop",
      baseEnvironment: "production",
      provider: "github",
      repository: "acme/shop",
      secret: GH_SECRET,
      imageTemplate: `${registry.host}/shop/web:{short_sha}`,
      statusApiUrl: providers.githubUrl,
      statusToken: "gh-status-token",
      withSecrets: false,
    });
    assert.ok(hook);
    const url = `${hooksUrl}${hook.path}`;
    const tag = (n: number): string => sha(n).slice(0, 7);
    const image = (n: number): string => `${registry.host}/shop/web:${tag(n)}`;

    // Opened before its image is pushed: refused naming the image, no preview, no record of
    // the delivery (it is delivered again once the image is there).
    const opened = githubDelivery(GH_SECRET, { action: "opened", number: 31, sha: sha(31), repository: "acme/shop" });
    const early = await deliver(url, opened);
    assert.equal(early.status, 400, JSON.stringify(early.body));
    assert.match(String(early.body.error), new RegExp(`has no image shop/web:${tag(31)}`));
    assert.equal(
      (await list()).find((p) => p.name === "pr-31"),
      undefined,
    );
    const d31 = await registry.pushTiny("shop/web", tag(31), "31");
    assert.equal((await deliver(url, opened)).status, 200);
    const pr31 = (await list()).find((p) => p.name === "pr-31");
    assert.ok(pr31);
    assert.deepEqual(await revisionsOf(pr31.environmentId), [{ image: image(31), image_digest: d31 }]);

    // A push: the new revision runs the new image's digest.
    const d32 = await registry.pushTiny("shop/web", tag(32), "32");
    const pushed = githubDelivery(GH_SECRET, {
      action: "synchronize",
      number: 31,
      sha: sha(32),
      repository: "acme/shop",
    });
    assert.equal((await deliver(url, pushed)).status, 200);
    assert.deepEqual(await revisionsOf(pr31.environmentId), [
      { image: image(32), image_digest: d32 },
      { image: image(31), image_digest: d31 },
    ]);

    // A fork waits for approval; approved, it runs the digest its tag names then.
    const d33 = await registry.pushTiny("shop/web", tag(33), "33");
    const fork = { action: "opened", number: 33, sha: sha(33), repository: "acme/shop", fork: true } as const;
    assert.equal((await deliver(url, githubDelivery(GH_SECRET, fork))).status, 200);
    const approved = (await previews().approvePreview({ workspace: WS, project: "shop", name: "pr-33" })).preview;
    assert.equal(approved?.state, "active");
    assert.deepEqual(await revisionsOf(approved.environmentId), [{ image: image(33), image_digest: d33 }]);

    for (const n of [31, 33])
      await deliver(
        url,
        githubDelivery(GH_SECRET, { action: "closed", number: n, sha: sha(n), repository: "acme/shop" }),
      );
  });
});

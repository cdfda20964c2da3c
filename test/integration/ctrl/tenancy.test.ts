// Workspace tokens against a real ctrl over HTTP/2 (SQLite, then PostgreSQL): every method of every
// public service found in src/gen is called with another workspace's token, aimed at the objects
// of the first workspace (by slug and by id), and must be refused — not_found for another
// workspace's objects, permission_denied for the installation's — with nothing of the first
// workspace in the answer. A service or method added without a rule in src/ctrl/auth/scope.ts
// fails here. Then the attacker's other moves: guessed ids, another token's page tokens and
// idempotency keys, the dashboard's session, a revoked token, a deleted workspace and one created
// again under the same slug.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create, toJsonString, type DescMessage, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import {
  ApiTokenService,
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { AuditService } from "../../../src/gen/krane/ctrl/v1/audit_pb.js";
import { ConfigService } from "../../../src/gen/krane/ctrl/v1/config_pb.js";
import { DomainService, EndpointService } from "../../../src/gen/krane/ctrl/v1/exposure_pb.js";
import { JobService } from "../../../src/gen/krane/ctrl/v1/job_pb.js";
import { LogService } from "../../../src/gen/krane/ctrl/v1/logs_pb.js";
import { PreviewService } from "../../../src/gen/krane/ctrl/v1/preview_pb.js";
import { ReleaseService } from "../../../src/gen/krane/ctrl/v1/release_pb.js";
import { isAgentMethod } from "../../../src/ctrl/auth/policy.js";
import { ruleOf } from "../../../src/ctrl/auth/scope.js";
import { finishDeletions } from "../../../src/ctrl/domain/deletion.js";
import { Keyring } from "../../../src/ctrl/secrets/keyring.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const GEN = join(import.meta.dirname, "..", "..", "..", "src", "gen", "krane", "ctrl", "v1");

/** Every service src/gen holds that user tokens call (every one but the agents'). */
async function publicServices(): Promise<DescService[]> {
  const out: DescService[] = [];
  for (const file of readdirSync(GEN)
    .filter((f) => f.endsWith("_pb.ts"))
    .sort()) {
    const mod = (await import(join(GEN, file))) as Record<string, unknown>;
    for (const v of Object.values(mod)) {
      const s = v as Partial<DescService> | null;
      if (s && typeof s === "object" && s.kind === "service" && !(s.methods ?? []).every(isAgentMethod))
        out.push(s as DescService);
    }
  }
  return out;
}

interface Victim {
  workspaceId: string;
  projectId: string;
  environmentId: string;
  deploymentId: string;
  hookId: string;
  tokenId: string;
  token: string;
  /** The installation's: no workspace token may see it. */
  clusterId: string;
}

/** A request aimed at the victim's objects, every field that names one filled (by slug or by id). */
function victimRequest(method: DescMethod, v: Victim, byId: boolean, installation = false): Record<string, unknown> {
  const refs: Record<string, unknown> = {
    workspace: byId ? v.workspaceId : "acme",
    project: byId ? v.projectId : "web",
    environment: byId ? v.environmentId : "prod",
    base_environment: "prod",
    deployment_id: v.deploymentId,
    hook_id: v.hookId,
    token_id: v.tokenId,
    hostname: "shop.acme-example.com",
    name:
      method.name === "ApplyRelease" || method.name === "GetRelease" || method.name === "DeleteRelease"
        ? "extras"
        : "pr-1",
    region: "eu",
    slug: "stolen",
    image: "registry.example.com/evil:1",
    visibility: "public",
    confirm:
      { DeleteWorkspace: "acme", DeleteProject: "web", DeleteEnvironment: "prod", DeleteJob: "report" }[method.name] ??
      "",
    cluster_name: "default",
    keys: ["MODE"],
    values: [{ key: "MODE", value: "evil" }],
    replicas: 5,
    follow: false,
    latest: true,
    filter: installation ? { installation: true } : { workspace: byId ? v.workspaceId : "acme" },
    spec: { name: "report", schedule: "@daily" },
    limits: { maxPreviews: 1000 },
    provider: "github",
    repository: "acme/shop",
    secret: "x".repeat(32),
    image_template: "registry.example.com/evil:{short_sha}",
  };
  if (method.name === "DeleteJob") refs.name = "report";
  // A quota that changes nothing else the test calls.
  if (method.name === "SetQuota") refs.values = { build_minutes: "600" };
  const init: Record<string, unknown> = {};
  for (const f of method.input.fields) {
    const value = refs[f.name];
    if (value !== undefined) init[f.localName] = value;
  }
  return init;
}

/**
 * Calls any method with a message. A server stream is read up to its first answer (a live view's
 * first answer is its whole state; a refusal comes before any), for at most 20 s.
 */
async function callAny(client: Client<DescService>, method: DescMethod, message: unknown): Promise<unknown[]> {
  const fn = (client as unknown as Record<string, (m: unknown, o?: { signal: AbortSignal }) => unknown>)[
    method.localName
  ];
  assert.ok(fn, `${method.name}: the client has it`);
  if (method.methodKind === "server_streaming") {
    const out: unknown[] = [];
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), 20_000);
    try {
      for await (const m of fn.call(client, message, { signal: ac.signal }) as AsyncIterable<unknown>) {
        out.push(m);
        break;
      }
    } catch (err) {
      if (!ac.signal.aborted) throw err;
    } finally {
      clearTimeout(timer);
      ac.abort();
    }
    return out;
  }
  return [await fn.call(client, message)];
}

function jsonOf(schema: DescMessage, m: unknown): string {
  return toJsonString(schema, m as never);
}

function suite(newUrl: () => Promise<string>): void {
  let ctrl: TestCtrl;
  const v = {} as Victim;
  let evil: string;
  let evilWorkspaceId: string;

  before(async () => {
    ctrl = await startTestCtrl(await newUrl(), {
      keyring: new Keyring(randomBytes(32)),
      domains: { resolver: { resolveTxt: async () => [] } },
      audit: { refusalLimits: { perSecond: 1000, burst: 10_000, total: { perSecond: 1000, burst: 10_000 } } },
      // A deleted workspace's token leaves the auth cache sooner (the default is 5 s).
      auth: { cacheTtlMs: 1000 },
      // No agent answers logs here: say so soon.
      logs: { answerTimeoutMs: 300 },
    });
    const t = ctrl.adminToken;
    await ctrl.client(RegionService, t).createRegion({ name: "eu" });
    await ctrl.agentToken("eu");
    v.workspaceId = (await ctrl.client(WorkspaceService, t).createWorkspace({ slug: "acme" })).workspace?.id ?? "";
    evilWorkspaceId = (await ctrl.client(WorkspaceService, t).createWorkspace({ slug: "evil" })).workspace?.id ?? "";
    v.projectId =
      (await ctrl.client(ProjectService, t).createProject({ workspace: "acme", slug: "web" })).project?.id ?? "";
    const ref = { workspace: "acme", project: "web", environment: "prod" };
    v.environmentId =
      (
        await ctrl.client(EnvironmentService, t).createEnvironment({
          workspace: "acme",
          project: "web",
          slug: "prod",
          regions: [{ region: "eu", replicas: 1 }],
        })
      ).environment?.id ?? "";
    v.deploymentId =
      (
        await ctrl
          .client(DeploymentService, t)
          .createDeployment({ ...ref, image: "registry.example.com/shop:1", port: 8080 })
      ).deployment?.id ?? "";
    await ctrl.client(ConfigService, t).setConfig({ ...ref, values: [{ key: "MODE", value: "prod" }] });
    await ctrl
      .client(ConfigService, t)
      .setSecrets({ ...ref, secrets: [{ key: "DB_PASSWORD", source: { case: "value", value: "hunter2" } }] });
    await ctrl.client(EndpointService, t).setEndpoint({ ...ref, visibility: "public" });
    await ctrl.client(DomainService, t).addDomain({ ...ref, hostname: "shop.acme-example.com" });
    await ctrl.client(JobService, t).putJob({ ...ref, spec: { name: "report", schedule: "@hourly" } });
    await ctrl.client(ReleaseService, t).applyRelease({
      ...ref,
      name: "extras",
      files: [{ name: "cm.yaml", content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {a: b}\n" }],
    });
    v.hookId =
      (
        await ctrl.client(PreviewService, t).createPreviewHook({
          workspace: "acme",
          project: "web",
          baseEnvironment: "prod",
          provider: "github",
          repository: "acme/shop",
          secret: "s".repeat(32),
          imageTemplate: "registry.example.com/shop:{short_sha}",
        })
      ).hook?.id ?? "";
    await ctrl.client(PreviewService, t).createPreview({
      workspace: "acme",
      project: "web",
      baseEnvironment: "prod",
      name: "pr-1",
      image: "registry.example.com/shop:pr-1",
    });
    const acme = await ctrl.client(ApiTokenService, t).createApiToken({ name: "ci", workspace: "acme" });
    v.tokenId = acme.apiToken?.id ?? "";
    v.token = acme.token;
    evil = (await ctrl.client(ApiTokenService, t).createApiToken({ name: "ci", workspace: "evil" })).token;
    v.clusterId = (await ctrl.client(RegionService, t).listClusters({})).clusters[0]?.id ?? "";
    assert.ok(
      Object.values(v).every((x) => x !== ""),
      JSON.stringify(v),
    );
  });
  after(async () => {
    await ctrl?.close();
  });

  /** What of the victim no answer to the attacker may hold (ids it did not send, secrets, names). */
  const secretsOf = (sent: string): string[] =>
    [
      v.workspaceId,
      v.projectId,
      v.environmentId,
      v.deploymentId,
      v.hookId,
      v.tokenId,
      v.clusterId,
      "hunter2",
      "shop:1",
    ].filter((s) => !sent.includes(s));

  it("every public method of src/gen has a rule, and every rule a method", async () => {
    const services = await publicServices();
    assert.ok(services.length >= 15, `found ${services.length} public services`);
    for (const s of services)
      for (const m of s.methods) assert.ok(ruleOf(m), `${s.typeName}/${m.name} has no tenancy rule`);
  });

  it("another workspace's token is refused by every public method, and learns nothing", async () => {
    const headBefore = (
      await ctrl
        .client(AuditService, ctrl.adminToken)
        .listAuditEvents({ filter: { workspace: "acme" }, pageSize: 1000 })
    ).events.length;
    let calls = 0;
    for (const service of await publicServices()) {
      const client = ctrl.client(service, evil) as unknown as Client<DescService>;
      for (const method of service.methods) {
        const rule = ruleOf(method);
        const variants: [string, Record<string, unknown>][] = [
          ["by slug", victimRequest(method, v, false)],
          ["by id", victimRequest(method, v, true)],
        ];
        if (method.input.fields.some((f) => f.name === "filter"))
          variants.push(["installation", victimRequest(method, v, false, true)]);
        for (const [variant, init] of variants) {
          const what = `${service.name}/${method.name} (${variant})`;
          const message = create(method.input, init as never);
          const sent = jsonOf(method.input, message);
          calls++;
          let answers: unknown[];
          try {
            answers = await callAny(client, method, message);
          } catch (err) {
            const ce = ConnectError.from(err);
            const expected =
              rule?.kind === "installation" || variant === "installation" ? Code.PermissionDenied : Code.NotFound;
            assert.equal(Code[ce.code], Code[expected], `${what}: ${ce.rawMessage}`);
            for (const s of secretsOf(sent)) assert.ok(!ce.rawMessage.includes(s), `${what}: the refusal names ${s}`);
            continue;
          }
          // Answered: only the methods that answer from the caller's own scope may, and with
          // nothing of the victim's.
          assert.equal(rule?.kind, "caller", `${what} answered a workspace token aimed at another workspace`);
          assert.ok(answers.length > 0, `${what}: no answer to look into`);
          for (const a of answers) {
            const text = jsonOf(method.output, a);
            for (const s of [...secretsOf(sent), "acme"])
              assert.ok(!text.includes(s), `${what}: answer holds ${s}: ${text}`);
          }
        }
      }
    }
    assert.ok(calls >= 130, `${calls} calls`);
    // Nothing of the victim changed, and nothing was written into its audit chain.
    const events = (
      await ctrl
        .client(AuditService, ctrl.adminToken)
        .listAuditEvents({ filter: { workspace: "acme" }, pageSize: 1000 })
    ).events;
    assert.equal(events.length, headBefore, "no event in the victim's chain");
    const config = await ctrl
      .client(ConfigService, ctrl.adminToken)
      .listConfig({ workspace: "acme", project: "web", environment: "prod" });
    assert.deepEqual(
      config.entries.map((e) => `${e.key}=${e.value}`),
      ["MODE=prod"],
    );
    const tokens = await ctrl.client(ApiTokenService, ctrl.adminToken).listApiTokens({});
    assert.ok(
      tokens.apiTokens.some((t) => t.id === v.tokenId),
      "the victim's token was not revoked",
    );
    assert.ok(
      !tokens.apiTokens.some((t) => t.name === "pr-1"),
      "no token was made by the attacker in a scope of its choosing",
    );
    // Each refusal is an event of the attacker's own chain, naming its scope.
    const own = (
      await ctrl
        .client(AuditService, evil)
        .listAuditEvents({ filter: { workspace: "evil", refusedOnly: true }, pageSize: 1000 })
    ).events;
    const outside = own.filter((e) => e.message.endsWith("(refused: outside the token's workspace)"));
    assert.ok(outside.length >= calls - 10, `${outside.length} of ${calls} refusals recorded`);
    for (const e of outside) {
      assert.equal(e.actor?.scope, evilWorkspaceId);
      assert.deepEqual(e.targets, [], "no id of what it named");
    }
  });

  it("guessed ids: another workspace's deployment answers exactly as one that does not exist", async () => {
    const deployments = ctrl.client(DeploymentService, evil);
    const refusal = async (id: string): Promise<string> => {
      try {
        await deployments.getDeployment({ deploymentId: id });
      } catch (err) {
        const ce = ConnectError.from(err);
        return `${Code[ce.code]} ${ce.rawMessage.replace(id, "<id>")}`;
      }
      return "answered";
    };
    const real = await refusal(v.deploymentId);
    assert.equal(real, 'NotFound deployment "<id>" not found');
    for (const guess of ["dep_aaaaaaaaaaaaaaaaaaaa", `dep_${v.deploymentId.slice(4, -1)}x`])
      assert.equal(await refusal(guess), real);
    // Its own workspace named, the victim's objects below it by id: looked up within its own.
    const mixed = { workspace: "evil", project: v.projectId, environment: v.environmentId };
    await expectCode(ctrl.client(ProjectService, evil).getProject(mixed), Code.NotFound);
    await expectCode(ctrl.client(StatusService, evil).getEnvironmentStatus(mixed), Code.NotFound);
    await expectCode(ctrl.client(ConfigService, evil).listSecrets(mixed), Code.NotFound);
    await expectCode(
      ctrl.client(PreviewService, evil).deletePreviewHook({ workspace: "evil", hookId: v.hookId }),
      Code.NotFound,
    );
    await expectCode(
      ctrl.client(DomainService, evil).removeDomain({ ...mixed, hostname: "shop.acme-example.com" }),
      Code.NotFound,
    );
    // The victim's own token reaches it.
    const own = await ctrl.client(DeploymentService, v.token).getDeployment({ deploymentId: v.deploymentId });
    assert.equal(own.deployment?.id, v.deploymentId);
  });

  it("a workspace token works within its workspace, and the CLI's default workspace is its own", async () => {
    const acme = v.token;
    const { workspaces } = await ctrl.client(WorkspaceService, acme).listWorkspaces({});
    assert.deepEqual(
      workspaces.map((w) => w.slug),
      ["acme"],
    );
    const status = await ctrl
      .client(StatusService, acme)
      .getEnvironmentStatus({ workspace: v.workspaceId, project: "web", environment: "prod" });
    assert.equal(status.environment?.id, v.environmentId);
    const { projects } = await ctrl.client(ProjectService, acme).listProjects({ workspace: "acme" });
    assert.deepEqual(
      projects.map((p) => p.id),
      [v.projectId],
    );
    // Its own audit chain, and its events name its scope.
    const { events } = await ctrl.client(AuditService, acme).listAuditEvents({ filter: { workspace: "acme" } });
    assert.ok(events.length > 0);
    await ctrl.client(ProjectService, acme).createProject({ workspace: "acme", slug: "api" });
    const { events: after } = await ctrl
      .client(AuditService, acme)
      .listAuditEvents({ filter: { workspace: "acme", method: "CreateProject" } });
    const mine = after.find((e) => e.actor?.id === v.tokenId);
    assert.equal(mine?.actor?.scope, v.workspaceId);
    const byAdmin = after.find((e) => e.actor?.name === "admin");
    assert.equal(byAdmin?.actor?.scope, "installation");
    // Installation calls are refused as such.
    await expectCode(ctrl.client(RegionService, acme).listRegions({}), Code.PermissionDenied, /installation API token/);
    await expectCode(
      ctrl.client(AuditService, acme).listAuditEvents({ filter: { installation: true } }),
      Code.PermissionDenied,
    );
  });

  it("a workspace token manages its own workspace's tokens only", async () => {
    const tokens = ctrl.client(ApiTokenService, v.token);
    const made = await tokens.createApiToken({ name: "deploy" });
    assert.equal(made.apiToken?.workspaceId, v.workspaceId, "bound to the creator's workspace");
    assert.equal(made.apiToken?.workspace, "acme");
    await expectCode(
      tokens.createApiToken({ name: "x", workspace: "evil" }),
      Code.NotFound,
      /workspace "evil" not found/,
    );
    await expectCode(tokens.createApiToken({ name: "x", workspace: evilWorkspaceId }), Code.NotFound);
    // The new token is as bound as its maker.
    await expectCode(ctrl.client(ProjectService, made.token).listProjects({ workspace: "evil" }), Code.NotFound);
    // Names are per scope: "ci" exists in evil and in acme.
    await expectCode(tokens.createApiToken({ name: "ci" }), Code.AlreadyExists, /in workspace "acme"/);
    const listed = (await tokens.listApiTokens({})).apiTokens;
    assert.deepEqual(listed.map((t) => t.name).sort(), ["ci", "deploy"]);
    assert.ok(listed.every((t) => t.workspaceId === v.workspaceId));
    const evilTokens = (await ctrl.client(ApiTokenService, evil).listApiTokens({})).apiTokens;
    assert.equal(evilTokens.length, 1);
    await expectCode(tokens.revokeApiToken({ tokenId: evilTokens[0]?.id ?? "" }), Code.NotFound);
    // Its token's making is an event of its workspace's chain, naming the new token.
    const made_ = (
      await ctrl
        .client(AuditService, v.token)
        .listAuditEvents({ filter: { workspace: "acme", method: "CreateApiToken" }, pageSize: 1000 })
    ).events.filter((e) => e.code === "ok");
    assert.ok(made_.some((e) => e.targets.includes(made.apiToken?.id ?? "-") && e.actor?.id === v.tokenId));
    await tokens.revokeApiToken({ tokenId: made.apiToken?.id ?? "" });
    await expectCode(ctrl.client(ProjectService, made.token).listProjects({ workspace: "acme" }), Code.Unauthenticated);
    // An installation token sees every token with its scope.
    const all = (await ctrl.client(ApiTokenService, ctrl.adminToken).listApiTokens({})).apiTokens;
    assert.deepEqual(all.map((t) => `${t.name}@${t.workspace || "installation"}`).sort(), [
      "admin@installation",
      "ci@acme",
      "ci@evil",
    ]);
  });

  it("page tokens and idempotency keys of another token are worthless", async () => {
    // A page of the victim's projects, handed to the attacker.
    await ctrl.client(ProjectService, ctrl.adminToken).createProject({ workspace: "acme", slug: "zz-last" });
    const first = await ctrl.client(ProjectService, v.token).listProjects({ workspace: "acme", pageSize: 1 });
    assert.notEqual(first.nextPageToken, "");
    await expectCode(
      ctrl.client(ProjectService, evil).listProjects({ workspace: "evil", pageToken: first.nextPageToken }),
      Code.InvalidArgument,
      /^page_token: /,
    );
    await expectCode(
      ctrl.client(ProjectService, evil).listProjects({ workspace: "acme", pageToken: first.nextPageToken }),
      Code.NotFound,
    );
    // The victim's key, replayed by the attacker: never the victim's answer.
    const key = { headers: { "idempotency-key": "shared-key-1" } };
    const mine = await ctrl.client(ProjectService, v.token).createProject({ workspace: "acme", slug: "keyed" }, key);
    assert.equal(mine.project?.workspaceId, v.workspaceId);
    await expectCode(
      ctrl.client(ProjectService, evil).createProject({ workspace: "acme", slug: "keyed" }, key),
      Code.NotFound,
    );
    const theirs = await ctrl.client(ProjectService, evil).createProject({ workspace: "evil", slug: "keyed" }, key);
    assert.equal(theirs.project?.workspaceId, evilWorkspaceId);
    assert.notEqual(theirs.project?.id, mine.project?.id);
  });

  it("a dashboard session carries its token's scope", async () => {
    const origin = ctrl.url;
    const signIn = await fetch(`${ctrl.url}/dashboard/session`, {
      method: "POST",
      headers: { "content-type": "application/json", origin },
      body: JSON.stringify({ token: evil }),
    });
    assert.equal(signIn.status, 200);
    assert.deepEqual(((await signIn.json()) as { workspace: unknown }).workspace, {
      id: evilWorkspaceId,
      slug: "evil",
    });
    const cookie = (signIn.headers.get("set-cookie") ?? "").split(";", 1)[0] ?? "";
    const who = await fetch(`${ctrl.url}/dashboard/session`, { headers: { cookie } });
    // The token's own role in its workspace; no member (a token, not a sign-in).
    assert.deepEqual(await who.json(), {
      name: "ci",
      workspace: { id: evilWorkspaceId, slug: "evil" },
      role: "admin",
      member: null,
    });
    const call = (method: string, body: unknown) =>
      fetch(`${ctrl.url}/${method}`, {
        method: "POST",
        headers: { "content-type": "application/json", origin, cookie },
        body: JSON.stringify(body),
      });
    const get = await call("krane.ctrl.v1.WorkspaceService/GetWorkspace", { workspace: "acme" });
    assert.equal(get.status, 404);
    const text = await get.text();
    assert.ok(!text.includes(v.workspaceId), text);
    const list = await call("krane.ctrl.v1.WorkspaceService/ListWorkspaces", {});
    const listed = (await list.json()) as { workspaces: { slug: string }[] };
    assert.deepEqual(
      listed.workspaces.map((w) => w.slug),
      ["evil"],
    );
    const env = await call("krane.ctrl.v1.StatusService/GetEnvironmentStatus", {
      workspace: "acme",
      project: "web",
      environment: "prod",
    });
    assert.equal(env.status, 404);
  });

  it("a deleted workspace's tokens end with it; one created again under the slug is not theirs", async () => {
    const admin = ctrl.adminToken;
    const { workspace } = await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: "temp" });
    const { token } = await ctrl.client(ApiTokenService, admin).createApiToken({ name: "ci", workspace: "temp" });
    assert.equal(
      (await ctrl.client(WorkspaceService, token).getWorkspace({ workspace: "temp" })).workspace?.id,
      workspace?.id,
    );
    await ctrl.client(WorkspaceService, admin).deleteWorkspace({ workspace: "temp", confirm: "temp" });
    await finishDeletions(ctrl.store);
    const again = await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: "temp" });
    assert.notEqual(again.workspace?.id, workspace?.id);
    await ctrl.client(ProjectService, admin).createProject({ workspace: "temp", slug: "fresh" });
    // Even while this process may still hold the old token's lookup (its auth cache), the slug
    // now names another workspace: nothing of it is reached.
    for (const ref of ["temp", again.workspace?.id ?? "", workspace?.id ?? ""]) {
      await assert.rejects(ctrl.client(ProjectService, token).listProjects({ workspace: ref }), (e) => {
        const c = ConnectError.from(e).code;
        assert.ok(c === Code.NotFound || c === Code.Unauthenticated, `${ref}: ${Code[c]}`);
        return true;
      });
    }
    // And the token itself is gone (revoked with its workspace), once the cache has let go of it.
    const gone = await ctrl.store.db
      .selectFrom("api_tokens")
      .select("id")
      .where("workspace_id", "=", workspace?.id ?? "")
      .execute();
    assert.deepEqual(gone, []);
    // Past the auth cache, the token is unknown.
    const deadline = Date.now() + 30_000;
    for (;;) {
      const code = await ctrl
        .client(WorkspaceService, token)
        .listWorkspaces({})
        .then(
          () => undefined,
          (e: unknown) => ConnectError.from(e).code,
        );
      if (code === Code.Unauthenticated) break;
      assert.ok(Date.now() < deadline, `still ${code === undefined ? "answered" : Code[code]}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  });

  it("a followed log stream ends when its token is revoked", async () => {
    const admin = ctrl.client(ApiTokenService, ctrl.adminToken);
    const made = await admin.createApiToken({ name: "follower", workspace: "acme" });
    const ac = new AbortController();
    const stream = ctrl
      .client(LogService, made.token)
      .streamLogs({ workspace: "acme", project: "web", environment: "prod", follow: true }, { signal: ac.signal });
    // The first answer (a marker: no agent answers in this test) shows the stream open; then the
    // token is revoked, and the stream must end with it.
    let revoked = false;
    let end = "clean end";
    try {
      for await (const _ of stream) {
        if (revoked) continue;
        revoked = true;
        await admin.revokeApiToken({ tokenId: made.apiToken?.id ?? "" });
      }
    } catch (err) {
      end = Code[ConnectError.from(err).code];
    }
    assert.ok(revoked, "the stream answered before the revocation");
    assert.equal(end, "Unauthenticated");
    ac.abort();
  });

  it("a revoked workspace token is refused at once", async () => {
    const admin = ctrl.client(ApiTokenService, ctrl.adminToken);
    const made = await admin.createApiToken({ name: "short", workspace: "evil" });
    await ctrl.client(WorkspaceService, made.token).getWorkspace({ workspace: "evil" });
    await admin.revokeApiToken({ tokenId: made.apiToken?.id ?? "" });
    await expectCode(
      ctrl.client(WorkspaceService, made.token).getWorkspace({ workspace: "evil" }),
      Code.Unauthenticated,
    );
  });
}

describe("workspace tokens (SQLite)", () => {
  const dir = tempDir();
  after(() => dir.remove());
  suite(async () => join(dir.path, "ctrl.db"));
});

describe("workspace tokens (PostgreSQL)", () => {
  let pg: TestPostgres;
  before(async () => {
    pg = await startPostgres();
  });
  after(async () => {
    await pg?.stop();
  });
  suite(() => pg.newDatabase());
});

// The role matrix against a real ctrl over HTTP/2 (SQLite): every method of every public service
// is called with a token of each role of a workspace (service accounts viewer … owner) and with
// an owner's token of another workspace, aimed at the first workspace's objects. What each role
// may call is read from the table in docs/running-for-real.md, which the declarations render
// (test/unit/docs/roles-table.test.ts): a call the table allows must pass authorization (its
// handler may still refuse it for what it asks, e.g. invalid_argument without a confirmation), a
// call it does not must be permission_denied naming the role needed, before anything runs. The
// other workspace's owner is refused everything of the first workspace. Then the rules the
// declarations cannot hold: no grant above one's own role, a deleted service account's tokens
// end at once.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { API_SERVICES } from "../../../src/client/services.js";
import { ChainVerifier } from "../../../src/contracts/audit.js";
import { chainHead, recordOfRow } from "../../../src/ctrl/domain/audit.js";
import { allows, ROLE_NAMES, type RoleName } from "../../../src/contracts/roles.js";
import { ruleOf } from "../../../src/ctrl/auth/scope.js";
import { parseTable, tableBlock, type Need } from "../../../src/ctrl/auth/roles-table.js";
import { MemberService } from "../../../src/gen/krane/ctrl/v1/access_pb.js";
import { AuditService } from "../../../src/gen/krane/ctrl/v1/audit_pb.js";
import {
  ApiTokenService,
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { Keyring } from "../../../src/ctrl/secrets/keyring.js";
import { kraneAsync } from "./process.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const DOC = join(import.meta.dirname, "..", "..", "..", "docs", "running-for-real.md");

/** The table as the documentation states it, by "Service/Method". */
function documentedNeeds(): Map<string, Need> {
  const block = tableBlock(readFileSync(DOC, "utf8"));
  assert.ok(block, "docs/running-for-real.md has the roles table");
  return parseTable(block);
}

interface Objects {
  workspaceId: string;
  deploymentId: string;
}

/**
 * A request aimed at the workspace's objects. What would destroy what the later calls need is
 * left unconfirmed or aimed at ids that do not exist (the handler then refuses it after
 * authorization, which is what an allowed call has to reach).
 */
function requestFor(method: DescMethod, o: Objects): Record<string, unknown> {
  const refs: Record<string, unknown> = {
    workspace: "acme",
    project: "web",
    environment: "prod",
    base_environment: "prod",
    deployment_id: o.deploymentId,
    hook_id: "hook_doesnotexist",
    token_id: "tok_doesnotexist",
    hostname: "shop.acme-example.com",
    name: method.name === "CreateServiceAccount" ? "made" : method.name === "CreateApiToken" ? "made" : "pr-1",
    email: "ana@example.com",
    member: "nobody@example.com",
    role: "viewer",
    region: "eu",
    slug: "other-ws",
    image: "registry.example.com/shop:2",
    port: 8080,
    keys: ["MODE"],
    values: [{ key: "MODE", value: "x" }],
    replicas: 1,
    follow: false,
    latest: true,
    filter: { workspace: "acme" },
    spec: { name: "report", schedule: "@daily" },
    limits: { maxPreviews: 5 },
  };
  if (method.name === "DeleteServiceAccount") refs.name = "nobody";
  // A quota that changes nothing else the test calls.
  if (method.name === "SetQuota") refs.values = { build_minutes: "600" };
  const init: Record<string, unknown> = {};
  for (const f of method.input.fields) {
    const value = refs[f.name];
    if (value !== undefined) init[f.localName] = value;
  }
  return init;
}

/** Calls any method; a server stream is read to its first answer (at most 20 s). */
async function callAny(client: Client<DescService>, method: DescMethod, message: unknown): Promise<void> {
  const fn = (client as unknown as Record<string, (m: unknown, o?: { signal: AbortSignal }) => unknown>)[
    method.localName
  ];
  assert.ok(fn, `${method.name}: the client has it`);
  if (method.methodKind !== "server_streaming") {
    await fn.call(client, message);
    return;
  }
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), 20_000);
  try {
    for await (const _ of fn.call(client, message, { signal: ac.signal }) as AsyncIterable<unknown>) break;
  } catch (err) {
    if (!ac.signal.aborted) throw err;
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
}

/** The refusal of a call, or undefined when it was answered. */
async function refusal(client: Client<DescService>, method: DescMethod, message: unknown) {
  try {
    await callAny(client, method, message);
    return undefined;
  } catch (err) {
    return ConnectError.from(err);
  }
}

describe("roles (SQLite)", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  const o = {} as Objects;
  const tokens = {} as Record<RoleName, string>;
  let outsider: string;

  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      keyring: new Keyring(randomBytes(32)),
      domains: { resolver: { resolveTxt: async () => [] } },
      audit: { refusalLimits: { perSecond: 1000, burst: 10_000, total: { perSecond: 1000, burst: 10_000 } } },
      logs: { answerTimeoutMs: 300 },
    });
    const t = ctrl.adminToken;
    await ctrl.client(RegionService, t).createRegion({ name: "eu" });
    await ctrl.agentToken("eu");
    o.workspaceId = (await ctrl.client(WorkspaceService, t).createWorkspace({ slug: "acme" })).workspace?.id ?? "";
    await ctrl.client(WorkspaceService, t).createWorkspace({ slug: "other" });
    await ctrl.client(ProjectService, t).createProject({ workspace: "acme", slug: "web" });
    await ctrl.client(EnvironmentService, t).createEnvironment({
      workspace: "acme",
      project: "web",
      slug: "prod",
      regions: [{ region: "eu", replicas: 1 }],
    });
    o.deploymentId =
      (
        await ctrl.client(DeploymentService, t).createDeployment({
          workspace: "acme",
          project: "web",
          environment: "prod",
          image: "registry.example.com/shop:1",
          port: 8080,
        })
      ).deployment?.id ?? "";
    const members = ctrl.client(MemberService, t);
    const apiTokens = ctrl.client(ApiTokenService, t);
    for (const role of ROLE_NAMES) {
      await members.createServiceAccount({ workspace: "acme", name: `sa-${role}`, role });
      tokens[role] = (
        await apiTokens.createApiToken({ name: `t-${role}`, workspace: "acme", serviceAccount: `sa-${role}` })
      ).token;
    }
    await ctrl.client(MemberService, t).createServiceAccount({ workspace: "other", name: "boss", role: "owner" });
    outsider = (await apiTokens.createApiToken({ name: "boss", workspace: "other", serviceAccount: "boss" })).token;
  });
  after(async () => {
    await ctrl?.close();
    dir.remove();
  });

  it("every public method as each role is allowed exactly as the documented table says", async () => {
    const documented = documentedNeeds();
    const wrong: string[] = [];
    let calls = 0;
    let roleRefusals = 0;
    // Role by role, lowest first: every refusal is checked before a higher role changed anything.
    for (const role of ROLE_NAMES)
      for (const service of Object.values(API_SERVICES) as DescService[]) {
        const client = ctrl.client(service, tokens[role]) as unknown as Client<DescService>;
        for (const method of service.methods) {
          const what = `${service.name}/${method.name} as ${role}`;
          const need = documented.get(`${service.name}/${method.name}`);
          if (need === undefined) {
            wrong.push(`${service.name}/${method.name}: not in the documented table`);
            continue;
          }
          calls++;
          const ce = await refusal(client, method, create(method.input, requestFor(method, o) as never));
          const roleRefusal = ce?.code === Code.PermissionDenied && /needs the \w+ role/.test(ce.rawMessage);
          if (roleRefusal) roleRefusals++;
          if (need === "installation") {
            if (ce?.code !== Code.PermissionDenied)
              wrong.push(`${what}: ${ce ? Code[ce.code] : "answered"}, not refused`);
          } else if (allows(role, need)) {
            if (ce?.code === Code.PermissionDenied || ce?.code === Code.Unauthenticated)
              wrong.push(`${what}: refused (${ce.rawMessage}) though the table allows it`);
          } else if (!roleRefusal) {
            wrong.push(`${what}: ${ce ? `${Code[ce.code]} ${ce.rawMessage}` : "answered"}, not refused for its role`);
          } else if (!ce.rawMessage.includes(`needs the ${need} role`)) {
            wrong.push(`${what}: the refusal names another role: ${ce.rawMessage}`);
          }
        }
      }
    assert.deepEqual(wrong, []);
    assert.ok(calls >= 4 * 75, `${calls} calls`);
    // Each role is refused exactly the methods the table puts above it.
    const expected = ROLE_NAMES.reduce(
      (n, role) => n + [...documented.values()].filter((need) => need !== "installation" && !allows(role, need)).length,
      0,
    );
    assert.ok(expected >= 50, `${expected} refusals expected`);
    assert.equal(roleRefusals, expected);
  });

  it("an owner of another workspace is refused everything of this one", async () => {
    const wrong: string[] = [];
    for (const service of Object.values(API_SERVICES) as DescService[]) {
      const client = ctrl.client(service, outsider) as unknown as Client<DescService>;
      for (const method of service.methods) {
        const what = `${service.name}/${method.name}`;
        const ce = await refusal(client, method, create(method.input, requestFor(method, o) as never));
        // Methods that answer from the caller's own scope (its tokens, its workspace) may answer.
        if (ce === undefined) {
          if (ruleOf(method)?.kind !== "caller") wrong.push(`${what}: answered`);
        } else if (ce.code !== Code.NotFound && ce.code !== Code.PermissionDenied)
          wrong.push(`${what}: ${Code[ce.code]} ${ce.rawMessage}`);
      }
    }
    assert.deepEqual(wrong, []);
  });

  it("grants nothing above the granter's own role", async () => {
    const admin = ctrl.client(MemberService, tokens.admin);
    await expectCode(
      admin.createServiceAccount({ workspace: "acme", name: "x", role: "owner" }),
      Code.PermissionDenied,
    );
    await expectCode(
      admin.inviteMember({ workspace: "acme", email: "o@example.com", role: "owner" }),
      Code.PermissionDenied,
    );
    // Nor a token acting as a higher role than the minter's.
    await expectCode(
      ctrl.client(ApiTokenService, tokens.admin).createApiToken({ name: "up", serviceAccount: "sa-owner" }),
      Code.PermissionDenied,
    );
    // Nor revokes an owner's token (an owner does).
    const ownerToken = (await ctrl.client(ApiTokenService, tokens.owner).listApiTokens({})).apiTokens.find(
      (x) => x.name === "t-owner",
    );
    assert.ok(ownerToken);
    await expectCode(
      ctrl.client(ApiTokenService, tokens.admin).revokeApiToken({ tokenId: ownerToken.id }),
      Code.PermissionDenied,
    );
    // A developer makes tokens of its own service account only, at its own role.
    const dev = ctrl.client(ApiTokenService, tokens.developer);
    await expectCode(dev.createApiToken({ name: "up", serviceAccount: "sa-admin" }), Code.PermissionDenied);
    const mine = await dev.createApiToken({ name: "dev-2" });
    assert.equal(mine.apiToken?.serviceAccount, "sa-developer");
    assert.equal(mine.apiToken?.role, "developer");
    // And sees only its own service account's tokens.
    const listed = (await dev.listApiTokens({})).apiTokens.map((x) => x.name).sort();
    assert.deepEqual(listed, ["dev-2", "t-developer"]);
    // Bad input names the field.
    await expectCode(
      admin.inviteMember({ workspace: "acme", email: "x@example.com", role: "root" }),
      Code.InvalidArgument,
    );
    await expectCode(
      admin.inviteMember({ workspace: "acme", email: "not-an-address", role: "viewer" }),
      Code.InvalidArgument,
    );
  });

  it("invites, lists, changes and removes members", async () => {
    const owner = ctrl.client(MemberService, tokens.owner);
    const made = await owner.inviteMember({ workspace: "acme", email: "Bo@Example.com", role: "developer" });
    assert.equal(made.member?.email, "bo@example.com");
    assert.equal(made.member?.state, "invited");
    await expectCode(
      owner.inviteMember({ workspace: "acme", email: "bo@example.com", role: "viewer" }),
      Code.AlreadyExists,
    );
    await owner.setMemberRole({ workspace: "acme", member: "bo@example.com", role: "owner" });
    const list = (await ctrl.client(MemberService, tokens.viewer).listMembers({ workspace: "acme" })).members;
    assert.deepEqual(
      list.map((m) => `${m.email}=${m.role}`),
      ["ana@example.com=viewer", "bo@example.com=owner"],
    );
    // An admin cannot remove an owner; an owner can.
    await expectCode(
      ctrl.client(MemberService, tokens.admin).removeMember({ workspace: "acme", member: "bo@example.com" }),
      Code.PermissionDenied,
    );
    await owner.removeMember({ workspace: "acme", member: "bo@example.com" });
    await expectCode(owner.removeMember({ workspace: "acme", member: "bo@example.com" }), Code.NotFound);
  });

  it("krane member and krane service-account, as processes", async () => {
    const env = { KRANE_CTRL_URL: ctrl.url, KRANE_TOKEN: tokens.owner, KRANE_WORKSPACE: "" };
    const ok = async (args: string[], as: NodeJS.ProcessEnv = env): Promise<string> => {
      const r = await kraneAsync(args, as);
      assert.equal(r.status, 0, `krane ${args.join(" ")}: ${r.stderr}`);
      // Tables' borders as spaces, so a row reads as its cells.
      return r.stdout.replace(/[│┌┐└┘├┤┬┴┼─]/g, " ");
    };
    assert.match(await ok(["member", "add", "cy@example.com", "--role", "viewer"]), /invited cy@example.com as viewer/);
    assert.match(await ok(["member", "set-role", "cy@example.com", "developer"]), /cy@example.com is now developer/);
    assert.match(await ok(["member", "list"]), /cy@example\.com\s+developer\s+invited/);
    assert.match(await ok(["member", "remove", "cy@example.com"]), /removed cy@example.com/);
    const bad = await kraneAsync(["member", "add", "dee@example.com", "--role", "boss"], env);
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr, /invalid_argument: role: /);
    // A viewer is told which role it lacks.
    const refused = await kraneAsync(["member", "add", "dee@example.com", "--role", "viewer"], {
      ...env,
      KRANE_TOKEN: tokens.viewer,
    });
    assert.match(refused.stderr, /permission_denied: InviteMember needs the admin role in workspace "acme"/);
    assert.match(await ok(["service-account", "create", "deployer", "--role", "developer"]), /deployer \(developer\)/);
    const token = (await ok(["api-token", "create", "deploy", "--service-account", "deployer"])).trim();
    assert.match(token, /^krane_user_/);
    assert.match(await ok(["api-token", "list"]), /deploy\s+workspace acme\s+service account deployer\s+developer/);
    assert.match(await ok(["service-account", "list"]), /deployer\s+developer/);
    assert.match(await ok(["service-account", "delete", "deployer"]), /deleted service account deployer/);
  });

  it("the audit log names the service account that acted", async () => {
    await ctrl.client(ProjectService, tokens.admin).createProject({ workspace: "acme", slug: "audited" });
    const events = (
      await ctrl
        .client(AuditService, ctrl.adminToken)
        .listAuditEvents({ filter: { workspace: "acme", method: "CreateProject" }, pageSize: 1000 })
    ).events;
    const made = events.find((e) => e.targets.some((t) => t.startsWith("prj_")) && e.actor?.name === "t-admin");
    assert.equal(made?.actor?.owner, "service account sa-admin");
    // The chain, owner included in what each event's hash covers, still verifies.
    const v = new ChainVerifier(await chainHead(ctrl.store.db, o.workspaceId));
    for (const r of await ctrl.store.db
      .selectFrom("audit_events")
      .selectAll()
      .where("workspace_id", "=", o.workspaceId)
      .orderBy("seq")
      .execute())
      v.add(recordOfRow(r));
    assert.deepEqual(v.finish(), []);
  });

  it("a deleted service account's tokens end at once", async () => {
    const ws = ctrl.client(WorkspaceService, tokens.developer);
    await ws.getWorkspace({ workspace: "acme" });
    await ctrl.client(MemberService, tokens.admin).deleteServiceAccount({ workspace: "acme", name: "sa-developer" });
    await expectCode(ws.getWorkspace({ workspace: "acme" }), Code.Unauthenticated);
  });
});

// `krane login` end to end against a real OpenID provider (test/support/oidc-provider.ts: the
// `oidc-provider` package) and a real ctrl (SQLite) over sockets: the CLI's loopback listener
// gets the provider's answer from the test's "browser" (plain HTTP through the provider's login
// and consent pages), the session lands in the config file (0600), commands run with it and
// refresh it once its access token has expired; `krane session revoke` ends another session at
// once (its tokens refused), `krane logout` ends one's own at ctrl; another workspace's sessions
// are not_found; the audit log names the member who called with a session.
import assert from "node:assert/strict";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Code } from "@connectrpc/connect";
import { MemberService, SessionService } from "../../../src/gen/krane/ctrl/v1/access_pb.js";
import { WorkspaceService } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { AuditService } from "../../../src/gen/krane/ctrl/v1/audit_pb.js";
import { CLIENT_ID, CLIENT_SECRET, newSigningKey, TestProvider } from "../../support/oidc-provider.js";
import { kraneAsync, spawnKrane, type CliResult } from "./process.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

interface Stored {
  sessionId: string;
  accessToken: string;
  refreshToken: string;
  accessExpiresAt: number;
  expiresAt: number;
  workspace: string;
  email: string;
  role: string;
}

/** Ten seconds of access per token: long enough for a few CLI runs, short enough to wait out. */
const ACCESS_MS = 10_000;

describe("krane login against a real OpenID provider", () => {
  const dir = tempDir("krane-login-");
  let ctrl: TestCtrl;
  let provider: TestProvider;

  before(async () => {
    provider = await TestProvider.start(
      [
        { sub: "ana-1", email: "ana@example.com", email_verified: true, name: "Ana" },
        { sub: "bo-1", email: "bo@example.com", email_verified: true, name: "Bo" },
        { sub: "cy-1", email: "cy@example.com", email_verified: true, name: "Cy" },
      ],
      [await newSigningKey("key-a")],
    );
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      oidc: {
        issuer: provider.issuer,
        clientId: CLIENT_ID,
        clientSecret: CLIENT_SECRET,
        lifetimes: { accessMs: ACCESS_MS, sessionMs: 3600_000 },
      },
      // Every sign-in and refresh here comes from 127.0.0.1: more than the default 10 a minute.
      dashboard: { signInLimit: { perAddress: { burst: 1000, everyMs: 10 } } },
    });
    const t = ctrl.adminToken;
    await ctrl.client(WorkspaceService, t).createWorkspace({ slug: "acme" });
    await ctrl.client(WorkspaceService, t).createWorkspace({ slug: "other" });
    const members = ctrl.client(MemberService, t);
    await members.inviteMember({ workspace: "acme", email: "ana@example.com", role: "developer" });
    await members.inviteMember({ workspace: "acme", email: "bo@example.com", role: "admin" });
    await members.inviteMember({ workspace: "other", email: "cy@example.com", role: "owner" });
  });

  after(async () => {
    await ctrl?.close();
    await provider?.stop();
    dir.remove();
  });

  const configOf = (name: string) => join(dir.path, name, "config.json");
  const env = (config: string) => ({ KRANE_CONFIG: config, KRANE_TOKEN: "", KRANE_CTRL_URL: ctrl.url });
  const stored = (config: string): Stored => {
    const file = JSON.parse(readFileSync(config, "utf8")) as { sessions: Record<string, Stored> };
    const s = file.sessions[ctrl.url.replace(/\/+$/, "")];
    assert.ok(s, `a session for ${ctrl.url} in ${config}`);
    return s;
  };
  const cli = (config: string, args: string[]): Promise<CliResult> => kraneAsync(args, env(config));

  /** `krane login` as `sub`: the test is the browser, through the provider's pages with plain HTTP. */
  async function login(sub: string, config: string, workspace: string): Promise<CliResult> {
    const child = spawnKrane(["login", "--no-browser", "-w", workspace], env(config));
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    const url = await new Promise<string>((resolve, reject) => {
      child.stderr.on("data", (d: Buffer) => {
        stderr += d.toString();
        const m = /^ {2}(http\S+)$/m.exec(stderr);
        if (m?.[1]) resolve(m[1]);
      });
      child.once("exit", () => reject(new Error(`krane login exited before printing a URL: ${stderr}`)));
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    const callback = await provider.signIn(url, sub);
    assert.match(callback, /^http:\/\/127\.0\.0\.1:\d+\/callback\?/, "the provider sends the browser to the CLI");
    const page = await fetch(callback);
    const text = await page.text();
    const status = await exited;
    return { status, stdout, stderr: `${stderr}\n(browser page ${page.status}: ${text})` };
  }

  it("signs in through the browser, stores the session 0600 and runs commands with it", async () => {
    const config = configOf("ana");
    const r = await login("ana-1", config, "acme");
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /signed in to workspace acme as ana@example\.com \(developer\)/);
    assert.match(r.stderr, /browser page 200: .*Signed in to krane as ana@example\.com/);
    assert.equal(statSync(config).mode & 0o777, 0o600, "the config file is the owner's only");
    assert.equal(statSync(join(dir.path, "ana")).mode & 0o777, 0o700);
    const s = stored(config);
    assert.equal(s.workspace, "acme");
    assert.match(s.sessionId, /^mss_/);

    const list = await cli(config, ["session", "list", "-o", "json"]);
    assert.equal(list.status, 0, list.stderr);
    const sessions = (JSON.parse(list.stdout) as { sessions: Record<string, unknown>[] }).sessions;
    assert.deepEqual(
      sessions.map((x) => [x.id, x.email, x.client, x.ip, x.current]),
      [[s.sessionId, "ana@example.com", "cli", "127.0.0.1", true]],
    );
  });

  it("refreshes the session once its access token has expired", async () => {
    const config = configOf("ana");
    const before = stored(config);
    // Wait the access token out (ctrl's clock is this process's).
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, before.accessExpiresAt - Date.now()) + 200));
    await expectCode(
      ctrl.client(SessionService, before.accessToken).listSessions({ workspace: "acme" }),
      Code.Unauthenticated,
    );
    const r = await cli(config, ["member", "list"]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /ana@example\.com/);
    const after = stored(config);
    assert.equal(after.sessionId, before.sessionId, "the same session");
    assert.notEqual(after.refreshToken, before.refreshToken, "a new refresh token was stored");
    assert.ok(after.accessExpiresAt > Date.now());
    assert.equal(statSync(config).mode & 0o777, 0o600, "still the owner's only after the rewrite");
    // The spent refresh token is refused.
    const again = await fetch(`${ctrl.url}/auth/oidc/refresh`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ refresh_token: before.refreshToken }),
    });
    assert.equal(again.status, 401);
  });

  it("revokes a session at once; a developer may not end another member's, an admin may", async () => {
    const ana = configOf("ana");
    const ana2 = configOf("ana2");
    const bo = configOf("bo");
    assert.equal((await login("ana-1", ana2, "acme")).status, 0);
    assert.equal((await login("bo-1", bo, "acme")).status, 0);
    const second = stored(ana2);
    const boSession = stored(bo);

    const refused = await cli(ana, ["session", "revoke", boSession.sessionId]);
    assert.equal(refused.status, 1);
    assert.match(refused.stderr, /permission_denied: only an admin sees or ends another member's sessions/);

    const calls = ctrl.client(SessionService, second.accessToken);
    await calls.listSessions({ workspace: "acme" });
    const revoked = await cli(ana, ["session", "revoke", second.sessionId]);
    assert.equal(revoked.status, 0, revoked.stderr);
    await expectCode(calls.listSessions({ workspace: "acme" }), Code.Unauthenticated);
    assert.ok(Date.now() < second.accessExpiresAt, "refused for the revocation, not the token's expiry");
    const r = await cli(ana2, ["session", "list"]);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /has ended or was revoked: krane login/);

    // The admin sees everyone's sessions and ends ana's.
    const all = await cli(bo, ["session", "list", "--all-members", "-o", "json"]);
    assert.equal(all.status, 0, all.stderr);
    const emails = (JSON.parse(all.stdout) as { sessions: { email: string }[] }).sessions.map((x) => x.email).sort();
    assert.deepEqual(emails, ["ana@example.com", "bo@example.com"]);
    const anaSession = stored(ana).sessionId;
    assert.equal((await cli(bo, ["session", "revoke", anaSession])).status, 0);
    assert.match((await cli(ana, ["member", "list"])).stderr, /has ended or was revoked/);
  });

  it("names the member in the audit log for a call made with a session", async () => {
    const events = await ctrl
      .client(AuditService, ctrl.adminToken)
      .listAuditEvents({ filter: { workspace: "acme", method: "SessionService/RevokeSession" } });
    const owners = events.events.map((e) => e.actor?.owner ?? "");
    assert.ok(owners.includes(`member bo@example.com (${provider.issuer}#bo-1)`), JSON.stringify(owners));
    assert.ok(owners.includes(`member ana@example.com (${provider.issuer}#ana-1)`), JSON.stringify(owners));
    const ok = events.events.find((e) => e.actor?.owner.startsWith("member bo@") && e.code === "ok");
    assert.ok(ok, "bo's revocation of ana's session is recorded as done");
    assert.match(ok.actor?.id ?? "", /^mss_/, "the actor is the session");
  });

  it("reaches no session of another workspace", async () => {
    const cy = configOf("cy");
    assert.equal((await login("cy-1", cy, "other")).status, 0);
    const cySession = stored(cy).sessionId;
    const bo = configOf("bo");
    const r = await cli(bo, ["session", "revoke", cySession]);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /not_found: session "mss_\w+" not found/);
    const other = await cli(bo, ["session", "list", "--all-members", "-w", "other"]);
    assert.equal(other.status, 1);
    assert.match(other.stderr, /not_found/);
    // cy's session still works.
    assert.equal((await cli(cy, ["session", "list"])).status, 0);
  });

  it("logs out: the session ends at ctrl and leaves the config file", async () => {
    const cy = configOf("cy");
    const s = stored(cy);
    const r = await cli(cy, ["logout"]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /signed out of .*: session mss_\w+ ended at ctrl/);
    await expectCode(
      ctrl.client(SessionService, s.accessToken).listSessions({ workspace: "other" }),
      Code.Unauthenticated,
    );
    const file = JSON.parse(readFileSync(cy, "utf8")) as { sessions: Record<string, unknown> };
    assert.deepEqual(file.sessions, {});
    const none = await cli(cy, ["session", "list"]);
    assert.equal(none.status, 1);
    assert.match(none.stderr, /no API token: .*krane login/);
  });
});

// The dashboard's sign-in through a real OpenID provider (test/support/oidc-provider.ts: the
// `oidc-provider` package) into a real ctrl (SQLite) over sockets, in Debian's chromium driven by
// playwright-core: the page's "Sign in with …" link, the provider's own login and consent pages,
// back on the dashboard as the member (their name, their role), their session listed by
// `krane session list` as client "dashboard", and `krane session revoke` ending the browser's
// access; a viewer is shown no deploy or rollback but why, and ctrl's refusal of their call names
// the role needed; the audit page tells a viewer it needs the admin role without asking ctrl, the
// quotas page (no writes) shows them the table. The failure cases fail closed with plain HTTP as
// the browser: a callback not started in that browser, a replayed state, a nonce mismatch,
// another audience and an expired ID token each refused with no cookie set and no session made.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { chromium, type Browser, type Page } from "playwright-core";
import { MemberService, SessionService } from "../../../src/gen/krane/ctrl/v1/access_pb.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { CLIENT_ID, CLIENT_SECRET, newSigningKey, TestProvider } from "../../support/oidc-provider.js";
import { exitAfterLastHook } from "../../support/exit.js";
import { freePort } from "../../support/ports.js";
import { kraneAsync } from "../ctrl/process.js";
import { startTestCtrl, tempDir, type TestCtrl } from "../ctrl/support.js";

const CHROMIUM = process.env.KRANE_CHROMIUM ?? "/usr/bin/chromium";
const DIST = join(import.meta.dirname, "..", "..", "..", "dist", "dashboard", "index.html");
const skip = !existsSync(CHROMIUM)
  ? `no chromium at ${CHROMIUM} (Debian's chromium package; KRANE_CHROMIUM names another)`
  : !existsSync(DIST)
    ? "the dashboard is not built (npm run build)"
    : false;

interface Answer {
  status: number;
  location: string | null;
  cookies: string[];
  text: string;
}

describe("dashboard sign-in through a real OpenID provider", { skip }, () => {
  const dir = tempDir("krane-dash-oidc-");
  let ctrl: TestCtrl;
  let provider: TestProvider;
  let browser: Browser;
  let page: Page;

  before(async () => {
    provider = await TestProvider.start(
      [
        { sub: "ana-1", email: "ana@example.com", email_verified: true, name: "Ana Lima" },
        { sub: "vic-1", email: "vic@example.com", email_verified: true, name: "Vic Viewer" },
      ],
      [await newSigningKey("key-a")],
    );
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      listen: { host: "127.0.0.1", port: await freePort() },
      oidc: { issuer: provider.issuer, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, jwksCooldownMs: 0 },
      dashboard: { signInLimit: { perAddress: { burst: 1000, everyMs: 10 } } },
    });
    const t = ctrl.adminToken;
    await ctrl.client(WorkspaceService, t).createWorkspace({ slug: "acme" });
    const members = ctrl.client(MemberService, t);
    await members.inviteMember({ workspace: "acme", email: "ana@example.com", role: "developer" });
    await members.inviteMember({ workspace: "acme", email: "vic@example.com", role: "viewer" });
    // An environment with two revisions: a developer is offered a rollback to the first.
    await ctrl.client(RegionService, t).createRegion({ name: "eu-west" });
    await ctrl.client(ProjectService, t).createProject({ workspace: "acme", slug: "shop" });
    const env = { workspace: "acme", project: "shop" };
    await ctrl
      .client(EnvironmentService, t)
      .createEnvironment({ ...env, slug: "production", regions: [{ region: "eu-west", replicas: 1 }] });
    for (const tag of ["1.0", "1.1"])
      await ctrl
        .client(DeploymentService, t)
        .createDeployment({ ...env, environment: "production", image: `registry.example.com/shop:${tag}`, port: 8080 });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
  });

  after(async () => {
    await browser?.close();
    await ctrl?.close();
    await provider?.stop();
    dir.remove();
    exitAfterLastHook();
  });

  const dashboardSessions = async () =>
    (await ctrl.client(SessionService, ctrl.adminToken).listSessions({ workspace: "acme", allMembers: true })).sessions;

  /**
   * The provider's own pages, in the browser: log in as `sub` (any password) and consent, as
   * far as the provider asks (it remembers a person it has a session of); back on ctrl's page.
   */
  async function throughProvider(p: Page, sub: string): Promise<void> {
    const login = p.locator('input[name="login"]');
    const consent = p.getByRole("button", { name: "Continue" });
    const home = ctrl.url.replace(/\/$/, "");
    for (let step = 0; step < 4; step++) {
      await p.waitForLoadState();
      if (p.url().startsWith(home)) return;
      if (await login.isVisible()) {
        await login.fill(sub);
        await p.locator('input[name="password"]').fill("any");
        await p.locator('button[type="submit"]').click();
      } else if (await consent.isVisible()) await consent.click();
      else await p.waitForURL((u) => u.href.startsWith(home), { timeout: 2000 }).catch(() => undefined);
    }
    assert.fail(`still at the provider: ${p.url()} ${(await p.content()).slice(0, 2000)}`);
  }

  it("signs in through the provider's pages and lands on the dashboard as the member", async () => {
    await page.goto(ctrl.url);
    const link = page.getByRole("link", { name: `Sign in with ${new URL(provider.issuer).host}` });
    await link.click();
    await page.waitForURL((u) => u.href.startsWith(provider.issuer));
    await throughProvider(page, "ana-1");
    await page.getByText("signed in as Ana Lima (workspace acme) · developer").waitFor();
    assert.equal(new URL(page.url()).origin, ctrl.url.replace(/\/$/, ""), "back on ctrl's own origin");
    const cookies = (await page.context().cookies(ctrl.url)).filter((c) => c.name.startsWith("krane_"));
    assert.deepEqual(
      cookies.map((c) => [c.name, c.httpOnly, c.sameSite]),
      [["krane_session", true, "Strict"]],
      "the session cookie only (the sign-in's own cookie is gone)",
    );
    // Nothing of a token in the page's reach.
    const reach = (await page.evaluate(
      "[location.href, JSON.stringify(localStorage), JSON.stringify(sessionStorage), document.cookie].join(' ')",
    )) as string;
    assert.doesNotMatch(reach, /krane_(session|refresh)_|code=|state=/);

    const list = await kraneAsync(["session", "list", "--all-members", "-w", "acme", "-o", "json"], {
      KRANE_TOKEN: ctrl.adminToken,
      KRANE_CTRL_URL: ctrl.url,
    });
    assert.equal(list.status, 0, list.stderr);
    const sessions = (JSON.parse(list.stdout) as { sessions: { email: string; client: string }[] }).sessions;
    assert.deepEqual(
      sessions.map((s) => [s.email, s.client]),
      [["ana@example.com", "dashboard"]],
    );
  });

  it("ends the browser's access when the session is revoked with krane session revoke", async () => {
    const [session] = await dashboardSessions();
    assert.ok(session);
    // The page's own call with the cookie works before.
    const before = (await page.evaluate("fetch('/dashboard/session').then((r) => r.status)")) as number;
    assert.equal(before, 200);
    const r = await kraneAsync(["session", "revoke", session.id, "-w", "acme"], {
      KRANE_TOKEN: ctrl.adminToken,
      KRANE_CTRL_URL: ctrl.url,
    });
    assert.equal(r.status, 0, r.stderr);
    // The page may see the revocation first (its live stream ends, and it reloads to sign in):
    // then the call is asked again from the reloaded page, with the same cookie.
    let afterRevoke = 0;
    for (let attempt = 0; afterRevoke === 0 && attempt < 3; attempt++)
      afterRevoke = (await page
        .evaluate("fetch('/dashboard/session').then((r) => r.status)")
        .catch(async (err: unknown) => {
          if (!String(err).includes("Execution context was destroyed")) throw err;
          await page.waitForLoadState();
          return 0;
        })) as number;
    assert.equal(afterRevoke, 401, "refused at once, not after the cookie's lifetime");
    await page.reload();
    await page.getByRole("link", { name: /Sign in with/ }).waitFor();
  });

  it("signs out: the member session ends with the cookie's", async () => {
    await page.getByRole("link", { name: /Sign in with/ }).click();
    await throughProvider(page, "ana-1");
    await page.getByText("signed in as Ana Lima").waitFor();
    assert.equal((await dashboardSessions()).length, 1);
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("link", { name: /Sign in with/ }).waitFor();
    assert.deepEqual(await dashboardSessions(), [], "no session left listed");
  });

  it("shows a viewer no deploy or rollback, says why, and a refused call names the role needed", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    try {
      const viewer = await context.newPage();
      await viewer.goto(ctrl.url);
      await viewer.getByRole("link", { name: /Sign in with/ }).click();
      await throughProvider(viewer, "vic-1");
      await viewer.getByText("signed in as Vic Viewer (workspace acme) · viewer").waitFor();
      await viewer.goto(`${ctrl.url}#/env/acme/shop/production/status`);
      await viewer.getByRole("table", { name: "Revisions" }).getByText("registry.example.com/shop:1.0").waitFor();
      await viewer.getByText(/Deploy, Scale, .* and Roll back need the developer role; you are a viewer\./).waitFor();
      assert.equal(await viewer.getByRole("button", { name: "Deploy" }).count(), 0);
      assert.equal(await viewer.getByRole("button", { name: /Roll back/ }).count(), 0);
      // ctrl decides regardless: the viewer's own call with the cookie is refused, naming the role.
      const refusal = (await viewer.evaluate(`fetch("/krane.ctrl.v1.DeploymentService/CreateDeployment", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ workspace: "acme", project: "shop", environment: "production", image: "x:1", inherit: true }),
        }).then(async (r) => [r.status, (await r.json()).message])`)) as [number, string];
      assert.equal(refusal[0], 403);
      assert.match(refusal[1], /CreateDeployment needs the developer role in workspace "acme" .*viewer/);

      // The audit log needs the admin role: the page says so and asks ctrl nothing.
      const asked: string[] = [];
      viewer.on("request", (r) => {
        if (r.url().includes("AuditService/ListAuditEvents")) asked.push(r.url());
      });
      await viewer.goto(`${ctrl.url}#/audit`);
      await viewer
        .getByRole("note")
        .getByText("Reading the audit log needs the admin role; you are a viewer.")
        .waitFor();
      assert.equal(await viewer.getByRole("table", { name: "Audit events" }).count(), 0);
      assert.deepEqual(asked, []);
      // The quotas page writes nothing and every role reads it: shown, nothing hidden.
      await viewer.goto(`${ctrl.url}#/quotas`);
      await viewer.getByRole("table", { name: "Quotas" }).waitFor();
      assert.equal(await viewer.getByRole("note").count(), 0);
    } finally {
      await context.close();
    }
    // The developer is offered both.
    await page.goto(ctrl.url);
    await page.getByRole("link", { name: /Sign in with/ }).click();
    await throughProvider(page, "ana-1");
    await page.getByText("signed in as Ana Lima").waitFor();
    await page.goto(`${ctrl.url}#/env/acme/shop/production/status`);
    await page.getByRole("button", { name: "Deploy" }).waitFor();
    await page.getByRole("button", { name: "Roll back to revision 1" }).waitFor();
    assert.equal(await page.getByRole("note").count(), 0, "nothing hidden from a developer");
  });

  // --- The failure cases, with plain HTTP as the browser (its cookie jar held by hand). ---

  async function get(url: string, cookie = ""): Promise<Answer> {
    const res = await fetch(url, { redirect: "manual", headers: cookie === "" ? {} : { cookie } });
    return {
      status: res.status,
      location: res.headers.get("location"),
      cookies: res.headers.getSetCookie(),
      text: await res.text(),
    };
  }

  /** Starts a sign-in as a browser would, signs in at the provider: the callback URL and the browser's sign-in cookie. */
  async function started(sub: string): Promise<{ callback: string; cookie: string }> {
    const start = await get(`${ctrl.url}/auth/oidc/dashboard?workspace=acme`);
    assert.equal(start.status, 303, start.text);
    const set = start.cookies.find((c) => c.startsWith("krane_signin="));
    assert.ok(set, "the start binds the sign-in to the browser");
    assert.match(set, /HttpOnly/);
    assert.match(set, /SameSite=Lax/);
    const callback = await provider.signIn(start.location ?? "", sub);
    assert.ok(callback.startsWith(`${ctrl.url.replace(/\/$/, "")}/auth/oidc/callback?`), callback);
    return { callback, cookie: set.split(";")[0] ?? "" };
  }

  function refused(a: Answer, status: number, message: RegExp): void {
    assert.equal(a.status, status, a.text);
    assert.match(a.text, message);
    assert.ok(!a.cookies.some((c) => /^krane_session=[^;]/.test(c)), "no session cookie");
  }

  it("refuses a callback not started in this browser, and a replayed one", async () => {
    const before = (await dashboardSessions()).length;
    const { callback, cookie } = await started("vic-1");
    // Handed to another browser (a login CSRF): refused, the sign-in not used up.
    refused(await get(callback), 401, /not started in this browser/);
    refused(await get(callback, "krane_signin=someone-elses-state"), 401, /not started in this browser/);
    const ok = await get(callback, cookie);
    assert.equal(ok.status, 303, ok.text);
    assert.equal(ok.location, "/");
    assert.ok(ok.cookies.some((c) => /^krane_session=[A-Za-z0-9_-]+;.*HttpOnly.*SameSite=Strict/.test(c)));
    // Replayed, even with the browser's cookie: the state was good once.
    refused(await get(callback, cookie), 401, /unknown, already used or expired/);
    assert.equal((await dashboardSessions()).length, before + 1, "one session from the one good answer");
  });

  it("refuses a nonce mismatch, another audience and an expired ID token, making no session", async () => {
    const before = (await dashboardSessions()).length;
    const cases: [string, (c: Record<string, unknown>) => Record<string, unknown>, RegExp][] = [
      ["nonce", (c) => ({ ...c, nonce: "another-nonce" }), /nonce&#34; claim/],
      ["audience", (c) => ({ ...c, aud: "another-client" }), /\(audience\)/],
      [
        "expiry",
        (c) => ({ ...c, iat: Math.floor(Date.now() / 1000) - 7200, exp: Math.floor(Date.now() / 1000) - 3600 }),
        /expiration is past/,
      ],
    ];
    try {
      for (const [name, change, message] of cases) {
        const { callback, cookie } = await started("vic-1");
        provider.rewrite(change);
        const a = await get(callback, cookie);
        provider.tamper = null;
        assert.equal(a.status, 401, `${name}: ${a.text}`);
        assert.match(a.text, message, name);
        assert.ok(!a.cookies.some((c) => /^krane_session=[^;]/.test(c)), `${name}: no session cookie`);
      }
    } finally {
      provider.tamper = null;
    }
    assert.equal((await dashboardSessions()).length, before, "no session made");
  });
});

// The dashboard in a real browser: Debian's chromium, driven by playwright-core through the
// system executable (no browser download), against a real ctrl on SQLite over real sockets.
// Sign in, see the overview and an environment, deploy from the page (a refused image first,
// with ctrl's message next to the field), roll back after the diff, sign out; the cookie's flags;
// a cross-site page cannot use the session; another workspace's token sees nothing of the first;
// screenshots of the main pages for docs/using.md.
//
// What the page shows is pushed (LiveService): a change made through the API shows up with no
// request of the page's; ctrl restarted under the page, the page reconnects and catches up. No
// accessibility violations on the main pages (axe-core, injected by the test).
//
// No agent runs here: instances and sentinels stay empty and rollouts never complete. A rollout
// completing live, and a canary's weights moving, are ./live-rollout.test.ts (a local cluster).
import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { chromium, type Browser, type Page } from "playwright-core";
import {
  ApiTokenService,
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { ConfigService } from "../../../src/gen/krane/ctrl/v1/config_pb.js";
import { QuotaService } from "../../../src/gen/krane/ctrl/v1/quota_pb.js";
import { startCtrl } from "../../../src/ctrl/server/server.js";
import { Keyring } from "../../../src/ctrl/secrets/keyring.js";
import { randomBytes } from "node:crypto";
import { freePort } from "../../support/ports.js";
import { startTestCtrl, tempDir, transportFor, type TestCtrl } from "../ctrl/support.js";
import { createClient } from "@connectrpc/connect";
import { axeViolations } from "./axe.js";
import { exitAfterLastHook } from "../../support/exit.js";

const CHROMIUM = process.env.KRANE_CHROMIUM ?? "/usr/bin/chromium";
/** Where the screenshots go (docs/using.md shows the ones in docs/dashboard/). */
const SHOTS = process.env.KRANE_SCREENSHOTS_DIR;
const DIST = join(import.meta.dirname, "..", "..", "..", "dist", "dashboard", "index.html");
const skip = !existsSync(CHROMIUM)
  ? `no chromium at ${CHROMIUM} (Debian's chromium package; KRANE_CHROMIUM names another)`
  : !existsSync(DIST)
    ? "the dashboard is not built (npm run build)"
    : false;

describe("dashboard in a browser", { skip }, () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  let browser: Browser;
  let page: Page;
  let evil: Server;
  let port = 0;
  const keyring = new Keyring(randomBytes(32));
  before(async () => {
    port = await freePort();
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { listen: { host: "127.0.0.1", port }, keyring });
    const admin = ctrl.adminToken;
    await ctrl.client(RegionService, admin).createRegion({ name: "eu-west" });
    await ctrl.client(RegionService, admin).createRegion({ name: "us-east" });
    await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: "acme" });
    await ctrl.client(ProjectService, admin).createProject({ workspace: "acme", slug: "shop" });
    const env = { workspace: "acme", project: "shop" };
    await ctrl.client(EnvironmentService, admin).createEnvironment({
      ...env,
      slug: "production",
      regions: [
        { region: "eu-west", replicas: 2 },
        { region: "us-east", replicas: 3 },
      ],
    });
    await ctrl.client(EnvironmentService, admin).createEnvironment({
      ...env,
      slug: "staging",
      regions: [{ region: "eu-west", replicas: 1 }],
    });
    await ctrl.client(DeploymentService, admin).createDeployment({
      ...env,
      environment: "production",
      image: "registry.example.com/shop:1.0",
      port: 8081,
      env: [{ name: "MODE", value: "prod" }],
    });
    await ctrl.client(RegionService, admin).createClusterToken({ region: "eu-west" });
    // A page of another site that tries to use the session (CSRF).
    evil = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/html" });
      res.end("<!doctype html><title>evil</title><p>evil</p>");
    });
    await new Promise<void>((r) => evil.listen(0, "127.0.0.1", () => r()));
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    page = await context.newPage();
  });
  after(async () => {
    await browser?.close();
    evil?.close();
    await ctrl?.close();
    dir.remove();
    exitAfterLastHook();
  });

  async function shot(name: string): Promise<void> {
    if (!SHOTS) return;
    mkdirSync(SHOTS, { recursive: true });
    await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  }

  it("signs in with a token, keeping only an HttpOnly, SameSite=Strict cookie", async () => {
    await page.goto(ctrl.url);
    await page.getByLabel("API token").fill("krane_user_wrong");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByText("token: not a valid API token").waitFor();
    await shot("sign-in");
    await page.getByLabel("API token").fill(ctrl.adminToken);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByText("signed in as admin").waitFor();
    const cookies = await page.context().cookies();
    assert.equal(cookies.length, 1);
    assert.equal(cookies[0]?.name, "krane_session");
    assert.equal(cookies[0]?.httpOnly, true);
    assert.equal(cookies[0]?.sameSite, "Strict");
    // Nothing of the token in the page's reach: URL, storage, the input.
    // (Page scripts are strings: this file is type-checked for Node, without the DOM's types.)
    const reach = (await page.evaluate(
      "[location.href, JSON.stringify(localStorage), JSON.stringify(sessionStorage), document.cookie, document.body.innerHTML]",
    )) as string[];
    const leaks = reach.filter((s) => s.includes(ctrl.adminToken)).length;
    assert.equal(leaks, 0);
  });

  it("shows the overview: environments and clusters", async () => {
    const envs = page.getByRole("table", { name: "Environments" });
    await envs.getByRole("link", { name: "shop/production" }).waitFor();
    assert.match((await envs.textContent()) ?? "", /eu-west=2, us-east=3/);
    await page.getByRole("table", { name: "Clusters" }).getByText("eu-west").waitFor();
    // The filter narrows the table.
    await page.getByLabel("Filter Environments").fill("staging");
    await page.getByText("1 of 2").waitFor();
    await page.getByLabel("Filter Environments").fill("");
    // A header sorts by its column, and a second click reverses the order.
    const order = async (): Promise<string[]> =>
      (await envs.getByRole("link").allTextContents()).filter((t) => t.startsWith("shop/"));
    const header = envs.getByRole("button", { name: /^Environment/ });
    await header.click();
    await envs.locator('th[aria-sort="ascending"]').waitFor();
    assert.deepEqual(await order(), ["shop/production", "shop/staging"]);
    await header.click();
    await envs.locator('th[aria-sort="descending"]').waitFor();
    assert.deepEqual(await order(), ["shop/staging", "shop/production"]);
    await shot("overview");
  });

  it("shows an environment and deploys from the page; a refused image shows ctrl's message at the field", async () => {
    await page.getByRole("link", { name: "shop/production" }).click();
    const revisions = page.getByRole("table", { name: "Revisions" });
    await revisions.getByText("registry.example.com/shop:1.0").waitFor();
    await page.getByLabel("Image").fill("Not A Valid::Image");
    await page.getByRole("button", { name: "Deploy", exact: true }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Confirm" }).click();
    const fieldError = page.locator("#image-error");
    await fieldError.filter({ hasText: /image/ }).waitFor();
    assert.match((await fieldError.textContent()) ?? "", /image/);
    await page.getByLabel("Image").fill("registry.example.com/shop:2.0");
    await page.getByRole("button", { name: "Deploy", exact: true }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Confirm" }).click();
    // The new revision appears without a reload (ctrl pushes it).
    await revisions.getByText("registry.example.com/shop:2.0").waitFor();
    // Only the image changed: the port and variables are the previous revision's.
    const [newest] = (
      await ctrl
        .client(DeploymentService, ctrl.adminToken)
        .listDeployments({ workspace: "acme", project: "shop", environment: "production" })
    ).deployments;
    assert.equal(newest?.image, "registry.example.com/shop:2.0");
    assert.equal(newest?.port, 8081);
    assert.deepEqual(
      newest?.env.map((e) => [e.name, e.value]),
      [["MODE", "prod"]],
    );
    await shot("environment");
  });

  it("is pushed what changes: no request of the page's, however long it stays open", async () => {
    const requests: string[] = [];
    const onRequest = (r: { url(): string }) => requests.push(r.url());
    page.on("request", onRequest);
    try {
      // A quiet while: a polling page would ask again.
      await new Promise((r) => setTimeout(r, 5_000));
      // A change made elsewhere (configuration and a secret: a new revision) shows up.
      const env = { workspace: "acme", project: "shop", environment: "production" };
      await ctrl
        .client(ConfigService, ctrl.adminToken)
        .setConfig({ ...env, values: [{ key: "LOG_LEVEL", value: "debug" }] });
      await ctrl
        .client(ConfigService, ctrl.adminToken)
        .setSecrets({ ...env, secrets: [{ key: "API_KEY", source: { case: "value", value: "s3cret-value" } }] });
      await page.getByRole("table", { name: "Revisions" }).getByRole("cell", { name: "4", exact: true }).waitFor();
      assert.deepEqual(requests, []);
    } finally {
      page.off("request", onRequest);
    }
  });

  it("rolls back after showing the diff", async () => {
    await page.getByRole("button", { name: "Roll back to revision 1" }).click();
    const diff = page.getByRole("table", { name: "What the rollback changes" });
    await diff.waitFor();
    const text = (await diff.textContent()) ?? "";
    assert.match(text, /shop:2\.0/);
    assert.match(text, /shop:1\.0/);
    // Configuration and secrets are part of what a rollback restores: the secret by name only.
    assert.match(text, /LOG_LEVEL=debug/);
    assert.match(text, /secret names\s*API_KEY/);
    assert.doesNotMatch(text, /s3cret-value/);
    await shot("rollback-diff");
    await page.getByRole("dialog").getByRole("button", { name: "Confirm" }).click();
    // Revision 1 becomes the rollout's target: revision 4 is now one to roll back to.
    await page.getByRole("button", { name: "Roll back to revision 4" }).waitFor();
    assert.equal(await page.getByRole("button", { name: "Roll back to revision 1" }).count(), 0);
  });

  it("reconnects when ctrl restarts, and catches up with what changed meanwhile", async () => {
    await page.evaluate("window.__kraneMarker = 'no reload'");
    const url = ctrl.url;
    const admin = ctrl.adminToken;
    await ctrl.close();
    await page.locator(".badge", { hasText: "reconnecting" }).first().waitFor();
    const again = await startCtrl({
      databaseUrl: join(dir.path, "ctrl.db"),
      listen: { host: "127.0.0.1", port },
      opsListen: { host: "127.0.0.1", port: 0 },
      shutdownGraceMs: 2000,
      keyring,
    });
    ctrl = {
      ...again,
      adminToken: admin,
      agentToken: () => Promise.reject(new Error("unused")),
      client: (service, token) => createClient(service, transportFor(url, token)),
    };
    assert.equal(again.url, url);
    await createClient(DeploymentService, transportFor(url, admin)).createDeployment({
      workspace: "acme",
      project: "shop",
      environment: "production",
      image: "registry.example.com/shop:3.0",
    });
    await page
      .getByRole("table", { name: "Revisions" })
      .getByText("registry.example.com/shop:3.0")
      .waitFor({ timeout: 30_000 });
    assert.equal(await page.evaluate("window.__kraneMarker"), "no reload");
  });

  it("shows a workspace's quotas: use against each limit, a limit set below use as over", async () => {
    await ctrl
      .client(QuotaService, ctrl.adminToken)
      .setQuota({ workspace: "acme", values: { cpu: "10", instances: "4" } });
    await page.goto(`${ctrl.url}/#/`);
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Quotas" }).click();
    const table = page.getByRole("table", { name: "Quotas" });
    await table.waitFor();
    assert.equal(await page.getByLabel("Workspace").inputValue(), "acme");
    const row = async (name: string): Promise<string> =>
      (await table.locator("tbody tr", { hasText: name }).first().textContent()) ?? "";
    // production at 2 + 3 and staging at 1: 6 instances against the 4 set, kept and shown as over.
    assert.match(await row("instances"), /^instances64150%workspace.*over$/);
    assert.match(await row("cpu"), /^cpu\d+m10000m\d+%workspace.*within$/);
    assert.match(await row("memory"), /^memory\d+ MiBunlimited-default.*unlimited$/);
    await shot("quotas");
  });

  it("has no accessibility violations on the main pages", async () => {
    const pages: [string, string][] = [
      ["overview", "#/"],
      ["environment", "#/env/acme/shop/production/status"],
      ["events", "#/env/acme/shop/production/events"],
      ["logs", "#/env/acme/shop/production/logs"],
      ["charts", "#/env/acme/shop/production/charts"],
      ["config", "#/env/acme/shop/production/config"],
      ["audit", "#/audit"],
      ["quotas", "#/quotas/acme"],
    ];
    for (const [name, hash] of pages) {
      await page.goto(`${ctrl.url}/${hash}`);
      await page
        .getByText("Loading…")
        .first()
        .waitFor({ state: "detached" })
        .catch(() => undefined);
      await page.locator("main h2").first().waitFor();
      if (name === "audit") await page.getByRole("table", { name: "Audit events" }).waitFor();
      if (name === "quotas") await page.getByRole("table", { name: "Quotas" }).waitFor();
      if (name === "config") await shot("config");
      if (name === "audit") await shot("audit");
      if (name === "events") await shot("events");
      const violations = await axeViolations(page);
      assert.deepEqual(violations, [], `${name}: ${violations.join("\n")}`);
      // On a 1280-pixel screen nothing runs off the page: a wide table scrolls inside its frame.
      const overflow = await page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth",
      );
      assert.ok(Number(overflow) <= 0, `${name}: the page is ${String(overflow)} px wider than the window`);
    }
  });

  it("refuses the session to another site's page", async () => {
    // The same browser profile (so the session cookie is there), another site's page.
    const other = await page.context().newPage();
    await other.goto(`http://127.0.0.1:${(evil.address() as AddressInfo).port}/`);
    const status = await other.evaluate(async (url) => {
      try {
        const res = await fetch(`${url}/krane.ctrl.v1.WorkspaceService/CreateWorkspace`, {
          method: "POST",
          credentials: "include",
          mode: "no-cors",
          headers: { "content-type": "text/plain" },
          body: '{"slug":"csrf"}',
        });
        return res.type;
      } catch (err) {
        return String(err);
      }
    }, ctrl.url);
    assert.equal(status, "opaque");
    await other.close();
    const { workspaces } = await ctrl.client(WorkspaceService, ctrl.adminToken).listWorkspaces({});
    assert.ok(!workspaces.some((w) => w.slug === "csrf"), "the cross-site POST changed nothing");
  });

  it("another workspace's token sees nothing of the first", async () => {
    const admin = ctrl.adminToken;
    await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: "globex" });
    await ctrl.client(ProjectService, admin).createProject({ workspace: "globex", slug: "site" });
    await ctrl.client(EnvironmentService, admin).createEnvironment({
      workspace: "globex",
      project: "site",
      slug: "live",
      regions: [{ region: "eu-west", replicas: 1 }],
    });
    const { token } = await ctrl
      .client(ApiTokenService, admin)
      .createApiToken({ name: "globex-ci", workspace: "globex" });
    // A browser profile of its own: the admin's session is not in it.
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    try {
      const other = await context.newPage();
      await other.goto(ctrl.url);
      await other.getByLabel("API token").fill(token);
      await other.getByRole("button", { name: "Sign in" }).click();
      await other.getByText("signed in as globex-ci (workspace globex)").waitFor();
      const envs = other.getByRole("table", { name: "Environments" });
      await envs.getByRole("link", { name: "site/live" }).waitFor();
      const overview = (await other.locator("main").textContent()) ?? "";
      assert.doesNotMatch(overview, /shop|acme/, "the overview shows nothing of the other workspace");
      assert.equal(await other.getByRole("table", { name: "Clusters" }).count(), 0, "no installation clusters");
      // The first workspace's environment by its address: refused, and nothing of it on the page.
      await other.goto(`${ctrl.url}/#/env/acme/shop/production/status`);
      await other
        .getByRole("alert")
        .filter({ hasText: /not found/i })
        .waitFor();
      const page2 = (await other.locator("main").textContent()) ?? "";
      assert.doesNotMatch(page2, /registry\.example\.com|eu-west=2|us-east/);
      // Its audit page: its own chain only.
      await other.goto(`${ctrl.url}/#/audit`);
      await other.getByRole("table", { name: "Audit events" }).waitFor();
      const audit = (await other.locator("main").textContent()) ?? "";
      assert.doesNotMatch(audit, /acme|shop/);
      // Its quotas: its own workspace only.
      await other.goto(`${ctrl.url}/#/quotas`);
      await other.getByRole("table", { name: "Quotas" }).waitFor();
      assert.equal(await other.getByLabel("Workspace").inputValue(), "globex");
      assert.doesNotMatch((await other.locator("main").textContent()) ?? "", /acme/);
    } finally {
      await context.close();
    }
  });

  it("works with the keyboard alone, and signs out", async () => {
    await page.goto(`${ctrl.url}/#/`);
    await page.getByRole("table", { name: "Environments" }).waitFor();
    // Tab to the first environment link and follow it with Enter.
    for (let i = 0; i < 30; i++) {
      await page.keyboard.press("Tab");
      const focused = await page.evaluate('document.activeElement?.textContent ?? ""');
      if (focused === "shop/production") break;
    }
    await page.keyboard.press("Enter");
    await page.getByRole("table", { name: "Revisions" }).waitFor();
    // An action's confirmation opens from the keyboard and Escape cancels it.
    await page.getByRole("button", { name: "Pause", exact: true }).focus();
    await page.keyboard.press("Enter");
    await page.getByRole("dialog", { name: "Pause the rollout" }).waitFor();
    await page.keyboard.press("Escape");
    await page.getByRole("dialog").waitFor({ state: "detached" });
    // The tabs are links: Tab to "Events", Enter.
    for (let i = 0; i < 60; i++) {
      await page.keyboard.press("Tab");
      if ((await page.evaluate('document.activeElement?.textContent ?? ""')) === "Events") break;
    }
    await page.keyboard.press("Enter");
    await page.getByRole("table", { name: "Events" }).waitFor();
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByLabel("API token").waitFor();
    assert.equal((await page.context().cookies()).length, 0);
    // The old session is gone on the server too: a reload stays signed out.
    await page.reload();
    await page.getByLabel("API token").waitFor();
  });
});

// The dashboard in a real browser: Debian's chromium, driven by playwright-core through the
// system executable (no browser download), against a real ctrl on SQLite over real sockets.
// Sign in, see the overview and an environment, deploy from the page (a refused image first,
// with ctrl's message next to the field), roll back after the diff, sign out; the cookie's flags;
// a cross-site page cannot use the session; screenshots of the main pages for the README.
//
// No agent runs here: instances and sentinels stay empty and rollouts never complete. What needs
// a cluster (a rollout completing live, canary weights moving) is not covered yet.
import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { chromium, type Browser, type Page } from "playwright-core";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { startTestCtrl, tempDir, type TestCtrl } from "../ctrl/support.js";
import { exitAfterLastHook } from "../../support/exit.js";

const CHROMIUM = process.env.KRANE_CHROMIUM ?? "/usr/bin/chromium";
/** Where the screenshots go (the README shows the ones in docs/dashboard/). */
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
  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"));
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
      port: 8080,
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
    // The new revision appears without a reload (the page refreshes what it shows).
    await revisions.getByText("registry.example.com/shop:2.0").waitFor();
    await shot("environment");
  });

  it("rolls back after showing the diff", async () => {
    await page.getByRole("button", { name: "Roll back to revision 1" }).click();
    const diff = page.getByRole("table", { name: "What the rollback changes" });
    await diff.waitFor();
    const text = (await diff.textContent()) ?? "";
    assert.match(text, /shop:2\.0/);
    assert.match(text, /shop:1\.0/);
    await shot("rollback-diff");
    await page.getByRole("dialog").getByRole("button", { name: "Confirm" }).click();
    // Revision 1 becomes the rollout's target: revision 2 is now the one to roll back to.
    await page.getByRole("button", { name: "Roll back to revision 2" }).waitFor();
    assert.equal(await page.getByRole("button", { name: "Roll back to revision 1" }).count(), 0);
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
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByLabel("API token").waitFor();
    assert.equal((await page.context().cookies()).length, 0);
    // The old session is gone on the server too: a reload stays signed out.
    await page.reload();
    await page.getByLabel("API token").waitFor();
  });
});

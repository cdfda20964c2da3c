// The requests and policies tabs in a real browser (Debian's chromium through playwright-core)
// against a real ctrl on SQLite. Requests: the region's agent is played through its own API (the
// log channel it keeps open to ctrl, and PushLogs with its cluster token), answering the page's
// request view with two requests, one served and one refused by a policy; the table shows them
// with their fields. Policies: the empty state, a policy ctrl refuses shows its message naming the
// field, a limits policy added from the form is listed with its summary, removed after the
// confirmation, and the empty state is back. A viewer sees the list but no form, with a line
// saying why. No accessibility violations on either tab.
import assert from "node:assert/strict";
import { join } from "node:path";
import { existsSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { createClient } from "@connectrpc/connect";
import { chromium, type Browser, type Page } from "playwright-core";
import {
  ApiTokenService,
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { LogChannelService } from "../../../src/gen/krane/ctrl/v1/logs_pb.js";
import { MemberService } from "../../../src/gen/krane/ctrl/v1/access_pb.js";
import { startTestCtrl, tempDir, transportFor, type TestCtrl } from "../ctrl/support.js";
import { exitAfterLastHook } from "../../support/exit.js";
import { axeViolations } from "./axe.js";

const CHROMIUM = process.env.KRANE_CHROMIUM ?? "/usr/bin/chromium";
const DIST = join(import.meta.dirname, "..", "..", "..", "dist", "dashboard", "index.html");
const skip = !existsSync(CHROMIUM)
  ? `no chromium at ${CHROMIUM} (Debian's chromium package; KRANE_CHROMIUM names another)`
  : !existsSync(DIST)
    ? "the dashboard is not built (npm run build)"
    : false;

const PROD = { workspace: "acme", project: "shop", environment: "production" };
const POD = "production-web-7f9c4-abcde";

describe("dashboard requests and policies tabs in a browser", { skip }, () => {
  const dir = tempDir("krane-dash-edge-");
  const stopAgent = new AbortController();
  let ctrl: TestCtrl;
  let browser: Browser;
  let page: Page;
  let deploymentId = "";
  /** Request-view requests the played agent was asked for. */
  let asked = 0;

  /** The region's agent as ctrl sees it: its log channel, answering each request view with two requests. */
  async function playAgent(token: string): Promise<void> {
    const client = createClient(LogChannelService, transportFor(ctrl.url, token));
    try {
      for await (const m of client.openLogChannel({ region: "eu-west" }, { signal: stopAgent.signal, timeoutMs: 0 })) {
        if (m.message.case !== "request" || !m.message.value.requests) continue;
        asked++;
        const requestId = m.message.value.requestId;
        void (async () => {
          for (let i = 0; !stopAgent.signal.aborted; i++) {
            const now = BigInt(Date.now()) * 1_000_000n;
            const entries =
              i === 0
                ? [
                    {
                      timeUnixNano: now,
                      instance: POD,
                      deploymentId,
                      entry: {
                        case: "request" as const,
                        value: {
                          method: "GET",
                          path: "/books/7?page=…",
                          status: 200,
                          latencyMs: 12.4,
                          client: "192.0.2.7",
                          key: "mobile-app",
                        },
                      },
                    },
                    {
                      timeUnixNano: now + 1n,
                      entry: {
                        case: "request" as const,
                        value: {
                          method: "DELETE",
                          path: "/books/7",
                          status: 405,
                          latencyMs: 0.3,
                          policy: "read-only",
                          client: "192.0.2.7",
                        },
                      },
                    },
                  ]
                : [];
            const r = await client.pushLogs({ region: "eu-west", requestId, entries });
            if (r.cancelled) return;
            await new Promise((res) => setTimeout(res, 500));
          }
        })().catch(() => undefined);
      }
    } catch {
      // Stopped with the test.
    }
  }

  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"));
    const admin = ctrl.adminToken;
    await ctrl.client(RegionService, admin).createRegion({ name: "eu-west" });
    await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: "acme" });
    await ctrl.client(ProjectService, admin).createProject({ workspace: "acme", slug: "shop" });
    await ctrl.client(EnvironmentService, admin).createEnvironment({
      workspace: "acme",
      project: "shop",
      slug: "production",
      regions: [{ region: "eu-west", replicas: 2 }],
    });
    const { deployment } = await ctrl
      .client(DeploymentService, admin)
      .createDeployment({ ...PROD, image: "registry.example.com/shop:1.0", port: 8080 });
    deploymentId = deployment?.id ?? "";
    void playAgent(await ctrl.agentToken("eu-west"));
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    await page.goto(ctrl.url);
    await page.getByLabel("API token").fill(admin);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByText("signed in as admin").waitFor();
  });
  after(async () => {
    stopAgent.abort();
    await browser?.close();
    await ctrl?.close();
    dir.remove();
    exitAfterLastHook();
  });

  it("the requests tab shows the requests the region's agent pushes, as they come", async () => {
    await page.goto(`${ctrl.url}/#/env/acme/shop/production/requests`);
    const table = page.getByRole("table", { name: "Requests" });
    const served = table.locator("tbody tr", { hasText: "/books/7?page=…" });
    const refused = table.locator("tbody tr", { hasText: "refused by read-only" });
    await served.waitFor();
    await refused.waitFor();
    assert.ok(asked >= 1, "the page's view reached the agent");
    assert.match(
      (await served.textContent()) ?? "",
      new RegExp(`eu-westGET20012 ms/books/7\\?page=…r1 ${POD}192\\.0\\.2\\.7mobile-app$`),
    );
    assert.match(
      (await refused.textContent()) ?? "",
      /eu-westDELETE4050\.3 ms\/books\/7refused by read-only192\.0\.2\.7$/,
    );
    assert.deepEqual(await axeViolations(page), []);
  });

  it("the policies tab lists, adds (a refusal names its field) and removes after asking", async () => {
    await page.goto(`${ctrl.url}/#/env/acme/shop/production/policies`);
    const policies = page.getByRole("table", { name: "Edge policies" });
    await page.getByText("No policy: every request goes on to an instance").waitFor();
    const form = page.getByRole("form", { name: "Add a policy" });
    // A CIDR ctrl refuses: its message, naming the field, under the form.
    await form.getByLabel("Name").fill("office");
    await form.getByLabel("Allow (CIDRs)").fill("192.0.2.1/24");
    await form.getByRole("button", { name: "Add policy" }).click();
    await form.getByRole("alert").getByText(/allow/).waitFor();

    await form.getByLabel("Name").fill("read-only");
    await form.getByLabel("Kind").selectOption("limits");
    await form.getByLabel("Methods").fill("GET, HEAD");
    await form.getByLabel("Methods").press("Enter");
    const row = policies.locator("tbody tr", { hasText: "read-only" });
    await row.waitFor();
    assert.match((await row.textContent()) ?? "", /^read-onlylimits.*GET.*HEAD.*Remove$/);
    assert.equal(await form.getByLabel("Name").inputValue(), "", "the form is emptied");
    assert.deepEqual(await axeViolations(page), []);

    await row.getByRole("button", { name: "Remove policy read-only" }).click();
    const dialog = page.getByRole("dialog", { name: "Remove policy read-only" });
    await dialog.getByRole("button", { name: "Confirm" }).click();
    await page.getByText("No policy: every request goes on to an instance").waitFor();
  });

  it("a viewer sees the policies but no form, and a line saying why", async () => {
    const admin = ctrl.adminToken;
    await ctrl.client(MemberService, admin).createServiceAccount({ workspace: "acme", name: "reader", role: "viewer" });
    const { token } = await ctrl
      .client(ApiTokenService, admin)
      .createApiToken({ name: "reader", workspace: "acme", serviceAccount: "reader" });
    const viewer = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    await viewer.goto(ctrl.url);
    await viewer.getByLabel("API token").fill(token);
    await viewer.getByRole("button", { name: "Sign in" }).click();
    await viewer.getByText("signed in as").waitFor();
    await viewer.goto(`${ctrl.url}/#/env/acme/shop/production/policies`);
    await viewer
      .getByText("Adding a policy and Removing a policy need the developer role; you are a viewer.")
      .waitFor();
    assert.equal(await viewer.getByRole("form", { name: "Add a policy" }).count(), 0);
    assert.equal(await viewer.getByRole("button", { name: /^Remove policy/ }).count(), 0);
    assert.deepEqual(await axeViolations(viewer), []);
  });
});

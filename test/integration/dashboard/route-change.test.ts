// The dashboard when the address changes under an open page (the hash edited, a link followed):
// the new object's page never shows the previous object's data, not even for a moment, on any
// tab (status with its actions and an open confirmation, events, logs and their filters, charts,
// config and its form), nor on the audit page; a page for something that does not exist shows
// that, and nothing stays "Loading…" or "connecting…" after an error. A workspace session is not
// offered the installation's audit chain. Debian's chromium through playwright-core, against a
// real ctrl on SQLite; the agent's reports (instances, events, sentinels, measurements) are sent
// with a real agent token, so every tab has something of its own to show.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
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
import { ClusterService, Health, InstanceStatus } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { ConfigService } from "../../../src/gen/krane/ctrl/v1/config_pb.js";
import { LATENCY_BUCKETS_MS } from "../../../src/contracts/analysis.js";
import { startTestCtrl, tempDir, type TestCtrl } from "../ctrl/support.js";
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
const STAGE = { workspace: "acme", project: "shop", environment: "staging" };
/** What only production shows: its image, an instance, its event, its sentinel's address, a config key. */
const PROD_ONLY = ["shop:2.0", "prod-web-a", "OOMKilled", "10.1.1.1:8443", "PROD_ONLY_KEY", "Requests: r3"];

async function desiredIn(ctrl: TestCtrl, objectId: string, region: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const row = await ctrl.store.db
      .selectFrom("desired_objects")
      .select("object_id")
      .where("object_id", "=", objectId)
      .where("region", "=", region)
      .executeTakeFirst();
    if (row) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${objectId} never became desired in ${region}`);
}

/**
 * From now on, records every moment the page shows the new object (`shown`, a page expression
 * over `main`) together with any of `stale` in <main> (text or attributes: an input's placeholder
 * counts). A MutationObserver sees each render, so a page that shows the old data only until the
 * new arrives is caught too.
 */
async function watchForStale(page: Page, shown: string, stale: string[]): Promise<void> {
  // Page scripts are strings: this file is type-checked for Node, without the DOM's types.
  await page.evaluate(`(() => {
    const stale = ${JSON.stringify(stale)};
    window.__stale = [];
    const check = () => {
      const main = document.querySelector("main");
      if (!main || !(${shown})) return;
      const html = main.innerHTML;
      for (const s of stale) if (html.includes(s)) window.__stale.push(s);
    };
    window.__staleObserver?.disconnect();
    window.__staleObserver = new MutationObserver(check);
    window.__staleObserver.observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
  })()`);
}

/** The page names staging in its heading line. */
const STAGING_SHOWN = 'main.textContent.includes("shop/staging")';

async function staleSeen(page: Page): Promise<string[]> {
  const seen = (await page.evaluate("(() => { window.__staleObserver.disconnect(); return window.__stale; })()")) as
    string[] | undefined;
  return [...new Set(seen ?? [])];
}

/** Changes the address the way a person does: the hash, no reload. */
async function goHash(page: Page, hash: string): Promise<void> {
  await page.evaluate(`location.hash = ${JSON.stringify(hash)}`);
}

describe("dashboard when the route changes", { skip }, () => {
  const dir = tempDir("krane-dash-route-");
  let ctrl: TestCtrl;
  let browser: Browser;
  let page: Page;
  let workspaceToken = "";

  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"));
    const admin = ctrl.adminToken;
    await ctrl.client(RegionService, admin).createRegion({ name: "eu-west" });
    await ctrl.client(RegionService, admin).createRegion({ name: "us-east" });
    for (const [ws, project] of [
      ["acme", "shop"],
      ["globex", "site"],
    ] as const) {
      await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: ws });
      await ctrl.client(ProjectService, admin).createProject({ workspace: ws, slug: project });
    }
    const envs = ctrl.client(EnvironmentService, admin);
    const { environment: prodEnv } = await envs.createEnvironment({
      workspace: "acme",
      project: "shop",
      slug: "production",
      regions: [
        { region: "eu-west", replicas: 2 },
        { region: "us-east", replicas: 1 },
      ],
      sentinel: { image: "registry.example.com/sentinel:1", replicas: 1, cpuMillicores: 0n, memoryMib: 0n },
    });
    await envs.createEnvironment({ ...STAGE, slug: "staging", regions: [{ region: "eu-west", replicas: 1 }] });
    await envs.createEnvironment({
      workspace: "globex",
      project: "site",
      slug: "live",
      regions: [{ region: "eu-west", replicas: 1 }],
    });
    const deploy = ctrl.client(DeploymentService, admin);
    await deploy.createDeployment({ ...PROD, image: "registry.example.com/shop:1.0", port: 8080 });
    await deploy.createDeployment({ ...PROD, image: "registry.example.com/shop:2.0", port: 8080 });
    // A third revision (shop:2.0 with a configuration key only production has).
    await ctrl.client(ConfigService, admin).setConfig({ ...PROD, values: [{ key: "PROD_ONLY_KEY", value: "1" }] });
    await ctrl.client(ConfigService, admin).setConfig({ ...STAGE, values: [{ key: "STAGE_KEY", value: "1" }] });
    const { deployment: stageDep } = await deploy.createDeployment({
      ...STAGE,
      image: "registry.example.com/stage:0.9",
      port: 8080,
    });
    const prodDep = (await ctrl.client(DeploymentService, admin).listDeployments({ ...PROD })).deployments.find(
      (d) => d.revision === 3n,
    );
    assert.ok(prodEnv && prodDep && stageDep);

    // What the eu-west agent would report: instances with an event each, the sentinel, measurements.
    const eu = ctrl.client(ClusterService, await ctrl.agentToken("eu-west"));
    const now = BigInt(Date.now());
    for (const [dep, pod, reason] of [
      [prodDep, "prod-web-a", "OOMKilled"],
      [stageDep, "stage-web-a", "ErrImagePull"],
    ] as const) {
      await desiredIn(ctrl, dep.id, "eu-west");
      await eu.reportDeploymentStatus({
        region: "eu-west",
        change: {
          case: "update",
          value: {
            deploymentId: dep.id,
            instances: [{ k8sName: pod, address: "10.0.0.1:8080", status: InstanceStatus.FAILED }],
            events: [{ instance: pod, kind: "terminated", reason, atUnixMs: now, restarts: 1, image: "", message: "" }],
          },
        },
      });
    }
    const sentinel = await ctrl.store.db
      .selectFrom("sentinels")
      .select("id")
      .where("environment_id", "=", prodEnv.id)
      .where("region", "=", "eu-west")
      .executeTakeFirstOrThrow();
    await desiredIn(ctrl, sentinel.id, "eu-west");
    await eu.reportSentinelStatus({
      region: "eu-west",
      change: {
        case: "update",
        value: { sentinelId: sentinel.id, availableReplicas: 1, health: Health.HEALTHY, address: "10.1.1.1:8443" },
      },
    });
    const t0 = Date.now() - 60_000;
    await eu.reportMeasurements({
      region: "eu-west",
      fromUnixMs: BigInt(t0),
      toUnixMs: BigInt(t0 + 30_000),
      revisions: [
        {
          environmentId: prodEnv.id,
          deploymentId: prodDep.id,
          responses2xx: 300n,
          responses3xx: 0n,
          responses4xx: 0n,
          responses5xx: 0n,
          latencyBuckets: new Array<bigint>(LATENCY_BUCKETS_MS.length + 1).fill(0n).map((v, i) => (i === 2 ? 300n : v)),
        },
      ],
    });

    ({ token: workspaceToken } = await ctrl
      .client(ApiTokenService, admin)
      .createApiToken({ name: "globex-ci", workspace: "globex" }));

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    await page.goto(ctrl.url);
    await page.getByLabel("API token").fill(admin);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByText("signed in as admin").waitFor();
  });
  after(async () => {
    await browser?.close();
    await ctrl?.close();
    dir.remove();
    exitAfterLastHook();
  });

  /** Opens production's `tab` and waits until it shows what is production's own. */
  async function openProduction(tab: string, own: string): Promise<void> {
    await page.goto(`${ctrl.url}/#/env/acme/shop/production/${tab}`);
    await page.locator("main").getByText(own).first().waitFor();
  }

  it("a missing environment's address shows that it is missing, and nothing of the previous one", async () => {
    await openProduction("status", "registry.example.com/shop:2.0");
    await page.getByRole("table", { name: "Sentinels" }).getByText("10.1.1.1:8443").waitFor();
    await goHash(page, "#/env/acme/shop/doesnotexist");
    await page
      .getByRole("alert")
      .filter({ hasText: /not found/i })
      .waitFor();
    const main = (await page.locator("main").textContent()) ?? "";
    assert.match(main, /shop\/doesnotexist/);
    for (const s of PROD_ONLY) assert.ok(!main.includes(s), `the missing environment's page shows ${s}`);
    assert.equal(await page.locator("main table").count(), 0, "no table of the previous environment");
    assert.equal(
      await page.getByRole("button", { name: "Deploy", exact: true }).count(),
      0,
      "no action aims at the missing environment",
    );
    // The error ended the waiting: it says the stream stopped, not that it is still coming.
    assert.doesNotMatch(main, /Loading…|connecting…/);
    await page.locator(".badge", { hasText: "stopped" }).waitFor();
    const violations = await axeViolations(page);
    assert.deepEqual(violations, [], violations.join("\n"));
  });

  it("status: another environment never shows the first's data, typed input or open confirmation", async () => {
    await openProduction("status", "registry.example.com/shop:2.0");
    await page.getByRole("table", { name: "Instances" }).getByText("prod-web-a").waitFor();
    // Half an action in progress: an image typed, its confirmation open.
    await page.getByLabel("Image").fill("registry.example.com/typed:1");
    await page.getByRole("button", { name: "Deploy", exact: true }).click();
    await page.getByRole("dialog").waitFor();
    await watchForStale(page, STAGING_SHOWN, [...PROD_ONLY, "typed:1"]);
    await goHash(page, "#/env/acme/shop/staging/status");
    await page.getByRole("table", { name: "Instances" }).getByText("stage-web-a").waitFor();
    assert.deepEqual(await staleSeen(page), []);
    assert.equal(await page.getByRole("dialog").count(), 0, "the confirmation for production is gone");
    assert.equal(await page.getByLabel("Image").inputValue(), "", "the image typed for production is gone");
    // Nothing was deployed anywhere by the switch.
    const revs = await ctrl.client(DeploymentService, ctrl.adminToken).listDeployments({ ...PROD });
    assert.equal(revs.deployments.length, 3);
  });

  it("events: another environment's timeline has none of the first's events", async () => {
    await openProduction("events", "OOMKilled");
    await watchForStale(page, STAGING_SHOWN, PROD_ONLY);
    await goHash(page, "#/env/acme/shop/staging/events");
    await page.getByRole("table", { name: "Events" }).getByText("ErrImagePull").waitFor();
    assert.deepEqual(await staleSeen(page), []);
  });

  it("logs: another environment's logs start with no filter of the first's", async () => {
    await page.goto(`${ctrl.url}/#/env/acme/shop/production/logs`);
    await page.getByRole("log", { name: "Log lines" }).waitFor();
    await page.getByLabel("Text", { exact: true }).fill("needle");
    await page.getByLabel(/^Revision/).selectOption("3");
    await watchForStale(page, STAGING_SHOWN, PROD_ONLY);
    await goHash(page, "#/env/acme/shop/staging/logs");
    await page.locator("main p").filter({ hasText: "shop/staging" }).waitFor();
    await page.locator(".badge", { hasText: "live" }).waitFor();
    await page.getByRole("log", { name: "Log lines" }).waitFor();
    assert.deepEqual(await staleSeen(page), []);
    assert.equal(await page.getByLabel("Text", { exact: true }).inputValue(), "");
    // Revision 3 is production's: staging's filter is "every revision" (the first option).
    const revision = page.getByLabel(/^Revision/);
    assert.equal(await revision.evaluate((s) => (s as unknown as { selectedIndex: number }).selectedIndex), 0);
    assert.equal(await revision.inputValue(), "");
  });

  it("charts: another environment's charts never draw the first's measurements", async () => {
    await page.goto(`${ctrl.url}/#/env/acme/shop/production/charts`);
    await page.locator('svg[aria-label^="Requests: r3: last"]').waitFor();
    await watchForStale(page, STAGING_SHOWN, PROD_ONLY);
    await goHash(page, "#/env/acme/shop/staging/charts");
    await page.getByText("No measurements in the last 15 minutes.").waitFor();
    assert.deepEqual(await staleSeen(page), []);
    assert.equal(await page.locator('svg[aria-label^="Requests: no measurements"]').count(), 1);
  });

  it("config: another environment's settings never show the first's keys or typed input", async () => {
    await openProduction("config", "PROD_ONLY_KEY");
    await page.getByLabel("Key", { exact: true }).fill("typed-key");
    await watchForStale(page, STAGING_SHOWN, PROD_ONLY);
    await goHash(page, "#/env/acme/shop/staging/config");
    await page.getByRole("table", { name: "Configuration" }).getByText("STAGE_KEY").waitFor();
    assert.deepEqual(await staleSeen(page), []);
    assert.equal(await page.getByLabel("Key", { exact: true }).inputValue(), "");
  });

  it("audit: another workspace's address shows that workspace's chain, never the first's", async () => {
    await page.goto(`${ctrl.url}/#/audit/acme`);
    const table = page.getByRole("table", { name: "Audit events" });
    // Configuration was set in acme only; an API token was made in globex only.
    await table.getByText("ConfigService/SetConfig").first().waitFor();
    await watchForStale(page, 'main.querySelector("select")?.value === "globex"', ["ConfigService/SetConfig"]);
    await goHash(page, "#/audit/globex");
    await table.getByText("ApiTokenService/CreateApiToken").first().waitFor();
    assert.deepEqual(await staleSeen(page), []);
    assert.equal(await page.getByLabel("Chain").inputValue(), "globex");
  });

  /** A browser profile of its own, signed in with globex's workspace token. */
  async function asWorkspace(run: (p: Page) => Promise<void>): Promise<void> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    try {
      const other = await context.newPage();
      await other.goto(ctrl.url);
      await other.getByLabel("API token").fill(workspaceToken);
      await other.getByRole("button", { name: "Sign in" }).click();
      await other.getByText("signed in as globex-ci (workspace globex)").waitFor();
      await run(other);
    } finally {
      await context.close();
    }
  }

  it("a workspace session is not offered the installation's audit chain", async () => {
    await asWorkspace(async (other) => {
      await goHash(other, "#/audit");
      await other.getByRole("table", { name: "Audit events" }).getByText("ApiTokenService/CreateApiToken").waitFor();
      const options = await other.getByLabel("Chain").locator("option").allTextContents();
      assert.deepEqual(options, ["workspace globex"]);
    });
  });

  it("a refused audit chain shows the refusal and ends the loading", async () => {
    await asWorkspace(async (other) => {
      // Another workspace's chain, and the installation's, by their address: refused.
      for (const hash of ["#/audit/acme", "#/audit/*"]) {
        await other.goto(`${ctrl.url}/${hash}`);
        await other.getByRole("alert").waitFor();
        const main = (await other.locator("main").textContent()) ?? "";
        assert.doesNotMatch(main, /Loading…/, hash);
        assert.equal(await other.getByRole("table", { name: "Audit events" }).count(), 0, hash);
      }
    });
  });
});

// The charts tab in a real browser (Debian's chromium through playwright-core) against a real ctrl
// on SQLite: a known load reported through the agents' own path (ClusterService.ReportMeasurements
// and ReportUsage, with the region's agent token) shows as those numbers in each chart's
// accessible name (requests/s, error rate, p50, p99, CPU and memory per instance). The alert
// rules under them: the empty state names the form, a rule ctrl refuses shows its message naming
// the field, a restarts rule added by keyboard is listed with its window, removed after the
// confirmation (keyboard again), and the empty state is back; no accessibility violations with a
// rule listed, nor on the status tab with its rollout chart. Screenshots for docs/using.md.
import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
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
import { ClusterService } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { LATENCY_BUCKETS_MS } from "../../../src/contracts/analysis.js";
import { startTestCtrl, tempDir, type TestCtrl } from "../ctrl/support.js";
import { exitAfterLastHook } from "../../support/exit.js";
import { axeViolations } from "./axe.js";

const CHROMIUM = process.env.KRANE_CHROMIUM ?? "/usr/bin/chromium";
const SHOTS = process.env.KRANE_SCREENSHOTS_DIR;
const DIST = join(import.meta.dirname, "..", "..", "..", "dist", "dashboard", "index.html");
const skip = !existsSync(CHROMIUM)
  ? `no chromium at ${CHROMIUM} (Debian's chromium package; KRANE_CHROMIUM names another)`
  : !existsSync(DIST)
    ? "the dashboard is not built (npm run build)"
    : false;

const PROD = { workspace: "acme", project: "shop", environment: "production" };
const POD = "production-web-7f9c4-abcde";
const MIB = 2 ** 20;

describe("dashboard charts and alert rules in a browser", { skip }, () => {
  const dir = tempDir("krane-dash-charts-");
  let ctrl: TestCtrl;
  let browser: Browser;
  let page: Page;

  async function shot(name: string): Promise<void> {
    if (!SHOTS) return;
    mkdirSync(SHOTS, { recursive: true });
    await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  }

  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"));
    const admin = ctrl.adminToken;
    await ctrl.client(RegionService, admin).createRegion({ name: "eu-west" });
    await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: "acme" });
    await ctrl.client(ProjectService, admin).createProject({ workspace: "acme", slug: "shop" });
    const { environment } = await ctrl.client(EnvironmentService, admin).createEnvironment({
      workspace: "acme",
      project: "shop",
      slug: "production",
      regions: [{ region: "eu-west", replicas: 2 }],
      // Measurements come from an environment's sentinels.
      sentinel: { image: "registry.example.com/sentinel:1", replicas: 1, cpuMillicores: 0n, memoryMib: 0n },
    });
    const { deployment } = await ctrl
      .client(DeploymentService, admin)
      .createDeployment({ ...PROD, image: "registry.example.com/shop:1.0", port: 8080 });
    assert.ok(environment && deployment);
    const eu = ctrl.client(ClusterService, await ctrl.agentToken("eu-west"));
    // The known load: 10 s into a 30 s bucket (the newest, so the chart's last point), 250
    // requests of which 50 answered 5xx; 200 within 2.5 ms and 50 within 100 ms.
    const bucket = Math.floor((Date.now() - 60_000) / 30_000) * 30_000;
    const report = (fromMs: number, toMs: number, r2xx: number, r4xx: number, r5xx: number, slow: number) => {
      const latency = new Array<bigint>(LATENCY_BUCKETS_MS.length + 1).fill(0n);
      latency[LATENCY_BUCKETS_MS.indexOf(2.5)] = BigInt(r2xx + r4xx + r5xx - slow);
      latency[LATENCY_BUCKETS_MS.indexOf(100)] = BigInt(slow);
      return eu.reportMeasurements({
        region: "eu-west",
        fromUnixMs: BigInt(fromMs),
        toUnixMs: BigInt(toMs),
        revisions: [
          {
            environmentId: environment.id,
            deploymentId: deployment.id,
            responses2xx: BigInt(r2xx),
            responses3xx: 0n,
            responses4xx: BigInt(r4xx),
            responses5xx: BigInt(r5xx),
            latencyBuckets: latency,
          },
        ],
      });
    };
    // Before it, eight whole buckets of a lighter load (the lines' history in the screenshot).
    for (let k = 8; k >= 1; k--) {
      const from = bucket - k * 30_000;
      await report(from, from + 29_000, 300 + 40 * (8 - k), 10, k % 3 === 0 ? 15 : 3, 3);
    }
    await report(bucket, bucket + 10_000, 180, 20, 50, 50);
    // One instance over the last whole minute: 4 readings of 250 millicores and 64 MiB (less in
    // the five minutes before).
    const minute = Math.floor(Date.now() / 60_000) * 60_000 - 60_000;
    const { stored } = await eu.reportUsage({
      region: "eu-west",
      minutes: [5, 4, 3, 2, 1, 0].map((j) => ({
        minuteUnixMs: BigInt(minute - j * 60_000),
        instances: [
          {
            environmentId: environment.id,
            deploymentId: deployment.id,
            instance: POD,
            cpuMillicoresSum: 4 * (250 - 30 * j),
            memoryBytesSum: 4 * (64 - 4 * j) * MIB,
            readings: 4,
            restarts: j === 2 ? 1 : 0,
          },
        ],
      })),
    });
    assert.equal(stored, 6);

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

  /** Each chart's accessible name (its title and each line's last value), in page order. */
  async function chartNames(): Promise<string[]> {
    return page
      .locator('main svg[role="img"]')
      .evaluateAll((els) => els.map((e) => e.getAttribute("aria-label") ?? ""));
  }

  it("draws the known load's numbers", async () => {
    await page.goto(`${ctrl.url}/#/env/acme/shop/production/charts`);
    await page.locator('svg[aria-label^="Requests: r1: last"]').waitFor();
    await page.locator('svg[aria-label^="CPU per instance: r1"]').waitFor();
    assert.deepEqual(await chartNames(), [
      "Requests: r1: last 25 per second",
      "Error rate: r1: last 20 % 5xx",
      "p50 latency: r1: last 2.50 ms",
      "p99 latency: r1: last 100 ms",
      "CPU per instance: r1 eu-west …abcde: last 250 millicores",
      "Memory per instance: r1 eu-west …abcde: last 64 MiB",
    ]);
  });

  it("adds a restarts rule by keyboard, lists it, and removes it after asking", async () => {
    const rules = page.getByRole("table", { name: "Alert rules" });
    await page.getByText("No alert rule: add one with the form below").waitFor();
    const form = page.getByRole("form", { name: "Add an alert rule" });
    // A name ctrl refuses: its message, naming the field, under the form.
    await form.getByLabel("Name").fill("Bad Name");
    await form.getByLabel("Bound").fill("3");
    await form.getByLabel("Bound").press("Enter");
    await form
      .getByRole("alert")
      .getByText(/^name: /)
      .waitFor();

    await form.getByLabel("Name").fill("");
    await form.getByLabel("Name").focus();
    await page.keyboard.type("crashloop");
    await form.getByLabel("Metric").selectOption("restarts");
    await form.getByLabel("Over (minutes)").fill("10");
    await form.getByLabel("For (minutes)").fill("1");
    await form.getByLabel("For (minutes)").press("Enter");
    await rules.getByText("crashloop").waitFor();
    const row = rules.locator("tbody tr", { hasText: "crashloop" });
    assert.match((await row.textContent()) ?? "", /^crashlooprestarts > 3 in 10m for 1m✓ inactive-Remove$/);
    assert.equal(await form.getByLabel("Name").inputValue(), "", "the form is emptied");
    assert.deepEqual(await axeViolations(page), []);
    await shot("charts");

    await row.getByRole("button", { name: "Remove alert rule crashloop" }).focus();
    await page.keyboard.press("Enter");
    const dialog = page.getByRole("dialog", { name: "Remove alert rule crashloop" });
    await dialog.waitFor();
    // The dialog takes the focus: Enter confirms.
    await page.keyboard.press("Enter");
    await page.getByText("No alert rule: add one with the form below").waitFor();
    assert.equal(await dialog.count(), 0);
  });

  it("draws the rollout's instances per region on the status tab, with no accessibility violation", async () => {
    await page.goto(`${ctrl.url}/#/env/acme/shop/production/status`);
    const chart = page.locator('svg[aria-label^="Instances per region, new and old: eu-west new: last"]');
    await chart.waitFor();
    assert.match((await chart.getAttribute("aria-label")) ?? "", /eu-west old: last \d+ instances$/);
    assert.deepEqual(await axeViolations(page), []);
  });
});

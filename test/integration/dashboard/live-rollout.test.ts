// The dashboard watching real rollouts: a real local cluster (KWOK nodes with pod stand-ins: what
// is checked is what the page shows of a rollout, not what runs in the pods, which the agent's
// own tests prove on real nodes), a real agent and ctrl, Debian's chromium. From the page: deploy
// an image and watch the rollout complete with no reload; roll back after the diff and watch the
// instances move to the old revision; a canary promoted, then aborted, its weights changing on
// screen. Screenshots of the rollout and the canary for docs/using.md.
import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { chromium, type Browser, type Page } from "playwright-core";
import type { Agent } from "../../../src/agent/agent.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { applySentinelRbac } from "../../../src/sentinel/rbac.js";
import { useCluster } from "../../support/cluster.js";
import { routingAgent } from "../agent/support.js";
import { startTestCtrl, tempDir, type TestCtrl } from "../ctrl/support.js";

const CHROMIUM = process.env.KRANE_CHROMIUM ?? "/usr/bin/chromium";
const SHOTS = process.env.KRANE_SCREENSHOTS_DIR;
const DIST = join(import.meta.dirname, "..", "..", "..", "dist", "dashboard", "index.html");
const skip = !existsSync(CHROMIUM)
  ? `no chromium at ${CHROMIUM} (Debian's chromium package; KRANE_CHROMIUM names another)`
  : !existsSync(DIST)
    ? "the dashboard is not built (npm run build)"
    : false;

/** Generous: the shared machine runs other clusters too. */
const LONG = 180_000;

describe("dashboard watching real rollouts", { skip }, () => {
  const handle = useCluster({ standins: true, pods: { readyDelayMs: 300 } });
  const dir = tempDir("krane-dash-live-");
  let ctrl: TestCtrl;
  let agent: Agent;
  let browser: Browser;
  let page: Page;

  before(
    async () => {
      ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { rolloutSweepIntervalMs: 300 });
      const t = ctrl.adminToken;
      await ctrl.client(RegionService, t).createRegion({ name: "eu" });
      await ctrl.client(WorkspaceService, t).createWorkspace({ slug: "acme" });
      await ctrl.client(ProjectService, t).createProject({ workspace: "acme", slug: "shop" });
      await ctrl.client(EnvironmentService, t).createEnvironment({
        workspace: "acme",
        project: "shop",
        slug: "web",
        regions: [{ region: "eu", replicas: 2 }],
      });
      await ctrl.client(EnvironmentService, t).createEnvironment({
        workspace: "acme",
        project: "shop",
        slug: "canary",
        regions: [{ region: "eu", replicas: 2 }],
        sentinel: { image: "", replicas: 1 },
        rollout: {
          progressive: {
            canary: {
              steps: [
                { step: { case: "setWeight", value: 20 } },
                { step: { case: "pause", value: { seconds: 0 } } },
                { step: { case: "setWeight", value: 60 } },
                { step: { case: "pause", value: { seconds: 0 } } },
              ],
            },
          },
        },
      });
      const cluster = await handle.ready();
      await applySentinelRbac(cluster.kubeConfig());
      agent = await routingAgent(cluster, ctrl, "eu");
      await agent.start();
      browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
      page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
      await page.goto(ctrl.url);
      await page.getByLabel("API token").fill(t);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.getByText("signed in as admin").waitFor();
    },
    { timeout: 15 * 60_000 },
  );
  after(async () => {
    await browser?.close();
    await agent?.stop();
    await ctrl?.close();
    dir.remove();
  });

  async function shot(name: string): Promise<void> {
    if (!SHOTS) return;
    mkdirSync(SHOTS, { recursive: true });
    await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  }

  /**
   * Until `expr` is true in the page. Polled from here: page.waitForFunction evaluates its
   * predicate with eval inside the page, which the dashboard's CSP (no unsafe-eval) refuses as soon
   * as it has to poll.
   */
  async function pageUntil(expr: string): Promise<void> {
    const deadline = Date.now() + LONG;
    while (!(await page.evaluate(expr))) {
      assert.ok(Date.now() < deadline, `timed out waiting for ${expr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Deploys from the page's form, confirming the dialog. */
  async function deploy(image: string): Promise<void> {
    await page.getByLabel("Image").fill(image);
    await page.getByRole("button", { name: "Deploy", exact: true }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Confirm" }).click();
  }

  /** The text of the rollout table's row for eu. */
  const rolloutRow = () => page.getByRole("table", { name: "Rollout per region" }).getByRole("row").nth(1);

  it(
    "deploys from the page and shows the rollout progress, then complete, with no reload",
    { timeout: LONG },
    async () => {
      await page.goto(`${ctrl.url}/#/env/acme/shop/web/status`);
      await page.getByRole("table", { name: "Revisions" }).waitFor();
      await page.evaluate("window.__kraneMarker = 'no reload'");
      // Every state the rollout row shows, as the page draws it.
      await page.evaluate(`
      window.__kraneStates = [];
      window.__kraneMoves = [];
      new MutationObserver(() => {
        const row = document.querySelector('table[aria-label="Rollout per region"] tbody tr td:nth-child(2)');
        const s = row ? row.textContent : "";
        if (s && window.__kraneStates.at(-1) !== s) window.__kraneStates.push(s);
        const chart = document.querySelector('svg[aria-label^="Instances per region"]');
        const c = chart ? chart.getAttribute("aria-label") : "";
        if (c && window.__kraneMoves.at(-1) !== c) window.__kraneMoves.push(c);
      }).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
    `);
      await deploy("krane.local/hello:v1");
      await rolloutRow()
        .filter({ hasText: /^eu✓ complete2222/ })
        .waitFor({ timeout: LONG });
      const instances = page.getByRole("table", { name: "Instances" });
      await instances.getByText("running").first().waitFor();
      assert.equal(await instances.getByText("running").count(), 2);
      const states = (await page.evaluate("window.__kraneStates")) as string[];
      // Each state after its tone's shape (◐ under way, ✓ done).
      assert.ok(states.includes("◐ progressing"), `states seen: ${states.join(", ")}`);
      assert.equal(states.at(-1), "✓ complete");
      assert.equal(await page.evaluate("window.__kraneMarker"), "no reload");
      // The rollout chart moved with it: eu's new instances from fewer than 2 up to 2, as pushed.
      const moves = (await page.evaluate("window.__kraneMoves")) as string[];
      const newOf = (label: string): number => Number(/eu new: last (\d+)/.exec(label)?.[1] ?? NaN);
      assert.ok(
        moves.some((m) => newOf(m) < 2),
        `the chart's labels: ${moves.join(" | ")}`,
      );
      await pageUntil(
        `/eu new: last 2 instances/.test(document.querySelector('svg[aria-label^="Instances per region"]')?.getAttribute("aria-label") ?? "")`,
      );
      await shot("rollout");
    },
  );

  it("rolls back after the diff, and the instances move to the old revision", { timeout: LONG }, async () => {
    await deploy("krane.local/hello:v2");
    const revisions = page.getByRole("table", { name: "Revisions" });
    await revisions.getByRole("row", { name: /hello:v2.*eu 2\/2/ }).waitFor({ timeout: LONG });
    await rolloutRow()
      .filter({ hasText: /^eu✓ complete/ })
      .waitFor({ timeout: LONG });
    await page.getByRole("button", { name: "Roll back to revision 1" }).click();
    const diff = page.getByRole("table", { name: "What the rollback changes" });
    assert.match((await diff.textContent()) ?? "", /hello:v2.*hello:v1/);
    await page.getByRole("dialog").getByRole("button", { name: "Confirm" }).click();
    // Traffic follows the instances: revision 1's run again, revision 2's are gone.
    await revisions.getByRole("row", { name: /hello:v1.*eu 2\/2/ }).waitFor({ timeout: LONG });
    await revisions.getByRole("row", { name: /hello:v2.*eu 0\/0/ }).waitFor({ timeout: LONG });
    const instances = page.getByRole("table", { name: "Instances" });
    await pageUntil(
      `[...document.querySelectorAll('table[aria-label="Instances"] tbody tr')].every((r) => r.children[2]?.textContent === "1")`,
    );
    assert.ok((await instances.getByText("running").count()) >= 2);
    assert.equal(await page.evaluate("window.__kraneMarker"), "no reload");
  });

  it("a canary: the weights move on screen when promoted, and go back on abort", { timeout: LONG * 2 }, async () => {
    // The first revision rolls out whole (nothing to compare it with).
    await ctrl.client(DeploymentService, ctrl.adminToken).createDeployment({
      workspace: "acme",
      project: "shop",
      environment: "canary",
      image: "krane.local/hello:v1",
    });
    await page.goto(`${ctrl.url}/#/env/acme/shop/canary/status`);
    await page.getByText(/phase Healthy/).waitFor({ timeout: LONG });
    await page.evaluate("window.__kraneMarker = 'no reload'");
    await deploy("krane.local/hello:v2");
    const weights = page.getByRole("table", { name: "Traffic weights" });
    await weights.getByText("r1 80%, r2 20%").waitFor({ timeout: LONG });
    await page.getByText(/step 2 of 4 \(pause \(until promote\)\)/).waitFor({ timeout: LONG });
    assert.equal(await page.locator('.steps li[aria-current="step"]').textContent(), "pause until promoted ← now");
    await shot("canary");
    await page.getByRole("button", { name: "Promote", exact: true }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Confirm" }).click();
    await weights.getByText("r1 40%, r2 60%").waitFor({ timeout: LONG });
    await page.getByRole("button", { name: "Abort", exact: true }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Confirm" }).click();
    await page.getByText("aborted").first().waitFor({ timeout: LONG });
    await weights.getByText(/^r1 100%/).waitFor({ timeout: LONG });
    assert.equal(await page.evaluate("window.__kraneMarker"), "no reload");
  });
});

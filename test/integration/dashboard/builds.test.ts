// The builds tab in a real browser (Debian's chromium through playwright-core) against a real ctrl
// whose build worker runs real BuildKit and pushes to the real `registry`: builds started with
// `krane build` are listed newest first with their state and source; a failed build shows the
// step that failed and that step's last lines above its log; a running build's log is followed
// as it grows and it is cancelled from the page after asking (an admin); a viewer's page offers
// no Cancel and says why. No accessibility violations with a failed build open.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { chromium, type Browser, type Page } from "playwright-core";
import { ensureBases } from "../../../src/cluster/bases.js";
import { ensureBuildkit } from "../../../src/cluster/build.js";
import {
  ApiTokenService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { MemberService } from "../../../src/gen/krane/ctrl/v1/access_pb.js";
import { BuildService } from "../../../src/gen/krane/ctrl/v1/build_pb.js";
import { exitAfterLastHook } from "../../support/exit.js";
import { startTestRegistry, type TestRegistry } from "../../support/registry.js";
import { KRANE_BIN } from "../ctrl/process.js";
import { startTestCtrl, tempDir, type TestCtrl } from "../ctrl/support.js";
import { axeViolations } from "./axe.js";
import { buildsSkip } from "../../support/build-tools.js";

const CHROMIUM = process.env.KRANE_CHROMIUM ?? "/usr/bin/chromium";
const SHOTS = process.env.KRANE_SCREENSHOTS_DIR;
const DIST = join(import.meta.dirname, "..", "..", "..", "dist", "dashboard", "index.html");
const skip = !existsSync(CHROMIUM)
  ? `no chromium at ${CHROMIUM} (Debian's chromium package; KRANE_CHROMIUM names another)`
  : !existsSync(DIST)
    ? "the dashboard is not built (npm run build)"
    : buildsSkip;

const WS = "acme";

describe("the builds tab in a browser", { skip }, () => {
  const dir = tempDir("krane-dash-builds-");
  let registry: TestRegistry;
  let ctrl: TestCtrl;
  let browser: Browser;
  let viewerToken = "";

  /** `krane build shop/production --source <dir>`: resolves with its exit code once it ends. */
  function build(source: string): Promise<number> {
    const child = spawn(process.execPath, [KRANE_BIN, "build", "shop/production", "--source", source], {
      env: { ...process.env, KRANE_CTRL_URL: ctrl.url, KRANE_TOKEN: ctrl.adminToken, KRANE_WORKSPACE: WS },
      stdio: "ignore",
    });
    return new Promise((resolve) => child.on("close", (code) => resolve(code ?? -1)));
  }

  function source(name: string, dockerfile: string): string {
    const d = join(dir.path, name);
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, "Dockerfile"), dockerfile);
    return d;
  }

  async function signedIn(token: string): Promise<Page> {
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    await page.goto(ctrl.url);
    await page.getByLabel("API token").fill(token);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByText(/signed in as/).waitFor();
    await page.goto(`${ctrl.url}/#/env/acme/shop/production/builds`);
    return page;
  }

  before(async () => {
    const bk = await ensureBuildkit((l) => console.log(l));
    const bases = await ensureBases((l) => console.log(l));
    registry = await startTestRegistry({ dir: dir.path });
    const user = registry.users[0];
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      builds: {
        registry: registry.host,
        username: user?.username,
        password: user?.password,
        ca: [registry.caPem],
        buildkitd: bk.buildkitd,
        buildctl: bk.buildctl,
        basesLayout: bases,
        stateDir: join(dir.path, "buildkit"),
        slots: 1,
      },
    });
    const admin = ctrl.adminToken;
    await ctrl.client(RegionService, admin).createRegion({ name: "eu" });
    await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: WS });
    await ctrl.client(ProjectService, admin).createProject({ workspace: WS, slug: "shop" });
    await ctrl.client(EnvironmentService, admin).createEnvironment({
      workspace: WS,
      project: "shop",
      slug: "production",
      regions: [{ region: "eu", replicas: 1 }],
    });
    await ctrl.client(MemberService, admin).createServiceAccount({ workspace: WS, name: "reader", role: "viewer" });
    viewerToken = (
      await ctrl
        .client(ApiTokenService, admin)
        .createApiToken({ workspace: WS, name: "reader-token", serviceAccount: "reader" })
    ).token;
    // A build that fails at its second step, after printing what the page must show.
    const failed = await build(
      source(
        "failing",
        "FROM krane.local/base/run:12\nRUN echo preparing\nRUN echo 'the widget compiler broke' && exit 3\n",
      ),
    );
    assert.notEqual(failed, 0, "the failing build fails");
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  });
  after(async () => {
    await browser?.close();
    await ctrl?.close();
    await registry?.stop();
    dir.remove();
    exitAfterLastHook();
  });

  it("shows a failed build's step and last lines, with no accessibility violation", async () => {
    const page = await signedIn(ctrl.adminToken);
    const table = page.getByRole("table");
    await table.getByText("failed").waitFor();
    assert.match(await table.innerText(), /upload [0-9a-f]{12}/, "the source: the upload's digest");
    // The newest build's log is open: the failed step and its last lines, then the log itself.
    const alert = page.getByRole("alert").filter({ hasText: /^Failed: .*RUN echo 'the widget compiler broke'/ });
    await alert.waitFor();
    assert.match(await alert.innerText(), /the widget compiler broke/);
    const log = page.getByRole("log");
    await log.getByText("preparing").first().waitFor();
    assert.deepEqual(await axeViolations(page), []);
    if (SHOTS) {
      mkdirSync(SHOTS, { recursive: true });
      await page.screenshot({ path: join(SHOTS, "builds.png"), fullPage: true });
    }
    await page.context().close();
  });

  it("follows a running build's log and cancels it after asking; a viewer gets no Cancel", async () => {
    const slow = build(
      source(
        "slow",
        "FROM krane.local/base/run:12\nRUN for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60; do echo tick-$i; sleep 1; done\n",
      ),
    );
    const viewer = await signedIn(viewerToken);
    const admin = await signedIn(ctrl.adminToken);
    // Newest first: the running build is listed above the failed one and its log is open.
    await admin.getByRole("table").getByText("running").waitFor({ timeout: 180_000 });
    const log = admin.getByRole("log");
    await log.getByText("tick-3").first().waitFor({ timeout: 60_000 });
    // Followed: later lines arrive without a reload.
    await log.getByText("tick-6").first().waitFor({ timeout: 30_000 });

    // The viewer sees it run but may not cancel it, and is told why.
    await viewer.getByRole("table").getByText("running").waitFor();
    assert.equal(await viewer.getByRole("button", { name: "Cancel" }).count(), 0);
    await viewer.getByText("Cancel needs the developer role; you are a viewer.").waitFor();

    await admin.getByRole("button", { name: "Cancel" }).click();
    await admin
      .getByRole("dialog")
      .getByText(/Cancel build bld_/)
      .waitFor();
    await admin.getByRole("dialog").getByRole("button", { name: "Confirm" }).click();
    await admin.getByRole("table").getByText("cancelled").waitFor({ timeout: 60_000 });
    assert.notEqual(await slow, 0, "krane build ends non-zero for a cancelled build");
    const { builds } = await ctrl
      .client(BuildService, ctrl.adminToken)
      .listBuilds({ workspace: WS, project: "shop", environment: "production" });
    assert.deepEqual(
      builds.map((b) => b.state),
      ["cancelled", "failed"],
    );
    await viewer.context().close();
    await admin.context().close();
  });
});

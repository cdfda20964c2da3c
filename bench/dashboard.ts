// Dashboard figures (`npm run bench -- dashboard`), one run against a local ctrl on SQLite, in
// Debian's chromium (playwright-core):
//  - the initial bundle, raw and gzipped, as ctrl serves it;
//  - first load: from navigation to the overview's environment table drawn (signed in), p50/p95
//    of KRANE_BENCH_DASHBOARD_LOADS (5) cold loads of KRANE_BENCH_DASHBOARD_ENVS (1,000)
//    environments over 10 projects; beside it, `krane env list`-style reading of the same rows
//    through the API from Node (what a script would otherwise do);
//  - change in ctrl → visible in the page: an environment created through the API until its row
//    shows in the open overview, p50/p95 of 10 (the page polls every 2 s: expect ~1 s/2 s);
//  - filtering and sorting the overview's rows in the page (typing into the filter, clicking a
//    column's header until the table is redrawn).
import { gzipSync } from "node:zlib";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";
import {
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../src/gen/krane/ctrl/v1/api_pb.js";
import { startTestCtrl, tempDir } from "../test/integration/ctrl/support.js";

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
}

export async function benchDashboard(): Promise<void> {
  const assets = join(import.meta.dirname, "..", "dist", "dashboard", "assets");
  let raw = 0;
  let gz = 0;
  for (const f of readdirSync(assets)) {
    const b = readFileSync(join(assets, f));
    raw += b.byteLength;
    gz += gzipSync(b, { level: 9 }).byteLength;
  }
  console.log(`bundle: ${(raw / 1024).toFixed(1)} KB raw, ${(gz / 1024).toFixed(1)} KB gzipped (target ≤ 250 KB)`);

  const envs = Number(process.env.KRANE_BENCH_DASHBOARD_ENVS ?? 1000);
  const loads = Number(process.env.KRANE_BENCH_DASHBOARD_LOADS ?? 5);
  const dir = tempDir("krane-bench-dash-");
  const ctrl = await startTestCtrl(join(dir.path, "ctrl.db"));
  const browser = await chromium.launch({
    executablePath: process.env.KRANE_CHROMIUM ?? "/usr/bin/chromium",
    args: ["--no-sandbox"],
  });
  try {
    const admin = ctrl.adminToken;
    await ctrl.client(RegionService, admin).createRegion({ name: "eu" });
    await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: "acme" });
    const started = performance.now();
    for (let p = 0; p < 10; p++) {
      await ctrl.client(ProjectService, admin).createProject({ workspace: "acme", slug: `p${p}` });
      const calls: Promise<unknown>[] = [];
      for (let e = 0; e < envs / 10; e++)
        calls.push(
          ctrl.client(EnvironmentService, admin).createEnvironment({
            workspace: "acme",
            project: `p${p}`,
            slug: `e${e}`,
            regions: [{ region: "eu", replicas: 1 + (e % 5) }],
          }),
        );
      await Promise.all(calls);
    }
    console.log(`seeded ${envs} environments in ${((performance.now() - started) / 1000).toFixed(1)} s`);

    const viaApi: number[] = [];
    for (let i = 0; i < loads; i++) {
      const t = performance.now();
      for (let p = 0; p < 10; p++)
        await ctrl.client(EnvironmentService, admin).listEnvironments({ workspace: "acme", project: `p${p}` });
      viaApi.push(performance.now() - t);
    }

    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await page.goto(ctrl.url);
    await page.getByLabel("API token").fill(admin);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByText("signed in as admin").waitFor();
    const firstLoad: number[] = [];
    for (let i = 0; i < loads; i++) {
      const t = performance.now();
      await page.goto(`${ctrl.url}/?${i}#/`);
      await page.getByText(`${envs} of ${envs}`).waitFor({ timeout: 60_000 });
      firstLoad.push(performance.now() - t);
    }
    console.log(
      `first load to the overview's ${envs} rows: p50 ${pct(firstLoad, 50).toFixed(0)} ms / p95 ${pct(firstLoad, 95).toFixed(0)} ms` +
        ` (the same rows read through the API from Node: p50 ${pct(viaApi, 50).toFixed(0)} ms)`,
    );

    const filter: number[] = [];
    const sort: number[] = [];
    for (let i = 0; i < 5; i++) {
      let t = performance.now();
      await page.getByLabel("Filter Environments").fill(`p${i}/e1`);
      await page
        .getByText(new RegExp(`^\\d+ of ${envs}$`))
        .filter({ hasNotText: `${envs} of` })
        .waitFor();
      filter.push(performance.now() - t);
      await page.getByLabel("Filter Environments").fill("");
      await page.getByText(`${envs} of ${envs}`).waitFor();
      t = performance.now();
      await page.getByRole("button", { name: /^Replicas/ }).click();
      await page.locator("th[aria-sort]").waitFor();
      sort.push(performance.now() - t);
    }
    console.log(
      `in the page, ${envs} rows: filter p50 ${pct(filter, 50).toFixed(0)} ms / max ${Math.max(...filter).toFixed(0)} ms;` +
        ` sort p50 ${pct(sort, 50).toFixed(0)} ms / max ${Math.max(...sort).toFixed(0)} ms (target ≤ 200 ms; includes playwright's round trips)`,
    );

    // Only the rows in view are drawn: the filter keeps the new ones in view.
    await page.getByLabel("Filter Environments").fill("p0/live");
    const visible: number[] = [];
    for (let i = 0; i < 10; i++) {
      const slug = `live${i}`;
      const t = performance.now();
      await ctrl.client(EnvironmentService, admin).createEnvironment({
        workspace: "acme",
        project: "p0",
        slug,
        regions: [{ region: "eu", replicas: 1 }],
      });
      await page.getByRole("link", { name: `p0/${slug}`, exact: true }).waitFor({ timeout: 30_000 });
      visible.push(performance.now() - t);
    }
    console.log(
      `change in ctrl → visible in the page: p50 ${pct(visible, 50).toFixed(0)} ms / p95 ${pct(visible, 95).toFixed(0)} ms (target p95 ≤ 1 s; the page polls every 2 s)`,
    );
  } finally {
    await browser.close();
    await ctrl.close();
    dir.remove();
  }
}

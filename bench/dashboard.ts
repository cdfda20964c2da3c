// Dashboard figures (`npm run bench -- dashboard`), one run against a local ctrl on SQLite, in
// Debian's chromium (playwright-core):
//  - the initial bundle, raw and gzipped, as ctrl serves it;
//  - first load: from navigation to the overview's environment table drawn (signed in), p50/p95
//    of KRANE_BENCH_DASHBOARD_LOADS (5) cold loads of KRANE_BENCH_DASHBOARD_ENVS (1,000)
//    environments over 10 projects; beside it, `krane env list`-style reading of the same rows
//    through the API from Node (what a script would otherwise do);
//  - change in ctrl → visible in the page (pushed by LiveService): an environment created
//    through the API until its row shows in the open overview, and a deployment until its image
//    shows on the open environment page, p50/p95 of 20 each;
//  - filtering and sorting the overview's rows in the page, timed inside the page from the input
//    event or the click to the next frame drawn (and, beside it, through playwright's round
//    trips, as the last figures were);
//  - 500 open pages (KRANE_BENCH_DASHBOARD_STREAMS) on one environment of a ctrl in its own
//    process: a change until every page's stream has it, and ctrl's CPU per change.
import { gzipSync } from "node:zlib";
import { loadavg } from "node:os";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";
import * as http2 from "node:http2";
import { create, toBinary, type DescService } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { WatchEnvironmentRequestSchema } from "../src/gen/krane/ctrl/v1/live_pb.js";
import { generatedAdminToken, spawnCtrl } from "../test/integration/ctrl/process.js";
import {
  ApiTokenService,
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../src/gen/krane/ctrl/v1/api_pb.js";
import { startTestCtrl, tempDir, transportFor } from "../test/integration/ctrl/support.js";

/** The machine's load average now, printed with each figure (figures at high load are not comparable). */
function load(): string {
  return ` [load average ${loadavg()
    .map((x) => x.toFixed(2))
    .join(", ")}]`;
}

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
  console.log(
    `bundle: ${(raw / 1024).toFixed(1)} KB raw, ${(gz / 1024).toFixed(1)} KB gzipped (target ≤ 250 KB)` + load(),
  );

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
    console.log(`seeded ${envs} environments in ${((performance.now() - started) / 1000).toFixed(1)} s` + load());

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
        ` (the same rows read through the API from Node: p50 ${pct(viaApi, 50).toFixed(0)} ms)` +
        load(),
    );

    const filter: number[] = [];
    const sort: number[] = [];
    const sortRoundTrip: number[] = [];
    // In the page: from the event to the next frame drawn after the table changed.
    const timeInPage = (action: string): Promise<number> =>
      page.evaluate(`(async () => {
        const t = performance.now();
        ${action};
        await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
        return performance.now() - t;
      })()`) as Promise<number>;
    const setFilter = (text: string) =>
      timeInPage(`{
        const input = document.querySelector('input[aria-label="Filter Environments"]');
        input.value = ${JSON.stringify(text)};
        input.dispatchEvent(new Event("input", { bubbles: true }));
      }`);
    const clickReplicas = () =>
      timeInPage(
        `[...document.querySelectorAll("th button")].find((b) => b.textContent.startsWith("Replicas")).click()`,
      );
    for (let i = 0; i < 10; i++) {
      filter.push(await setFilter(`p${i % 10}/e1`));
      await page
        .getByText(new RegExp(`^\\d+ of ${envs}$`))
        .filter({ hasNotText: `${envs} of` })
        .waitFor();
      await setFilter("");
      await page.getByText(`${envs} of ${envs}`).waitFor();
      sort.push(await clickReplicas());
      await page.locator("th[aria-sort]").waitFor();
    }
    for (let i = 0; i < 5; i++) {
      const t = performance.now();
      await page.getByRole("button", { name: /^Replicas/ }).click();
      await page.locator(`th[aria-sort="${i % 2 === 0 ? "ascending" : "descending"}"]`).waitFor();
      sortRoundTrip.push(performance.now() - t);
    }
    console.log(
      `in the page, ${envs} rows (input or click to the next frame): filter p50 ${pct(filter, 50).toFixed(0)} ms / max ${Math.max(...filter).toFixed(0)} ms;` +
        ` sort p50 ${pct(sort, 50).toFixed(0)} ms / max ${Math.max(...sort).toFixed(0)} ms (target ≤ 200 ms);` +
        ` sort through playwright's round trips p50 ${pct(sortRoundTrip, 50).toFixed(0)} ms` +
        load(),
    );

    // Only the rows in view are drawn: the filter keeps the new ones in view.
    await page.getByLabel("Filter Environments").fill("p0/live");
    const visible: number[] = [];
    for (let i = 0; i < 20; i++) {
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
      `change in ctrl → visible in the overview: p50 ${pct(visible, 50).toFixed(0)} ms / p95 ${pct(visible, 95).toFixed(0)} ms (target p95 ≤ 1 s; pushed)` +
        load(),
    );
    await page.goto(`${ctrl.url}/#/env/acme/p0/e1/status`);
    await page.getByRole("table", { name: "Revisions" }).waitFor();
    const onEnv: number[] = [];
    for (let i = 0; i < 20; i++) {
      const image = `registry.example.com/bench:${i}`;
      const t = performance.now();
      await ctrl
        .client(DeploymentService, admin)
        .createDeployment({ workspace: "acme", project: "p0", environment: "e1", image });
      await page
        .getByRole("table", { name: "Revisions" })
        .getByText(image, { exact: true })
        .waitFor({ timeout: 30_000 });
      onEnv.push(performance.now() - t);
    }
    console.log(
      `change in ctrl → visible on the environment page: p50 ${pct(onEnv, 50).toFixed(0)} ms / p95 ${pct(onEnv, 95).toFixed(0)} ms (target p95 ≤ 1 s; pushed)` +
        load(),
    );

    await fanOut();
  } finally {
    await browser.close();
    await ctrl.close();
    dir.remove();
  }
}

/** ctrl's CPU time so far (user + system, ms), from /proc. */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
  // utime and stime are fields 14 and 15 of stat, in clock ticks (100 a second on Linux).
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/**
 * 500 open pages (KRANE_BENCH_DASHBOARD_STREAMS), each with its own API token, watching one
 * environment of a ctrl in a process of its own (so its CPU is its own): each change timed until
 * every stream has it. The clients read the Connect stream's frames and look for the new image
 * in the bytes, without decoding (500 decodes in this process would be the clients' cost, which
 * browsers pay in their own processes).
 */
async function fanOut(): Promise<void> {
  const n = Number(process.env.KRANE_BENCH_DASHBOARD_STREAMS ?? 500);
  const dir = tempDir("krane-bench-fanout-");
  const database = join(dir.path, "ctrl.db");
  const proc = await spawnCtrl(["--database", database]);
  const admin = await generatedAdminToken(database);
  const session = http2.connect(proc.url);
  try {
    const api = <S extends DescService>(s: S) => createClient(s, transportFor(proc.url, admin));
    await api(RegionService).createRegion({ name: "eu" });
    await api(WorkspaceService).createWorkspace({ slug: "acme" });
    await api(ProjectService).createProject({ workspace: "acme", slug: "shop" });
    const env = { workspace: "acme", project: "shop", environment: "web" };
    await api(EnvironmentService).createEnvironment({ ...env, slug: "web", regions: [{ region: "eu", replicas: 3 }] });
    const tokens: string[] = [];
    for (let i = 0; i < n; i++) tokens.push((await api(ApiTokenService).createApiToken({ name: `page-${i}` })).token);
    const body = toBinary(WatchEnvironmentRequestSchema, create(WatchEnvironmentRequestSchema, env));
    const frame = Buffer.alloc(5 + body.length);
    frame.writeUInt32BE(body.length, 1);
    frame.set(body, 5);
    let want = Buffer.from("nothing yet");
    let missing = n;
    let done: () => void = () => undefined;
    const has = new Array<boolean>(n).fill(false);
    const opened: Promise<void>[] = [];
    for (let i = 0; i < n; i++) {
      const req = session.request({
        ":method": "POST",
        ":path": "/krane.ctrl.v1.LiveService/WatchEnvironment",
        "content-type": "application/connect+proto",
        authorization: `Bearer ${tokens[i]}`,
      });
      req.end(frame);
      let buf = Buffer.alloc(0);
      opened.push(new Promise<void>((resolve) => req.once("data", () => resolve())));
      req.on("data", (chunk: Buffer) => {
        buf = Buffer.concat([buf, chunk]);
        while (buf.length >= 5) {
          const len = buf.readUInt32BE(1);
          if (buf.length < 5 + len) break;
          const msg = buf.subarray(5, 5 + len);
          buf = buf.subarray(5 + len);
          if (!has[i] && msg.includes(want)) {
            has[i] = true;
            if (--missing === 0) done();
          }
        }
      });
    }
    await Promise.all(opened);
    const times: number[] = [];
    const cpu: number[] = [];
    for (let k = 0; k < 10; k++) {
      const image = `registry.example.com/fanout:${k}`;
      want = Buffer.from(image);
      has.fill(false);
      missing = n;
      const all = new Promise<void>((r) => (done = r));
      const c0 = cpuMs(proc.child.pid ?? 0);
      const t = performance.now();
      await api(DeploymentService).createDeployment({ ...env, image });
      await all;
      times.push(performance.now() - t);
      cpu.push(cpuMs(proc.child.pid ?? 0) - c0);
    }
    console.log(
      `${n} pages (each its own token) on one environment, change → every page's stream has it: p50 ${pct(times, 50).toFixed(0)} ms / p95 ${pct(times, 95).toFixed(0)} ms;` +
        ` ctrl's CPU per change p50 ${pct(cpu, 50).toFixed(0)} ms (the change, the rollout passes, one read of the view, ${n} sends)` +
        ` (polling every 2 s instead: ${n / 2} status reads a second, changes or not)` +
        load(),
    );
  } finally {
    session.close();
    await proc.stop();
    dir.remove();
  }
}

// CLI and start-up figures, each against kubectl in the same run:
//   - `krane --help`, `krane version`, `krane status <env>` against a running ctrl: wall time and
//     peak RSS, min/median/max of 10 runs, for the build as installed (bin/, dist/ and
//     package.json copied to a temporary folder, node_modules linked: what a user runs, without
//     the source checkout's freshness check) and from source (tsx, what bin/krane.js runs in a
//     checkout whose build is stale); kubectl: `version --client`, `get namespaces`;
//   - ctrl (SQLite, fresh database) and the agent: process start to /readyz answering 200, from
//     the build and from source, as wall time and as the CPU time the process used (which the
//     machine's load does not inflate);
//   - the start-up target: `kubectl version --client`, `node -e ''`, `krane --help`, `krane
//     version` and `krane status` (installed), the same calls as `krane status` from a plain
//     node:http2 script (its floor on Node.js: cli-status-floor.mjs), and `krane --help` in this
//     checkout (bin/krane.js first checks that dist/ is newer than src/), run in turn, RUNS_PAIRED rounds: the medians,
//     and the median of each round's ratio to kubectl (the machine's load changes less within a
//     round than across the run); and the single-file CLI's `--help`, `version` and `status`
//     (dist/single-file/…, no Node.js: scripts/build-single.mjs), whose target is 1.2× kubectl;
//   - the image's size, when `npm run image` built one into dist-image/.
//
//   npm run bench -- cli       (builds dist/ first when it is stale)
//   KRANE_BENCH_CLI_ONLY=startup   stops after the paired start-up figures (starts no cluster)
// RSS and CPU time come from GNU time (/usr/bin/time, Debian's `time`: ../tools.ts installs it).
// CPU time is printed because wall times on a shared, loaded machine are inflated.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { once } from "node:events";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { agentKubeConfigFrom } from "../../src/agent/rbac.js";
import { createApiClients } from "../../src/client/node.js";
import { findKubeAssets, startCluster } from "../../src/cluster/index.js";
import { bunPath, singleFileName } from "../../scripts/build-single.mjs";
import { ROOT } from "../support.js";
import { ensureTools, GNU_TIME } from "../tools.js";

const RUNS = 10;
const RUNS_PAIRED = 21;
/** `krane` in this checkout: bin/krane.js checks that dist/ is newer than src/ first. */
const CHECKOUT = [join(ROOT, "bin/krane.js")];
/** `krane` as installed (see `install`), set when the bench starts. */
let BUILD: string[] = CHECKOUT;
const SOURCE = ["--import", "tsx", join(ROOT, "src/cli/main.ts")];
/** The single-file CLI that `npm run build` makes (scripts/build-single.mjs). */
const SINGLE = join(ROOT, "dist/single-file", singleFileName());
/** The plain script that makes `krane status`'s calls, and Bun's executable (the devDependency). */
const FLOOR = join(ROOT, "bench/cli/cli-status-floor.mjs");
const BUN = bunPath();

interface Sample {
  ms: number;
  rssKb: number;
  /** User + system CPU seconds (0 when unknown). */
  cpu: number;
}

/** One run of a command: wall time (ms) and peak resident memory (KiB, 0 when unknown). */
function measure(command: string, args: string[], env: NodeJS.ProcessEnv): Sample {
  const file = join(tmpdir(), `krane-bench-time-${process.pid}`);
  const [cmd, argv] = [GNU_TIME.command, ["-f", "%M %U %S", "-o", file, command, ...args]];
  const t = performance.now();
  const r = spawnSync(cmd, argv, { env: { ...process.env, ...env }, cwd: ROOT, encoding: "utf8", maxBuffer: 16 << 20 });
  const ms = performance.now() - t;
  if (r.status !== 0) throw new Error(`${command} ${args.join(" ")} failed (${r.status}): ${r.stderr.slice(0, 400)}`);
  const [rssKb = 0, user = 0, sys = 0] = (readFileSync(file, "utf8").trim().split("\n").pop() ?? "")
    .split(" ")
    .map(Number);
  rmSync(file, { force: true });
  return { ms, rssKb, cpu: user + sys };
}

function stats(values: number[]): { min: number; median: number; max: number } {
  const s = [...values].sort((a, b) => a - b);
  return { min: s[0] ?? NaN, median: s[Math.floor(s.length / 2)] ?? NaN, max: s[s.length - 1] ?? NaN };
}

function row(label: string, samples: Sample[]): void {
  const t = stats(samples.map((x) => x.ms / 1000));
  const m = stats(samples.map((x) => x.rssKb / 1024));
  const c = stats(samples.map((x) => x.cpu));
  const rss = `   RSS ${m.min.toFixed(0)}/${m.median.toFixed(0)}/${m.max.toFixed(0)} MiB   CPU median ${c.median.toFixed(2)} s`;
  console.log(`cli: ${label.padEnd(44)} ${t.min.toFixed(3)}/${t.median.toFixed(3)}/${t.max.toFixed(3)} s${rss}`);
}

function series(label: string, command: string, args: string[], env: NodeJS.ProcessEnv = {}): void {
  measure(command, args, env); // warm the file cache, as a user's second call would be
  row(
    label,
    Array.from({ length: RUNS }, () => measure(command, args, env)),
  );
}

/** One command of the paired run: label, executable, arguments, environment. */
type Run = [label: string, command: string, args: string[], env: NodeJS.ProcessEnv];

/**
 * The start-up target, in rounds: kubectl, then each krane command, one after another; medians
 * of wall and CPU time, and the median of the rounds' ratios to kubectl's wall time.
 */
function paired(kubectl: string, env: NodeJS.ProcessEnv): void {
  const runs: Run[] = [
    ["kubectl version --client", kubectl, ["version", "--client"], {}],
    // Node.js starting and doing nothing: the part of every krane command no build can remove.
    ["node -e '' (Node.js itself)", process.execPath, ["-e", ""], {}],
    ["krane --help", process.execPath, [...BUILD, "--help"], {}],
    ["krane version", process.execPath, [...BUILD, "version"], {}],
    ["krane status shop/prod", process.execPath, [...BUILD, "status", "shop/prod"], env],
    // The same four calls from a plain script over node:http2 (cli-status-floor.mjs): the floor.
    ["status's calls, node:http2 alone", process.execPath, [FLOOR, "shop/prod"], env],
    ["krane --help (checkout)", process.execPath, [...CHECKOUT, "--help"], {}],
    // The single file (dist/single-file/…): no Node.js, Bun's runtime built in.
    ...(existsSync(SINGLE)
      ? ([
          ["krane --help (single file)", SINGLE, ["--help"], {}],
          ["krane version (single file)", SINGLE, ["version"], {}],
          ["krane status (single file)", SINGLE, ["status", "shop/prod"], env],
          // The same four calls from the plain script in Bun: the single file's floor.
          ...(BUN ? [["status's calls, Bun alone", BUN, [FLOOR, "shop/prod"], env] satisfies Run] : []),
        ] satisfies Run[])
      : []),
  ];
  if (!existsSync(SINGLE)) console.log(`cli: no single-file CLI at ${SINGLE} (npm run build makes it)`);
  for (const [, cmd, args, e] of runs) measure(cmd, args, e); // warm the file cache
  const samples = runs.map(() => [] as Sample[]);
  for (let i = 0; i < RUNS_PAIRED; i++) runs.forEach(([, cmd, args, e], k) => samples[k]?.push(measure(cmd, args, e)));
  const median = (v: number[]): number => stats(v).median;
  const base = samples[0] ?? [];
  console.log(`cli: paired start-up, ${RUNS_PAIRED} rounds (each round runs every command once, in turn)   ${load()}`);
  runs.forEach(([label], k) => {
    const s = samples[k] ?? [];
    const ratio = median(s.map((x, i) => x.ms / (base[i]?.ms ?? NaN)));
    const target = label.endsWith("(single file)")
      ? " (target ≤ 1.2)"
      : label.startsWith("krane --help") || label.startsWith("krane status")
        ? " (target ≤ 2)"
        : "";
    console.log(
      `cli: paired  ${label.padEnd(34)} wall median ${(median(s.map((x) => x.ms)) / 1000).toFixed(3)} s` +
        `, CPU median ${median(s.map((x) => x.cpu)).toFixed(3)} s` +
        `${k === 0 ? "" : `; against kubectl: median of the rounds' ratios ${ratio.toFixed(2)}×${target}`}`,
    );
  });
}

function load(): string {
  return `load ${(loadavg()[0] ?? 0).toFixed(2)}`;
}

async function freePort(): Promise<number> {
  const s = createServer();
  s.listen(0, "127.0.0.1");
  await once(s, "listening");
  const port = (s.address() as { port: number }).port;
  s.close();
  return port;
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  await exited;
}

/** CPU time (ms, user + system) a process has used so far; the machine's load does not inflate it. */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8")
    .replace(/^.*\) /, "")
    .split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // utime, stime in clock ticks (100/s)
}

interface Ready {
  wallMs: number;
  cpuMs: number;
}

/** Starts a krane process; returns the wall and CPU time until its ops port's /readyz answers 200. */
async function startToReady(entry: string[], args: string[], opsPort: number): Promise<Ready> {
  const t = performance.now();
  const child = spawn(process.execPath, [...entry, ...args], { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`exited: ${stderr.slice(0, 400)}`);
      const status = await fetch(`http://127.0.0.1:${opsPort}/readyz`).then(
        (r) => r.status,
        () => 0,
      );
      if (status === 200) return { wallMs: performance.now() - t, cpuMs: cpuMs(child.pid ?? 0) };
      if (performance.now() - t > 120_000) throw new Error("not ready within 120 s");
      await new Promise((r) => setTimeout(r, 5));
    }
  } finally {
    await stop(child);
  }
}

function readyRow(label: string, runs: Ready[]): void {
  const t = stats(runs.map((x) => x.wallMs / 1000));
  const c = stats(runs.map((x) => x.cpuMs / 1000));
  console.log(
    `cli: ${label.padEnd(44)} ${t.min.toFixed(3)}/${t.median.toFixed(3)}/${t.max.toFixed(3)} s to ready, CPU ${c.min.toFixed(2)}/${c.median.toFixed(2)}/${c.max.toFixed(2)} s (${runs.length} runs)`,
  );
}

function imageSize(): void {
  const layout = join(ROOT, "dist-image/krane-oci");
  if (!existsSync(join(layout, "index.json"))) {
    console.log("cli: image size                                    (no image: npm run image builds dist-image/)");
    return;
  }
  const blob = (d: string): string => join(layout, "blobs", ...d.split(":"));
  const index = JSON.parse(readFileSync(join(layout, "index.json"), "utf8")) as { manifests: { digest: string }[] };
  const manifest = JSON.parse(readFileSync(blob(index.manifests[0]?.digest ?? ""), "utf8")) as {
    config: { size: number };
    layers: { size: number }[];
  };
  const bytes = manifest.config.size + manifest.layers.reduce((n, l) => n + l.size, 0);
  console.log(
    `cli: image size (dist-image/krane-oci)            ${(bytes / 1024 / 1024).toFixed(1)} MiB compressed, ${manifest.layers.length} layers`,
  );
}

/**
 * krane as a user has it installed, in a temporary folder: bin/, dist/ and package.json copied
 * (npm's package, minus what the CLI never reads), node_modules linked to the checkout's. Without
 * src/ next to dist/, bin/krane.js runs dist/ without comparing it with the sources.
 */
function install(dir: string): string[] {
  for (const part of ["bin", "dist", "package.json"]) cpSync(join(ROOT, part), join(dir, part), { recursive: true });
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  return [join(dir, "bin/krane.js")];
}

export async function benchCli(): Promise<void> {
  ensureTools("cli", [GNU_TIME]);
  const build = spawnSync(process.execPath, [join(ROOT, "scripts/build.mjs"), "--if-stale"], { stdio: "inherit" });
  if (build.status !== 0) throw new Error("npm run build failed");
  const installed = mkdtempSync(join(tmpdir(), "krane-bench-installed-"));
  try {
    BUILD = install(installed);
    await benchCliInstalled();
  } finally {
    rmSync(installed, { recursive: true, force: true });
  }
}

async function benchCliInstalled(): Promise<void> {
  const kubectl = (await findKubeAssets())?.bin.kubectl;
  console.log(
    `cli: min/median/max of ${RUNS} runs each (after one warm-up run); peak RSS and CPU time from GNU time; ${load()}`,
  );
  series("node -e '' (Node.js itself)", process.execPath, ["-e", ""]);
  if (kubectl) series("kubectl version --client", kubectl, ["version", "--client"]);
  series("krane --help (installed)", process.execPath, [...BUILD, "--help"]);
  series("krane version (installed)", process.execPath, [...BUILD, "version"]);
  series("krane --help (checkout)", process.execPath, [...CHECKOUT, "--help"]);
  series("krane --help (source, tsx)", process.execPath, [...SOURCE, "--help"]);
  series("krane version (source, tsx)", process.execPath, [...SOURCE, "version"]);

  const dir = mkdtempSync(join(tmpdir(), "krane-bench-cli-"));
  // The local cluster (kubectl get namespaces, the agent) starts after the paired start-up figures.
  let cluster: Awaited<ReturnType<typeof startCluster>> | undefined;
  const children: ChildProcess[] = [];
  try {
    // ctrl with an environment and a deployment for `krane status`.
    const token = "krane_user_benchclibenchclibenchclibenchcli000";
    const port = await freePort();
    const ctrl = spawn(
      process.execPath,
      [
        ...BUILD,
        "ctrl",
        "serve",
        "--database",
        join(dir, "status.db"),
        "--listen",
        `127.0.0.1:${port}`,
        "--ops-listen",
        "off",
        "--admin-token",
        token,
        "--log-level",
        "warn",
      ],
      { cwd: ROOT, stdio: "ignore" },
    );
    children.push(ctrl);
    const url = `http://127.0.0.1:${port}`;
    const api = createApiClients(url, token);
    for (let i = 0; ; i++) {
      try {
        await api.regions.createRegion({ name: "local" });
        break;
      } catch (err) {
        if (i > 300) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    await api.workspaces.createWorkspace({ slug: "acme" });
    await api.projects.createProject({ workspace: "acme", slug: "shop" });
    await api.environments.createEnvironment({
      workspace: "acme",
      project: "shop",
      slug: "prod",
      regions: [{ region: "local", replicas: 3 }],
    });
    await api.deployments.createDeployment({
      workspace: "acme",
      project: "shop",
      environment: "prod",
      image: "registry.example.com/shop:1",
    });
    const env = { KRANE_CTRL_URL: url, KRANE_TOKEN: token };
    if (kubectl) paired(kubectl, env);
    if (process.env.KRANE_BENCH_CLI_ONLY === "startup") return;
    const kube = (cluster = await startCluster({ name: "bench-cli" }));
    if (kubectl) series("kubectl get namespaces", kubectl, ["--kubeconfig", kube.kubeconfigPath, "get", "namespaces"]);
    series("krane status shop/prod (installed)", process.execPath, [...BUILD, "status", "shop/prod"], env);
    series("krane status shop/prod (source, tsx)", process.execPath, [...SOURCE, "status", "shop/prod"], env);

    // Start to ready: ctrl on a fresh SQLite database each time (migrations included).
    for (const [label, entry] of [
      ["installed", BUILD],
      ["source, tsx", SOURCE],
    ] as const) {
      const ms: Ready[] = [];
      for (let i = 0; i < 5; i++) {
        const ops = await freePort();
        ms.push(
          await startToReady(
            entry,
            [
              "ctrl",
              "serve",
              "--database",
              join(dir, `ready-${label.length}-${i}.db`),
              "--listen",
              "127.0.0.1:0",
              "--ops-listen",
              `127.0.0.1:${ops}`,
              "--admin-token",
              token,
              "--log-level",
              "warn",
            ],
            ops,
          ),
        );
      }
      readyRow(`ctrl serve, SQLite (${label})`, ms);
    }

    // The agent: caches synced and streams to ctrl connected.
    const clusterToken = (await api.regions.createClusterToken({ region: "local", clusterName: "bench" })).token;
    const kubeconfig = join(dir, "agent.kubeconfig");
    writeFileSync(kubeconfig, (await agentKubeConfigFrom(kube.kubeConfig())).exportConfig());
    for (const [label, entry] of [
      ["installed", BUILD],
      ["source, tsx", SOURCE],
    ] as const) {
      const ms: Ready[] = [];
      for (let i = 0; i < 5; i++) {
        const ops = await freePort();
        ms.push(
          await startToReady(
            entry,
            [
              "agent",
              "--ctrl-url",
              url,
              "--token",
              clusterToken,
              "--region",
              "local",
              "--kubeconfig",
              kubeconfig,
              "--ops-port",
              String(ops),
              "--log-level",
              "warn",
            ],
            ops,
          ),
        );
      }
      readyRow(`agent (${label})`, ms);
    }
  } finally {
    for (const c of children) await stop(c);
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  imageSize();
}

if (import.meta.url === `file://${process.argv[1]}`) await benchCli();

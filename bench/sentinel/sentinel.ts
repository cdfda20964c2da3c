// Sentinel figures (`npm run bench -- sentinel`), all in one run on this machine:
//  - throughput and latency with wrk (64 connections, 10 s) against an upstream faster than every
//    proxy (nginx serving a fixed answer): the upstream reached directly; nginx as a reverse proxy
//    with one worker; `krane sentinel` on each runtime it has a shell for (Node.js: one process;
//    Bun); and each runtime's floor, a bare proxy on the same parts doing nothing else
//    (bench/sentinel/sentinel-floor.ts on Node, also as one process per core through node:cluster;
//    bench/sentinel/sentinel-floor-bun.ts on Bun), which tells the runtime's share of the gap from krane's.
//    Besides requests a second, each proxy's CPU time over the run (its whole process tree) gives
//    requests per CPU-second: throughput per core, which the machine's other load disturbs less;
//  - added latency at 1,000 requests/s (wrk pacing 10 connections to one request each per 10 ms,
//    through its Lua delay() hook): p50/p99 of each path, microsecond resolution;
//  - EndpointSlice change → first request routed to the new instance, and → last request routed
//    to the removed one, p50/p99/max over repeated changes (the Node.js sentinel);
//  - the sentinel's memory with 1,000 instances in its table (after traffic to all of them);
//  - what the edge policies cost (policyCosts below): the Node.js sentinel with no policies, a
//    rate limit by client address, API-key verification and the request view on, one sentinel
//    each (an environment each), measured in interleaved rounds: requests/s and requests per
//    CPU-second with wrk -c64, added p99 at 1,000 requests/s, each against "no policies".
// The sentinels run as their own processes with the krane-sentinel ServiceAccount, reading their
// table from a local cluster. Needs Debian's nginx and wrk (../tools.ts installs them as root, or
// names the apt-get line).
// KRANE_BENCH_SENTINEL_ONLY=proxies stops after the throughput and latency figures;
// KRANE_BENCH_SENTINEL_ONLY=policies measures only the policies' cost (KRANE_BENCH_SENTINEL_ROUNDS
// rounds, 3).
// KRANE_BENCH_PROF_DIR=<dir> writes the Node.js sentinel's CPU profile there (node --cpu-prof).
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { Pool } from "undici";
import { startCluster, type LocalCluster } from "../../src/cluster/index.js";
import { localAddress } from "../../src/cluster/pod-network.js";
import { KubeClient } from "../../src/kube/client.js";
import { resources } from "../../src/kube/resources.js";
import { SENTINEL_NAMESPACE } from "../../src/contracts/cluster.js";
import {
  LABEL_COMPONENT,
  LABEL_DEPLOYMENT_ID,
  LABEL_ENVIRONMENT_ID,
  LABEL_MANAGED_BY,
  LABEL_REGION,
  MANAGED_BY,
} from "../../src/contracts/labels.js";
import {
  formatRoutingPolicy,
  POLICY_KEY,
  ROUTING_COMPONENT,
  type SentinelStatus,
} from "../../src/contracts/routing.js";
import { hashApiKey, newApiKey } from "../../src/contracts/api-keys.js";
import { MAX_RATE_LIMIT, parseEdgePolicies } from "../../src/contracts/edge-policy.js";
import { SENTINEL_REQUESTS_PATH, type SentinelRequests } from "../../src/contracts/request-view.js";
import { applySentinelRbac, sentinelKubeConfigFrom } from "../../src/sentinel/rbac.js";
import { cpuSeconds, freePort, load, metricSum, percentileOf, ROOT, until, spawnBenchSentinel } from "../support.js";
import { ensureTools, NGINX, WRK } from "../tools.js";

export const ENV = "env_bench";
export const REGION = "bench";
const DURATION_S = Number(process.env.KRANE_BENCH_SENTINEL_SECONDS ?? 10);
const CHANGES = Number(process.env.KRANE_BENCH_SENTINEL_CHANGES ?? 30);
const HOST = "bench.example.com";
const BUN = join(ROOT, "node_modules", ".bin", "bun");
const ONLY_PROXIES = process.env.KRANE_BENCH_SENTINEL_ONLY === "proxies";
const ONLY_POLICIES = process.env.KRANE_BENCH_SENTINEL_ONLY === "policies";
const ROUNDS = Number(process.env.KRANE_BENCH_SENTINEL_ROUNDS ?? 3);

/** A process and all its descendants (a cluster's workers, nginx's worker). */
function processTree(root: number): number[] {
  const parent = new Map<number, number>();
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, "utf8");
      parent.set(Number(e), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {
      // gone meanwhile
    }
  }
  const out = [root];
  for (let i = 0; i < out.length; i++) for (const [pid, pp] of parent) if (pp === out[i]) out.push(pid);
  return out;
}

function treeCpuSeconds(root: number): number {
  return processTree(root).reduce((sum, pid) => sum + cpuSeconds(pid), 0);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** `until` with this bench's defaults. */
const waitFor = <T>(
  what: string,
  check: () => Promise<T | undefined | false>,
  timeoutMs = 30_000,
  stepMs = 20,
): Promise<T> => until(what, check, timeoutMs, stepMs, true);

export function labels(deploymentId?: string, env = ENV): Record<string, string> {
  return {
    [LABEL_MANAGED_BY]: MANAGED_BY,
    [LABEL_COMPONENT]: ROUTING_COMPONENT,
    [LABEL_ENVIRONMENT_ID]: env,
    [LABEL_REGION]: REGION,
    ...(deploymentId ? { [LABEL_DEPLOYMENT_ID]: deploymentId } : {}),
  };
}

export async function writeSlice(
  kube: KubeClient,
  deploymentId: string,
  ips: string[],
  port: number,
  env = ENV,
): Promise<void> {
  await kube.apply(resources.endpointSlices, {
    metadata: { name: `bench-${deploymentId}`, namespace: SENTINEL_NAMESPACE, labels: labels(deploymentId, env) },
    addressType: "IPv4",
    ports: [{ name: "http", port, protocol: "TCP" }],
    endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true } })),
  });
}

function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) * 1024 : NaN;
}

export interface WrkResult {
  rps: number;
  p50: number;
  p99: number;
  /** CPU-seconds the proxy's processes used per second of the run (NaN when not measured). */
  cores: number;
}

function toMs(v: string): number {
  const m = /^([\d.]+)(us|ms|s)$/.exec(v.trim());
  if (!m) return NaN;
  const n = Number(m[1]);
  return m[2] === "us" ? n / 1000 : m[2] === "s" ? n * 1000 : n;
}

/** Each wrk connection waits this long before its next request (10 connections → ~1,000/s). */
const PACED_SCRIPT = "function delay()\n  return 10\nend\n";

export function wrk(
  url: string,
  seconds: number,
  paced = false,
  dir = tmpdir(),
  pid?: number,
  headers: readonly string[] = [],
): WrkResult {
  const args = paced ? ["-t1", "-c10", "-s", join(dir, "paced.lua")] : ["-t1", "-c64"];
  if (paced) writeFileSync(join(dir, "paced.lua"), PACED_SCRIPT);
  const cpu0 = pid === undefined ? NaN : treeCpuSeconds(pid);
  const t0 = performance.now();
  const extra = headers.flatMap((h) => ["-H", h]);
  const out = spawnSync("wrk", [...args, `-d${seconds}s`, "--latency", "-H", `Host: ${HOST}`, ...extra, url], {
    encoding: "utf8",
  });
  const cores = pid === undefined ? NaN : (treeCpuSeconds(pid) - cpu0) / ((performance.now() - t0) / 1000);
  const text = `${out.stdout}${out.stderr}`;
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(text)?.[1]);
  const p50 = toMs(/\n\s+50%\s+(\S+)/.exec(text)?.[1] ?? "");
  const p99 = toMs(/\n\s+99%\s+(\S+)/.exec(text)?.[1] ?? "");
  const errors = /Non-2xx or 3xx responses: (\d+)/.exec(text)?.[1];
  if (errors) throw new Error(`wrk saw ${errors} non-2xx answers from ${url}`);
  if (!Number.isFinite(rps) || rps === 0) throw new Error(`wrk got no answers from ${url}: ${text.slice(0, 300)}`);
  return { rps, p50, p99, cores };
}

function nginxConfig(dir: string, listen: string, upstream: string | undefined): string {
  const user = process.getuid?.() === 0 ? "user root;" : "";
  const location = upstream
    ? `location / {
        proxy_pass http://app;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_set_header Host $host;
        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        proxy_set_header X-Forwarded-Proto $scheme;
        proxy_set_header X-Forwarded-Host $host;
        proxy_set_header X-Request-Id $request_id;
        proxy_buffering off;
      }`
    : `location / { return 200 "ok\\n"; }`;
  return `${user}
worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fcgi;
  uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  keepalive_requests 10000000;
  ${upstream ? `upstream app { server ${upstream}; keepalive 256; keepalive_requests 10000000; }` : ""}
  server {
    listen ${listen};
    ${location}
  }
}
`;
}

export async function startNginx(name: string, listen: string, upstream: string | undefined): Promise<ChildProcess> {
  const dir = mkdtempSync(join(tmpdir(), `krane-bench-nginx-${name}-`));
  writeFileSync(join(dir, "nginx.conf"), nginxConfig(dir, listen, upstream));
  const child = spawn("nginx", ["-p", dir, "-e", join(dir, "error.log"), "-c", join(dir, "nginx.conf")], {
    stdio: "ignore",
  });
  const [host, port] = [listen.slice(0, listen.lastIndexOf(":")), Number(listen.slice(listen.lastIndexOf(":") + 1))];
  await waitFor(
    `nginx (${name}) to listen`,
    async () => (await fetch(`http://${host}:${port}/`).catch(() => undefined))?.ok === true,
    10_000,
  );
  child.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  return child;
}

export async function startUpstream(addresses: string[]): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    ["--import", import.meta.resolve("tsx"), join(ROOT, "bench/sentinel/sentinel-upstream.ts"), ...addresses],
    {
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on("data", (d: Buffer) => d.toString().includes("listening") && resolve());
    child.once("exit", (code) => reject(new Error(`upstream exited (${code})`)));
  });
  return child;
}

/** Waits for a child to print "listening". */
function listening(child: ChildProcess, what: string): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    child.stdout?.on("data", (d: Buffer) => d.toString().includes("listening") && resolve(child));
    child.once("exit", (code) => reject(new Error(`${what} exited (${code})`)));
  });
}

/** A floor proxy on `listen`, forwarding to `upstream`: on Node (N processes) or on Bun. */
function startFloor(runtime: "node" | "bun", listen: string, upstream: string, processes = 1): Promise<ChildProcess> {
  const child =
    runtime === "bun"
      ? spawn(BUN, [join(ROOT, "bench/sentinel/sentinel-floor-bun.ts"), listen, upstream], {
          stdio: ["ignore", "pipe", "inherit"],
        })
      : spawn(
          process.execPath,
          [
            "--import",
            import.meta.resolve("tsx"),
            join(ROOT, "bench/sentinel/sentinel-floor.ts"),
            listen,
            upstream,
            String(processes),
          ],
          { stdio: ["ignore", "pipe", "inherit"] },
        );
  return listening(child, `the ${runtime} floor proxy`);
}

export async function startSentinel(
  cluster: LocalCluster,
  dir: string,
  port: number,
  opsPort: number,
  runtime: "node" | "bun",
  env = ENV,
): Promise<ChildProcess> {
  const kc = await sentinelKubeConfigFrom(cluster.kubeConfig());
  const kubeconfig = join(dir, "sentinel.kubeconfig");
  writeFileSync(kubeconfig, kc.exportConfig(), { mode: 0o600 });
  const net = cluster.podNetwork;
  if (!net) throw new Error("the cluster has no pod network");
  const child = spawnBenchSentinel({
    environmentId: env,
    region: REGION,
    port,
    opsPort,
    kubeconfig,
    podNetwork: net,
    runtime: runtime === "bun" ? BUN : undefined,
  });
  await waitFor("the sentinel to be ready", async () => (await fetch(`http://127.0.0.1:${opsPort}/readyz`)).ok, 60_000);
  return child;
}

async function status(opsPort: number): Promise<SentinelStatus> {
  return (await (await fetch(`http://127.0.0.1:${opsPort}/status`)).json()) as SentinelStatus;
}

export async function benchSentinel(): Promise<void> {
  ensureTools("sentinel", [NGINX, WRK]);
  const cluster = await startCluster({ name: "bench-sentinel" });
  const dir = mkdtempSync(join(tmpdir(), "krane-bench-sentinel-"));
  const children: ChildProcess[] = [];
  let kube = new KubeClient(cluster.kubeConfig(), { qps: 200, burst: 400 });
  try {
    const net = cluster.podNetwork;
    if (!net) throw new Error("the cluster has no pod network");
    const pod = (i: number): string => `10.${net.slot}.${8 + Math.floor(i / 250)}.${(i % 250) + 1}`;
    await applySentinelRbac(cluster.kubeConfig());
    const [appPort, changePort, manyPort, sentinelPort, opsPort, nginxPort] = (await Promise.all(
      Array.from({ length: 6 }, freePort),
    )) as [number, number, number, number, number, number];
    const app = `10.${net.slot}.0.10`;
    const appLocal = `${localAddress(net, app)}:${appPort}`;
    // The upstream every path shares.
    const upstream = await startNginx("upstream", appLocal, undefined);
    children.push(upstream);
    if (ONLY_POLICIES) {
      await policyCosts({ cluster, kube, dir, children, app, appPort, appLocal });
      return;
    }
    const a = `10.${net.slot}.0.20`;
    const b = `10.${net.slot}.0.21`;
    const many = Array.from({ length: 1000 }, (_, i) => pod(i));
    children.push(
      await startUpstream(
        [a, b, ...many].map((ip) => `${localAddress(net, ip)}:${ip === a || ip === b ? changePort : manyPort}`),
      ),
    );

    await kube.apply(resources.configMaps, {
      metadata: { name: "bench-policy", namespace: SENTINEL_NAMESPACE, labels: labels() },
      data: { [POLICY_KEY]: formatRoutingPolicy({ version: 1, environmentId: ENV, mode: "instances", revisions: [] }) },
    });
    await writeSlice(kube, "app", [app], appPort);
    const sentinel = await startSentinel(cluster, dir, sentinelPort, opsPort, "node");
    children.push(sentinel);
    const withBun = existsSync(BUN);
    if (!withBun) console.log("sentinel: no Bun in node_modules (npm install); the Bun figures are skipped");
    const cores = availableParallelism();
    const targets: { name: string; url: string; pid: number | undefined }[] = [
      { name: "direct", url: `http://${appLocal}/`, pid: undefined },
      { name: "sentinel/node", url: `http://127.0.0.1:${sentinelPort}/`, pid: sentinel.pid },
    ];
    const add = async (name: string, start: (listen: string) => Promise<ChildProcess>): Promise<void> => {
      const port = await freePort();
      const child = await start(`127.0.0.1:${port}`);
      children.push(child);
      targets.push({ name, url: `http://127.0.0.1:${port}/`, pid: child.pid });
    };
    if (withBun) {
      const [bunPort, bunOps] = [await freePort(), await freePort()];
      const child = await startSentinel(cluster, dir, bunPort, bunOps, "bun");
      children.push(child);
      targets.push({ name: "sentinel/bun", url: `http://127.0.0.1:${bunPort}/`, pid: child.pid });
    }
    const nginx = await startNginx("proxy", `127.0.0.1:${nginxPort}`, appLocal);
    children.push(nginx);
    targets.push({ name: "nginx", url: `http://127.0.0.1:${nginxPort}/`, pid: nginx.pid });
    await add("floor/node", (l) => startFloor("node", l, appLocal));
    if (cores > 1) await add(`floor/node×${cores}`, (l) => startFloor("node", l, appLocal, cores));
    if (withBun) await add("floor/bun", (l) => startFloor("bun", l, appLocal));

    console.log(`sentinel: upstream nginx (fixed answer); ${cores} cores; ${DURATION_S} s per run; ${load()}`);
    const tput = new Map<string, WrkResult>();
    const perCore = (r: WrkResult | undefined): number => (r ? r.rps / r.cores : NaN);
    for (const t of targets) {
      wrk(t.url, 2); // warm-up: connections, JIT
      const r = wrk(t.url, DURATION_S, false, dir, t.pid);
      tput.set(t.name, r);
      const cpu = Number.isFinite(r.cores)
        ? `CPU ${r.cores.toFixed(2)} cores, ${perCore(r).toFixed(0).padStart(6)} req per CPU-s`
        : "CPU (not measured)";
      console.log(
        `sentinel: wrk 64 conns  ${t.name.padEnd(13)} ${r.rps.toFixed(0).padStart(7)} req/s   ${cpu}   p50 ${r.p50.toFixed(2)} ms   p99 ${r.p99.toFixed(2)} ms   ${load()}`,
      );
    }
    const n = tput.get("nginx");
    const ratio = (x: number, y: number): string => (Number.isFinite(x / y) ? `${(x / y).toFixed(2)}×` : "n/a");
    if (n) {
      for (const name of ["sentinel/node", "sentinel/bun", "floor/node", `floor/node×${cores}`, "floor/bun"]) {
        const r = tput.get(name);
        if (!r) continue;
        console.log(
          `sentinel: against nginx (1 worker): ${name.padEnd(13)} per core ${ratio(perCore(r), perCore(n))}${name.startsWith("sentinel") ? " (target ≥ 0.5)" : ""}, requests a second ${ratio(r.rps, n.rps)}`,
        );
      }
    }
    for (const rt of ["node", "bun"]) {
      const s = tput.get(`sentinel/${rt}`);
      const f = tput.get(`floor/${rt}`);
      if (s && f)
        console.log(
          `sentinel: against its runtime's floor: sentinel/${rt} per core ${ratio(perCore(s), perCore(f))}, requests a second ${ratio(s.rps, f.rps)}`,
        );
    }
    const fixed = new Map<string, WrkResult>();
    for (const t of targets) {
      wrk(t.url, 2, true, dir);
      const r = wrk(t.url, DURATION_S, true, dir);
      fixed.set(t.name, r);
      console.log(
        `sentinel: ~1,000 req/s  ${t.name.padEnd(13)} ${r.rps.toFixed(0).padStart(7)} req/s   p50 ${r.p50.toFixed(3)} ms   p99 ${r.p99.toFixed(3)} ms   ${load()}`,
      );
    }
    const d = fixed.get("direct");
    for (const t of targets) {
      const r = fixed.get(t.name);
      if (t.name === "direct" || !d || !r) continue;
      console.log(
        `sentinel: added latency at ~1,000 req/s: ${t.name.padEnd(13)} p50 +${(r.p50 - d.p50).toFixed(3)} ms   p99 +${(r.p99 - d.p99).toFixed(3)} ms${t.name.startsWith("sentinel") ? " (target p99 ≤ 0.5 ms)" : ""}`,
      );
    }
    if (ONLY_PROXIES) return;
    await policyCosts({ cluster, kube, dir, children, app, appPort, appLocal });
    // A new client: the first one's keep-alive connections sat idle through minutes of wrk, and a
    // connection the API server closed meanwhile fails its first write (EPIPE), which KubeClient
    // does not take for a stale socket.
    kube.close();
    kube = new KubeClient(cluster.kubeConfig(), { qps: 200, burst: 400 });

    // EndpointSlice change → routing.
    await writeSlice(kube, "app", [], appPort);
    await writeSlice(kube, "change", [a], changePort);
    await waitFor("the change revision alone", async () => {
      const st = await status(opsPort);
      return st.revisions.reduce((n, r) => n + r.endpoints, 0) === 1;
    });
    const pool = new Pool(`http://127.0.0.1:${sentinelPort}`, { connections: 8 });
    const bLocal = localAddress(net, b);
    const adds: number[] = [];
    const addsAfterCommit: number[] = [];
    const removals: number[] = [];
    const removalsAfterCommit: number[] = [];
    let probing = true;
    let lastB = -Infinity;
    let firstB = Infinity;
    let t0 = 0;
    const probers = Array.from({ length: 4 }, async () => {
      while (probing) {
        const start = performance.now();
        const res = await pool.request({ method: "GET", path: "/", headers: { host: HOST } });
        const text = await res.body.text();
        if (text.includes(bLocal)) {
          lastB = Math.max(lastB, start);
          if (start >= t0) firstB = Math.min(firstB, performance.now());
        }
      }
    });
    for (let i = 0; i < CHANGES; i++) {
      firstB = Infinity;
      t0 = performance.now();
      await writeSlice(kube, "change", [a, b], changePort);
      const committed = performance.now();
      await waitFor("b to get traffic", async () => firstB !== Infinity, 10_000, 1);
      adds.push(firstB - t0);
      addsAfterCommit.push(Math.max(0, firstB - committed));
      await sleep(100);
      lastB = -Infinity;
      t0 = performance.now();
      await writeSlice(kube, "change", [a], changePort);
      const removedAt = performance.now();
      await sleep(600);
      removals.push(Math.max(0, lastB - t0));
      removalsAfterCommit.push(Math.max(0, lastB - removedAt));
    }
    probing = false;
    await Promise.all(probers);
    await pool.close();
    const fmt = (v: number[]): string =>
      `p50 ${percentileOf(v, 50).toFixed(0)} ms, p99 ${percentileOf(v, 99).toFixed(0)} ms, max ${Math.max(...v).toFixed(0)} ms`;
    console.log(
      `sentinel: slice apply sent → first request to the added instance    ${fmt(adds)} (${CHANGES} changes; target p99 ≤ 200 ms)`,
    );
    console.log(`sentinel: slice apply sent → last request to the removed instance   ${fmt(removals)}`);
    console.log(`sentinel: apply answered → first request to the added instance      ${fmt(addsAfterCommit)}`);
    console.log(`sentinel: apply answered → last request to the removed instance     ${fmt(removalsAfterCommit)}`);

    // 1,000 instances.
    const pid = sentinel.pid ?? 0;
    const before = rssBytes(pid);
    const tTable = performance.now();
    await writeSlice(kube, "many", many, manyPort);
    await waitFor(
      "1,000 endpoints in the table",
      async () => (await status(opsPort)).revisions.some((r) => r.endpoints === 1000),
      30_000,
      5,
    );
    const tableMs = performance.now() - tTable;
    const spreadPool = new Pool(`http://127.0.0.1:${sentinelPort}`, { connections: 64 });
    const seen = new Set<string>();
    let errors = 0;
    await Promise.all(
      Array.from({ length: 64 }, async (_, w) => {
        for (let i = w; i < 30_000; i += 64) {
          const res = await spreadPool.request({ method: "GET", path: "/", headers: { host: HOST } });
          const text = await res.body.text();
          if (res.statusCode !== 200) errors++;
          else seen.add(text);
        }
      }),
    );
    await spreadPool.close();
    await sleep(1000);
    const after = rssBytes(pid);
    const st = await status(opsPort);
    console.log(
      `sentinel: 1,000 instances: table in force ${tableMs.toFixed(0)} ms after the apply; RSS ${(before / 2 ** 20).toFixed(0)} MiB → ${(after / 2 ** 20).toFixed(0)} MiB ` +
        `after 30,000 requests reached ${seen.size} of ${st.revisions.reduce((n, r) => n + r.endpoints, 0)} instances (errors ${errors})`,
    );
  } finally {
    for (const c of children.reverse()) c.kill("SIGTERM");
    await sleep(500);
    kube.close();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

interface PolicyCase {
  readonly name: "none" | "ratelimit" | "apikey" | "view";
  readonly what: string;
  /** The most of the throughput it may cost (none: the baseline). */
  readonly goal?: number;
  readonly policies?: unknown[];
  readonly key?: string;
}

interface PolicyRun {
  readonly tput: WrkResult;
  readonly paced: WrkResult;
  readonly direct: WrkResult;
}

/** Polls the request view on an ops port as the agent does while someone watches (every 500 ms). */
function startWatcher(opsPort: number): ChildProcess {
  const script = `let after = 0;
for (;;) {
  try { after = (await (await fetch(process.argv[1] + "?after=" + after)).json()).seq; } catch {}
  await new Promise((r) => setTimeout(r, 500));
}`;
  return spawn(
    process.execPath,
    ["--input-type=module", "-e", script, `http://127.0.0.1:${opsPort}${SENTINEL_REQUESTS_PATH}`],
    {
      stdio: "ignore",
    },
  );
}

/**
 * What each edge policy costs the Node.js sentinel: one sentinel (its own environment) per case,
 * all against the same upstream, measured in ROUNDS interleaved rounds (the order rotating, so the
 * machine's other load falls on each case alike); the median round of each is compared with "no
 * policies".
 */
async function policyCosts(o: {
  cluster: LocalCluster;
  kube: KubeClient;
  dir: string;
  children: ChildProcess[];
  app: string;
  appPort: number;
  appLocal: string;
}): Promise<void> {
  const key = newApiKey();
  const cases: PolicyCase[] = [
    { name: "none", what: "no policies" },
    {
      name: "ratelimit",
      what: "rate limit by client address (nothing refused)",
      goal: 0.1,
      policies: [{ name: "per-address", kind: "ratelimit", key: "address", limit: MAX_RATE_LIMIT, windowSeconds: 60 }],
    },
    {
      name: "apikey",
      what: "API key verified (a valid key on every request)",
      goal: 0.1,
      policies: [{ name: "keys", kind: "apikey" }],
      key,
    },
    { name: "view", what: "request view on (someone watching)", goal: 0.03 },
  ];
  const started = new Map<string, { url: string; opsPort: number; pid: number | undefined }>();
  for (const c of cases) {
    const env = `env_bench_${c.name}`;
    await o.kube.apply(resources.configMaps, {
      metadata: { name: `bench-policy-${c.name}`, namespace: SENTINEL_NAMESPACE, labels: labels(undefined, env) },
      data: {
        [POLICY_KEY]: formatRoutingPolicy({
          version: 1,
          environmentId: env,
          mode: "instances",
          revisions: [],
          ...(c.policies ? { policies: parseEdgePolicies("policies", c.policies) } : {}),
          ...(c.key
            ? {
                apiKeys: [
                  {
                    id: "key_bench",
                    hash: hashApiKey(c.key),
                    name: "bench",
                    expiresAt: null,
                    limit: null,
                    windowSeconds: null,
                    metadata: { plan: "bench" },
                  },
                ],
              }
            : {}),
        }),
      },
    });
    await writeSlice(o.kube, `p-${c.name}`, [o.app], o.appPort, env);
    const [port, opsPort] = [await freePort(), await freePort()];
    const child = await startSentinel(o.cluster, o.dir, port, opsPort, "node", env);
    o.children.push(child);
    started.set(c.name, { url: `http://127.0.0.1:${port}/`, opsPort, pid: child.pid });
    // Which CPU profile is whose (KRANE_BENCH_PROF_DIR: named by process id).
    if (process.env.KRANE_BENCH_PROF_DIR) console.log(`sentinel policies: ${c.name} is process ${child.pid}`);
  }
  // The policies are in force: a request without the key is refused.
  const keyed = started.get("apikey");
  const unkeyed = keyed ? await fetch(keyed.url) : undefined;
  if (unkeyed?.status !== 401) throw new Error(`the apikey sentinel answered ${unkeyed?.status} without a key`);
  const view = started.get("view");
  if (view) o.children.push(startWatcher(view.opsPort));
  await sleep(1_000);

  console.log(
    `sentinel policies: Node.js sentinel, one per case; ${ROUNDS} rounds of wrk -c64 ${DURATION_S} s and ~1,000 req/s ${DURATION_S} s each; ${load()}`,
  );
  const runs = new Map<string, PolicyRun[]>(cases.map((c) => [c.name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    const order = cases.map((_, i) => cases[(i + round) % cases.length] as PolicyCase);
    wrk(`http://${o.appLocal}/`, 1, true, o.dir);
    const direct = wrk(`http://${o.appLocal}/`, DURATION_S, true, o.dir);
    for (const c of order) {
      const t = started.get(c.name);
      if (!t) continue;
      const headers = c.key ? [`x-api-key: ${c.key}`] : [];
      wrk(t.url, 2, false, o.dir, undefined, headers);
      const tput = wrk(t.url, DURATION_S, false, o.dir, t.pid, headers);
      wrk(t.url, 1, true, o.dir, undefined, headers);
      const paced = wrk(t.url, DURATION_S, true, o.dir, undefined, headers);
      runs.get(c.name)?.push({ tput, paced, direct });
      console.log(
        `sentinel policies: round ${round + 1} ${c.name.padEnd(9)} ${tput.rps.toFixed(0).padStart(6)} req/s   ${(tput.rps / tput.cores).toFixed(0).padStart(6)} req per CPU-s   p99 at ~1,000 req/s ${paced.p99.toFixed(3)} ms (direct ${direct.p99.toFixed(3)} ms)   ${load()}`,
      );
    }
  }
  // Each case did what it says: the rate limit counted every request, the view recorded. Asked
  // twice at most: the keep-alive connection of the readiness polls may have been closed while
  // wrk held the event loop, and is found dead only by this first use.
  const twice = <T>(f: () => Promise<T>): Promise<T> => f().catch(() => f());
  const limited = await twice(() =>
    metricSum(
      `http://127.0.0.1:${started.get("ratelimit")?.opsPort ?? 0}`,
      "krane_sentinel_policy_decisions_total",
      (l) => l.includes('policy="per-address"'),
    ),
  );
  if (limited === 0) throw new Error("the rate limit decided nothing");
  const seen = await twice(
    async () =>
      (await (
        await fetch(`http://127.0.0.1:${view?.opsPort ?? 0}${SENTINEL_REQUESTS_PATH}?after=0`)
      ).json()) as SentinelRequests,
  );
  if (seen.seq === 0) throw new Error("the request view recorded nothing");

  const median = (c: string, f: (r: PolicyRun) => number): number => percentileOf((runs.get(c) ?? []).map(f), 50);
  const rps = (c: string): number => median(c, (r) => r.tput.rps);
  const perCpu = (c: string): number => median(c, (r) => r.tput.rps / r.tput.cores);
  const added = (c: string): number => median(c, (r) => r.paced.p99 - r.direct.p99);
  console.log(
    `sentinel policies: no policies (median of ${ROUNDS}): ${rps("none").toFixed(0)} req/s, ${perCpu("none").toFixed(0)} req per CPU-s, added p99 at ~1,000 req/s +${added("none").toFixed(3)} ms`,
  );
  for (const c of cases) {
    if (c.goal === undefined) continue;
    const cpuRatio = perCpu(c.name) / perCpu("none");
    const verdict = 1 - cpuRatio <= c.goal ? "met" : "NOT met";
    console.log(
      `sentinel policies: ${c.what}: ${rps(c.name).toFixed(0)} req/s (${(rps(c.name) / rps("none")).toFixed(2)}×), ${perCpu(c.name).toFixed(0)} req per CPU-s (${cpuRatio.toFixed(2)}×; goal ≥ ${(1 - c.goal).toFixed(2)}×: ${verdict}), added p99 +${added(c.name).toFixed(3)} ms (none +${added("none").toFixed(3)} ms)`,
    );
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await benchSentinel();

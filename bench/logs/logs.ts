// Logs (`npm run bench -- logs`): from a line written in a container to the line printed by
// `krane logs -f`, with N instances (default 20) writing R lines/s each (default 200); the CPU
// time of the agent and of ctrl (each a process of its own, as shipped) per 1,000 lines relayed;
// and lines lost while the reader keeps up (each line is numbered per instance, so a gap is a
// lost line; it must be 0). Two parts, each with its own ctrl:
//
//  1. "path": krane's own stages alone. The agent's log path (bench/logs/logs-agent.ts: its
//     LogChannel, connection to ctrl and Kubernetes client) reads the pods' logs from a stand-in
//     API server (bench/logs/logs-standin.ts, HTTPS, one chunk per line as kube-apiserver sends them),
//     pushes to ctrl, and `krane logs -f` prints. It needs no Kubernetes and shows what krane
//     costs per line, apart from what the kubelet, containerd and the API server cost.
//  2. "real": the shipped agent and a workload of N pods on a real node (gVisor), read by
//     `krane logs -f` and by `kubectl logs -f` (its cap raised with --max-log-requests) in the
//     same run, each alone in a window of its own after a warm-up (KRANE_BENCH_LOGS_READERS=together
//     reads with both at once, each then paying for the other's load on the kubelet, the API server
//     and the two cores). Each line's delay is also split at the container runtime's timestamp.
//     The agent's CPU is given whole and net of what it used while no log was read (its
//     controllers, informers and heartbeats), measured just before.
//
// Every figure is printed with the load averages: on a shared machine a figure taken at a high
// load is not comparable with one taken at a low load (a starved process waits to be scheduled,
// and the lines wait with it). KRANE_BENCH_LOGS_PARTS=path|real runs one part;
// KRANE_BENCH_LOGS_PROFILE=<dir> writes the agent's and ctrl's CPU profiles (node --cpu-prof) there.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { agentKubeConfigFrom } from "../../src/agent/rbac.js";
import { createApiClients } from "../../src/client/node.js";
import { ensureKubeAssets, startCluster } from "../../src/cluster/index.js";
import { workloadImages } from "../../src/cluster/images.js";
import { realNodeSupport } from "../../src/cluster/nodes/host.js";
import { InstanceStatus } from "../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { generatedAdminToken } from "../../test/integration/ctrl/process.js";
import { cpuSeconds, ensureBuild, freePort, KRANE_BIN, pct, ROOT, until } from "../support.js";

const N = Number(process.env.KRANE_BENCH_LOGS_INSTANCES ?? "20");
const RATE = Number(process.env.KRANE_BENCH_LOGS_RATE ?? "200");
const WINDOW_MS = Number(process.env.KRANE_BENCH_LOGS_SECONDS ?? "30") * 1000;
/** Both readers in one window (KRANE_BENCH_LOGS_READERS=together) instead of one after the other. */
const TOGETHER = process.env.KRANE_BENCH_LOGS_READERS === "together";
/** After every reader attached, how long before the window opens (both readers alike). */
const WARMUP_MS = Number(process.env.KRANE_BENCH_LOGS_WARMUP_SECONDS ?? "10") * 1000;
const PARTS = (process.env.KRANE_BENCH_LOGS_PARTS ?? "path,real").split(",");
const PROFILE = process.env.KRANE_BENCH_LOGS_PROFILE;
const REF = { workspace: "bench", project: "logs", environment: "production" };
const NAMESPACE = "ws-bench";

/** The three load averages, as `uptime` prints them. */
function loads(): string {
  return `load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(", ")}`;
}

/** Writes RATE numbered lines per second, each with the time it was written (unix ms). */
function writer(): string[] {
  const per = Math.max(1, Math.round(RATE / 20));
  return [
    "node",
    "-e",
    `const pod=require("os").hostname();let n=0;setInterval(()=>{let s="";for(let i=0;i<${per};i++){n++;s+="seq="+n+" pod="+pod+" t="+Date.now()+"\\n"}process.stdout.write(s)},50);` +
      `require("http").createServer((q,r)=>r.end("ok")).listen(8080);process.on("SIGTERM",()=>process.exit(0));`,
  ];
}

interface Reader {
  child: ChildProcess;
  /** Latency of each line read in the window (ms). */
  latency: number[];
  /**
   * Of that, from the container runtime's timestamp of the line to its printing (ms): the kubelet,
   * the API server and the reader's own path, without the runtime's capture of the container's
   * output (both readers run with --timestamps).
   */
  afterStamp: number[];
  /** Per pod, the numbers read in the window. */
  seqs: Map<string, number[]>;
  lines: number;
  /** Lines the reader said were dropped (krane's "N lines dropped" markers), in the window. */
  dropped: number;
  /** Times the stream broke and was resumed (krane logs says so on stderr). */
  breaks: number;
}

function read(child: ChildProcess, measuring: () => boolean): Reader {
  const r: Reader = { child, latency: [], afterStamp: [], seqs: new Map(), lines: 0, dropped: 0, breaks: 0 };
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (l) => {
    if (!measuring()) return;
    const m = /seq=(\d+) pod=(\S+) t=(\d+)/.exec(l);
    if (!m) {
      const d = /: (\d+) lines dropped/.exec(l);
      if (d) r.dropped += Number(d[1]);
      return;
    }
    const now = Date.now();
    r.latency.push(now - Number(m[3]));
    const stamp = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,3})?)\d*Z /.exec(l);
    if (stamp) r.afterStamp.push(now - Date.parse(`${stamp[1]}Z`));
    r.lines++;
    const pod = m[2] as string;
    const list = r.seqs.get(pod) ?? [];
    list.push(Number(m[1]));
    r.seqs.set(pod, list);
  });
  createInterface({ input: child.stderr as NodeJS.ReadableStream }).on("line", (l) => {
    if (/stream broke/.test(l)) r.breaks++;
    process.stderr.write(`  ${l}\n`);
  });
  return r;
}

/** Lines missing between the first and last number read of each pod. */
function lost(r: Reader): number {
  let n = 0;
  for (const seqs of r.seqs.values()) {
    const s = [...seqs].sort((a, b) => a - b);
    const first = s[0] ?? 0;
    const last = s[s.length - 1] ?? 0;
    n += last - first + 1 - new Set(s).size;
  }
  return n;
}

function row(what: string, r: Reader): string {
  const s = [...r.latency].sort((a, b) => a - b);
  const expected = Math.round((N * RATE * WINDOW_MS) / 1000);
  const extra = [r.dropped > 0 ? `${r.dropped} dropped (markers)` : "", r.breaks > 0 ? `stream broke ${r.breaks}×` : ""]
    .filter(Boolean)
    .join(", ");
  const a = [...r.afterStamp].sort((x, y) => x - y);
  return (
    `  ${what.padEnd(44)} p50 ${pct(s, 50).toFixed(0)} ms, p95 ${pct(s, 95).toFixed(0)} ms, p99 ${pct(s, 99).toFixed(0)} ms; ` +
    `${r.lines} of ~${expected} lines from ${r.seqs.size} instances, ${lost(r)} lost${extra ? `, ${extra}` : ""}` +
    (a.length > 0
      ? `\n  ${"  of which runtime's timestamp → printed".padEnd(44)} p50 ${pct(a, 50).toFixed(0)} ms, p95 ${pct(a, 95).toFixed(0)} ms, p99 ${pct(a, 99).toFixed(0)} ms`
      : "")
  );
}

const perThousand = (cpuS: number, lines: number): string =>
  `${((cpuS / Math.max(1, lines)) * 1_000_000).toFixed(1)} ms`;

/** A process's CPU time so far in user and in kernel mode, seconds. */
function cpuSplit(pid: number): { user: number; sys: number } {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { user: Number(rest[11]) / 100, sys: Number(rest[12]) / 100 };
  } catch {
    return { user: 0, sys: 0 };
  }
}

/** CPU used between two readings, as "total s (user u, kernel k)". */
function cpuUsed(a: { user: number; sys: number }, b: { user: number; sys: number }): { total: number; text: string } {
  const user = b.user - a.user;
  const sys = b.sys - a.sys;
  return {
    total: user + sys,
    text: `${(user + sys).toFixed(2)} s (user ${user.toFixed(2)}, kernel ${sys.toFixed(2)})`,
  };
}

interface Ctrl {
  child: ChildProcess;
  url: string;
  token: string;
  api: ReturnType<typeof createApiClients>;
  /** The agent's cluster token for region "local". */
  agentToken: string;
}

/** ctrl as shipped (SQLite), with the bench's workspace, project and environment of N instances. */
async function startCtrl(dir: string, children: ChildProcess[], profile: string): Promise<Ctrl> {
  mkdirSync(dir, { recursive: true });
  const database = join(dir, "ctrl.db");
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(
    process.execPath,
    [...profileFlags(profile), KRANE_BIN, "ctrl", "serve", "--database", database, "--listen", `127.0.0.1:${port}`],
    {
      cwd: ROOT,
      env: { ...process.env, KRANE_OPS_LISTEN: "off", KRANE_LOG_LEVEL: "warn" },
      stdio: ["ignore", "inherit", "inherit"],
    },
  );
  children.push(child);
  // On a first start ctrl writes a generated admin token next to its database.
  const token = await generatedAdminToken(database);
  const api = createApiClients(url, token);
  await until(
    "ctrl answering",
    async () =>
      api.regions.listRegions({}).then(
        () => true,
        () => false,
      ),
    60_000,
    200,
  );
  await api.regions.createRegion({ name: "local" });
  const { token: agentToken } = await api.regions.createClusterToken({ region: "local", clusterName: "bench" });
  await api.workspaces.createWorkspace({ slug: REF.workspace });
  await api.projects.createProject({ workspace: REF.workspace, slug: REF.project });
  await api.environments.createEnvironment({
    workspace: REF.workspace,
    project: REF.project,
    slug: REF.environment,
    regions: [{ region: "local", replicas: N }],
    rollout: { maxSurge: "100%", maxUnavailable: "0" },
  });
  return { child, url, token, api, agentToken };
}

function kraneLogs(ctrl: Ctrl, measuring: () => boolean): Reader {
  return read(
    spawn(
      process.execPath,
      [KRANE_BIN, "logs", `${REF.project}/${REF.environment}`, "-f", "--tail", "0", "--timestamps"],
      {
        cwd: ROOT,
        env: { ...process.env, KRANE_CTRL_URL: ctrl.url, KRANE_TOKEN: ctrl.token, KRANE_WORKSPACE: REF.workspace },
        stdio: ["ignore", "pipe", "pipe"],
      },
    ),
    measuring,
  );
}

/** Node's flags for the agent: a CPU profile when asked for. */
function profileFlags(name: string): string[] {
  if (!PROFILE) return [];
  const dir = join(PROFILE, `${name}-${Date.now()}`);
  mkdirSync(dir, { recursive: true });
  // One file per thread (tsx loads modules on a thread of its own): the biggest is the agent's.
  return ["--cpu-prof", "--cpu-prof-dir", dir];
}

/**
 * Waits until every reader printed a line of every instance (all attached; how long it took is
 * printed), then the warm-up: the window measures readers that follow, not their catching up with
 * the lines written while 20 streams opened at once. A reader still short of some after 2 minutes
 * is said, and measured all the same: a starved machine is a result, not a reason to print nothing.
 */
async function attached(readers: Reader[], seen: Map<Reader, Set<string>>, names: string[]): Promise<void> {
  const t0 = performance.now();
  const at = new Map<Reader, number>();
  const all = (): boolean => {
    for (const r of readers) if (!at.has(r) && (seen.get(r)?.size ?? 0) >= N) at.set(r, performance.now() - t0);
    return at.size === readers.length;
  };
  await until(`every reader printing lines of ${N} instances`, all, 120_000, 50).catch(() => {
    const got = readers.map((r, i) => `${names[i]} ${seen.get(r)?.size ?? 0}`).join(", ");
    console.log(`  not every reader printed lines of all ${N} instances within 2 minutes (${got}); ${loads()}`);
  });
  const took = readers.map((r, i) => {
    const ms = at.get(r);
    return `${names[i]} ${ms === undefined ? "not all" : `${(ms / 1000).toFixed(1)} s`}`;
  });
  console.log(`  attached to all ${N} instances: ${took.join(", ")}; then ${WARMUP_MS / 1000} s of warm-up`);
  await new Promise((r) => setTimeout(r, Math.max(1_000, WARMUP_MS)));
}

/** Instances each reader printed lines of, before the window opens. */
function watchInstances(readers: Reader[]): Map<Reader, Set<string>> {
  const seen = new Map<Reader, Set<string>>();
  for (const r of readers) {
    const s = new Set<string>();
    seen.set(r, s);
    createInterface({ input: r.child.stdout as NodeJS.ReadableStream }).on("line", (l) => {
      if (s.size < N) {
        const m = /pod=(\S+)/.exec(l);
        if (m) s.add(m[1] as string);
      }
    });
  }
  return seen;
}

/** Part 1: krane's own stages, with a stand-in API server. */
async function pathPart(dir: string, children: ChildProcess[]): Promise<void> {
  console.log(`logs/path: the agent's log path, ctrl and krane logs -f on a stand-in API server (no Kubernetes)`);
  const cert = join(dir, "standin.crt");
  const key = join(dir, "standin.key");
  const ssl = spawnSync(
    "openssl",
    ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"].concat([
      "-subj",
      "/CN=127.0.0.1",
      "-addext",
      "subjectAltName=IP:127.0.0.1",
      "-keyout",
      key,
      "-out",
      cert,
    ]),
    { encoding: "utf8" },
  );
  if (ssl.status !== 0) throw new Error(`openssl: ${ssl.stderr}`);
  const ctrl = await startCtrl(join(dir, "path"), children, "ctrl-path");
  const apiPort = await freePort();
  const standin = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      join(ROOT, "bench/logs/logs-standin.ts"),
      String(apiPort),
      cert,
      key,
      String(N),
      String(RATE),
      NAMESPACE,
    ],
    { cwd: ROOT, stdio: ["ignore", "inherit", "inherit", "ipc"] },
  );
  children.push(standin);
  await new Promise<void>((resolve, reject) => {
    standin.once("message", () => resolve());
    standin.once("exit", (c) => reject(new Error(`stand-in API server exited with ${c}`)));
  });
  const agent = spawn(
    process.execPath,
    [
      ...profileFlags("agent-path"),
      "--import",
      "tsx",
      join(ROOT, "bench/logs/logs-agent.ts"),
      ctrl.url,
      ctrl.agentToken,
      "local",
      `https://127.0.0.1:${apiPort}`,
      cert,
    ],
    { cwd: ROOT, stdio: ["ignore", "inherit", "inherit"] },
  );
  children.push(agent);
  let measuring = false;
  const krane = kraneLogs(ctrl, () => measuring);
  children.push(krane.child);
  await attached([krane], watchInstances([krane]), ["krane logs"]);
  const cpu0 = {
    agent: cpuSplit(agent.pid ?? 0),
    ctrl: cpuSplit(ctrl.child.pid ?? 0),
    cli: cpuSplit(krane.child.pid ?? 0),
  };
  measuring = true;
  await new Promise((r) => setTimeout(r, WINDOW_MS));
  measuring = false;
  const cpu = {
    agent: cpuUsed(cpu0.agent, cpuSplit(agent.pid ?? 0)),
    ctrl: cpuUsed(cpu0.ctrl, cpuSplit(ctrl.child.pid ?? 0)),
    cli: cpuUsed(cpu0.cli, cpuSplit(krane.child.pid ?? 0)),
  };
  console.log(row("krane logs -f (stand-in → agent → ctrl → CLI)", krane));
  console.log(
    `  CPU per 1,000 lines: agent's log path ${perThousand(cpu.agent.total, krane.lines)}, ctrl ${perThousand(cpu.ctrl.total, krane.lines)}, ` +
      `krane logs ${perThousand(cpu.cli.total, krane.lines)} (agent ${cpu.agent.text}, ctrl ${cpu.ctrl.text}, ` +
      `krane logs ${cpu.cli.text} over ${WINDOW_MS / 1000} s); ${loads()}`,
  );
  for (const c of [krane.child, agent, standin, ctrl.child]) await stop(c);
}

/** Part 2: the shipped agent and N pods on a real node, against kubectl logs -f. */
async function realPart(dir: string, children: ChildProcess[]): Promise<void> {
  const support = await realNodeSupport();
  if (!support.ok) {
    console.log(`logs/real: skipped, this machine cannot run real nodes: ${support.reason}`);
    return;
  }
  console.log(`logs/real: the shipped agent, ${N} pods on a real node (gVisor), against kubectl logs -f`);
  const images = await workloadImages((l) => console.log(`  ${l}`));
  const cluster = await startCluster({ name: "bench-logs", realNodes: ["untrusted"], images: [images.hello] });
  try {
    const ctrl = await startCtrl(join(dir, "real"), children, "ctrl-real");
    const api = ctrl.api;
    const kc = await agentKubeConfigFrom(cluster.kubeConfig(), 3600);
    const kubeconfig = join(dir, "agent.kubeconfig");
    writeFileSync(kubeconfig, kc.exportConfig(), { mode: 0o600 });
    const agent = spawn(
      process.execPath,
      [
        ...profileFlags("agent-real"),
        KRANE_BIN,
        "agent",
        "--ctrl-url",
        ctrl.url,
        "--token",
        ctrl.agentToken,
        "--region",
        "local",
        "--kubeconfig",
        kubeconfig,
        "--ops-port",
        String(await freePort()),
        "--log-level",
        process.env.KRANE_BENCH_LOGS_AGENT_LOG ?? "warn",
      ],
      { cwd: ROOT, stdio: ["ignore", "inherit", "inherit"] },
    );
    children.push(agent);
    await api.deployments.createDeployment({
      ...REF,
      image: images.hello.names[0] ?? "",
      command: writer(),
      port: 8080,
      cpuMillicores: 50n,
      memoryMib: 64n,
    });
    const t0 = performance.now();
    await until(
      `${N} running instances`,
      async () => {
        const s = await api.status.getEnvironmentStatus(REF);
        const n = s.deployments[0]?.regions[0]?.instances.filter((i) => i.status === InstanceStatus.RUNNING).length;
        return n === N;
      },
      600_000,
      500,
    );
    console.log(`  ${N} instances running in ${((performance.now() - t0) / 1000).toFixed(0)} s; ${loads()}`);
    // What the agent uses with no log read: its controllers, informers and heartbeats.
    const idleMs = 15_000;
    const idle0 = cpuSeconds(agent.pid ?? 0);
    await new Promise((r) => setTimeout(r, idleMs));
    const idleRate = (cpuSeconds(agent.pid ?? 0) - idle0) / (idleMs / 1000);
    const kubectlBin = (await ensureKubeAssets()).bin.kubectl;
    const startKubectl = (measuring: () => boolean): Reader =>
      read(
        spawn(
          kubectlBin,
          [
            "logs",
            "-f",
            "-n",
            NAMESPACE,
            "-l",
            "app.kubernetes.io/component=deployment",
            "--max-log-requests",
            String(N + 10),
            "--tail",
            "0",
            "--timestamps",
          ],
          { env: { ...process.env, KUBECONFIG: cluster.kubeconfigPath }, stdio: ["ignore", "pipe", "pipe"] },
        ),
        measuring,
      );
    /** Attaches the readers, warms up, measures one window; their CPU and the agent's and ctrl's. */
    const measure = async (
      readers: { name: string; start: (measuring: () => boolean) => Reader }[],
    ): Promise<{ readers: Reader[]; cpu: Map<string, { total: number; text: string }> }> => {
      let measuring = false;
      const rs = readers.map((x) => x.start(() => measuring));
      for (const r of rs) children.push(r.child);
      await attached(
        rs,
        watchInstances(rs),
        readers.map((x) => x.name),
      );
      const pids = new Map<string, number>([
        ["agent", agent.pid ?? 0],
        ["ctrl", ctrl.child.pid ?? 0],
        ...rs.map((r, i) => [readers[i]?.name ?? "", r.child.pid ?? 0] as [string, number]),
      ]);
      const cpu0 = new Map([...pids].map(([k, pid]) => [k, cpuSplit(pid)]));
      measuring = true;
      await new Promise((r) => setTimeout(r, WINDOW_MS));
      measuring = false;
      const cpu = new Map([...pids].map(([k, pid]) => [k, cpuUsed(cpu0.get(k) ?? { user: 0, sys: 0 }, cpuSplit(pid))]));
      for (const r of rs) await stop(r.child);
      return { readers: rs, cpu };
    };
    const kraneReader = { name: "krane logs", start: (m: () => boolean) => kraneLogs(ctrl, m) };
    const kubectlReader = { name: "kubectl logs", start: startKubectl };
    // Apart (the default): each reader alone in a window of its own, as a user runs one of them;
    // together, both read at once and each one's load on the kubelet and the API server (and on
    // the machine's two cores) lands on the other's figure too.
    const windows = TOGETHER
      ? [await measure([kraneReader, kubectlReader])]
      : [await measure([kraneReader]), await measure([kubectlReader])];
    const krane = windows[0]?.readers[0] as Reader;
    const kubectl = (TOGETHER ? windows[0]?.readers[1] : windows[1]?.readers[0]) as Reader;
    const kraneCpu = windows[0]?.cpu as Map<string, { total: number; text: string }>;
    const kubectlCpu = windows.at(-1)?.cpu.get("kubectl logs") ?? { total: 0, text: "?" };
    const used = {
      agent: kraneCpu.get("agent") ?? { total: 0, text: "?" },
      ctrl: kraneCpu.get("ctrl") ?? { total: 0, text: "?" },
      cli: kraneCpu.get("krane logs") ?? { total: 0, text: "?" },
      kubectl: kubectlCpu,
    };
    const cpu = {
      agent: used.agent.total,
      ctrl: used.ctrl.total,
      cli: used.cli.total,
      kubectl: used.kubectl.total,
    };
    const net = Math.max(0, cpu.agent - idleRate * (WINDOW_MS / 1000));
    console.log(`  readers ${TOGETHER ? "together in one window" : "apart, each in a window of its own"}`);
    console.log(row("krane logs -f (agent → ctrl → CLI)", krane));
    console.log(row(`kubectl logs -f --max-log-requests ${N + 10}`, kubectl));
    console.log(
      `  CPU per 1,000 lines: agent ${perThousand(cpu.agent, krane.lines)} (${perThousand(net, krane.lines)} net of its ` +
        `${(idleRate * 1000).toFixed(0)} ms/s with no log read), ctrl ${perThousand(cpu.ctrl, krane.lines)}, ` +
        `krane logs ${perThousand(cpu.cli, krane.lines)}, kubectl logs ${perThousand(cpu.kubectl, kubectl.lines)} ` +
        `(agent ${used.agent.text}, ctrl ${used.ctrl.text}, krane logs ${used.cli.text}, kubectl ${used.kubectl.text} ` +
        `over ${WINDOW_MS / 1000} s); ${loads()}`,
    );
    for (const c of [agent, ctrl.child]) await stop(c);
  } finally {
    await cluster.stop();
  }
}

async function stop(c: ChildProcess): Promise<void> {
  if (c.exitCode !== null || c.signalCode !== null) return;
  const exited = new Promise((r) => c.once("exit", r));
  c.kill("SIGTERM");
  await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
  if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
}

export async function benchLogs(): Promise<void> {
  console.log(
    `logs: krane ${ensureBuild()}; ${N} instances × ${RATE} lines/s, ${WINDOW_MS / 1000} s window; ${loads()}`,
  );
  const dir = mkdtempSync(join(tmpdir(), "krane-bench-logs-"));
  const children: ChildProcess[] = [];
  try {
    if (PARTS.includes("path")) await pathPart(dir, children);
    if (PARTS.includes("real")) await realPart(dir, children);
    if (PROFILE) console.log(`  CPU profiles in ${PROFILE}`);
  } finally {
    for (const c of children.reverse()) await stop(c);
    rmSync(dir, { recursive: true, force: true });
  }
}

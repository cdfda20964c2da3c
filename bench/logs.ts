// Logs (`npm run bench -- logs`): from a line written in a container to the line printed by
// `krane logs -f`, with N instances (default 20) writing R lines/s each (default 200), and the
// same instances read by `kubectl logs -f` (its cap raised with --max-log-requests) in the same
// run; the CPU time of the agent and of ctrl (each a process of its own, as shipped) per 1,000
// lines relayed; and lines lost while the reader keeps up (each line is numbered per instance,
// so a gap is a lost line; it must be 0).
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { agentKubeConfigFrom } from "../src/agent/rbac.js";
import { createApiClients } from "../src/client/api.js";
import { ensureKubeAssets, startCluster } from "../src/cluster/index.js";
import { workloadImages } from "../src/cluster/images.js";
import { realNodeSupport } from "../src/cluster/nodes/host.js";
import { InstanceStatus } from "../src/gen/krane/ctrl/v1/cluster_pb.js";
import { generateToken } from "../src/ctrl/domain/tokens.js";
import { cpuSeconds, ensureBuild, freePort, KRANE_BIN, load, pct, ROOT, until } from "./support.js";

const N = Number(process.env.KRANE_BENCH_LOGS_INSTANCES ?? "20");
const RATE = Number(process.env.KRANE_BENCH_LOGS_RATE ?? "200");
const WINDOW_MS = Number(process.env.KRANE_BENCH_LOGS_SECONDS ?? "30") * 1000;

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
  /** Per pod, the numbers read in the window. */
  seqs: Map<string, number[]>;
  lines: number;
}

function read(child: ChildProcess, measuring: () => boolean): Reader {
  const r: Reader = { child, latency: [], seqs: new Map(), lines: 0 };
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (l) => {
    const m = /seq=(\d+) pod=(\S+) t=(\d+)/.exec(l);
    if (!m || !measuring()) return;
    r.latency.push(Date.now() - Number(m[3]));
    r.lines++;
    const pod = m[2] as string;
    const list = r.seqs.get(pod) ?? [];
    list.push(Number(m[1]));
    r.seqs.set(pod, list);
  });
  child.stderr?.on("data", (d: Buffer) => process.stderr.write(`  ${d.toString()}`));
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
  return `${what.padEnd(46)} p50 ${pct(s, 50).toFixed(0)} ms, p95 ${pct(s, 95).toFixed(0)} ms, p99 ${pct(s, 99).toFixed(0)} ms; ${r.lines} lines from ${r.seqs.size} instances, ${lost(r)} lost`;
}

export async function benchLogs(): Promise<void> {
  const support = await realNodeSupport();
  if (!support.ok) {
    console.log(`logs: skipped, this machine cannot run real nodes: ${support.reason}`);
    return;
  }
  console.log(`logs: krane ${ensureBuild()}; ${N} instances × ${RATE} lines/s, ${WINDOW_MS / 1000} s window`);
  const images = await workloadImages((l) => console.log(`  ${l}`));
  const cluster = await startCluster({ name: "bench-logs", realNodes: ["untrusted"], images: [images.hello] });
  const dir = mkdtempSync(join(tmpdir(), "krane-bench-logs-"));
  const children: ChildProcess[] = [];
  try {
    const token = generateToken("user");
    const port = await freePort();
    const ctrlUrl = `http://127.0.0.1:${port}`;
    const ctrl = spawn(
      process.execPath,
      [KRANE_BIN, "ctrl", "serve", "--database", join(dir, "ctrl.db"), "--listen", `127.0.0.1:${port}`],
      {
        cwd: ROOT,
        env: { ...process.env, KRANE_ADMIN_TOKEN: token, KRANE_OPS_LISTEN: "off", KRANE_LOG_LEVEL: "warn" },
        stdio: ["ignore", "inherit", "inherit"],
      },
    );
    children.push(ctrl);
    const api = createApiClients(ctrlUrl, token);
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
    const ref = { workspace: "bench", project: "logs", environment: "production" };
    await api.regions.createRegion({ name: "local" });
    const { token: agentToken } = await api.regions.createClusterToken({ region: "local", clusterName: "bench" });
    await api.workspaces.createWorkspace({ slug: ref.workspace });
    await api.projects.createProject({ workspace: ref.workspace, slug: ref.project });
    await api.environments.createEnvironment({
      workspace: ref.workspace,
      project: ref.project,
      slug: ref.environment,
      regions: [{ region: "local", replicas: N }],
      rollout: { maxSurge: "100%", maxUnavailable: "0" },
    });
    const kc = await agentKubeConfigFrom(cluster.kubeConfig(), 3600);
    const kubeconfig = join(dir, "agent.kubeconfig");
    writeFileSync(kubeconfig, kc.exportConfig(), { mode: 0o600 });
    const agent = spawn(
      process.execPath,
      [
        KRANE_BIN,
        "agent",
        "--ctrl-url",
        ctrlUrl,
        "--token",
        agentToken,
        "--region",
        "local",
        "--kubeconfig",
        kubeconfig,
        "--ops-port",
        String(await freePort()),
        "--log-level",
        "warn",
      ],
      { cwd: ROOT, stdio: ["ignore", "inherit", "inherit"] },
    );
    children.push(agent);
    await api.deployments.createDeployment({
      ...ref,
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
        const s = await api.status.getEnvironmentStatus(ref);
        const n = s.deployments[0]?.regions[0]?.instances.filter((i) => i.status === InstanceStatus.RUNNING).length;
        return n === N;
      },
      600_000,
      500,
    );
    console.log(`logs: ${N} instances running in ${((performance.now() - t0) / 1000).toFixed(0)} s (${load()})`);
    let measuring = false;
    const krane = read(
      spawn(process.execPath, [KRANE_BIN, "logs", "logs/production", "-f", "--tail", "0"], {
        cwd: ROOT,
        env: { ...process.env, KRANE_CTRL_URL: ctrlUrl, KRANE_TOKEN: token, KRANE_WORKSPACE: ref.workspace },
        stdio: ["ignore", "pipe", "pipe"],
      }),
      () => measuring,
    );
    children.push(krane.child);
    const kubectlBin = (await ensureKubeAssets()).bin.kubectl;
    const kubectl = read(
      spawn(
        kubectlBin,
        [
          "logs",
          "-f",
          "-n",
          "ws-bench",
          "-l",
          "app.kubernetes.io/component=deployment",
          "--max-log-requests",
          String(N + 10),
          "--tail",
          "0",
        ],
        { env: { ...process.env, KUBECONFIG: cluster.kubeconfigPath }, stdio: ["ignore", "pipe", "pipe"] },
      ),
      () => measuring,
    );
    children.push(kubectl.child);
    // Both readers attached to every instance before the window opens.
    await new Promise((r) => setTimeout(r, 5_000));
    const cpu0 = { agent: cpuSeconds(agent.pid ?? 0), ctrl: cpuSeconds(ctrl.pid ?? 0) };
    measuring = true;
    await new Promise((r) => setTimeout(r, WINDOW_MS));
    measuring = false;
    const cpu = { agent: cpuSeconds(agent.pid ?? 0) - cpu0.agent, ctrl: cpuSeconds(ctrl.pid ?? 0) - cpu0.ctrl };
    console.log(row("krane logs -f (agent → ctrl → CLI)", krane));
    console.log(row(`kubectl logs -f --max-log-requests ${N + 10}`, kubectl));
    const per = (s: number): string => `${((s / Math.max(1, krane.lines)) * 1000 * 1000).toFixed(0)} ms`;
    console.log(
      `CPU per 1,000 lines relayed: agent ${per(cpu.agent)}, ctrl ${per(cpu.ctrl)} (agent ${cpu.agent.toFixed(1)} s, ctrl ${cpu.ctrl.toFixed(1)} s over ${WINDOW_MS / 1000} s; ${load()})`,
    );
  } finally {
    for (const c of children.reverse()) if (c.exitCode === null) c.kill("SIGTERM");
    await new Promise((r) => setTimeout(r, 1_000));
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

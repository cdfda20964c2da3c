// Agent figures on the local cluster, with the agent running as a child process (`krane agent`,
// its least-privilege ServiceAccount) against a test ClusterService:
//  - 1,000 deployments committed at once: time until all 1,000 ReplicaSets exist, against
//    `kubectl apply --server-side` of the same 1,000 ReplicaSets in the same run;
//  - single-change propagation, ctrl commit → ReplicaSet changed (seen by a watch), p50/p99;
//  - one resync over 1,000 unchanged deployments: Kubernetes writes and ctrl requests;
//  - the agent's resident memory with 1,000 deployments of 2 pods each.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { create } from "@bufbuild/protobuf";
import { ApplyDeploymentSchema } from "../src/gen/krane/ctrl/v1/cluster_pb.js";
import { findKubeAssets, startCluster } from "../src/cluster/index.js";
import { renderReplicaSet } from "../src/agent/deployments/render.js";
import { Informer } from "../src/kube/informer.js";
import { silentLogger } from "../src/agent/runtime/log.js";
import { KubeClient } from "../src/kube/client.js";
import { resources } from "../src/kube/resources.js";
import { TestCtrl } from "../test/integration/agent/test-ctrl.js";
import { agentKubeConfig } from "../test/integration/agent/support.js";
import { sampleDeploymentInit } from "./agent-fixtures.js";

const N = Number(process.env.KRANE_BENCH_AGENT_N ?? 1000);
const REGION = "bench";

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const a = s.address();
      s.close(() => (typeof a === "object" && a ? resolve(a.port) : reject(new Error("no port"))));
    });
  });
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number, stepMs = 20): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`bench: timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

async function metricSum(opsUrl: string, name: string, filter: (labels: string) => boolean = () => true): Promise<number> {
  const text = await (await fetch(`${opsUrl}/metrics`)).text();
  let sum = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$/.exec(line);
    if (m && m[1] === name && filter(m[2] ?? "")) sum += Number(m[3]);
  }
  return sum;
}

export async function benchAgent(): Promise<void> {
  const assets = await findKubeAssets();
  const kubectl = assets?.bin.kubectl;
  const cluster = await startCluster({ name: "bench-agent" });
  const dir = mkdtempSync(join(tmpdir(), "krane-bench-agent-"));
  const ctrl = new TestCtrl();
  const admin = new KubeClient(cluster.kubeConfig(), { fieldManager: "bench" });
  const watchAbort = new AbortController();
  let child: ReturnType<typeof spawn> | undefined;
  try {
    // --- kubectl baseline: the same 1,000 ReplicaSets, server-side applied in one run.
    if (kubectl) {
      await admin.create(resources.namespaces, { metadata: { name: "bench-kubectl" } });
      const docs = [];
      for (let i = 0; i < N; i++) {
        docs.push(stringify(renderReplicaSet(create(ApplyDeploymentSchema, sampleDeploymentInit(i, "bench-kubectl", 0)), "kubectl")));
      }
      const file = join(dir, "replicasets.yaml");
      writeFileSync(file, docs.join("---\n"));
      const t = performance.now();
      const r = spawnSync(kubectl, ["--kubeconfig", cluster.kubeconfigPath, "apply", "--server-side", "--field-manager", "kubectl-bench", "-f", file], {
        encoding: "utf8",
        maxBuffer: 64 << 20,
      });
      const ms = performance.now() - t;
      if (r.status !== 0) throw new Error(`kubectl failed: ${r.stderr.slice(0, 500)}`);
      console.log(`agent: kubectl apply --server-side ${N} ReplicaSets   ${(ms / 1000).toFixed(2)} s`);
    } else {
      console.log("agent: kubectl not found in the build cache; baseline skipped");
    }

    // --- the agent, as a child process with its ServiceAccount's kubeconfig.
    const kc = await agentKubeConfig(cluster);
    const kubeconfig = join(dir, "agent.kubeconfig");
    writeFileSync(kubeconfig, kc.exportConfig());
    await ctrl.start();
    const opsPort = await freePort();
    const opsUrl = `http://127.0.0.1:${opsPort}`;
    child = spawn(
      process.execPath,
      ["--import", "tsx", "agent-only.mts", "agent", "--ctrl-url", ctrl.url, "--token", ctrl.token, "--region", REGION,
        "--kubeconfig", kubeconfig, "--ops-port", String(opsPort), "--resync-period", "15", "--kube-qps", "1000",
        "--concurrency", "32", "--log-level", "warn"],
      { stdio: ["ignore", "inherit", "inherit"] },
    );
    await until("agent ready", async () => (await fetch(`${opsUrl}/readyz`).then((r) => r.status, () => 0)) === 200, 120_000, 200);

    // An admin watch sees ReplicaSets as they land.
    const seen = new Map<string, unknown>();
    const waiters = new Set<() => void>();
    const rsCache = new Informer({ resource: resources.replicaSets, labelSelector: `krane.dev/region=${REGION}`, client: admin, log: silentLogger });
    rsCache.onChange((type, o) => {
      const key = o.metadata.name ?? "";
      if (type === "deleted") seen.delete(key);
      else seen.set(key, o.spec);
      for (const w of [...waiters]) w();
    });
    void rsCache.run(watchAbort.signal);
    await rsCache.waitSynced();

    // --- 1,000 deployments at once.
    const t0 = performance.now();
    for (let i = 0; i < N; i++) ctrl.applyDeployment(REGION, sampleDeploymentInit(i, "bench-krane", 0));
    await until(`${N} ReplicaSets`, () => seen.size >= N, 300_000, 5);
    console.log(`agent: krane ${N} deployments → ${N} ReplicaSets      ${((performance.now() - t0) / 1000).toFixed(2)} s`);

    // --- single-change propagation (env change on a 0-replica deployment: pure API path).
    const lat: number[] = [];
    for (let i = 0; i < 200; i++) {
      const value = `v${i}`;
      const done = new Promise<void>((resolve) => {
        const check = (): void => {
          const spec = seen.get("bench-0");
          if (JSON.stringify(spec).includes(`"value":"${value}"`)) {
            waiters.delete(check);
            resolve();
          }
        };
        waiters.add(check);
      });
      const t = performance.now();
      ctrl.applyDeployment(REGION, { deploymentId: "bench_0", env: [{ $typeName: "krane.ctrl.v1.EnvVar", name: "GREETING", value }] });
      await done;
      lat.push(performance.now() - t);
    }
    lat.sort((a, b) => a - b);
    console.log(
      `agent: change propagation ctrl→ReplicaSet      p50 ${pct(lat, 50).toFixed(1)} ms, p90 ${pct(lat, 90).toFixed(1)} ms, p99 ${pct(lat, 99).toFixed(1)} ms (200 changes)`,
    );

    // --- one resync over 1,000 unchanged deployments.
    const writes = (): Promise<number> => metricSum(opsUrl, "krane_agent_kube_requests_total", (l) => /verb="(apply|create|delete)"/.test(l));
    const resyncs = (): Promise<number> => metricSum(opsUrl, "krane_agent_resyncs_total", (l) => l.includes('result="ok"') && l.includes('controller="deployments"'));
    // Read the counters right after a pass completes (the next one is a full period away), then
    // again after the following pass: the difference is exactly one pass.
    const r0 = await resyncs();
    await until("a resync to complete", async () => (await resyncs()) > r0, 60_000, 50);
    const r1 = await resyncs();
    const w0 = await writes();
    const c0 = ctrl.count("getDesiredDeploymentStates");
    await until("one more resync", async () => (await resyncs()) > r1, 60_000, 50);
    const dw = (await writes()) - w0;
    const dc = ctrl.count("getDesiredDeploymentStates") - c0;
    console.log(`agent: resync of ${N} unchanged deployments      ${dw} Kubernetes writes, ${dc} GetDesiredDeploymentStates calls`);

    // --- memory with 1,000 deployments × 2 pods.
    for (let i = 0; i < N; i++) ctrl.applyDeployment(REGION, { deploymentId: `bench_${i}`, replicas: 2 });
    const reported = (): number => {
      let n = 0;
      for (let i = 0; i < N; i++) if ((ctrl.deploymentReports.get(`bench_${i}`)?.instances?.length ?? 0) >= 2) n++;
      return n;
    };
    const t2 = performance.now();
    try {
      await until("2,000 instances reported", () => reported() >= N, 600_000, 500);
      console.log(`agent: 2,000 pods scheduled, running, reported  ${((performance.now() - t2) / 1000).toFixed(1)} s`);
    } catch {
      console.log(`agent: only ${reported()} of ${N} deployments had 2 instances reported after 10 min`);
    }
    const status = readFileSync(`/proc/${child.pid}/status`, "utf8");
    const rss = /VmRSS:\s+(\d+) kB/.exec(status)?.[1];
    const heap = await metricSum(opsUrl, "nodejs_heap_size_used_bytes");
    console.log(`agent: resident memory, ${N} deployments × 2 pods   ${rss ? (Number(rss) / 1024).toFixed(0) : "?"} MiB RSS (${(heap / 1048576).toFixed(0)} MiB heap used)`);
    const dedup = await metricSum(opsUrl, "krane_agent_reports_deduplicated_total");
    const sent = await metricSum(opsUrl, "krane_agent_reports_total");
    console.log(`agent: status reports sent / deduplicated       ${sent} / ${dedup}`);
  } finally {
    watchAbort.abort();
    if (child && child.exitCode === null) {
      child.kill("SIGTERM");
      await new Promise((r) => child?.once("exit", r));
    }
    await ctrl.stop();
    admin.close();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await benchAgent();


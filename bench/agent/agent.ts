// Agent figures at any size: `KRANE_BENCH_AGENT_N=10000 npm run bench -- agent` (default 1,000).
// The agent runs as shipped (`node bin/krane.js agent`, the compiled dist/, with its
// least-privilege ServiceAccount and the runtime settings the Helm chart gives it: NODE_OPTIONS,
// MALLOC_ARENA_MAX) against a test ClusterService, on a local cluster whose untrusted pool is
// sized for 2 × N pods (planForPods). KRANE_BENCH_AGENT_NODE_ARGS adds Node.js options (to try
// V8 flags). In one run:
//  - bulk apply: N deployments committed at once → N ReplicaSets (seen by a watch), against
//    `kubectl apply --server-side` of the same N ReplicaSets in the same cluster, as admin and
//    as the agent's ServiceAccount (under the same admission fence as the agent);
//  - single-change propagation, ctrl commit → ReplicaSet changed (seen by a watch), p50/p99,
//    next to the cluster's own apply → watch latency for the same change;
//  - one resync over N unchanged deployments: Kubernetes writes and ctrl requests;
//  - every deployment to 2 replicas: how long the cluster itself takes to get 2 × N pods Running
//    (a watch on pods) next to how long until krane has reported 2 Running instances for all;
//  - status reports computed, sent and deduplicated; agent RSS, heap and CPU time, and the
//    heap each cached deployment and pod costs; the control plane's CPU during the scale-up.
// Every line carries the machine's 1-minute load average: the machine may be shared.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments, stringify } from "yaml";
import { create } from "@bufbuild/protobuf";
import { ApplyDeploymentSchema, InstanceStatus } from "../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { ensureHelm, findKubeAssets, planForPods, startCluster, type LocalCluster } from "../../src/cluster/index.js";
import { regionSelector } from "../../src/contracts/labels.js";
import { renderDeployment, renderReplicaSet } from "../../src/agent/deployments/render.js";
import { Informer } from "../../src/kube/informer.js";
import { silentLogger } from "../../src/base/log.js";
import { KubeClient } from "../../src/kube/client.js";
import { isRecord, type KubeObject } from "../../src/kube/object.js";
import { resources } from "../../src/kube/resources.js";
import { TestCtrl } from "../../test/integration/agent/test-ctrl.js";
import { agentKubeConfig } from "../../test/integration/agent/support.js";
import { sampleDeploymentInit, SAMPLE_POD_REQUEST } from "./agent-fixtures.js";
import {
  cpuSeconds,
  ensureBuild,
  fmtS,
  freePort,
  KRANE_BIN,
  load,
  metricSum,
  pct,
  ROOT,
  rssMiB,
  until,
} from "../support.js";

const N = Number(process.env.KRANE_BENCH_AGENT_N ?? 1000);
const REGION = "bench";
const PROPAGATION_CHANGES = 200;

function line(what: string, figure: string): void {
  console.log(`agent: ${what.padEnd(58)} ${figure}   (${load()})`);
}

/** MiB spread over `n` objects, in KiB each. */
function kib(mib: number, n: number): string {
  return ((mib * 1024) / n).toFixed(1);
}

/** The lowest heap-used sample over `ms` (the floor of V8's sawtooth: what is live, not garbage). */
async function heapFloorMiB(opsUrl: string, ms = 3000): Promise<number> {
  let floor = Infinity;
  const end = Date.now() + ms;
  while (Date.now() < end) {
    floor = Math.min(floor, await metricSum(opsUrl, "nodejs_heap_size_used_bytes"));
    await new Promise((r) => setTimeout(r, 100));
  }
  return floor / 1048576;
}

/** The environment variables of the Helm chart's agent container that set up its runtime. */
const RUNTIME_ENV = ["NODE_OPTIONS", "MALLOC_ARENA_MAX"];

/**
 * The agent's runtime settings as the Helm chart sets them with its default values (V8's heap
 * limit and young generation, glibc's malloc arenas), so the agent runs with what ships.
 */
async function chartRuntimeEnv(): Promise<Record<string, string>> {
  const helm = (await ensureHelm()).bin;
  const r = spawnSync(
    helm,
    [
      "template",
      "krane",
      join(ROOT, "deploy/helm/krane"),
      "--namespace",
      "krane-system",
      "--set",
      "agent.enabled=true",
      "--set",
      `agent.region=${REGION}`,
      "--set",
      "agent.token.value=bench",
      "--show-only",
      "templates/agent-deployment.yaml",
    ],
    { encoding: "utf8" },
  );
  if (r.status !== 0) throw new Error(`helm template failed: ${r.stderr.slice(0, 500)}`);
  const out: Record<string, string> = {};
  for (const doc of parseAllDocuments(r.stdout)) {
    const d: unknown = doc.toJS();
    const spec = isRecord(d) && isRecord(d.spec) && isRecord(d.spec.template) ? d.spec.template.spec : undefined;
    const containers = isRecord(spec) && Array.isArray(spec.containers) ? spec.containers : [];
    for (const c of containers) {
      const env: unknown[] = isRecord(c) && Array.isArray(c.env) ? c.env : [];
      for (const e of env)
        if (isRecord(e) && typeof e.name === "string" && RUNTIME_ENV.includes(e.name) && typeof e.value === "string")
          out[e.name] = e.value;
    }
  }
  if (out.NODE_OPTIONS === undefined) throw new Error("the chart's agent Deployment sets no NODE_OPTIONS");
  return out;
}

/** CPU seconds of the cluster's processes, by component. */
function clusterCpu(cluster: LocalCluster): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, pid] of Object.entries(cluster.state.pids)) if (pid !== undefined) out[name] = cpuSeconds(pid);
  return out;
}

/** A pod reduced to what the bench counts: Running with its containers ready (krane's RUNNING). */
function podRunning(p: KubeObject): KubeObject {
  const status = isRecord(p.status) ? p.status : {};
  const conditions = Array.isArray(status.conditions) ? status.conditions : [];
  const ready = conditions.some((c) => isRecord(c) && c.type === "ContainersReady" && c.status === "True");
  return {
    metadata: { name: p.metadata.name, namespace: p.metadata.namespace, resourceVersion: p.metadata.resourceVersion },
    running: status.phase === "Running" && ready,
  };
}

/** The ReplicaSet specs a watch has seen, by name; wakes whoever waits for a change. */
class SeenSpecs {
  readonly #specs = new Map<string, string>();
  readonly #waiters = new Set<() => void>();

  get size(): number {
    return this.#specs.size;
  }

  saw(type: string, o: KubeObject): void {
    const name = o.metadata.name ?? "";
    if (type === "deleted") this.#specs.delete(name);
    else this.#specs.set(name, JSON.stringify(o.spec));
    for (const w of [...this.#waiters]) w();
  }

  /** Resolves once ReplicaSet `name`'s spec carries the env value `value`. */
  carries(name: string, value: string): Promise<void> {
    return new Promise<void>((resolve) => {
      const check = (): void => {
        if ((this.#specs.get(name) ?? "").includes(`"value":"${value}"`)) {
          this.#waiters.delete(check);
          resolve();
        }
      };
      this.#waiters.add(check);
      check();
    });
  }
}

/** Times `n` changes of ReplicaSet bench-0's env value (`apply` makes one) until `seen` has it; sorted, ms. */
async function timeChanges(
  n: number,
  prefix: string,
  seen: SeenSpecs,
  apply: (value: string) => Promise<unknown> | void,
): Promise<number[]> {
  const lat: number[] = [];
  for (let i = 0; i < n; i++) {
    const value = `${prefix}${i}`;
    const done = seen.carries("bench-0", value);
    const t = performance.now();
    await apply(value);
    await done;
    lat.push(performance.now() - t);
  }
  return lat.sort((a, b) => a - b);
}

function latencies(lat: number[]): string {
  return `p50 ${pct(lat, 50).toFixed(1)} ms, p90 ${pct(lat, 90).toFixed(1)} ms, p99 ${pct(lat, 99).toFixed(1)} ms`;
}

/**
 * The API server's apply → watch latency for the propagation test's change (a new env value on
 * ReplicaSet bench-0 of a kubectl baseline in `namespace`), applied `n` times by `writer`, seen
 * by an admin watch; sorted.
 */
async function applyToWatchLatency(
  admin: KubeClient,
  writer: KubeClient,
  namespace: string,
  region: string,
  n: number,
): Promise<number[]> {
  const abort = new AbortController();
  const seen = new SeenSpecs();
  const inf = new Informer({
    resource: resources.replicaSets,
    labelSelector: regionSelector(region),
    namespace,
    client: admin,
    log: silentLogger,
  });
  inf.onChange((type, o) => seen.saw(type, o));
  void inf.run(abort.signal);
  await inf.waitSynced();
  try {
    return await timeChanges(n, "floor", seen, (value) =>
      writer.apply(
        resources.replicaSets,
        renderReplicaSet(
          create(ApplyDeploymentSchema, {
            ...sampleDeploymentInit(0, namespace, 0),
            env: [{ name: "GREETING", value }],
          }),
          region,
        ),
        { force: true },
      ),
    );
  } finally {
    abort.abort();
  }
}

export async function benchAgent(): Promise<void> {
  const build = ensureBuild();
  const assets = await findKubeAssets();
  const kubectl = assets?.bin.kubectl;
  const plan = planForPods(2 * N, SAMPLE_POD_REQUEST);
  const cap = plan.capacity?.untrusted;
  line(`N = ${N}; agent build`, build);
  line(
    `cluster sized for ${2 * N} pods`,
    `${plan.untrusted * 3} untrusted nodes × ${cap?.cpu} CPU, ${cap?.memoryGi} GiB, ${cap?.pods} pods`,
  );
  const cluster = await startCluster({ name: "bench-agent", nodes: plan });
  const dir = mkdtempSync(join(tmpdir(), "krane-bench-agent-"));
  const ctrl = new TestCtrl();
  const admin = new KubeClient(cluster.kubeConfig(), { fieldManager: "bench", qps: 0 });
  const watchAbort = new AbortController();
  let child: ReturnType<typeof spawn> | undefined;
  try {
    // --- kubectl baseline: the same N ReplicaSets, server-side applied in one run.
    let kubectlMs = NaN;
    if (kubectl) {
      await admin.create(resources.namespaces, { metadata: { name: "bench-kubectl" } });
      const docs = [];
      for (let i = 0; i < N; i++) {
        docs.push(
          stringify(
            renderReplicaSet(create(ApplyDeploymentSchema, sampleDeploymentInit(i, "bench-kubectl", 0)), "kubectl"),
          ),
        );
      }
      const file = join(dir, "replicasets.yaml");
      writeFileSync(file, docs.join("---\n"));
      const t = performance.now();
      const r = spawnSync(
        kubectl,
        [
          "--kubeconfig",
          cluster.kubeconfigPath,
          "apply",
          "--server-side",
          "--field-manager",
          "kubectl-bench",
          "-f",
          file,
        ],
        {
          encoding: "utf8",
          maxBuffer: 256 << 20,
        },
      );
      kubectlMs = performance.now() - t;
      if (r.status !== 0) throw new Error(`kubectl failed: ${r.stderr.slice(0, 500)}`);
      line(`kubectl apply --server-side ${N} ReplicaSets`, fmtS(kubectlMs));
    } else {
      console.log("agent: kubectl not found in the build cache; baseline skipped");
    }

    // --- the agent, as shipped, with its ServiceAccount's kubeconfig.
    const kc = await agentKubeConfig(cluster);
    const kubeconfig = join(dir, "agent.kubeconfig");
    writeFileSync(kubeconfig, kc.exportConfig());

    // --- kubectl as the agent's ServiceAccount: the same N ReplicaSets as krane renders them,
    // into a workspace namespace, under the admission fence the agent's writes go through
    // (kubectl as admin above is not fenced): tells krane's own cost from the fence's.
    let fencedMs = NaN;
    if (kubectl) {
      const ns = "bench-kubectl-fenced";
      const region = "kubectl-fenced"; // not the watched region: these do not count as krane's
      await admin.create(
        resources.namespaces,
        renderDeployment(create(ApplyDeploymentSchema, sampleDeploymentInit(0, ns, 0)), region).namespace,
      );
      const docs = [];
      for (let i = 0; i < N; i++)
        docs.push(stringify(renderReplicaSet(create(ApplyDeploymentSchema, sampleDeploymentInit(i, ns, 0)), region)));
      const file = join(dir, "replicasets-fenced.yaml");
      writeFileSync(file, docs.join("---\n"));
      const t = performance.now();
      const r = spawnSync(
        kubectl,
        ["--kubeconfig", kubeconfig, "apply", "--server-side", "--field-manager", "kubectl-bench", "-f", file],
        { encoding: "utf8", maxBuffer: 256 << 20 },
      );
      fencedMs = performance.now() - t;
      if (r.status !== 0) throw new Error(`kubectl as the agent failed: ${r.stderr.slice(0, 500)}`);
      line(`kubectl apply --server-side ${N} ReplicaSets as the agent (fenced)`, fmtS(fencedMs));
    }
    await ctrl.start();
    const opsPort = await freePort();
    const opsUrl = `http://127.0.0.1:${opsPort}`;
    const extraArgs = (process.env.KRANE_BENCH_AGENT_NODE_ARGS ?? "").split(" ").filter(Boolean);
    const runtimeEnv = await chartRuntimeEnv();
    line(
      "agent runtime settings (the Helm chart's)",
      `${Object.entries(runtimeEnv)
        .map(([k, v]) => `${k}=${v}`)
        .join(" ")}${extraArgs.length > 0 ? `, then ${extraArgs.join(" ")}` : ""}`,
    );
    child = spawn(
      process.execPath,
      [
        ...extraArgs,
        KRANE_BIN,
        "agent",
        "--ctrl-url",
        ctrl.url,
        "--token",
        ctrl.token,
        "--region",
        REGION,
        "--kubeconfig",
        kubeconfig,
        "--ops-port",
        String(opsPort),
        "--resync-period",
        "15",
        "--kube-qps",
        "1000",
        "--concurrency",
        "32",
        "--log-level",
        "warn",
      ],
      { cwd: ROOT, stdio: ["ignore", "inherit", "inherit"], env: { ...process.env, ...runtimeEnv } },
    );
    const pid = child.pid ?? 0;
    await until(
      "agent ready",
      async () =>
        (await fetch(`${opsUrl}/readyz`).then(
          (r) => r.status,
          () => 0,
        )) === 200,
      120_000,
      200,
    );
    const heapIdle = await heapFloorMiB(opsUrl);
    const rssIdle = rssMiB(pid);
    line("agent ready, empty caches", `${rssIdle.toFixed(0)} MiB RSS, ${heapIdle.toFixed(1)} MiB heap`);

    // An admin watch sees ReplicaSets as they land.
    const seen = new SeenSpecs();
    const rsCache = new Informer({
      resource: resources.replicaSets,
      labelSelector: regionSelector(REGION),
      client: admin,
      log: silentLogger,
    });
    rsCache.onChange((type, o) => seen.saw(type, o));
    void rsCache.run(watchAbort.signal);
    await rsCache.waitSynced();

    // --- N deployments at once.
    const cpu0 = cpuSeconds(pid);
    const t0 = performance.now();
    for (let i = 0; i < N; i++) ctrl.applyDeployment(REGION, sampleDeploymentInit(i, "bench-krane", 0));
    await until(`${N} ReplicaSets`, () => seen.size >= N, 1_800_000, 5);
    const bulkMs = performance.now() - t0;
    line(
      `krane ${N} deployments → ${N} ReplicaSets`,
      `${fmtS(bulkMs)}${Number.isFinite(kubectlMs) ? ` = ${(bulkMs / kubectlMs).toFixed(2)}× kubectl` : ""}${Number.isFinite(fencedMs) ? `, ${(bulkMs / fencedMs).toFixed(2)}× kubectl as the agent` : ""}; agent CPU ${(cpuSeconds(pid) - cpu0).toFixed(1)} s`,
    );

    // --- single-change propagation (env change on a 0-replica deployment: pure API path), in
    // steady state: once the agent's work queues are empty and it has stopped sending reports
    // (three samples 500 ms apart), so that a change does not queue behind the bulk apply's tail.
    const settleStart = performance.now();
    let idleSamples = 0;
    let lastReports = -1;
    await until(
      "the agent to settle after the bulk apply",
      async () => {
        const queued = await metricSum(opsUrl, "krane_agent_queue_keys");
        const reports = await metricSum(opsUrl, "krane_agent_reports_total");
        idleSamples = queued === 0 && reports === lastReports ? idleSamples + 1 : 0;
        lastReports = reports;
        return idleSamples >= 3;
      },
      1_800_000,
      500,
    );
    line(
      "agent settled after the bulk apply (queues empty, no reports)",
      `${fmtS(performance.now() - settleStart)} later`,
    );
    const lat = await timeChanges(PROPAGATION_CHANGES, "v", seen, (value) => {
      ctrl.applyDeployment(REGION, {
        deploymentId: "bench_0",
        env: [{ $typeName: "krane.ctrl.v1.EnvVar", name: "GREETING", value }],
      });
    });
    line(`change propagation ctrl → ReplicaSet (${PROPAGATION_CHANGES} changes)`, latencies(lat));
    if (kubectl) {
      // The cluster's own share: the same change server-side applied straight to the API server
      // (one of kubectl's ReplicaSets) → seen by a watch, as admin and as the agent's
      // ServiceAccount (through the admission fence, as the agent's writes go). krane's figure
      // above adds ctrl's stream and the agent to the second.
      const floors: [string, number[]][] = [
        ["as admin", await applyToWatchLatency(admin, admin, "bench-kubectl", "kubectl", PROPAGATION_CHANGES)],
        [
          "as the agent (fenced)",
          await applyToWatchLatency(
            admin,
            new KubeClient(kc, { fieldManager: "bench", qps: 0 }),
            "bench-kubectl-fenced",
            "kubectl-fenced",
            PROPAGATION_CHANGES,
          ),
        ],
      ];
      for (const [who, floor] of floors)
        line(`the cluster alone: apply ${who} → watch (${PROPAGATION_CHANGES})`, latencies(floor));
    }

    // --- one resync over N unchanged deployments.
    const writes = (): Promise<number> =>
      metricSum(
        opsUrl,
        "krane_agent_kube_requests_total",
        (l) => /verb="(apply|create|delete)"/.test(l) && !l.includes('resource="leases"'),
      );
    const resyncs = (): Promise<number> =>
      metricSum(
        opsUrl,
        "krane_agent_resyncs_total",
        (l) => l.includes('result="ok"') && l.includes('controller="deployments"'),
      );
    // Read the counters right after a pass completes (the next one is a full period away), then
    // again after the following pass: the difference is exactly one pass.
    const r0 = await resyncs();
    await until("a resync to complete", async () => (await resyncs()) > r0, 120_000, 50);
    const r1 = await resyncs();
    const w0 = await writes();
    const c0 = ctrl.count("getDesiredDeploymentStates");
    const cpuR = cpuSeconds(pid);
    await until("one more resync", async () => (await resyncs()) > r1, 120_000, 50);
    const dw = (await writes()) - w0;
    const dc = ctrl.count("getDesiredDeploymentStates") - c0;
    line(
      `idle resync of ${N} unchanged deployments`,
      `${dw} Kubernetes writes, ${dc} GetDesiredDeploymentStates calls, agent CPU ${(cpuSeconds(pid) - cpuR).toFixed(1)} s per period`,
    );

    const heapRs = await heapFloorMiB(opsUrl);
    const rssRs = rssMiB(pid);
    line(
      `memory, ${N} deployments at 0 replicas`,
      `${rssRs.toFixed(0)} MiB RSS, ${heapRs.toFixed(1)} MiB heap used; per deployment ${kib(rssRs - rssIdle, N)} KiB RSS, ${kib(heapRs - heapIdle, N)} KiB heap`,
    );

    // --- every deployment to 2 replicas: the cluster's own time to Running vs krane's reports.
    let running = 0;
    let clusterDoneAt = 0;
    const podCache = new Informer({
      resource: resources.pods,
      labelSelector: regionSelector(REGION),
      client: admin,
      log: silentLogger,
      transform: podRunning,
    });
    let t2 = 0;
    podCache.onChange((type, o, old) => {
      const was = old?.running === true;
      const is = type !== "deleted" && o.running === true;
      running += (is ? 1 : 0) - (was ? 1 : 0);
      if (running >= 2 * N && clusterDoneAt === 0 && t2 > 0) clusterDoneAt = performance.now();
    });
    void podCache.run(watchAbort.signal);
    await podCache.waitSynced();
    const reported = (): number => {
      let n = 0;
      for (let i = 0; i < N; i++) {
        const inst = ctrl.deploymentReports.get(`bench_${i}`)?.instances ?? [];
        if (inst.length === 2 && inst.every((x) => x.status === InstanceStatus.RUNNING)) n++;
      }
      return n;
    };
    const reportsBefore = {
      computed: await metricSum(opsUrl, "krane_agent_reports_computed_total", (l) =>
        l.includes('controller="deployments"'),
      ),
      sent: await metricSum(opsUrl, "krane_agent_reports_total", (l) => l.includes('controller="deployments"')),
      dedup: await metricSum(opsUrl, "krane_agent_reports_deduplicated_total", (l) =>
        l.includes('controller="deployments"'),
      ),
    };
    const cpuA = cpuSeconds(pid);
    const cpuCluster = clusterCpu(cluster);
    t2 = performance.now();
    for (let i = 0; i < N; i++) ctrl.applyDeployment(REGION, { deploymentId: `bench_${i}`, replicas: 2 });
    let kraneDoneAt = 0;
    try {
      await until(`${2 * N} instances reported Running`, () => reported() >= N, Math.max(900_000, N * 180), 50);
      kraneDoneAt = performance.now();
    } catch {
      console.log(
        `agent: only ${reported()} of ${N} deployments had 2 Running instances reported; ${running} of ${2 * N} pods Running`,
      );
    }
    if (kraneDoneAt > 0 && clusterDoneAt > 0) {
      const clusterMs = clusterDoneAt - t2;
      const kraneMs = kraneDoneAt - t2;
      line(`replicas 2 for all → ${2 * N} pods Running (the cluster, a watch)`, fmtS(clusterMs));
      line(
        `replicas 2 for all → all ${2 * N} reported Running (krane)`,
        `${fmtS(kraneMs)} = ${(kraneMs / clusterMs).toFixed(2)}× the cluster`,
      );
    }
    const cpuAgent = cpuSeconds(pid) - cpuA;
    const after = clusterCpu(cluster);
    const parts = Object.entries(after).map(([k, v]) => `${k} ${(v - (cpuCluster[k] ?? 0)).toFixed(0)}`);
    line("CPU seconds during the scale-up", `agent ${cpuAgent.toFixed(0)}; ${parts.join(", ")}`);
    const computed =
      (await metricSum(opsUrl, "krane_agent_reports_computed_total", (l) => l.includes('controller="deployments"'))) -
      reportsBefore.computed;
    const sent =
      (await metricSum(opsUrl, "krane_agent_reports_total", (l) => l.includes('controller="deployments"'))) -
      reportsBefore.sent;
    const dedup =
      (await metricSum(opsUrl, "krane_agent_reports_deduplicated_total", (l) =>
        l.includes('controller="deployments"'),
      )) - reportsBefore.dedup;
    line(
      "status reports in the scale-up: computed / sent / deduplicated",
      `${computed} / ${sent} / ${dedup} = ${(computed / sent).toFixed(2)} computed per sent`,
    );

    const heapPods = await heapFloorMiB(opsUrl);
    const rssPods = rssMiB(pid);
    line(
      `memory, ${N} deployments × 2 pods`,
      `${rssPods.toFixed(0)} MiB RSS, ${heapPods.toFixed(1)} MiB heap used; per deployment with its pods ${kib(rssPods - rssIdle, N)} KiB RSS, ${kib(heapPods - heapIdle, N)} KiB heap`,
    );
    line("agent CPU time, whole run", `${cpuSeconds(pid).toFixed(0)} s`);
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

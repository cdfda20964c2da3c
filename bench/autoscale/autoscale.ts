// Autoscaling (`npm run bench -- autoscale`), in one run on this machine:
//  - cold start from zero on real nodes (gVisor, the image already on the node): an environment
//    asleep at 0 replicas gets one request through its sentinel; the time to the first byte of
//    that held request's answer, p50/p99 over KRANE_BENCH_AUTOSCALE_RUNS runs (default 30), next
//    to the kubelet's own pod start in the same run (a bare Pod of the same image, RuntimeClass and
//    probe posted to the API server, until it answers), and the request's time split into the steps
//    between (bench/autoscale/cold-timeline.ts). Several environments take turns, so each
//    can sit out its idle window (30 s at least) while the others are measured;
//  - reaction to a load step: 8 clients keep slow requests in flight (concurrency target 2, max
//    4): the time until 4 instances answer through the sentinel;
//  - the sentinel's throughput (wrk, 64 connections) with the autoscaling measurements on — a
//    hold policy in force, /status read 10 times a second and a wake long-poll open, as the agent
//    does — and off (no policy, nobody reading), alternating, with requests per CPU-second. The
//    request path's own share (one timestamp kept per request, the in-flight counts the balancer
//    keeps anyway) cannot be switched off; what is compared is what an autoscaled environment
//    costs its sentinel.
// Every figure prints the machine's load average: figures at high load are not comparable.
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { request } from "undici";
import { Agent } from "../../src/agent/agent.js";
import { agentKubeConfigFrom } from "../../src/agent/rbac.js";
import { createApiClients } from "../../src/client/node.js";
import { startCluster } from "../../src/cluster/index.js";
import { workloadImages } from "../../src/cluster/images.js";
import { getJson, kubeRequest } from "../../src/cluster/kube-http.js";
import { realNodeSupport } from "../../src/cluster/nodes/host.js";
import { localAddress } from "../../src/cluster/pod-network.js";
import { SENTINEL_NAMESPACE, SENTINEL_PORT } from "../../src/contracts/cluster.js";
import { formatRoutingPolicy, POLICY_KEY } from "../../src/contracts/routing.js";
import { KubeClient } from "../../src/kube/client.js";
import { resources } from "../../src/kube/resources.js";
import { applySentinelRbac } from "../../src/sentinel/rbac.js";
import { bareNamespace, barePodSpec } from "../bare-pods.js";
import { ColdTimeline, MILESTONES, type Milestone } from "./cold-timeline.js";
import { nodePhases, type StartKind } from "./node-phases.js";
import { ensureTools, NGINX, WRK } from "../tools.js";
import { ENV, labels, startNginx, startSentinel, writeSlice, wrk } from "../sentinel/sentinel.js";
import { startTestCtrl } from "../../test/integration/ctrl/support.js";
import { cpuSeconds, freePort, load, pct, until } from "../support.js";

const RUNS = Number(process.env.KRANE_BENCH_AUTOSCALE_RUNS ?? "30");
/** Environments taking turns at sleeping (each needs its idle window between two of its runs). */
const ENVS = Number(process.env.KRANE_BENCH_AUTOSCALE_ENVS ?? "10");
const IDLE_S = 30;
/** Alternations of the throughput runs (off, on). */
const ROUNDS = Number(process.env.KRANE_BENCH_AUTOSCALE_ROUNDS ?? "5");
/** Rounds of the traced bare Pods (one start of every kind of PHASE_KINDS each). */
const PHASE_RUNS = Number(process.env.KRANE_BENCH_AUTOSCALE_PHASE_RUNS ?? "5");
/**
 * The kinds of start traced below Kubernetes, in the same rounds: runc and gVisor as krane runs
 * them, gVisor with runsc's debug logs (its own steps; the logging costs time itself), and the
 * lever the trace points at.
 */
const PHASE_KINDS: readonly StartKind[] = [
  { label: "runc, 100m", cpu: "100m" },
  { label: "gVisor, 100m", runtimeClassName: "gvisor", cpu: "100m" },
  { label: "gVisor traced, 100m", runtimeClassName: "gvisor", cpu: "100m", traced: true },
  // The trace's finding: the sandbox's own start (sentry, gofer, seccomp) runs in the pod's CPU
  // cgroup and is throttled by the app's limit; the lever is CPU while it starts.
  { label: "runc, 500m", cpu: "500m" },
  { label: "gVisor, 500m", runtimeClassName: "gvisor", cpu: "500m" },
  // The same CPU for the sandbox the Kubernetes way: the RuntimeClass's pod overhead raises the
  // pod cgroup's limit (where the sentry and gofer run), the container keeps its 100m.
  { label: "gVisor, 100m + 400m overhead", runtimeClassName: "gvisor", cpu: "100m", overheadCpu: "400m" },
  // What krane ships for it: the agent's startup CPU boost, a whole core until Ready (pods/resize).
  { label: "gVisor, 100m boosted to 1000m until Ready", runtimeClassName: "gvisor", cpu: "100m", boostCpu: "1000m" },
  { label: "gVisor, 500m boosted to 1000m until Ready", runtimeClassName: "gvisor", cpu: "500m", boostCpu: "1000m" },
  { label: "runc, 100m boosted to 1000m until Ready", cpu: "100m", boostCpu: "1000m" },
];

function line(what: string, ms: number[]): string {
  const s = [...ms].sort((a, b) => a - b);
  return `${what.padEnd(62)} p50 ${(pct(s, 50) / 1000).toFixed(2)} s, p99 ${(pct(s, 99) / 1000).toFixed(2)} s (${s.length} runs, ${load()})`;
}

const median = (v: number[]): number => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] ?? NaN;

/** Throughput of one sentinel with and without what autoscaling asks of it. */
async function measurementCost(): Promise<void> {
  ensureTools("autoscale", [NGINX, WRK]);
  const cluster = await startCluster({ name: "bench-autoscale-sentinel" });
  const dir = mkdtempSync(join(tmpdir(), "krane-bench-autoscale-"));
  const children: ChildProcess[] = [];
  const kube = new KubeClient(cluster.kubeConfig(), { qps: 50, burst: 100 });
  try {
    const net = cluster.podNetwork;
    if (!net) throw new Error("the cluster has no pod network");
    await applySentinelRbac(cluster.kubeConfig());
    const [appPort, sentinelPort, opsPort] = (await Promise.all([freePort(), freePort(), freePort()])) as [
      number,
      number,
      number,
    ];
    const app = `10.${net.slot}.0.10`;
    const appLocal = `${localAddress(net, app)}:${appPort}`;
    children.push(await startNginx("upstream", appLocal, undefined));
    const policy = async (version: number, hold: boolean): Promise<void> => {
      await kube.apply(resources.configMaps, {
        metadata: { name: "bench-policy", namespace: SENTINEL_NAMESPACE, labels: labels() },
        data: {
          [POLICY_KEY]: formatRoutingPolicy({
            version,
            environmentId: ENV,
            mode: "instances",
            revisions: [],
            ...(hold ? { hold: { maxHeld: 1000, timeoutMs: 30_000 } } : {}),
          }),
        },
      });
      await until(
        "the sentinel to serve the policy",
        async () => {
          const s = (await (await fetch(`http://127.0.0.1:${opsPort}/status`)).json()) as { routingVersion: number };
          return s.routingVersion === version;
        },
        30_000,
        20,
      );
    };
    await kube.apply(resources.configMaps, {
      metadata: { name: "bench-policy", namespace: SENTINEL_NAMESPACE, labels: labels() },
      data: { [POLICY_KEY]: formatRoutingPolicy({ version: 1, environmentId: ENV, mode: "instances", revisions: [] }) },
    });
    await writeSlice(kube, "app", [app], appPort);
    const sentinel = await startSentinel(cluster, dir, sentinelPort, opsPort, "node");
    children.push(sentinel);
    const url = `http://127.0.0.1:${sentinelPort}/`;
    /** 64 connections for `seconds` from wrk. */
    const drive = (seconds: number): { rps: number; p99: number } => wrk(url, seconds);
    drive(2); // warm-up
    const runs: Record<"off" | "on", { rps: number[]; perCpu: number[] }> = {
      off: { rps: [], perCpu: [] },
      on: { rps: [], perCpu: [] },
    };
    let version = 1;
    for (let i = 0; i < ROUNDS; i++) {
      // Which goes first alternates, so a drift over the run (warm-up, the machine's load) cancels out.
      for (const mode of i % 2 === 0 ? (["off", "on"] as const) : (["on", "off"] as const)) {
        await policy(++version, mode === "on");
        const stop = new AbortController();
        const readers: Promise<void>[] = [];
        if (mode === "on") {
          // What the agent does to an autoscaled environment's sentinel pod, 10 times as often.
          readers.push(
            (async () => {
              while (!stop.signal.aborted) {
                await fetch(`http://127.0.0.1:${opsPort}/status`).then(
                  (r) => r.text(),
                  () => "",
                );
                await new Promise((r) => setTimeout(r, 100));
              }
            })(),
            (async () => {
              while (!stop.signal.aborted)
                await fetch(`http://127.0.0.1:${opsPort}/wake?after=0`, { signal: stop.signal }).then(
                  (r) => r.text(),
                  () => "",
                );
            })(),
          );
        }
        const cpu0 = sentinel.pid === undefined ? NaN : cpuSeconds(sentinel.pid);
        const r = drive(10);
        const cpu = sentinel.pid === undefined ? NaN : cpuSeconds(sentinel.pid) - cpu0;
        stop.abort();
        await Promise.all(readers);
        runs[mode].rps.push(r.rps);
        runs[mode].perCpu.push((r.rps * 10) / cpu);
        console.log(
          `autoscale: sentinel throughput, measurements ${mode.padEnd(3)} ${r.rps.toFixed(0).padStart(6)} req/s, ${((r.rps * 10) / cpu).toFixed(0)} req per CPU-second, p99 ${r.p99.toFixed(2)} ms (${load()})`,
        );
      }
    }
    const cost = (a: number[], b: number[]): string => `${((1 - median(b) / median(a)) * 100).toFixed(1)} %`;
    console.log(
      `autoscale: measurements' cost (medians of ${ROUNDS}): throughput ${cost(runs.off.rps, runs.on.rps)}, per CPU-second ${cost(runs.off.perCpu, runs.on.perCpu)} (target ≤ 5 %; ${load()})`,
    );
  } finally {
    for (const c of children) c.kill("SIGTERM");
    kube.close();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

interface Pod {
  metadata: { name: string; labels?: Record<string, string>; deletionTimestamp?: string };
  spec?: Record<string, unknown>;
  status?: {
    podIP?: string;
    conditions?: { type: string; status: string }[];
    containerStatuses?: { state?: { running?: unknown } }[];
  };
}

/** Cold starts from zero and the reaction to a load step, on real nodes (only the traced bare Pods with `phasesOnly`). */
async function coldStarts(phasesOnly: boolean): Promise<void> {
  const support = await realNodeSupport();
  if (!support.ok) {
    console.log(`autoscale: cold starts skipped, this machine cannot run real nodes: ${support.reason}`);
    return;
  }
  const images = await workloadImages((l) => console.log(`  ${l}`));
  const cluster = await startCluster({
    name: "bench-autoscale",
    realNodes: ["untrusted", "sentinel"],
    images: [images.krane, images.hello],
  });
  if (phasesOnly) {
    try {
      await nodePhases(cluster, images.hello.names[0] ?? "", PHASE_RUNS, PHASE_KINDS);
    } finally {
      await cluster.stop();
    }
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), "krane-bench-autoscale-nodes-"));
  const ep = cluster.endpoint();
  const admin = cluster.kubeConfig();
  await applySentinelRbac(admin);
  const ctrl = await startTestCtrl(join(dir, "ctrl.db"), { opsListen: null, rolloutSweepIntervalMs: 200 });
  const api = createApiClients(ctrl.url, ctrl.adminToken);
  let agent: Agent | undefined;
  try {
    await api.regions.createRegion({ name: "local" });
    const { token: agentToken } = await api.regions.createClusterToken({ region: "local", clusterName: "bench" });
    await api.workspaces.createWorkspace({ slug: "bench" });
    await api.projects.createProject({ workspace: "bench", slug: "hello" });
    agent = new Agent({
      ctrlUrl: ctrl.url,
      token: agentToken,
      region: "local",
      kubeconfig: await agentKubeConfigFrom(admin, 3600),
      opsPort: -1,
      sentinelImage: images.krane.name,
      sentinelObserveIntervalMs: 1_000,
      autoscaleIntervalMs: 1_000,
      measureIntervalMs: 0,
      log: pino({ level: "warn" }, pino.destination(2)),
    });
    await agent.start();
    const probe = { method: "GET", path: "/healthz", intervalSeconds: 1, timeoutSeconds: 2, failureThreshold: 3 };
    /** An environment with its own sentinel, its revision deployed; the sentinel pod's URL. */
    const environment = async (
      slug: string,
      autoscale: Parameters<typeof api.environments.updateEnvironment>[0]["autoscale"],
    ): Promise<{ url: string; ns: string; deploymentId: string }> => {
      const ref = { workspace: "bench", project: "hello", environment: slug };
      const { environment: env } = await api.environments.createEnvironment({
        workspace: "bench",
        project: "hello",
        slug,
        regions: [{ region: "local", replicas: 1 }],
        sentinel: { image: "", replicas: 1, cpuMillicores: 100n, memoryMib: 128n },
        rollout: { maxSurge: "1", maxUnavailable: "0" },
      });
      const { deployment } = await api.deployments.createDeployment({
        ...ref,
        image: images.hello.names[0] ?? "",
        port: 8080,
        cpuMillicores: 100n,
        memoryMib: 128n,
        healthCheck: probe,
      });
      await api.environments.updateEnvironment({ ...ref, autoscale });
      const url = await until(
        `${slug}'s sentinel pod`,
        async () => {
          const pods = await getJson<{ items: Pod[] }>(
            ep,
            `/api/v1/namespaces/${SENTINEL_NAMESPACE}/pods?labelSelector=krane.dev/environment-id%3D${env?.id ?? ""}`,
          );
          const ip = pods.items.find((p) => p.status?.podIP && !p.metadata.deletionTimestamp)?.status?.podIP;
          return ip ? `http://${ip}:${SENTINEL_PORT}/` : undefined;
        },
        300_000,
        200,
      );
      return { url, ns: deployment?.k8sNamespace ?? "", deploymentId: deployment?.id ?? "" };
    };
    const podsOf = async (ns: string, deploymentId: string): Promise<Pod[]> =>
      (
        await getJson<{ items: Pod[] }>(
          ep,
          `/api/v1/namespaces/${ns}/pods?labelSelector=krane.dev/deployment-id%3D${deploymentId}`,
        )
      ).items;
    const answer = async (url: string): Promise<{ status: number; pod: string } | undefined> => {
      try {
        const res = await request(url, { headersTimeout: 300_000 });
        const body = (await res.body.json().catch(() => ({}))) as { pod?: string };
        return { status: res.statusCode, pod: body.pod ?? "" };
      } catch {
        return undefined;
      }
    };

    // ---- cold starts
    const envs = [];
    for (let i = 0; i < ENVS; i++)
      envs.push(
        await environment(`cold-${i}`, {
          minReplicas: 0,
          maxReplicas: 1,
          concurrencyTarget: 10,
          scaleToZero: { idleSeconds: IDLE_S, heldTimeoutSeconds: 300 },
        }),
      );
    for (const e of envs)
      await until("its first answer", async () => (await answer(e.url))?.status === 200, 300_000, 200);
    const firstByte: number[] = [];
    const timeline = new ColdTimeline();
    timeline.start(new KubeClient(admin));
    const steps = new Map<Milestone, number[]>();
    /** CPU milliseconds this process (ctrl, the agent, the bench's client) used per cold start. */
    const coldCpu: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const e = envs[run % envs.length];
      if (!e) break;
      await until(
        "the environment asleep (no pod left)",
        async () => (await podsOf(e.ns, e.deploymentId)).length === 0,
        600_000,
        200,
      );
      // And no other environment's pod shutting down beside it: a gVisor sandbox's teardown takes
      // CPU this 2-core machine's cold start would otherwise share.
      await until(
        "no pod terminating",
        async () =>
          !(await getJson<{ items: Pod[] }>(ep, `/api/v1/pods?labelSelector=krane.dev/deployment-id`)).items.some(
            (p) => p.metadata.deletionTimestamp !== undefined,
          ),
        600_000,
        200,
      );
      const started = performance.now();
      const cpuBefore = process.cpuUsage();
      const res = await request(e.url, { headersTimeout: 300_000 });
      const at = performance.now() - started;
      // ctrl and the agent run in this process: what they took of the 2 cores while the node started the pod.
      const used = process.cpuUsage(cpuBefore);
      const cpu = (used.user + used.system) / 1e6;
      coldCpu.push(cpu * 1000);
      await res.body.dump();
      if (res.statusCode !== 200) throw new Error(`run ${run}: HTTP ${res.statusCode}`);
      firstByte.push(at);
      // The kubelet's Ready may come after the first byte now (the sentinel probes the starting
      // instance itself): wait for it, so each run shows both.
      const readyDeadline = performance.now() + 15_000;
      while (!timeline.since(e.deploymentId, started).has("pod Ready") && performance.now() < readyDeadline)
        await new Promise((r) => setTimeout(r, 50));
      const marks = timeline.since(e.deploymentId, started);
      for (const [m, ms] of marks) {
        const list = steps.get(m);
        if (list) list.push(ms);
        else steps.set(m, [ms]);
      }
      const marked = MILESTONES.filter((m) => marks.has(m))
        .map((m) => `${m} ${((marks.get(m) ?? 0) / 1000).toFixed(2)}`)
        .join(", ");
      console.log(
        `autoscale: cold start ${run + 1}/${RUNS}: first byte after ${(at / 1000).toFixed(2)} s (${marked}; ctrl and agent ${cpu.toFixed(2)} CPU-s; ${load()})`,
      );
    }
    timeline.stop();
    // The pod spec krane rendered (the last cold start's pod, before its environment sleeps again),
    // run below as a bare Pod in its namespace: what krane's pod template itself costs, apart
    // from the Deployment and ReplicaSet on the way.
    const last = envs[(RUNS - 1) % envs.length];
    const kraneSpec = last ? (await podsOf(last.ns, last.deploymentId))[0]?.spec : undefined;

    // The kubelet alone: a bare Pod like the deployment's under gVisor, POST → answers.
    const bareNs = "bench-bare";
    await bareNamespace(ep, bareNs);
    /** Bare Pods of `spec` in `ns`, one after another: POST → container running, answering, Ready. */
    const barePods = async (
      prefix: string,
      ns: string,
      spec: Record<string, unknown>,
    ): Promise<{ running: number[]; answers: number[]; ready: number[] }> => {
      const out = { running: [] as number[], answers: [] as number[], ready: [] as number[] };
      for (let i = 1; i <= RUNS; i++) {
        const name = `${prefix}-${i}`;
        const started = performance.now();
        const res = await kubeRequest(ep, "POST", `/api/v1/namespaces/${ns}/pods`, {
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name },
          spec,
        });
        if (res.status !== 201) throw new Error(`bare pod: HTTP ${res.status} ${res.body.slice(0, 200)}`);
        let answeredAt: number | undefined;
        let readyAt: number | undefined;
        let runningAt: number | undefined;
        await until(
          `${name} answering and Ready`,
          async () => {
            const p = await getJson<Pod>(ep, `/api/v1/namespaces/${ns}/pods/${name}`);
            const now = performance.now();
            const ip = p.status?.podIP;
            if (runningAt === undefined && (p.status?.containerStatuses ?? []).some((c) => c.state?.running))
              runningAt = now;
            if (
              readyAt === undefined &&
              (p.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True")
            )
              readyAt = now;
            if (answeredAt === undefined && ip) {
              const res = await fetch(`http://${ip}:8080/`, { signal: AbortSignal.timeout(2_000) }).catch(
                () => undefined,
              );
              if (res?.ok === true) answeredAt = performance.now();
            }
            return answeredAt !== undefined && readyAt !== undefined;
          },
          300_000,
          20,
        );
        out.answers.push((answeredAt ?? 0) - started);
        out.ready.push((readyAt ?? 0) - started);
        out.running.push((runningAt ?? 0) - started);
        await kubeRequest(ep, "DELETE", `/api/v1/namespaces/${ns}/pods/${name}?gracePeriodSeconds=0`);
      }
      return out;
    };
    const bare = await barePods("bare", bareNs, barePodSpec(images.hello.names[0] ?? "", "gvisor"));
    const asKrane = last && kraneSpec ? await barePods("bare-krane", last.ns, kraneSpec) : undefined;
    // Below Kubernetes: the same bare Pod traced through containerd, runsc and the app, runc beside gVisor.
    await nodePhases(cluster, images.hello.names[0] ?? "", PHASE_RUNS, PHASE_KINDS);

    // ---- reaction to a load step
    const step = await environment("step", {
      minReplicas: 1,
      maxReplicas: 4,
      concurrencyTarget: 2,
      scaleUpWindowSeconds: 0,
      scaleDownWindowSeconds: 15,
    });
    await until("the step environment answering", async () => (await answer(step.url))?.status === 200, 300_000, 200);
    const reaction: number[] = [];
    for (let run = 0; run < 3; run++) {
      await until(
        "back to 1 instance",
        async () => (await podsOf(step.ns, step.deploymentId)).length === 1,
        300_000,
        500,
      );
      let running = true;
      const seen = new Set<string>();
      const started = performance.now();
      const workers = Array.from({ length: 8 }, async () => {
        while (running) {
          const a = await answer(`${step.url}?latency=1000`);
          if (a?.status === 200) seen.add(a.pod);
        }
      });
      await until("4 instances answering", async () => seen.size >= 4, 300_000, 50);
      reaction.push(performance.now() - started);
      running = false;
      await Promise.all(workers);
      console.log(
        `autoscale: load step ${run + 1}/3: 4 instances answering after ${((reaction.at(-1) ?? 0) / 1000).toFixed(2)} s (${load()})`,
      );
    }

    console.log(line("autoscale: cold start from 0, request → first byte (sentinel)", firstByte));
    console.log(line("autoscale:   ctrl and agent CPU during it (CPU-s, not s)", coldCpu));
    // Where the cold start's time went: each step as its watch event arrived, from the request.
    for (const m of MILESTONES) {
      const v = steps.get(m) ?? [];
      if (v.length > 0) console.log(line(`autoscale:   request → ${m}`, v));
    }
    console.log(line("autoscale: kubelet alone under gVisor, bare Pod POST → container running", bare.running));
    console.log(line("autoscale: kubelet alone under gVisor, bare Pod POST → answers", bare.answers));
    // What the held request must wait for: the sentinel routes to an instance once it is Ready.
    console.log(line("autoscale: kubelet alone under gVisor, bare Pod POST → Ready", bare.ready));
    if (asKrane) {
      console.log(line("autoscale: krane's pod spec as a bare Pod, POST → container running", asKrane.running));
      console.log(line("autoscale: krane's pod spec as a bare Pod, POST → answers", asKrane.answers));
      console.log(line("autoscale: krane's pod spec as a bare Pod, POST → Ready", asKrane.ready));
    }
    console.log(line("autoscale: load step 1 → 4 instances answering (8 in flight)", reaction));
    console.log("autoscale: targets for the cold start: p50 ≤ 1 s, p99 ≤ 2.5 s");
  } finally {
    await agent?.stop();
    await ctrl.close();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function benchAutoscale(): Promise<void> {
  const only = process.env.KRANE_BENCH_AUTOSCALE_ONLY;
  if (only !== "nodes" && only !== "phases") await measurementCost();
  if (only !== "sentinel") await coldStarts(only === "phases");
}

if (import.meta.url === `file://${process.argv[1]}`) await benchAutoscale();

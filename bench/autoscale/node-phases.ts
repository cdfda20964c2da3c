// Where a cold start's time goes below Kubernetes (`npm run bench -- autoscale`): bare Pods of the
// hello app posted to the untrusted real node, one at a time, the kinds (runc, gVisor, gVisor
// traced, a lever) taking turns in every round so they share the machine's load; each start traced
// through containerd's events (`ctr events` on the node's socket), runsc's debug logs (the traced
// kinds: runsc.toml gets `debug` and a per-container `debug-log` before their pod is posted — the
// shim reads it when it starts the sandbox), the app's own log line and its pod's CPU cgroup. The
// pure parts are in node-trace.ts.
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { CONTAINERD_BUILD, ensureGoBuild } from "../../src/cluster/build.js";
import type { LocalCluster } from "../../src/cluster/cluster.js";
import { getJson, kubeRequest } from "../../src/cluster/kube-http.js";
import { nodeDirs } from "../../src/cluster/nodes/config.js";
import { resizePatch } from "../../src/agent/deployments/boost.js";
import { bareNamespace, barePodSpec } from "../bare-pods.js";
import { load, pct, until } from "../support.js";
import {
  appMarks,
  containerdMarks,
  p50p99,
  parseCtrEvent,
  parseRunscLine,
  phaseTable,
  POSTED,
  runscLogCommand,
  runscMarks,
  sandboxIdOf,
  withRunscOptions,
  type ContainerdEvent,
  type RunscLog,
} from "./node-trace.js";

/** One kind of start: the runtime, the app's CPU limit and gVisor's flags for it. */
export interface StartKind {
  readonly label: string;
  /** "gvisor", or none for runc. */
  readonly runtimeClassName?: string;
  readonly cpu: string;
  /** runsc flags set in runsc.toml for this kind's pods (gVisor kinds only). */
  readonly runsc?: Readonly<Record<string, string>>;
  /** runsc's debug logs for this kind's pods (they cost the sandbox time themselves). */
  readonly traced?: boolean;
  /**
   * The RuntimeClass's pod overhead (CPU): the kubelet adds it to the pod cgroup's limit, where
   * gVisor's sandbox (sentry, gofer) runs beside the app. With it, the bench makes a RuntimeClass
   * of its own (`<runtimeClassName>-overhead-<cpu>`, same handler).
   */
  readonly overheadCpu?: string;
  /**
   * The agent's startup CPU boost (src/agent/deployments/boost.ts): the pod's CPU limit raised to
   * this through pods/resize right after the POST, and back to `cpu` once Ready.
   */
  readonly boostCpu?: string;
}

/** The RuntimeClass a kind's pods name (its own, with the pod overhead, when it has one). */
export function runtimeClassOf(kind: StartKind): string | undefined {
  if (!kind.runtimeClassName || !kind.overheadCpu) return kind.runtimeClassName;
  return `${kind.runtimeClassName}-overhead-${kind.overheadCpu}`;
}

interface PodStatus {
  metadata: { uid: string };
  status?: {
    podIP?: string;
    conditions?: { type: string; status: string }[];
    containerStatuses?: { containerID?: string }[];
  };
}

/** The pod's CPU cgroup (cgroup v1, the kubelet's cgroupfs driver under the node's root): CPU used and throttled, ms. */
function podCpu(cgroupRoot: string, uid: string): { usedMs: number; throttledMs: number } | undefined {
  for (const qos of ["", "burstable/", "besteffort/"]) {
    const rel = `${cgroupRoot}/kubepods/${qos}pod${uid}`;
    const acct = `/sys/fs/cgroup/cpuacct${rel}/cpuacct.usage`;
    const stat = `/sys/fs/cgroup/cpu${rel}/cpu.stat`;
    if (!existsSync(acct) || !existsSync(stat)) continue;
    const throttled = /^throttled_time (\d+)$/m.exec(readFileSync(stat, "utf8"))?.[1];
    return { usedMs: Number(readFileSync(acct, "utf8").trim()) / 1e6, throttledMs: Number(throttled ?? NaN) / 1e6 };
  }
  return undefined;
}

/** runsc's debug logs of one container id (`<dir>/<id>/runsc.log.<stamp>.<command>.txt`). */
function runscLogs(dir: string, id: string | undefined, year: number): RunscLog[] {
  const d = id ? join(dir, id) : "";
  if (!id || !existsSync(d)) return [];
  const out: RunscLog[] = [];
  for (const f of readdirSync(d).sort()) {
    const command = runscLogCommand(f);
    if (!command) continue;
    const lines = readFileSync(join(d, f), "utf8")
      .split("\n")
      .flatMap((l) => parseRunscLine(l, year) ?? []);
    out.push({ command, lines });
  }
  return out;
}

/** Runs `runs` rounds of one start of every kind and prints each kind's phase table. */
export async function nodePhases(
  cluster: LocalCluster,
  image: string,
  runs: number,
  kinds: readonly StartKind[],
): Promise<void> {
  const node = cluster.realNodes?.nodes.find((n) => n.name === "untrusted-real");
  if (!node) throw new Error("the cluster has no untrusted real node");
  const dirs = nodeDirs(cluster.dir, node);
  const ep = cluster.endpoint();
  const ns = "bench-phases";
  const debugDir = join(cluster.dir, "runsc-debug");
  const original = readFileSync(dirs.runscConfig, "utf8");
  await bareNamespace(ep, ns);
  for (const kind of kinds) {
    const name = runtimeClassOf(kind);
    if (!kind.overheadCpu || !name || !kind.runtimeClassName) continue;
    const base = await getJson<{ handler: string }>(ep, `/apis/node.k8s.io/v1/runtimeclasses/${kind.runtimeClassName}`);
    const res = await kubeRequest(ep, "POST", "/apis/node.k8s.io/v1/runtimeclasses", {
      apiVersion: "node.k8s.io/v1",
      kind: "RuntimeClass",
      metadata: { name },
      handler: base.handler,
      overhead: { podFixed: { cpu: kind.overheadCpu } },
    });
    if (res.status !== 201 && res.status !== 409)
      throw new Error(`RuntimeClass ${name}: HTTP ${res.status} ${res.body}`);
  }

  const ctr = join(await ensureGoBuild(CONTAINERD_BUILD), "bin", "ctr");
  const events: ContainerdEvent[] = [];
  const watcher = spawn(ctr, ["--address", dirs.containerdSocket, "events"], { stdio: ["ignore", "pipe", "inherit"] });
  createInterface({ input: watcher.stdout }).on("line", (l) => {
    const e = parseCtrEvent(l);
    if (e) events.push(e);
  });
  const marks = new Map<string, Map<string, number>[]>(kinds.map((k) => [k.label, []]));
  const cpu = new Map<string, { used: number[]; throttled: number[] }>(
    kinds.map((k) => [k.label, { used: [], throttled: [] }]),
  );
  try {
    // `ctr events` subscribes as it starts: give it a moment before the first pod.
    await new Promise((r) => setTimeout(r, 500));
    for (let round = 1; round <= runs; round++) {
      for (const [k, kind] of kinds.entries()) {
        const name = `phases-${round}-${k}`;
        writeFileSync(
          dirs.runscConfig,
          withRunscOptions(original, {
            ...kind.runsc,
            // The shim puts the container id for %ID%; state, events and the like are left unlogged.
            ...(kind.traced
              ? { debug: "true", "debug-log": `${debugDir}/%ID%/`, "debug-command": "create,start,boot,gofer" }
              : {}),
          }),
        );
        const spec = barePodSpec(image, runtimeClassOf(kind), kind.cpu);
        const posted = Date.now();
        const res = await kubeRequest(ep, "POST", `/api/v1/namespaces/${ns}/pods`, {
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name },
          spec,
        });
        if (res.status !== 201) throw new Error(`phases: HTTP ${res.status} ${res.body.slice(0, 200)}`);
        const resize = async (cpu: string): Promise<void> => {
          const r = await kubeRequest(
            ep,
            "PATCH",
            `/api/v1/namespaces/${ns}/pods/${name}/resize`,
            resizePatch(0, cpu),
            "application/json-patch+json",
          );
          if (r.status !== 200) throw new Error(`phases: resize of ${name}: HTTP ${r.status} ${r.body.slice(0, 200)}`);
        };
        if (kind.boostCpu) await resize(kind.boostCpu);
        let answered: number | undefined;
        let ready: number | undefined;
        let unboosted = false;
        let used: { usedMs: number; throttledMs: number } | undefined;
        let pod: PodStatus | undefined;
        await until(
          `${name} answering and Ready`,
          async () => {
            pod = await getJson<PodStatus>(ep, `/api/v1/namespaces/${ns}/pods/${name}`);
            const ip = pod.status?.podIP;
            if (
              ready === undefined &&
              (pod.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True")
            )
              ready = Date.now();
            if (ready !== undefined && kind.boostCpu && !unboosted) {
              unboosted = true;
              await resize(kind.cpu);
            }
            if (answered === undefined && ip) {
              const r = await fetch(`http://${ip}:8080/`, { signal: AbortSignal.timeout(2_000) }).catch(
                () => undefined,
              );
              if (r?.ok === true) {
                answered = Date.now();
                used = podCpu(node.cgroupRoot, pod.metadata.uid);
              }
            }
            return answered !== undefined && ready !== undefined;
          },
          300_000,
          20,
        );
        const appId = (pod?.status?.containerStatuses?.[0]?.containerID ?? "").replace(/^[a-z]+:\/\//, "");
        const log = await kubeRequest(ep, "GET", `/api/v1/namespaces/${ns}/pods/${name}/log?container=app`);
        const window = events.filter((e) => e.at >= posted - 5 && e.at <= (ready ?? Date.now()) + 5);
        const m = new Map<string, number>([
          [POSTED, posted],
          ...containerdMarks(window, appId),
          ...appMarks(log.body),
          ["answers", answered ?? NaN],
          ["Ready", ready ?? NaN],
        ]);
        if (kind.traced) {
          const year = new Date(posted).getUTCFullYear();
          const logs = [...runscLogs(debugDir, sandboxIdOf(window, appId), year), ...runscLogs(debugDir, appId, year)];
          for (const [mark, at] of runscMarks(logs)) m.set(mark, at);
          if (round === 1)
            console.log(`autoscale: phases, ${kind.label}: runsc logs ${logs.map((l) => l.command).join(" ")}`);
        }
        marks.get(kind.label)?.push(m);
        if (round === 1)
          console.log(
            `autoscale: phases, ${kind.label}: containerd's topics in the window: ${[...new Set(window.map((e) => e.topic))].join(" ")}`,
          );
        if (used) {
          cpu.get(kind.label)?.used.push(used.usedMs);
          cpu.get(kind.label)?.throttled.push(used.throttledMs);
        }
        const total = (answered ?? NaN) - posted;
        console.log(
          `autoscale: phases round ${round}/${runs}, ${kind.label}: answers after ${(total / 1000).toFixed(2)} s, pod CPU ${used ? `${used.usedMs.toFixed(0)} ms, throttled ${used.throttledMs.toFixed(0)} ms` : "not read"} (${load()})`,
        );
        await kubeRequest(ep, "DELETE", `/api/v1/namespaces/${ns}/pods/${name}?gracePeriodSeconds=0`);
        // The next start shares the machine with nothing of this one (a sandbox's teardown takes CPU).
        await until(
          `${name} gone`,
          async () => (await kubeRequest(ep, "GET", `/api/v1/namespaces/${ns}/pods/${name}`)).status === 404,
          120_000,
          100,
        );
      }
    }
  } finally {
    watcher.kill("SIGTERM");
    writeFileSync(dirs.runscConfig, original);
  }
  for (const kind of kinds) {
    const rows = phaseTable(marks.get(kind.label) ?? []);
    console.log(
      `autoscale: where a bare Pod's start goes, ${kind.label} (${runs} runs; step p50/p99, then p50 since the POST; ${load()})`,
    );
    for (const r of rows) {
      const since = pct(
        [...r.fromStart].sort((a, b) => a - b),
        50,
      );
      console.log(`autoscale:   ${r.step.padEnd(58)} ${p50p99(r.ms)}  (at ${(since / 1000).toFixed(2)} s)`);
    }
    const c = cpu.get(kind.label);
    if (c && c.used.length > 0)
      console.log(
        `autoscale:   pod cgroup until it answers: CPU used ${p50p99(c.used).replace(/ s/g, " CPU-s")}, throttled ${p50p99(c.throttled)}`,
      );
  }
}

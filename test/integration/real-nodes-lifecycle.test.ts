// Clusters with real nodes side by side and after a crash: two at once each get their own
// network namespace, pod ranges and cgroups, run containers this machine reaches, and leave
// nothing behind when stopped; a cluster whose owner is killed is cleaned up by its reaper
// (processes, containers, mounts, namespace, cgroups); and what a crashed run left for a slot no
// cluster holds is removed when the next cluster with real nodes starts.
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdir, rmdir } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, it } from "node:test";
import { startCluster, type LocalCluster } from "../../src/cluster/index.js";
import { workloadImages } from "../../src/cluster/images.js";
import { FIRST_SLOT, LAST_SLOT, podNetworkLockDir } from "../../src/cluster/pod-network.js";
import { isAlive } from "../../src/cluster/process.js";
import { eventually } from "../support/cluster.js";
import { kubectlJson, kubectlOk, realNodesSkip } from "../support/real-nodes.js";

const run = promisify(execFile);
const skip = await realNodesSkip();
const CGROUP_MEMORY = "/sys/fs/cgroup/memory";

/** What a slot's real nodes hold on this machine right now. */
function leftovers(slot: number, dir: string): string[] {
  const out: string[] = [];
  if (existsSync(`/run/netns/krane-${slot}`)) out.push(`netns krane-${slot}`);
  for (const n of readdirSync(CGROUP_MEMORY)) if (n.startsWith(`krane-${slot}-`)) out.push(`cgroup ${n}`);
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n"))
    if ((line.split(" ")[4] ?? "").startsWith(`${dir}/`)) out.push(`mount ${line.split(" ")[4]}`);
  if (existsSync(dir)) out.push(`dir ${dir}`);
  return out;
}

const slotOf = (c: LocalCluster): number => c.realNodes?.slot ?? -1;

/** Processes in the pods' cgroups of a slot's real nodes (containers, gVisor sandboxes). */
function podProcesses(slot: number): number[] {
  const pids: number[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) walk(join(dir, e.name));
    if (dir.includes("/kubepods"))
      for (const p of readFileSync(join(dir, "cgroup.procs"), "utf8").split("\n")) if (p) pids.push(Number(p));
  };
  for (const n of readdirSync(CGROUP_MEMORY)) if (n.startsWith(`krane-${slot}-`)) walk(join(CGROUP_MEMORY, n));
  return pids;
}

/** A hello pod on the cluster's untrusted node; its IP once it answers from this machine. */
async function helloPod(c: Pick<LocalCluster, "kubeconfigPath">): Promise<string> {
  await kubectlOk(
    c,
    ["apply", "-f", "-"],
    JSON.stringify({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "hello", namespace: "default" },
      spec: {
        runtimeClassName: "gvisor",
        automountServiceAccountToken: false,
        tolerations: [{ key: "node-class", operator: "Equal", value: "untrusted", effect: "NoSchedule" }],
        nodeSelector: { "node-class": "untrusted" },
        containers: [{ name: "app", image: "krane.local/hello:v1" }],
      },
    }),
  );
  return eventually(
    "the hello pod answering",
    async () => {
      const p = await kubectlJson<{ status: { podIP?: string } }>(c, ["pod", "hello", "-n", "default"]);
      const ip = p.status.podIP;
      if (!ip) return undefined;
      const res = await fetch(`http://${ip}:8080/`, { signal: AbortSignal.timeout(2_000) }).catch(() => undefined);
      return res?.status === 200 ? ip : undefined;
    },
    180_000,
  );
}

describe("clusters with real nodes, side by side and after a crash", { skip }, () => {
  it(
    "two at once: own namespace, pod range and cgroups, pods reachable; stop() leaves nothing",
    { timeout: 15 * 60_000 },
    async () => {
      const images = await workloadImages();
      const [a, b] = await Promise.all(
        ["life-a", "life-b"].map((name) => startCluster({ name, realNodes: ["untrusted"], images: [images.hello] })),
      );
      assert.ok(a && b);
      try {
        assert.notEqual(slotOf(a), slotOf(b));
        for (const c of [a, b]) assert.ok(existsSync(`/run/netns/krane-${slotOf(c)}`));
        const [ipA, ipB] = await Promise.all([helloPod(a), helloPod(b)]);
        assert.ok(ipA.startsWith(`10.${slotOf(a)}.`) && ipB.startsWith(`10.${slotOf(b)}.`), `${ipA}, ${ipB}`);
        // Each pod lives in its own cluster's cgroups.
        for (const c of [a, b])
          assert.ok(
            readdirSync(CGROUP_MEMORY).some((n) => n.startsWith(`krane-${slotOf(c)}-untrusted-real`)),
            `cgroup root of ${c.name}`,
          );
      } finally {
        await Promise.all([a.stop(), b.stop()]);
      }
      for (const c of [a, b]) assert.deepEqual(leftovers(slotOf(c), c.dir), [], `${c.name} left nothing`);
      assert.deepEqual(
        Object.values({ ...a.state.pids, ...b.state.pids }).filter(isAlive),
        [],
        "no process of either cluster runs",
      );
    },
  );

  it(
    "a cluster whose owner is killed with SIGKILL is cleaned up by its reaper, containers included",
    { timeout: 15 * 60_000 },
    async () => {
      const images = await workloadImages();
      const script = `
      import { startCluster } from ${JSON.stringify(new URL("../../src/cluster/index.ts", import.meta.url).pathname)};
      const c = await startCluster({ name: "life-crash", realNodes: ["untrusted"], images: [${JSON.stringify(images.hello)}] });
      console.log(JSON.stringify({ kubeconfig: c.kubeconfigPath, dir: c.dir, slot: c.realNodes.slot, pids: Object.values(c.state.pids) }));
      setInterval(() => {}, 1000);
    `;
      const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
        stdio: ["ignore", "pipe", "inherit"],
      });
      const line = await new Promise<string>((resolve, reject) => {
        let buf = "";
        child.stdout.on("data", (d: Buffer) => {
          buf += d.toString();
          const nl = buf.indexOf("\n");
          if (nl >= 0) resolve(buf.slice(0, nl));
        });
        child.once("exit", (code) => reject(new Error(`child exited early (${code})`)));
      });
      const info = JSON.parse(line) as { kubeconfig: string; dir: string; slot: number; pids: number[] };
      await helloPod({ kubeconfigPath: info.kubeconfig });
      // The container and its gVisor sandbox run in the node's cgroups.
      const containerPids = podProcesses(info.slot);
      assert.ok(containerPids.length > 0, "a container process runs");
      child.kill("SIGKILL");
      await eventually(
        "the reaper to remove everything",
        async () => (leftovers(info.slot, info.dir).length === 0 ? true : undefined),
        60_000,
      );
      assert.deepEqual([...info.pids, ...containerPids].filter(isAlive), [], "no process is left");
    },
  );

  it(
    "leftovers of a slot no cluster holds (a namespace, cgroups) are removed when a cluster with real nodes starts",
    { timeout: 15 * 60_000 },
    async () => {
      const held = new Set(readdirSync(podNetworkLockDir()).map(Number));
      let slot = LAST_SLOT;
      while (slot >= FIRST_SLOT && (held.has(slot) || existsSync(`/run/netns/krane-${slot}`))) slot--;
      // What a run that crashed together with its reaper would leave.
      await run("ip", ["netns", "add", `krane-${slot}`]);
      await mkdir(join(CGROUP_MEMORY, `krane-${slot}-untrusted-real`, "kubepods"), { recursive: true });
      let c: LocalCluster | undefined;
      try {
        c = await startCluster({ name: "life-next", realNodes: ["untrusted"] });
        assert.notEqual(slotOf(c), slot);
        assert.deepEqual(leftovers(slot, "/nonexistent"), [], "the abandoned slot is clean");
      } finally {
        await c?.stop();
        await run("ip", ["netns", "del", `krane-${slot}`]).catch(() => undefined);
        await rmdir(join(CGROUP_MEMORY, `krane-${slot}-untrusted-real`, "kubepods")).catch(() => undefined);
        await rmdir(join(CGROUP_MEMORY, `krane-${slot}-untrusted-real`)).catch(() => undefined);
      }
    },
  );
});

// What real nodes change on this machine, and how it is undone: the cluster's network
// namespace and veth link with its route, the kubelets' cgroup parents, the mounts under the
// cluster's directory. Everything a cluster creates is named by its pod network slot S
// (netns krane-S, cgroups krane-S-*, CNI networks krane-S-*), so cleanup — at stop, by the
// reaper after a crash, and at the next start for leftovers — never touches another cluster's.
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { readdir, readFile, readlink, rm, rmdir, stat, writeFile, mkdir } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import type { RealNodesPlan } from "./plan.js";

const run = promisify(execFile);

/**
 * Commands real nodes run on this machine (Debian: iproute2, util-linux, mount, procps, iptables,
 * openssl, runc, containernetworking-plugins); and gcc and umoci, which build the sandbox image.
 */
export const HOST_COMMANDS = [
  "ip",
  "nsenter",
  "unshare",
  "mount",
  "umount",
  "sysctl",
  "iptables",
  "openssl",
  "runc",
  "gcc",
  "umoci",
] as const;
export const CNI_BIN_DIR = "/usr/lib/cni";
const CNI_PLUGINS = ["bridge", "host-local", "loopback"];
/** cgroup v1 controllers the kubelet needs. */
const CONTROLLERS = ["cpu", "cpuacct", "cpuset", "memory", "pids"];

async function which(cmd: string): Promise<string | undefined> {
  const r = await run("sh", ["-c", `command -v ${cmd}`]).catch(() => undefined);
  const path = r?.stdout.trim();
  return path ? path : undefined;
}

export interface HostTools {
  readonly runc: string;
}

/**
 * Whether this machine can run real nodes: root, the cgroup controllers, network namespaces,
 * and the Debian packages. Returns the tools' paths, or the reason it cannot (printed by
 * `krane dev` when it falls back to stand-ins).
 */
export async function realNodeSupport(): Promise<{ ok: true; tools: HostTools } | { ok: false; reason: string }> {
  if (process.platform !== "linux") return { ok: false, reason: "real nodes need Linux" };
  if (process.getuid?.() !== 0)
    return { ok: false, reason: "real nodes need root (they create network namespaces and cgroups)" };
  const missing: string[] = [];
  const paths: Record<string, string> = {};
  for (const c of HOST_COMMANDS) {
    const p = await which(c);
    if (p) paths[c] = p;
    else missing.push(c);
  }
  for (const p of CNI_PLUGINS) if (!existsSync(join(CNI_BIN_DIR, p))) missing.push(`${CNI_BIN_DIR}/${p}`);
  if (missing.length > 0)
    return {
      ok: false,
      reason: `real nodes need ${missing.join(", ")} (Debian: apt-get install iproute2 util-linux mount procps iptables openssl runc containernetworking-plugins gcc libc6-dev umoci)`,
    };
  const hierarchies = await cgroupHierarchies();
  const absent = CONTROLLERS.filter((c) => !hierarchies.some((h) => h.controllers.includes(c)));
  if (absent.length > 0) return { ok: false, reason: `real nodes need the cgroup controllers ${absent.join(", ")}` };
  if (!existsSync("/proc/self/ns/net")) return { ok: false, reason: "real nodes need network namespaces" };
  // kube-proxy's Service rules must see the traffic between pods on a node's bridge.
  if (!existsSync("/proc/sys/net/bridge/bridge-nf-call-iptables"))
    return { ok: false, reason: "real nodes need the kernel's br_netfilter (modprobe br_netfilter)" };
  return { ok: true, tools: { runc: paths.runc as string } };
}

/** A mounted cgroup hierarchy: its mount point and controllers ("" for the v2 one). */
interface Hierarchy {
  readonly mount: string;
  readonly controllers: string[];
}

async function cgroupHierarchies(): Promise<Hierarchy[]> {
  const info = await readFile("/proc/self/mountinfo", "utf8");
  const out: Hierarchy[] = [];
  for (const line of info.split("\n")) {
    const [pre, post] = line.split(" - ");
    if (!pre || !post) continue;
    const fields = pre.split(" ");
    const [fstype, , options] = post.split(" ");
    const mount = unescapeMount(fields[4] ?? "");
    if (fstype === "cgroup") {
      const controllers = (options ?? "").split(",").filter((o) => !MOUNT_FLAGS.includes(o));
      out.push({ mount, controllers });
    } else if (fstype === "cgroup2") {
      out.push({ mount, controllers: [""] });
    }
  }
  return out;
}

const MOUNT_FLAGS = ["rw", "ro", "relatime", "noatime", "nosuid", "nodev", "noexec"];

function unescapeMount(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
}

/** Creates the kubelet's cgroup root in every hierarchy (cpuset needs its cpus and mems filled in). */
export async function createCgroupRoot(name: string): Promise<void> {
  for (const h of await cgroupHierarchies()) {
    const dir = join(h.mount, name);
    await mkdir(dir, { recursive: true });
    if (h.controllers.includes("cpuset")) {
      for (const f of ["cpuset.cpus", "cpuset.mems"]) {
        const parent = (await readFile(join(h.mount, f), "utf8")).trim();
        const own = (await readFile(join(dir, f), "utf8")).trim();
        if (own === "") await writeFile(join(dir, f), parent);
      }
    }
  }
}

async function sh(cmd: string, args: string[]): Promise<void> {
  try {
    await run(cmd, args);
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(" ")}: ${(e.stderr || e.message).trim()}`);
  }
}

/**
 * The cluster's network namespace and its link to this machine: the API server listens on the
 * host end, pods and Services are routed through the namespace end.
 */
export async function createNetwork(plan: RealNodesPlan): Promise<void> {
  const ns = plan.netns;
  await sh("ip", ["netns", "add", ns]);
  await sh("ip", ["link", "add", plan.hostInterface, "type", "veth", "peer", "name", plan.nodeInterface, "netns", ns]);
  await sh("ip", ["addr", "add", `${plan.hostIp}/${plan.linkPrefix}`, "dev", plan.hostInterface]);
  await sh("ip", ["link", "set", plan.hostInterface, "up"]);
  await sh("ip", ["-n", ns, "link", "set", "lo", "up"]);
  await sh("ip", ["-n", ns, "addr", "add", `${plan.nodeIp}/${plan.linkPrefix}`, "dev", plan.nodeInterface]);
  await sh("ip", ["-n", ns, "link", "set", plan.nodeInterface, "up"]);
  await sh("ip", ["-n", ns, "route", "add", "default", "via", plan.hostIp]);
  await sh("ip", ["route", "add", plan.routed, "via", plan.nodeIp, "dev", plan.hostInterface]);
  // Forwarding between the bridges and the link, and Services seen by iptables on the bridges.
  await sh("ip", ["netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
  await sh("ip", ["netns", "exec", ns, "sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=1"]);
}

/** The command prefix that runs a process in the cluster's network namespace (and nothing else). */
export function inNamespace(plan: RealNodesPlan): string[] {
  return ["nsenter", `--net=/run/netns/${plan.netns}`, "--"];
}

/** Pids of the processes in a network namespace (`ip netns pids`). */
async function namespacePids(netns: string): Promise<number[]> {
  if (!existsSync(`/run/netns/${netns}`)) return [];
  const r = await run("ip", ["netns", "pids", netns]).catch(() => undefined);
  return (r?.stdout ?? "")
    .split(/\s+/)
    .filter((s) => s !== "")
    .map(Number)
    .filter((n) => Number.isInteger(n) && n > 1 && n !== process.pid);
}

/** Every cgroup directory (deepest first) whose top-level name starts with `prefix`, in every hierarchy. */
async function cgroupDirs(prefix: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    for (const e of entries) if (e.isDirectory()) await walk(join(dir, e.name));
    out.push(dir);
  };
  for (const h of await cgroupHierarchies()) {
    const tops = await readdir(h.mount, { withFileTypes: true }).catch(() => []);
    for (const t of tops) if (t.isDirectory() && t.name.startsWith(prefix)) await walk(join(h.mount, t.name));
  }
  return out;
}

async function cgroupPids(dirs: string[]): Promise<number[]> {
  const pids = new Set<number>();
  for (const d of dirs) {
    const text = await readFile(join(d, "cgroup.procs"), "utf8").catch(() => "");
    for (const s of text.split("\n")) if (s !== "") pids.add(Number(s));
  }
  pids.delete(process.pid);
  return [...pids];
}

function kill(pids: number[], signal: NodeJS.Signals): void {
  for (const p of pids) {
    try {
      process.kill(p, signal);
    } catch {
      // gone
    }
  }
}

/** Mount points at or under `dir`, deepest first. */
async function mountsUnder(dir: string): Promise<string[]> {
  const info = await readFile("/proc/self/mountinfo", "utf8");
  const points = info
    .split("\n")
    .map((l) => unescapeMount(l.split(" ")[4] ?? ""))
    .filter((p) => p === dir || p.startsWith(`${dir}/`));
  return [...new Set(points)].sort((a, b) => b.length - a.length);
}

export async function unmountUnder(dir: string): Promise<void> {
  for (let round = 0; round < 5; round++) {
    const points = await mountsUnder(dir);
    if (points.length === 0) return;
    for (const p of points) await run("umount", ["-l", p]).catch(() => undefined);
  }
}

/**
 * Removes everything real nodes of slot `slot` left on this machine: their processes (those in
 * the namespace: kubelets, containerd, shims, kube-proxy, DNS; those in the cgroups: containers
 * and gVisor sandboxes), mounts under `dir`, the namespace with its link and route, the cgroups,
 * CNI's cache files and the kubelet's log links. Safe to run twice and on a slot with nothing left.
 */
export async function cleanupRealNodes(slot: number, dir?: string): Promise<void> {
  const netns = `krane-${slot}`;
  const prefix = `krane-${slot}-`;
  for (let round = 0; round < 20; round++) {
    const pids = [...(await namespacePids(netns)), ...(await cgroupPids(await cgroupDirs(prefix)))];
    if (pids.length === 0) break;
    kill(pids, "SIGKILL");
    await sleep(100 + round * 50);
  }
  if (dir) await unmountUnder(dir);
  if (existsSync(`/run/netns/${netns}`)) await run("ip", ["netns", "del", netns]).catch(() => undefined);
  // The host end goes with the namespace; a half-made link may not have.
  await run("ip", ["link", "del", netns]).catch(() => undefined);
  for (let round = 0; round < 10; round++) {
    let left = 0;
    for (const d of await cgroupDirs(prefix)) {
      await rmdir(d).catch(() => {
        left++;
      });
    }
    if (left === 0) break;
    await sleep(200);
  }
  const results = "/var/lib/cni/results";
  for (const f of await readdir(results).catch(() => [] as string[]))
    if (f.startsWith(prefix)) await rm(join(results, f), { force: true });
  if (dir) {
    const links = "/var/log/containers";
    for (const f of await readdir(links).catch(() => [] as string[])) {
      const target = await readlink(join(links, f)).catch(() => "");
      if (target.startsWith(`${dir}/`)) await rm(join(links, f), { force: true });
    }
  }
}

/**
 * Slots whose real nodes left something on this machine (a namespace or cgroups) although no
 * cluster holds their pod network lock: a run that crashed and whose reaper died too.
 */
export async function abandonedSlots(lockDir: string): Promise<number[]> {
  const slots = new Set<number>();
  for (const n of await readdir("/run/netns").catch(() => [] as string[])) {
    const m = /^krane-(\d+)$/.exec(n);
    if (m) slots.add(Number(m[1]));
  }
  for (const h of await cgroupHierarchies()) {
    if (!h.controllers.includes("memory")) continue;
    for (const n of await readdir(h.mount).catch(() => [] as string[])) {
      const m = /^krane-(\d+)-/.exec(n);
      if (m) slots.add(Number(m[1]));
    }
  }
  const out: number[] = [];
  for (const s of slots) {
    const locked = await stat(join(lockDir, String(s))).then(
      () => true,
      () => false,
    );
    if (!locked) out.push(s);
  }
  return out;
}

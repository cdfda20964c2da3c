// Starts a local cluster's real nodes: per node containerd (with runc and gVisor's runsc) and
// the kubelet, and per cluster kube-proxy and CoreDNS, all in the cluster's network namespace
// (host.ts) with their state under the cluster's directory (config.ts). The control plane is
// started by ../cluster.ts; this file only needs its API server address, CA and tokens.
import { execFile } from "node:child_process";
import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import {
  cniConfig,
  containerdConfig,
  corefile,
  KUBELET_SYSCTLS,
  kubeletConfig,
  kubeProxyConfig,
  nodeDirs,
  runscConfig,
  type NodeDirs,
} from "./config.js";
import { createCgroupRoot, inNamespace, type HostTools } from "./host.js";
import type { RealNodeSpec, RealNodesPlan } from "./plan.js";
import { REAL_NODE_ZONE } from "./plan.js";
import { NODE_CLASS_LABEL, ZONE_LABEL } from "../../contracts/cluster.js";

const run = promisify(execFile);

/**
 * Where every kubelet on a host listens for device plugins, whatever its --root-dir (a constant
 * of the kubelet's). A kubelet removes the file and binds it afresh as it starts, so two kubelets
 * starting at the same moment can race: one binds between the other's remove and bind, and the
 * loser exits ("bind: address already in use"; seen once in CI with a cluster's two real nodes).
 * Kubelets on this host therefore start one at a time, whichever cluster or process starts them
 * (a lock file beside that folder: the kubelet empties the folder itself), each once the one
 * before has bound the socket.
 */
const DEVICE_PLUGIN_SOCKET = "/var/lib/kubelet/device-plugins/kubelet.sock";
const KUBELET_START_LOCK = "/var/lib/kubelet/krane-kubelet-start.lock";

/**
 * Runs `f` holding the host's kubelet start lock: a file made exclusively, holding the holder's
 * pid. A holder that died leaves its file, which the next taker removes; a lock held for a
 * minute is taken over (a start takes about a second).
 */
async function withKubeletStartLock<T>(alive: (pid: number) => boolean, f: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 60_000;
  const mine = `${process.pid}:${Math.random().toString(36).slice(2)}`;
  for (;;) {
    try {
      writeFileSync(KUBELET_START_LOCK, mine, { flag: "wx" });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") {
        await mkdir(join(KUBELET_START_LOCK, ".."), { recursive: true });
        continue;
      }
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      let holder = "";
      try {
        holder = readFileSync(KUBELET_START_LOCK, "utf8");
      } catch {
        continue; // released meanwhile
      }
      const pid = Number(holder.split(":")[0]);
      // An empty file is a taker between making it and writing its pid: wait for it.
      if ((holder !== "" && !alive(pid)) || Date.now() > deadline) rmSync(KUBELET_START_LOCK, { force: true });
      else await sleep(50);
    }
  }
  try {
    return await f();
  } finally {
    try {
      if (readFileSync(KUBELET_START_LOCK, "utf8") === mine) rmSync(KUBELET_START_LOCK, { force: true });
    } catch {
      // Taken over and released already.
    }
  }
}

/** The device-plugin socket's inode and change time, or undefined while there is none. */
function devicePluginSocket(): { ino: number; ctimeMs: number } | undefined {
  try {
    const s = statSync(DEVICE_PLUGIN_SOCKET);
    return { ino: s.ino, ctimeMs: s.ctimeMs };
  } catch {
    return undefined;
  }
}

/**
 * Waits until the device-plugin socket is not `before` any more (true), or `p` exited, or 20 s
 * passed (false).
 */
async function devicePluginSocketRebound(
  p: NodeProcess,
  before: ReturnType<typeof devicePluginSocket>,
): Promise<boolean> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline && !p.hasExited()) {
    const now = devicePluginSocket();
    if (now && (!before || now.ino !== before.ino || now.ctimeMs > before.ctimeMs)) return true;
    await sleep(50);
  }
  return false;
}

/** A process the cluster supervises (../process.ts starts them). */
export interface NodeProcess {
  readonly name: string;
  readonly pid: number;
  hasExited(): boolean;
}

/**
 * How the cluster starts and watches processes: in their own process group, logging to a file,
 * recorded for stop and the reaper (the cluster passes its own, so this folder stays below it).
 */
export interface ProcessRunner<P extends NodeProcess> {
  start(spec: { name: string; command: string; args: string[]; logFile: string; env?: NodeJS.ProcessEnv }): P;
  /** Resolves once `probe` is true; fails with the log's tail when the process exits first or time runs out. */
  waitFor(p: P, what: string, probe: () => Promise<boolean>, timeoutMs: number): Promise<void>;
  /** Records the process under `key` (for stop and the reaper). */
  track(p: P, key: string): Promise<void>;
  /** Whether any process of this host with this pid is alive (a zombie is not). */
  readonly alive: (pid: number) => boolean;
}

/** The binaries real nodes run (the Go builds in the cache, and Debian's runc). */
export interface NodeBinaries extends HostTools {
  readonly runsc: string;
  readonly containerd: string;
  readonly runcShim: string;
  readonly runscShim: string;
  readonly ctr: string;
  readonly kubelet: string;
  readonly kubeProxy: string;
  readonly coredns: string;
}

/** An image to import into every real node: an OCI archive and the name its tag goes under. */
export interface NodeImage {
  readonly archive: string;
  /** Repository the archive's tags are named under, e.g. "krane.local/hello". */
  readonly repository: string;
}

export interface RealNodesContext<P extends NodeProcess> {
  readonly dir: string;
  readonly plan: RealNodesPlan;
  readonly bin: NodeBinaries;
  /** The API server as seen from the namespace (https://<host end of the link>:port). */
  readonly server: string;
  readonly caFile: string;
  /** Static tokens the API server knows: per node name, kube-proxy's and the DNS server's. */
  readonly tokens: {
    readonly nodes: Readonly<Record<string, string>>;
    readonly kubeProxy: string;
    readonly dns: string;
  };
  /** CA of the client certificate the API server presents to kubelets. */
  readonly kubeletClientCaFile: string;
  /** The sandbox image every node runs first (already an OCI archive). */
  readonly sandbox: NodeImage & { readonly name: string };
  /** More images every node gets before its kubelet starts. */
  readonly images: readonly NodeImage[];
  readonly processes: ProcessRunner<P>;
  readonly log: (line: string) => void;
}

/** Process keys in the cluster's state (the reaper and `stop` find them there). */
export const nodeProcessKey = (node: RealNodeSpec, what: "containerd" | "kubelet"): string => `${what}/${node.name}`;
export const KUBE_PROXY = "kube-proxy";
export const CLUSTER_DNS = "coredns";

/** A kubeconfig (JSON) for one user with a bearer token, trusting the API server's CA file. */
export function kubeconfig(server: string, caFile: string, user: string, token: string): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    "current-context": "local",
    clusters: [{ name: "local", cluster: { server, "certificate-authority": caFile } }],
    users: [{ name: user, user: { token } }],
    contexts: [{ name: "local", context: { cluster: "local", user } }],
  });
}

/** `ctr` against one node's containerd, in the k8s.io namespace the CRI uses. */
export function ctrArgs(bin: NodeBinaries, dirs: NodeDirs, args: string[]): [string, string[]] {
  return [bin.ctr, ["--address", dirs.containerdSocket, "--namespace", "k8s.io", ...args]];
}

export async function importImage(bin: NodeBinaries, dirs: NodeDirs, image: NodeImage): Promise<void> {
  const [cmd, args] = ctrArgs(bin, dirs, [
    "images",
    "import",
    "--platform",
    "linux/amd64",
    "--base-name",
    image.repository,
    image.archive,
  ]);
  try {
    await run(cmd, args, { maxBuffer: 16 * 1024 * 1024 });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`importing ${image.archive} into ${dirs.root}: ${(e.stderr || e.message).trim()}`);
  }
}

async function startNode<P extends NodeProcess>(ctx: RealNodesContext<P>, node: RealNodeSpec): Promise<P> {
  const { plan, bin } = ctx;
  const dirs = nodeDirs(ctx.dir, node);
  for (const d of [
    dirs.root,
    dirs.containerdRoot,
    dirs.containerdState,
    dirs.cniConfDir,
    dirs.ipamDir,
    dirs.kubeletRoot,
    dirs.podLogs,
    dirs.sysctlDir,
    dirs.registryHosts,
  ])
    await mkdir(d, { recursive: true });
  await writeFile(
    dirs.containerdConfig,
    containerdConfig(dirs, node, ctx.sandbox.name, {
      runcShim: bin.runcShim,
      runscShim: bin.runscShim,
      runc: bin.runc,
    }),
  );
  await writeFile(dirs.runscConfig, runscConfig(dirs, node, bin.runsc));
  await writeFile(join(dirs.cniConfDir, "10-krane.conflist"), cniConfig(dirs, node));
  await writeFile(dirs.kubeletConfig, kubeletConfig(dirs, node, plan, { clientCaFile: ctx.kubeletClientCaFile }));
  const token = ctx.tokens.nodes[node.name];
  if (!token) throw new Error(`no API token for node ${node.name}`);
  await writeFile(dirs.kubeletKubeconfig, kubeconfig(ctx.server, ctx.caFile, `system:node:${node.name}`, token), {
    mode: 0o600,
  });
  for (const [key, value] of Object.entries(KUBELET_SYSCTLS)) {
    await mkdir(join(dirs.sysctlDir, key, ".."), { recursive: true });
    await writeFile(join(dirs.sysctlDir, key), `${value}\n`);
  }
  await createCgroupRoot(node.cgroupRoot);
  await createCgroupRoot(`${node.cgroupRoot}/shims`);

  const logs = join(ctx.dir, "logs");
  const [nsenter, ...nsArgs] = inNamespace(plan);
  const containerd = ctx.processes.start({
    name: `containerd (${node.name})`,
    command: nsenter as string,
    args: [...nsArgs, bin.containerd, "--config", dirs.containerdConfig, "--log-level", "warn"],
    logFile: join(logs, `containerd-${node.name}.log`),
    env: { ...process.env, PATH: `${process.env.PATH ?? "/usr/bin:/bin"}:/usr/sbin:/sbin` },
  });
  await ctx.processes.track(containerd, nodeProcessKey(node, "containerd"));
  await ctx.processes.waitFor(
    containerd,
    "serve its socket",
    async () => {
      if (!existsSync(dirs.containerdSocket)) return false;
      const [cmd, args] = ctrArgs(bin, dirs, ["version"]);
      await run(cmd, args, { timeout: 5_000 });
      return true;
    },
    60_000,
  );
  for (const image of [ctx.sandbox, ...ctx.images]) await importImage(bin, dirs, image);

  // The kubelet's volumes (tmpfs for secrets and tokens) must reach containerd and runc: its root
  // is a shared mount, and the kubelet runs in a mount namespace of its own (propagation
  // unchanged) whose only private change is the masked kernel settings.
  await run("mount", ["--bind", dirs.kubeletRoot, dirs.kubeletRoot]);
  await run("mount", ["--make-shared", dirs.kubeletRoot]);
  const masks = Object.keys(KUBELET_SYSCTLS)
    .map((k) => `mount --bind ${join(dirs.sysctlDir, k)} /proc/sys/${k}`)
    .join(" && ");
  const labels = [
    `${NODE_CLASS_LABEL}=${node.pool}`,
    `${ZONE_LABEL}=${REAL_NODE_ZONE}`,
    "topology.kubernetes.io/region=local",
    "node.kubernetes.io/instance-type=real",
    "type=real",
  ].join(",");
  // One kubelet of this host at a time until it has bound the device-plugin socket (above).
  return withKubeletStartLock(ctx.processes.alive, async () => {
    const before = devicePluginSocket();
    const kubelet = startKubelet(ctx, node, dirs, labels, masks, logs);
    await ctx.processes.track(kubelet, nodeProcessKey(node, "kubelet"));
    const started = Date.now();
    if (await devicePluginSocketRebound(kubelet, before))
      ctx.log(`kubelet (${node.name}) bound ${DEVICE_PLUGIN_SOCKET} in ${Date.now() - started} ms`);
    else if (!kubelet.hasExited())
      ctx.log(`kubelet (${node.name}) did not bind ${DEVICE_PLUGIN_SOCKET} within 20 s; starting the next one`);
    return kubelet;
  });
}

function startKubelet<P extends NodeProcess>(
  ctx: RealNodesContext<P>,
  node: RealNodeSpec,
  dirs: NodeDirs,
  labels: string,
  masks: string,
  logs: string,
): P {
  const { plan, bin } = ctx;
  const [nsenter, ...nsArgs] = inNamespace(plan);
  return ctx.processes.start({
    name: `kubelet (${node.name})`,
    command: nsenter as string,
    args: [
      ...nsArgs,
      "unshare",
      "--mount",
      "--propagation",
      "unchanged",
      "--",
      "sh",
      "-c",
      // The kubelet sets vm.overcommit_memory, kernel.panic and friends machine-wide unless
      // they already have its values; this machine is shared, so it reads its values from
      // files bind-mounted over /proc/sys in its own mount namespace and leaves the kernel alone.
      `mount --make-rprivate /proc && ${masks} && exec "$0" "$@"`,
      bin.kubelet,
      "--config",
      dirs.kubeletConfig,
      "--kubeconfig",
      dirs.kubeletKubeconfig,
      "--root-dir",
      dirs.kubeletRoot,
      "--hostname-override",
      node.name,
      "--node-ip",
      plan.nodeIp,
      "--node-labels",
      labels,
      "-v=1",
    ],
    logFile: join(logs, `kubelet-${node.name}.log`),
    env: { ...process.env, PATH: `${process.env.PATH ?? "/usr/bin:/bin"}:/usr/sbin:/sbin` },
  });
}

/** Starts every real node, kube-proxy and CoreDNS; returns each kubelet (to wait on its Node). */
export async function startRealNodes<P extends NodeProcess>(ctx: RealNodesContext<P>): Promise<P[]> {
  const logs = join(ctx.dir, "logs");
  const shared = join(ctx.dir, "nodes");
  await mkdir(shared, { recursive: true });
  const [nsenter, ...nsArgs] = inNamespace(ctx.plan);
  const first = ctx.plan.nodes[0];
  if (!first) throw new Error("no real nodes planned");

  const proxyKubeconfig = join(shared, "kube-proxy.kubeconfig");
  await writeFile(proxyKubeconfig, kubeconfig(ctx.server, ctx.caFile, "system:kube-proxy", ctx.tokens.kubeProxy), {
    mode: 0o600,
  });
  const proxyConfig = join(shared, "kube-proxy.yaml");
  await writeFile(proxyConfig, kubeProxyConfig(ctx.plan, proxyKubeconfig, first.name));
  const proxy = ctx.processes.start({
    name: KUBE_PROXY,
    command: nsenter as string,
    args: [...nsArgs, ctx.bin.kubeProxy, "--config", proxyConfig, "-v=1"],
    logFile: join(logs, "kube-proxy.log"),
    env: { ...process.env, PATH: `${process.env.PATH ?? "/usr/bin:/bin"}:/usr/sbin:/sbin` },
  });
  await ctx.processes.track(proxy, KUBE_PROXY);

  const dnsKubeconfig = join(shared, "coredns.kubeconfig");
  await writeFile(dnsKubeconfig, kubeconfig(ctx.server, ctx.caFile, "krane:cluster-dns", ctx.tokens.dns), {
    mode: 0o600,
  });
  const dnsConfig = join(shared, "Corefile");
  await writeFile(dnsConfig, corefile(ctx.plan, dnsKubeconfig));
  const dns = ctx.processes.start({
    name: CLUSTER_DNS,
    command: nsenter as string,
    args: [...nsArgs, ctx.bin.coredns, "-conf", dnsConfig],
    logFile: join(logs, "coredns.log"),
  });
  await ctx.processes.track(dns, CLUSTER_DNS);

  return Promise.all(ctx.plan.nodes.map((n) => startNode(ctx, n)));
}

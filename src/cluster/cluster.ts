// Starts and stops a real local Kubernetes control plane on loopback: etcd, kube-apiserver
// (RBAC on), kube-controller-manager, kube-scheduler and KWOK simulating the nodes, on free
// ports so several clusters can run at once, with the agent's admission fence installed. Each
// cluster claims its own pod network (pod-network.ts); with `standins` a pod stand-in process
// serves Running pods on this machine; with `realNodes` some node pools get real nodes instead
// (kubelet, containerd, runc and gVisor: nodes/), whose containers really run.
//
// A cluster is either attached (tests, `krane dev`: a reaper stops it when the owning process
// dies, however it dies, and its directory is removed) or detached (`krane cluster up`: it keeps
// running and is found again by name through its state file).
import { KubeConfig } from "@kubernetes/client-node";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import { parseAllDocuments } from "yaml";
import {
  CONTAINERD_BUILD,
  COREDNS_BUILD,
  ensureExposureCrds,
  ensureGoBuild,
  ensureKubeAssets,
  ensureMetricsServer,
  GVISOR_BUILD,
  KUBE_NODE_BUILD,
  KUBE_VERSION,
  type KubeAssets,
} from "./build.js";
import { createIfMissing, getJson, kubeRequest, type KubeEndpoint } from "./kube-http.js";
import { featureGatesFlag } from "./nodes/feature-gates.js";
import {
  ComponentStartError,
  isAlive,
  logTail,
  startComponent,
  startReaper,
  stopPid,
  waitUntilHealthy,
  type RunningComponent,
} from "./process.js";
import { kwokStagesConfig, type PodBehaviour } from "./pods.js";
import { installFence } from "./fence.js";
import { warmKwokIpPools } from "./kwok-ip.js";
import { startCertificates, type LocalCertificates } from "./certificates.js";
import { startGateways, type LocalGateways } from "./gateway.js";
import {
  aggregationArgs,
  aggregationPki,
  METRICS_SERVER,
  startMetrics,
  type AggregationPki,
  type LocalMetrics,
} from "./metrics.js";
import {
  ciliumNetworkPolicyCrd,
  DEFAULT_NODE_PLAN,
  gvisorRuntimeClass,
  nodeCount,
  renderNodes,
  type NodePlan,
  type NodePool,
} from "./topology.js";
import {
  claimPodNetwork,
  localAddress,
  nodePodCidrs,
  podAddressMap,
  podNetworkLockDir,
  podNetworkLockFile,
  releasePodNetwork,
  type PodNetwork,
} from "./pod-network.js";
import { nodeEntryArgs } from "./node-entry.js";
import { realNodesPlan, type RealNodesPlan } from "./nodes/plan.js";
import { abandonedSlots, cleanupRealNodes, createNetwork, realNodeSupport } from "./nodes/host.js";
import { realNodeCredentials, DNS_USER, type RealNodeCredentials } from "./nodes/pki.js";
import {
  CLUSTER_DNS,
  importImage,
  KUBE_PROXY,
  nodeProcessKey,
  startRealNodes,
  type NodeBinaries,
  type NodeImage,
} from "./nodes/nodes.js";
import { nodeDirs, registryHostsToml } from "./nodes/config.js";
import { localStorageClass, localVolumes, volumePath, VOLUMES_PER_NODE } from "./nodes/volumes.js";
import { sandboxImage } from "./images.js";
import {
  isSecretsStoreProcess,
  startSecretsStore,
  type LocalSecretsStore,
  type SecretsStoreOptions,
} from "./secrets-store.js";

/** The pod stand-in process (src/cluster/standin), started only with `standins: true`. */
export const STANDIN = "pod-standin";
/** The local Gateways' processes (./gateway.ts), started only with `gateway: true`. */
export const GATEWAY_PROCESSES = ["cert-manager", "pod-proxy", "traefik"] as const;
/** Control-plane components, the stand-in, the Gateways, metrics-server, and real nodes' processes ("kubelet/<node>" …). */
type ProcessName =
  ComponentName | typeof STANDIN | (typeof GATEWAY_PROCESSES)[number] | typeof METRICS_SERVER | (string & {});

export const COMPONENTS = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"] as const;
export type ComponentName = (typeof COMPONENTS)[number];

export interface StartOptions {
  /** Cluster name; detached clusters are found again by it. Default "krane". */
  name?: string;
  /** Keep running after this process exits (`krane cluster up`). Default false. */
  detached?: boolean;
  nodes?: NodePlan;
  /** How simulated pods behave (readiness delay, images that never become Ready). */
  pods?: PodBehaviour;
  /** Install the agent's admission fence (deploy/rbac/fence.yaml). Default true. */
  fence?: boolean;
  /**
   * Serve Running pods on this machine (user pods: a small HTTP server; sentinel pods: a real
   * `krane sentinel`). Off by default: it costs a process and about a second of start-up.
   */
  standins?: boolean;
  /**
   * Run real Gateways (Traefik, built from Go modules on first use): `krane-gateways/public`
   * and `krane-gateways/internal`, each on a loopback port (state.gateways). Off by default.
   */
  gateway?: boolean;
  /**
   * Run cert-manager's controllers (built from Go modules on first use) with a CA ClusterIssuer
   * (state.certificates); with `gateway`, Traefik also gets an HTTPS entry point
   * (state.gateways.https) for the Gateways agents render with TLS listeners. Off by default.
   */
  tls?: boolean;
  /**
   * Give these node pools a real node each (kubelet, containerd, runc and gVisor's runsc on this
   * machine; nodes/README.md) instead of KWOK nodes: their pods' containers really run, and pod
   * IPs and Service IPs are reachable from this machine. Needs root (realNodeSupport says what
   * is missing). Not with `standins`.
   */
  realNodes?: readonly NodePool[];
  /**
   * Run the Secrets Store CSI driver (built from its Go module on first use) on every real node,
   * with the driver project's test provider serving these objects (state.secretsStore names the
   * provider an agent's --secret-store-provider gives). Needs `realNodes`.
   */
  secretsStore?: SecretsStoreOptions;
  /**
   * Run metrics-server (built from its Go module on first use) against the real nodes' kubelets,
   * serving the resource metrics API metrics.k8s.io/v1beta1 (PodMetrics, NodeMetrics) through
   * the API server's aggregation layer (state.metrics; ./metrics.ts). Needs `realNodes`.
   */
  metrics?: boolean;
  /** OCI images to import into every real node before it joins (besides the sandbox image). */
  images?: readonly NodeImage[];
  log?: (line: string) => void;
}

export interface ClusterState {
  name: string;
  dir: string;
  detached: boolean;
  kubeVersion: string;
  server: string;
  kubeconfigPath: string;
  adminToken: string;
  ports: { etcd: number; etcdPeer: number; apiserver: number; kwok: number };
  pids: { [key: string]: number };
  logs: Record<ComponentName, string> & { [STANDIN]?: string };
  /** Pod IPs come from podNetwork.cidr and are served on this machine in podNetwork.localCidr. */
  podNetwork?: PodNetwork;
  reaperPid?: number;
  /** With `gateway: true`: the Gateways and the loopback ports they listen on. */
  gateways?: LocalGateways;
  /** With `tls: true`: the CA ClusterIssuer and the CA's certificate. */
  certificates?: LocalCertificates;
  /** With `secretsStore`: the provider agents name. */
  secretsStore?: LocalSecretsStore;
  /** With `metrics: true`: the APIService of metrics.k8s.io/v1beta1 and how often it scrapes. */
  metrics?: LocalMetrics;
  /** With `realNodes`: the pools that have a real node (the rest of the plan follows from the slot). */
  realNodes?: { pools: NodePool[]; names: string[] };
  startedAt: string;
  nodes: string[];
}

/** Where detached clusters keep their state: $KRANE_HOME/clusters/<name>. */
export function clustersHome(): string {
  return join(process.env.KRANE_HOME || join(homedir(), ".krane"), "clusters");
}

export function clusterDir(name: string): string {
  return join(clustersHome(), name);
}

async function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      srv.close(() => (addr && typeof addr === "object" ? resolve(addr.port) : reject(new Error("no port"))));
    });
  });
}

function validName(name: string): string {
  if (!/^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$/.test(name)) {
    throw new Error(`cluster name "${name}": use 1-40 lowercase letters, digits and dashes`);
  }
  return name;
}

export class LocalCluster {
  private stopping: Promise<void> | undefined;

  constructor(readonly state: ClusterState) {}

  get name(): string {
    return this.state.name;
  }
  get dir(): string {
    return this.state.dir;
  }
  get server(): string {
    return this.state.server;
  }
  get kubeconfigPath(): string {
    return this.state.kubeconfigPath;
  }

  get podNetwork(): PodNetwork | undefined {
    return this.state.podNetwork;
  }

  /**
   * Where this machine reaches a pod IP of this cluster: the IP itself on real nodes (routed into
   * the cluster's network namespace), else where the pod stand-in listens.
   */
  localAddress(podIp: string): string {
    if (this.state.realNodes) return podIp;
    return this.state.podNetwork ? localAddress(this.state.podNetwork, podIp) : podIp;
  }

  /**
   * What processes on this machine pass as --pod-address-map (the agent, a sentinel) to reach
   * this cluster's pods: the stand-ins' loopback addresses; undefined with real nodes, whose pod
   * IPs this machine reaches as they are.
   */
  get podAddressMap(): string | undefined {
    return this.state.podNetwork && !this.state.realNodes ? podAddressMap(this.state.podNetwork) : undefined;
  }

  /** The real nodes' layout (namespace, ranges, node names), when the cluster has real nodes. */
  get realNodes(): RealNodesPlan | undefined {
    const r = this.state.realNodes;
    return r && this.state.podNetwork ? realNodesPlan(this.state.podNetwork.slot, r.pools) : undefined;
  }

  /** Imports OCI images into every real node (a pod naming one then starts without a pull). */
  async importImages(images: readonly NodeImage[]): Promise<void> {
    const plan = this.realNodes;
    if (!plan) throw new Error(`cluster ${this.name} has no real nodes to import images into`);
    const bin = await nodeBinaries();
    await Promise.all(
      plan.nodes.map(async (n) => {
        for (const image of images) await importImage(bin, nodeDirs(this.state.dir, n), image);
      }),
    );
  }

  /**
   * Makes every real node trust a private registry's certificate authority for pulls from `host`
   * (host:port, as images name it): containerd's hosts.toml for it, read at the next pull.
   */
  async trustRegistry(host: string, caPem: string): Promise<void> {
    const plan = this.realNodes;
    const first = plan?.nodes[0];
    if (!first) throw new Error(`cluster ${this.name} has no real nodes to trust a registry`);
    // containerd names a host's directory after host:port as given.
    if (!/^[A-Za-z0-9.-]+(:\d+)?$/.test(host)) throw new Error(`registry host "${host}" is not host[:port]`);
    const dir = join(nodeDirs(this.state.dir, first).registryHosts, host);
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, "ca.crt"), caPem);
    await writeFile(join(dir, "hosts.toml"), registryHostsToml(host, join(dir, "ca.crt")));
  }

  endpoint(): KubeEndpoint {
    return {
      server: this.state.server,
      token: this.state.adminToken,
      ca: readFileSync(join(this.state.dir, "pki", "apiserver.crt"), "utf8"),
    };
  }

  /** A client-node KubeConfig with admin rights on this cluster. */
  kubeConfig(): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromFile(this.state.kubeconfigPath);
    return kc;
  }

  /** Components whose process is running. */
  alive(): Record<ComponentName, boolean> {
    return Object.fromEntries(
      COMPONENTS.map((c) => [c, this.state.pids[c] !== undefined && isAlive(this.state.pids[c])]),
    ) as Record<ComponentName, boolean>;
  }

  /** Resident memory of the control-plane processes, in bytes. */
  residentBytes(): number {
    let total = 0;
    for (const pid of Object.values(this.state.pids)) {
      try {
        const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
        if (m) total += Number(m[1]) * 1024;
      } catch {
        // not running
      }
    }
    return total;
  }

  /** The local Gateways, when the cluster was started with `gateway: true`. */
  get gateways(): LocalGateways | undefined {
    return this.state.gateways;
  }

  /** The local CA ClusterIssuer, when the cluster was started with `tls: true`. */
  get certificates(): LocalCertificates | undefined {
    return this.state.certificates;
  }

  /** The external secret store on the real nodes, when the cluster was started with `secretsStore`. */
  get secretsStore(): LocalSecretsStore | undefined {
    return this.state.secretsStore;
  }

  /** The resource metrics API, when the cluster was started with `metrics: true`. */
  get metrics(): LocalMetrics | undefined {
    return this.state.metrics;
  }

  /** Stops every component (newest first), then removes the cluster's directory. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      const metricsServer = this.state.pids[METRICS_SERVER];
      if (metricsServer !== undefined) await stopPid(metricsServer, 3000);
      for (const g of [...GATEWAY_PROCESSES].reverse()) {
        const pid = this.state.pids[g];
        if (pid !== undefined) await stopPid(pid, 3000);
      }
      // The stand-in first: its sentinels drain while the API server is still up.
      const standin = this.state.pids[STANDIN];
      if (standin !== undefined) await stopPid(standin, 8000);
      // Real nodes: kubelets first (they would restart what containerd stops), then the rest;
      // whatever they leave (shims, containers, sandboxes, mounts) goes with the cleanup below.
      const plan = this.realNodes;
      if (plan) {
        const pid = (key: string) => this.state.pids[key];
        const stopAll = (keys: string[]) =>
          Promise.all(keys.map((k) => pid(k)).flatMap((p) => (p === undefined ? [] : [stopPid(p, 3000)])));
        await stopAll(plan.nodes.map((n) => nodeProcessKey(n, "kubelet")));
        await stopAll(Object.keys(this.state.pids).filter(isSecretsStoreProcess));
        await stopAll([KUBE_PROXY, CLUSTER_DNS, ...plan.nodes.map((n) => nodeProcessKey(n, "containerd"))]);
      }
      const order = [...COMPONENTS].reverse();
      for (const c of order) {
        const pid = this.state.pids[c];
        if (pid !== undefined) await stopPid(pid, c === "etcd" ? 5000 : 3000);
      }
      if (this.state.reaperPid !== undefined) await stopPid(this.state.reaperPid, 500);
      if (plan) await cleanupRealNodes(plan.slot, this.state.dir);
      if (this.state.podNetwork) await releasePodNetwork(this.state.podNetwork, this.state.dir);
      await rm(this.state.dir, { recursive: true, force: true });
    })();
    return this.stopping;
  }
}

/** Finds a detached cluster started earlier with `krane cluster up`. */
export async function loadCluster(name = "krane"): Promise<LocalCluster | undefined> {
  const file = join(clusterDir(validName(name)), "state.json");
  if (!existsSync(file)) return undefined;
  return new LocalCluster(JSON.parse(await readFile(file, "utf8")) as ClusterState);
}

function kubeconfigYaml(name: string, server: string, caPem: string, token: string): string {
  const ca = Buffer.from(caPem).toString("base64");
  return [
    "apiVersion: v1",
    "kind: Config",
    `current-context: ${name}`,
    "clusters:",
    `- name: ${name}`,
    "  cluster:",
    `    server: ${server}`,
    `    certificate-authority-data: ${ca}`,
    "users:",
    `- name: ${name}-admin`,
    "  user:",
    `    token: ${token}`,
    "contexts:",
    `- name: ${name}`,
    "  context:",
    `    cluster: ${name}`,
    `    user: ${name}-admin`,
    "",
  ].join("\n");
}

function portInUse(err: unknown): boolean {
  return err instanceof ComponentStartError && /address already in use|bind: /i.test(err.tail);
}

/** The binaries of real nodes, built into the cache on first use. */
async function nodeBinaries(log: (line: string) => void = () => {}): Promise<NodeBinaries> {
  const support = await realNodeSupport();
  if (!support.ok) throw new Error(`this machine cannot run real nodes: ${support.reason}`);
  const kubeNode = await ensureGoBuild(KUBE_NODE_BUILD, log);
  const containerd = await ensureGoBuild(CONTAINERD_BUILD, log);
  const gvisor = await ensureGoBuild(GVISOR_BUILD, log);
  const coredns = await ensureGoBuild(COREDNS_BUILD, log);
  return {
    ...support.tools,
    kubelet: join(kubeNode, "bin", "kubelet"),
    kubeProxy: join(kubeNode, "bin", "kube-proxy"),
    containerd: join(containerd, "bin", "containerd"),
    runcShim: join(containerd, "bin", "containerd-shim-runc-v2"),
    ctr: join(containerd, "bin", "ctr"),
    runscShim: join(gvisor, "bin", "containerd-shim-runsc-v1"),
    runsc: join(gvisor, "bin", "runsc"),
    coredns: join(coredns, "bin", "coredns"),
  };
}

/** Starts a local cluster and waits until its nodes are Ready and its APIs are installed. */
export async function startCluster(opts: StartOptions = {}): Promise<LocalCluster> {
  const name = validName(opts.name ?? "krane");
  const log = opts.log ?? (() => {});
  const realPools = [...new Set(opts.realNodes ?? [])];
  if (opts.secretsStore && realPools.length === 0)
    throw new Error("the Secrets Store CSI driver runs on real nodes: give realNodes too");
  if (opts.metrics && realPools.length === 0)
    throw new Error("metrics-server reads the kubelets of real nodes (KWOK's report no usage): give realNodes too");
  if (realPools.length > 0 && opts.standins)
    throw new Error(
      "a cluster runs either real nodes or pod stand-ins, not both (real containers replace the stand-ins)",
    );
  const assets = await ensureKubeAssets(log);
  // cert-manager's and Envoy Gateway's CRDs (the gateway kind's objects), installed with Gateway API's.
  const exposureCrds = await ensureExposureCrds(log);
  const nodeBin = realPools.length > 0 ? await nodeBinaries(log) : undefined;
  const sandbox = nodeBin ? await sandboxImage(log) : undefined;
  const metricsBuild = opts.metrics ? await ensureMetricsServer(log) : undefined;
  const detached = opts.detached ?? false;

  let dir: string;
  if (detached) {
    dir = clusterDir(name);
    const existing = await loadCluster(name);
    if (existing && Object.values(existing.alive()).some(Boolean)) {
      throw new Error(
        `cluster "${name}" is already running (krane cluster status --name ${name}); stop it with krane cluster down --name ${name}`,
      );
    }
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true });
  } else {
    dir = await mkdtemp(join(tmpdir(), `krane-${name}-`));
  }
  await mkdir(join(dir, "pki"), { recursive: true });
  await mkdir(join(dir, "logs"), { recursive: true });

  const state: ClusterState = {
    name,
    dir,
    detached,
    kubeVersion: KUBE_VERSION,
    server: "",
    kubeconfigPath: join(dir, "kubeconfig"),
    adminToken: randomBytes(24).toString("hex"),
    ports: { etcd: 0, etcdPeer: 0, apiserver: 0, kwok: 0 },
    pids: {},
    logs: Object.fromEntries(COMPONENTS.map((c) => [c, join(dir, "logs", `${c}.log`)])) as Record<
      ComponentName,
      string
    >,
    startedAt: new Date().toISOString(),
    nodes: [],
  };
  const cluster = new LocalCluster(state);
  const pidFile = join(dir, "pids");
  const track = async (c: RunningComponent, key: ProcessName) => {
    state.pids[key] = c.pid;
    await writeFile(pidFile, Object.values(state.pids).join(" "));
  };
  const network = await claimPodNetwork(dir);
  state.podNetwork = network;
  const realPlan = realPools.length > 0 ? realNodesPlan(network.slot, realPools) : undefined;
  if (realPlan) {
    // Whatever an earlier cluster of this slot (or one whose lock is gone) left behind.
    await cleanupRealNodes(network.slot);
    for (const slot of await abandonedSlots(podNetworkLockDir())) await cleanupRealNodes(slot);
    state.realNodes = { pools: realPools, names: realPlan.nodes.map((n) => n.name) };
  }
  if (!detached) {
    const cleanup = realPlan
      ? [
          process.execPath,
          ...nodeEntryArgs(import.meta.url, "./nodes/cleanup-main"),
          "--slot",
          String(network.slot),
          "--dir",
          dir,
        ]
      : undefined;
    state.reaperPid = startReaper(process.pid, pidFile, dir, podNetworkLockFile(network), cleanup);
  }

  try {
    let credentials: RealNodeCredentials | undefined;
    let aggregation: AggregationPki | undefined;
    if (realPlan) {
      await createNetwork(realPlan);
      credentials = await realNodeCredentials(join(dir, "pki"), realPlan);
      // The aggregation layer only where an aggregated API server runs (a few openssl runs).
      if (metricsBuild) aggregation = await aggregationPki(join(dir, "pki"), realPlan.hostIp);
    }
    await writePki(dir, state.adminToken, credentials?.tokenLines ?? []);
    await startWithFreePorts(
      async () => {
        state.ports.etcd = await freePort();
        state.ports.etcdPeer = await freePort();
        const etcd = startComponent({
          name: "etcd",
          command: assets.bin.etcd,
          args: etcdArgs(dir, state.ports),
          logFile: state.logs.etcd,
        });
        await track(etcd, "etcd");
        await waitUntilHealthy(etcd, () => etcdHealthy(state.ports.etcd), 30_000);
      },
      () => stopTracked(state, "etcd"),
    );
    // With real nodes the API server listens on this machine's end of their link, so kubelets,
    // kube-proxy and pods (through the `kubernetes` Service) reach it; else on loopback.
    const apiHost = realPlan?.hostIp ?? "127.0.0.1";
    await startWithFreePorts(
      async () => {
        state.ports.apiserver = await freePort(apiHost);
        state.server = `https://${apiHost}:${state.ports.apiserver}`;
        const api = startComponent({
          name: "kube-apiserver",
          command: assets.bin["kube-apiserver"],
          args: apiserverArgs(
            dir,
            state.ports,
            realPlan && credentials ? { plan: realPlan, credentials, aggregation } : undefined,
          ),
          logFile: state.logs["kube-apiserver"],
        });
        await track(api, "kube-apiserver");
        const ep: KubeEndpoint = { server: state.server, token: state.adminToken };
        await waitUntilHealthy(api, async () => (await kubeRequest(ep, "GET", "/readyz")).status === 200, 90_000);
      },
      () => stopTracked(state, "kube-apiserver"),
    );

    const caPem = await readFile(join(dir, "pki", "apiserver.crt"), "utf8");
    await writeFile(state.kubeconfigPath, kubeconfigYaml(name, state.server, caPem, state.adminToken), { mode: 0o600 });
    const ep = cluster.endpoint();

    // The controllers, the scheduler and KWOK only need the API server; start them together.
    state.ports.kwok = await freePort();
    const kwokDocs = await Promise.all(assets.kwokStages.map((f) => readFile(f, "utf8")));
    await writeFile(join(dir, "kwok.yaml"), kwokStagesConfig(kwokDocs, opts.pods));
    const kcm = startComponent({
      name: "kube-controller-manager",
      command: assets.bin["kube-controller-manager"],
      args: controllerManagerArgs(dir, state.kubeconfigPath, realPlan !== undefined),
      logFile: state.logs["kube-controller-manager"],
    });
    await track(kcm, "kube-controller-manager");
    const sched = startComponent({
      name: "kube-scheduler",
      command: assets.bin["kube-scheduler"],
      args: ["--kubeconfig", state.kubeconfigPath, "--leader-elect=false", "--secure-port=0", "-v=1"],
      logFile: state.logs["kube-scheduler"],
    });
    await track(sched, "kube-scheduler");
    const kwok = startComponent({
      name: "kwok",
      command: assets.bin.kwok,
      args: [
        "--kubeconfig",
        state.kubeconfigPath,
        // Beside real nodes KWOK must leave them (and their pods) alone: it manages only its own.
        ...(realPlan
          ? ["--manage-nodes-with-annotation-selector", `${KWOK_NODE_ANNOTATION}=fake`]
          : ["--manage-all-nodes=true"]),
        "--config",
        join(dir, "kwok.yaml"),
        "--server-address",
        `127.0.0.1:${state.ports.kwok}`,
        "--cidr",
        realPlan?.kwokCidr ?? network.cidr,
        "--node-ip",
        "10.0.0.1",
        "--node-lease-duration-seconds",
        "40",
      ],
      logFile: state.logs.kwok,
    });
    await track(kwok, "kwok");
    let standin: RunningComponent | undefined;
    if (opts.standins) {
      state.logs[STANDIN] = join(dir, "logs", `${STANDIN}.log`);
      standin = startComponent({
        name: STANDIN,
        command: process.execPath,
        args: [
          ...nodeEntryArgs(import.meta.url, "./standin/main"),
          "--kubeconfig",
          state.kubeconfigPath,
          "--dir",
          dir,
          "--pod-network-slot",
          String(network.slot),
          "--krane-bin",
          fileURLToPath(new URL("../../bin/krane.js", import.meta.url)),
        ],
        logFile: state.logs[STANDIN],
      });
      await track(standin, STANDIN);
    }

    await installApis(ep, { ...assets, crds: [...assets.crds, ...exposureCrds] });
    if (opts.fence ?? true) await installFence(ep);
    // KWOK nodes for the pools without a real node (a pool with both would spread pods over fake
    // and real nodes alike).
    const base = opts.nodes ?? DEFAULT_NODE_PLAN;
    const plan: NodePlan = { ...base, ...Object.fromEntries(realPools.map((p) => [p, 0])) };
    const nodes = renderNodes(plan, nodePodCidrs(network, nodeCount(plan), realPlan ? 17 : 16));
    await Promise.all(nodes.map((n) => createIfMissing(ep, "/api/v1/nodes", n)));
    state.nodes = nodes.map((n) => n.metadata.name);
    const waitOn: RunningComponent[] = [kcm, sched, kwok];
    if (realPlan && credentials && nodeBin && sandbox) {
      await installClusterDnsRbac(ep);
      const kubelets = await startRealNodes({
        dir,
        plan: realPlan,
        bin: nodeBin,
        server: state.server,
        caFile: join(dir, "pki", "apiserver.crt"),
        tokens: credentials.tokens,
        kubeletClientCaFile: credentials.kubeletClientCa,
        sandbox,
        images: opts.images ?? [],
        processes: {
          start: startComponent,
          waitFor: (p, what, probe, ms) => waitUntilHealthy(p, probe, ms, what),
          track,
          alive: isAlive,
        },
        log,
      });
      waitOn.push(...kubelets);
      state.nodes.push(...realPlan.nodes.map((n) => n.name));
      await installLocalVolumes(ep, realPlan, dir);
    }
    await waitForNodesReady(ep, state.nodes, waitOn);
    await waitUntilHealthy(kcm, () => defaultServiceAccountExists(ep), 30_000);
    await warmKwokIpPools(
      ep,
      nodes.map((n) => n.metadata.name),
      (probe, what) => waitUntilHealthy(kwok, probe, 60_000, what),
    );
    if (standin) await waitUntilHealthy(standin, async () => existsSync(join(dir, "pod-standin.ready")), 60_000);
    if (opts.secretsStore && realPlan) {
      state.secretsStore = await startSecretsStore(
        { dir, endpoint: ep, kubeconfigPath: state.kubeconfigPath, plan: realPlan, options: opts.secretsStore, log },
        (c, key) => track(c, key),
      );
    }
    if (metricsBuild && realPlan && aggregation) {
      state.metrics = await startMetrics(
        {
          dir,
          endpoint: ep,
          server: state.server,
          caFile: join(dir, "pki", "apiserver.crt"),
          hostIp: realPlan.hostIp,
          pki: aggregation,
          build: metricsBuild,
          freePort,
          log,
        },
        (c) => track(c, METRICS_SERVER),
      );
    }
    if (opts.tls) {
      state.certificates = await startCertificates(
        { dir, endpoint: ep, kubeconfigPath: state.kubeconfigPath, log },
        (c) => track(c, c.name as ProcessName),
      );
    }
    if (opts.gateway) {
      state.gateways = await startGateways(
        {
          dir,
          endpoint: ep,
          kubeconfigPath: state.kubeconfigPath,
          network,
          realPods: realPlan?.routed,
          https: opts.tls,
          freePort,
          log,
        },
        (c) => track(c, c.name as ProcessName),
      );
    }
    await writeFile(join(dir, "state.json"), JSON.stringify(state, null, 2));
    return cluster;
  } catch (err) {
    await cluster.stop();
    throw err;
  }
}

/** KWOK's own nodes carry this annotation (topology.ts); with real nodes beside them KWOK selects by it. */
const KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node";

/** The default StorageClass `local` and each real node's pre-made volumes (nodes/volumes.ts). */
async function installLocalVolumes(ep: KubeEndpoint, plan: RealNodesPlan, dir: string): Promise<void> {
  await createIfMissing(ep, "/apis/storage.k8s.io/v1/storageclasses", localStorageClass);
  for (const node of plan.nodes) {
    const dirs = nodeDirs(dir, node);
    for (let i = 0; i < VOLUMES_PER_NODE; i++) await mkdir(volumePath(dirs, i), { recursive: true, mode: 0o755 });
    for (const pv of localVolumes(node, dirs)) await createIfMissing(ep, "/api/v1/persistentvolumes", pv);
  }
}

/** What the DNS server reads: Services, their EndpointSlices and namespaces. */
async function installClusterDnsRbac(ep: KubeEndpoint): Promise<void> {
  const name = "krane:cluster-dns";
  await createIfMissing(ep, "/apis/rbac.authorization.k8s.io/v1/clusterroles", {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRole",
    metadata: { name },
    rules: [
      { apiGroups: [""], resources: ["services", "namespaces", "endpoints", "pods"], verbs: ["list", "watch"] },
      { apiGroups: ["discovery.k8s.io"], resources: ["endpointslices"], verbs: ["list", "watch"] },
    ],
  });
  await createIfMissing(ep, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRoleBinding",
    metadata: { name },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name },
    subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: DNS_USER }],
  });
}

async function stopTracked(state: ClusterState, c: ComponentName): Promise<void> {
  const pid = state.pids[c];
  if (pid !== undefined) await stopPid(pid, 2000);
  delete state.pids[c];
}

/** Runs a start attempt; when the component lost a race for its port, tries fresh ports. */
async function startWithFreePorts(attempt: () => Promise<void>, cleanup: () => Promise<void>): Promise<void> {
  for (let i = 1; ; i++) {
    try {
      return await attempt();
    } catch (err) {
      if (i >= 3 || !portInUse(err)) throw err;
      await cleanup();
    }
  }
}

async function writePki(dir: string, adminToken: string, extraTokenLines: readonly string[]): Promise<void> {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", {
    modulusLength: 2048,
    publicKeyEncoding: { type: "spki", format: "pem" },
    privateKeyEncoding: { type: "pkcs8", format: "pem" },
  });
  await writeFile(join(dir, "pki", "sa.key"), privateKey, { mode: 0o600 });
  await writeFile(join(dir, "pki", "sa.pub"), publicKey);
  const lines = [`${adminToken},admin,admin,"system:masters"`, ...extraTokenLines];
  await writeFile(join(dir, "pki", "tokens.csv"), `${lines.join("\n")}\n`, { mode: 0o600 });
}

function etcdArgs(dir: string, ports: ClusterState["ports"]): string[] {
  const client = `http://127.0.0.1:${ports.etcd}`;
  const peer = `http://127.0.0.1:${ports.etcdPeer}`;
  return [
    "--name",
    "default",
    "--data-dir",
    join(dir, "etcd"),
    "--listen-client-urls",
    client,
    "--advertise-client-urls",
    client,
    "--listen-peer-urls",
    peer,
    "--initial-advertise-peer-urls",
    peer,
    "--initial-cluster",
    `default=${peer}`,
    "--unsafe-no-fsync",
    "--watch-progress-notify-interval",
    "5s",
    "--log-level",
    "warn",
  ];
}

function apiserverArgs(
  dir: string,
  ports: ClusterState["ports"],
  real?: { plan: RealNodesPlan; credentials: RealNodeCredentials; aggregation?: AggregationPki },
): string[] {
  const pki = join(dir, "pki");
  const host = real?.plan.hostIp ?? "127.0.0.1";
  const args = [
    "--etcd-servers",
    `http://127.0.0.1:${ports.etcd}`,
    "--bind-address",
    host,
    "--advertise-address",
    host,
    "--secure-port",
    String(ports.apiserver),
    "--cert-dir",
    pki,
    "--service-account-issuer",
    "https://kubernetes.default.svc.cluster.local",
    "--service-account-key-file",
    join(pki, "sa.pub"),
    "--service-account-signing-key-file",
    join(pki, "sa.key"),
    "--token-auth-file",
    join(pki, "tokens.csv"),
    "--service-cluster-ip-range",
    real?.plan.serviceCidr ?? "10.96.0.0/16",
    "--allow-privileged=true",
    "--profiling=false",
    "--max-requests-inflight",
    "800",
    "--max-mutating-requests-inflight",
    "400",
    "--feature-gates",
    featureGatesFlag(),
    "-v=1",
  ];
  if (!real) {
    // 127.0.0.1 is not a valid Service endpoint, so the kubernetes Service gets none.
    return [...args, "--authorization-mode", "RBAC", "--endpoint-reconciler-type", "none"];
  }
  // Kubelets as on any cluster: the Node authorizer and NodeRestriction keep each to its own node,
  // and the API server reaches them (logs, exec, port-forward) with a client certificate they trust.
  return [
    ...args,
    "--authorization-mode",
    "Node,RBAC",
    "--enable-admission-plugins",
    "NodeRestriction",
    "--kubelet-client-certificate",
    real.credentials.apiserverClientCert,
    "--kubelet-client-key",
    real.credentials.apiserverClientKey,
    "--kubelet-preferred-address-types",
    "InternalIP",
    ...(real.aggregation ? aggregationArgs(real.aggregation) : []),
  ];
}

function controllerManagerArgs(dir: string, kubeconfig: string, realNodes: boolean): string[] {
  const pki = join(dir, "pki");
  return [
    "--kubeconfig",
    kubeconfig,
    "--leader-elect=false",
    "--secure-port=0",
    "--controllers",
    [
      "replicaset-controller",
      "deployment-controller",
      "garbage-collector-controller",
      "namespace-controller",
      "serviceaccount-controller",
      "serviceaccount-token-controller",
      "pod-garbage-collector-controller",
      "disruption-controller",
      "node-lifecycle-controller",
      "endpointslice-controller",
      // ResourceQuota status (used): without it the API server refuses every pod of a namespace
      // with a quota (the agent's quota backstop, src/agent/deployments/quota.ts).
      "resourcequota-controller",
      // Scheduled jobs (CronJob → Job → pods, which KWOK completes) and Jobs a release holds.
      "job-controller",
      "cronjob-controller",
      // Real nodes: volumes bind to the local PersistentVolumes (nodes/volumes.ts), and the
      // kubelets' CSRs and the nodes' leases are looked after as on any cluster.
      ...(realNodes
        ? [
            "persistentvolume-binder-controller",
            "persistentvolume-protection-controller",
            "persistentvolumeclaim-protection-controller",
            "ttl-controller",
            "root-ca-certificate-publisher-controller",
          ]
        : []),
    ].join(","),
    "--service-account-private-key-file",
    join(pki, "sa.key"),
    "--root-ca-file",
    join(pki, "apiserver.crt"),
    "--kube-api-qps",
    "300",
    "--kube-api-burst",
    "600",
    "--concurrent-replicaset-syncs",
    "10",
    "--concurrent-deployment-syncs",
    "10",
    "--concurrent-gc-syncs",
    "20",
    "-v=1",
  ];
}

async function etcdHealthy(port: number): Promise<boolean> {
  const res = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(2000) });
  return res.ok && (await res.text()).includes('"true"');
}

async function installApis(ep: KubeEndpoint, assets: KubeAssets): Promise<void> {
  const crdPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
  const crds: { metadata: { name: string } }[] = [ciliumNetworkPolicyCrd];
  for (const file of assets.crds) {
    for (const doc of parseAllDocuments(await readFile(file, "utf8"))) {
      const obj = doc.toJS() as { kind?: string; metadata: { name: string } } | null;
      if (obj?.kind === "CustomResourceDefinition") crds.push(obj);
    }
  }
  await Promise.all([
    createIfMissing(ep, "/apis/node.k8s.io/v1/runtimeclasses", gvisorRuntimeClass),
    ...crds.map((crd) => createIfMissing(ep, crdPath, crd)),
  ]);
  const deadline = Date.now() + 60_000;
  for (const crd of crds) {
    for (;;) {
      const obj = await getJson<{ status?: { conditions?: { type: string; status: string }[] } }>(
        ep,
        `${crdPath}/${crd.metadata.name}`,
      );
      if (obj.status?.conditions?.some((c) => c.type === "Established" && c.status === "True")) break;
      if (Date.now() > deadline) throw new Error(`CRD ${crd.metadata.name} was not established within 60s`);
      await sleep(100);
    }
  }
}

interface NodeList {
  items: {
    metadata: { name: string };
    spec?: { taints?: { key: string }[] };
    status?: { conditions?: { type: string; status: string }[] };
  }[];
}

/** Ready, and the controller-manager has lifted the not-ready taint the API server put on it. */
function schedulable(n: NodeList["items"][number]): boolean {
  return (
    (n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false) &&
    !(n.spec?.taints ?? []).some((t) => t.key.startsWith("node.kubernetes.io/"))
  );
}

async function waitForNodesReady(ep: KubeEndpoint, names: string[], components: RunningComponent[]): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    for (const c of components) {
      if (c.hasExited())
        throw new ComponentStartError(c.name, `exited during start (${await c.exited})`, logTail(c.logFile));
    }
    const list = await getJson<NodeList>(ep, "/api/v1/nodes");
    const ready = new Set(list.items.filter(schedulable).map((n) => n.metadata.name));
    if (names.every((n) => ready.has(n))) return;
    if (Date.now() > deadline) {
      const kwok = components.find((c) => c.name === "kwok");
      throw new ComponentStartError(
        "kwok",
        `did not make the nodes Ready within 60s (${ready.size}/${names.length})`,
        kwok ? logTail(kwok.logFile) : "",
      );
    }
    await sleep(100);
  }
}

/** Pods need their namespace's default ServiceAccount, which the controller-manager creates. */
async function defaultServiceAccountExists(ep: KubeEndpoint): Promise<boolean> {
  return (await kubeRequest(ep, "GET", "/api/v1/namespaces/default/serviceaccounts/default")).status === 200;
}

export interface ClusterStatus {
  name: string;
  server: string;
  kubeVersion: string;
  apiReady: boolean;
  components: Record<ComponentName, boolean>;
  nodesReady: number;
  nodesTotal: number;
  /** Ready nodes per pool, e.g. "untrusted 6, sentinel 3, general 3". */
  nodeSummary: string;
  residentBytes: number;
}

/** Health of a running cluster, read from its processes and its API server. */
export async function getClusterStatus(c: LocalCluster): Promise<ClusterStatus> {
  const components = c.alive();
  let apiReady = false;
  let nodesReady = 0;
  const pools = new Map<string, number>();
  try {
    const ep = c.endpoint();
    apiReady = (await kubeRequest(ep, "GET", "/readyz")).status === 200;
    const nodes = await getJson<NodeList & { items: { metadata: { labels?: Record<string, string> } }[] }>(
      ep,
      "/api/v1/nodes",
    );
    for (const n of nodes.items) {
      if (!n.status?.conditions?.some((cond) => cond.type === "Ready" && cond.status === "True")) continue;
      nodesReady++;
      const pool = n.metadata.labels?.["node-class"] ?? "other";
      pools.set(pool, (pools.get(pool) ?? 0) + 1);
    }
  } catch {
    // reported as not ready
  }
  return {
    name: c.name,
    server: c.server,
    kubeVersion: c.state.kubeVersion,
    apiReady,
    components,
    nodesReady,
    nodesTotal: c.state.nodes.length,
    nodeSummary: [...pools].map(([p, n]) => `${p} ${n}`).join(", "),
    residentBytes: c.residentBytes(),
  };
}

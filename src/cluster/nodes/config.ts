// The configuration files of one real node, as pure functions of its plan and directories:
// containerd (config version 3), gVisor's shim, the CNI network, the kubelet and, per cluster,
// kube-proxy and the DNS server. node.ts writes them and starts the processes.
import type { RealNodeSpec, RealNodesPlan } from "./plan.js";
import { FEATURE_GATES } from "./feature-gates.js";

/** Where one node keeps everything (all under the cluster's directory). */
export interface NodeDirs {
  readonly root: string;
  readonly containerdRoot: string;
  readonly containerdState: string;
  readonly containerdSocket: string;
  readonly runcRoot: string;
  readonly runscRoot: string;
  readonly cniConfDir: string;
  readonly ipamDir: string;
  readonly kubeletRoot: string;
  readonly podLogs: string;
  readonly kubeletConfig: string;
  readonly kubeletKubeconfig: string;
  readonly runscConfig: string;
  readonly containerdConfig: string;
  /** Files whose contents stand in for kernel settings the kubelet would otherwise change (kubelet.ts). */
  readonly sysctlDir: string;
  /**
   * containerd's registry hosts directory (`<host>/hosts.toml` per registry), one per cluster and
   * shared by its nodes: read at each pull, so a registry trusted later needs no restart.
   */
  readonly registryHosts: string;
}

export function nodeDirs(clusterDir: string, node: RealNodeSpec): NodeDirs {
  // Short names: containerd's socket path must stay under 108 bytes.
  const root = `${clusterDir}/nodes/${node.index}`;
  return {
    root,
    containerdRoot: `${root}/containerd`,
    containerdState: `${root}/run`,
    containerdSocket: `${root}/run/containerd.sock`,
    runcRoot: `${root}/run/runc`,
    runscRoot: `${root}/run/runsc`,
    cniConfDir: `${root}/cni`,
    ipamDir: `${root}/ipam`,
    kubeletRoot: `${root}/kubelet`,
    podLogs: `${root}/pod-logs`,
    kubeletConfig: `${root}/kubelet.yaml`,
    kubeletKubeconfig: `${root}/kubelet.kubeconfig`,
    runscConfig: `${root}/runsc.toml`,
    containerdConfig: `${root}/containerd.toml`,
    sysctlDir: `${root}/sysctl`,
    registryHosts: `${clusterDir}/registry-hosts`,
  };
}

/** A TOML basic string (JSON's escaping is valid TOML for these values). */
const q = (s: string): string => JSON.stringify(s);

export interface ContainerdBinaries {
  readonly runcShim: string;
  readonly runscShim: string;
  readonly runc: string;
}

/** The RuntimeClass handler user workloads run with (RuntimeClass `gvisor` names it). */
export const RUNSC_HANDLER = "runsc";

export function containerdConfig(
  dirs: NodeDirs,
  node: RealNodeSpec,
  sandboxImage: string,
  bin: ContainerdBinaries,
): string {
  return [
    "version = 3",
    `root = ${q(dirs.containerdRoot)}`,
    `state = ${q(dirs.containerdState)}`,
    // Plugins a local node never uses; "opt" would write to /opt/containerd.
    `disabled_plugins = ${JSON.stringify([
      "io.containerd.internal.v1.opt",
      "io.containerd.nri.v1.nri",
      "io.containerd.tracing.processor.v1.otlp",
      "io.containerd.internal.v1.tracing",
      "io.containerd.snapshotter.v1.blockfile",
      "io.containerd.snapshotter.v1.erofs",
    ])}`,
    "",
    "[grpc]",
    `  address = ${q(dirs.containerdSocket)}`,
    "",
    "[ttrpc]",
    `  address = ${q(`${dirs.containerdSocket}.ttrpc`)}`,
    "",
    "[metrics]",
    '  address = ""',
    "",
    "[plugins.'io.containerd.cri.v1.images']",
    "  snapshotter = 'overlayfs'",
    "  [plugins.'io.containerd.cri.v1.images'.pinned_images]",
    `    sandbox = ${q(sandboxImage)}`,
    "  [plugins.'io.containerd.cri.v1.images'.registry]",
    `    config_path = ${q(dirs.registryHosts)}`,
    "",
    "[plugins.'io.containerd.cri.v1.runtime']",
    "  enable_selinux = false",
    // Never below containerd's own OOM score: lowering it needs CAP_SYS_RESOURCE, which some
    // machines (CI sandboxes) withhold even from root; the sandbox would get -998 and fail to start.
    "  restrict_oom_score_adj = true",
    // Pod network namespaces under the state directory, so a node's cleanup finds every mount.
    "  netns_mounts_under_state_dir = true",
    "  tolerate_missing_hugetlb_controller = true",
    "  disable_hugetlb_controller = true",
    "  [plugins.'io.containerd.cri.v1.runtime'.containerd]",
    "    default_runtime_name = 'runc'",
    "    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]",
    "      runtime_type = 'io.containerd.runc.v2'",
    `      runtime_path = ${q(bin.runcShim)}`,
    "      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]",
    `        BinaryName = ${q(bin.runc)}`,
    `        Root = ${q(dirs.runcRoot)}`,
    "        SystemdCgroup = false",
    `        ShimCgroup = ${q(`${node.cgroupRoot}/shims`)}`,
    `    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.${RUNSC_HANDLER}]`,
    "      runtime_type = 'io.containerd.runsc.v1'",
    `      runtime_path = ${q(bin.runscShim)}`,
    `      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.${RUNSC_HANDLER}.options]`,
    "        TypeUrl = 'io.containerd.runsc.v1.options'",
    `        ConfigPath = ${q(dirs.runscConfig)}`,
    "  [plugins.'io.containerd.cri.v1.runtime'.cni]",
    "    bin_dirs = ['/usr/lib/cni']",
    `    conf_dir = ${q(dirs.cniConfDir)}`,
    "    max_conf_num = 1",
    "",
    "[plugins.'io.containerd.grpc.v1.cri']",
    "  disable_tcp_service = true",
    // In the cluster's network namespace: the kubelet (same namespace) proxies exec, logs and port-forward.
    "  stream_server_address = '127.0.0.1'",
    "  stream_server_port = '0'",
    "",
  ].join("\n");
}

/**
 * A registry's hosts.toml (containerd's hosts directory format): pulls from `host` go to it over
 * HTTPS, trusting the certificate authority in `caFile` (a private registry with its own CA).
 */
export function registryHostsToml(host: string, caFile: string): string {
  const server = `https://${host}`;
  return [
    `server = ${q(server)}`,
    "",
    `[host.${q(server)}]`,
    '  capabilities = ["pull", "resolve"]',
    `  ca = ${q(caFile)}`,
    "",
  ].join("\n");
}

/**
 * gVisor's shim: runsc on the systrap platform (gVisor's default; ptrace works too, slower; KVM
 * is not available here), its state under the node.
 */
export function runscConfig(dirs: NodeDirs, node: RealNodeSpec, runsc: string): string {
  return [
    `binary_name = ${q(runsc)}`,
    `root = ${q(dirs.runscRoot)}`,
    `shim_cgroup = ${q(`${node.cgroupRoot}/shims`)}`,
    "",
    "[runsc_config]",
    '  platform = "systrap"',
    "",
  ].join("\n");
}

/** The node's pod network: a bridge in the cluster's namespace, addresses from the node's /24. */
export function cniConfig(dirs: NodeDirs, node: RealNodeSpec): string {
  return JSON.stringify(
    {
      cniVersion: "1.0.0",
      name: node.network,
      plugins: [
        {
          type: "bridge",
          bridge: node.bridge,
          isGateway: true,
          ipMasq: false,
          // A pod reaching itself through a Service comes back through the bridge.
          hairpinMode: true,
          ipam: {
            type: "host-local",
            ranges: [[{ subnet: node.podCidr, gateway: node.gateway }]],
            routes: [{ dst: "0.0.0.0/0" }],
            dataDir: dirs.ipamDir,
          },
        },
      ],
    },
    null,
    2,
  );
}

/** The kernel settings the kubelet insists on, and the values it wants (kubelet.ts). */
export const KUBELET_SYSCTLS: Readonly<Record<string, string>> = {
  "vm/overcommit_memory": "1",
  "vm/panic_on_oom": "0",
  "kernel/panic": "10",
  "kernel/panic_on_oops": "1",
  "kernel/keys/root_maxkeys": "1000000",
  "kernel/keys/root_maxbytes": "25000000",
};

export interface KubeletPki {
  /** CA whose client certificates the kubelet accepts (the API server's). */
  readonly clientCaFile: string;
}

/** KubeletConfiguration (kubelet.config.k8s.io/v1beta1) as JSON, which the kubelet reads as YAML. */
export function kubeletConfig(dirs: NodeDirs, node: RealNodeSpec, plan: RealNodesPlan, pki: KubeletPki): string {
  return JSON.stringify(
    {
      apiVersion: "kubelet.config.k8s.io/v1beta1",
      kind: "KubeletConfiguration",
      address: plan.nodeIp,
      port: node.kubeletPort,
      readOnlyPort: 0,
      healthzPort: 0,
      authentication: {
        anonymous: { enabled: false },
        webhook: { enabled: true },
        x509: { clientCAFile: pki.clientCaFile },
      },
      authorization: { mode: "Webhook" },
      // This machine has cgroup v1 (v1 and v2 hybrid); from Kubernetes 1.35 the kubelet refuses
      // to start on cgroup v1 unless told so.
      failCgroupV1: false,
      failSwapOn: false,
      cgroupDriver: "cgroupfs",
      cgroupRoot: node.cgroupRoot,
      cgroupsPerQOS: true,
      enforceNodeAllocatable: ["pods"],
      clusterDomain: "cluster.local",
      clusterDNS: [plan.dnsIp],
      resolvConf: "/etc/resolv.conf",
      podLogsDir: dirs.podLogs,
      maxPods: 110,
      podPidsLimit: 4096,
      // The machine is shared with other clusters and people: neither evict nor collect images
      // because of what others do to the disk.
      evictionHard: { "memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%" },
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
      serializeImagePulls: false,
      registerNode: true,
      registerWithTaints:
        node.pool === "general" ? [] : [{ key: "node-class", value: node.pool, effect: "NoSchedule" }],
      nodeStatusUpdateFrequency: "10s",
      syncFrequency: "10s",
      fileCheckFrequency: "20s",
      shutdownGracePeriod: "0s",
      containerRuntimeEndpoint: `unix://${dirs.containerdSocket}`,
      imageServiceEndpoint: `unix://${dirs.containerdSocket}`,
      containerLogMaxSize: "10Mi",
      containerLogMaxFiles: 2,
      // The kubelet reads these from the masked files (kubelet.ts) and finds them as it wants them.
      protectKernelDefaults: false,
      localStorageCapacityIsolation: true,
      featureGates: FEATURE_GATES,
    },
    null,
    2,
  );
}

/** kube-proxy (iptables mode) in the cluster's namespace. */
export function kubeProxyConfig(plan: RealNodesPlan, kubeconfig: string, nodeName: string): string {
  return JSON.stringify(
    {
      apiVersion: "kubeproxy.config.k8s.io/v1alpha1",
      kind: "KubeProxyConfiguration",
      clientConnection: { kubeconfig },
      hostnameOverride: nodeName,
      bindAddress: plan.nodeIp,
      clusterCIDR: plan.podCidr,
      mode: "iptables",
      // Leave the kernel's conntrack table sizes alone: they are the machine's, not the namespace's.
      conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: "0s", tcpCloseWaitTimeout: "0s" },
      healthzBindAddress: `${plan.nodeIp}:10256`,
      metricsBindAddress: "127.0.0.1:10249",
    },
    null,
    2,
  );
}

/** CoreDNS's Corefile: cluster.local from the API server, nothing forwarded (no internet here). */
export function corefile(plan: RealNodesPlan, kubeconfig: string): string {
  return [
    ".:53 {",
    `  bind ${plan.dnsIp}`,
    "  errors",
    "  kubernetes cluster.local in-addr.arpa ip6.arpa {",
    `    kubeconfig ${kubeconfig}`,
    "    pods insecure",
    "    fallthrough in-addr.arpa ip6.arpa",
    "    ttl 5",
    "  }",
    "  cache 5",
    "  loadbalance",
    "}",
    "",
  ].join("\n");
}

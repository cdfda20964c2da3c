// Where a local cluster's real nodes live on this machine: one network namespace per cluster
// (all its real nodes share it, so their iptables, bridges and ports are their own and several
// clusters run side by side), a veth link between this machine and that namespace, one pod range
// and one CNI bridge per node, a Service range, cgroup parents and kubelet ports. Pure data,
// derived from the cluster's pod network slot S (pod-network.ts), which no other live cluster on
// this machine holds:
//
//   10.S.0.0/17       KWOK nodes' pod ranges (unchanged scheme, in the lower half)
//   10.S.128+i.0/24   real node i's pods (bridge kr-<pool>, gateway .1)
//   10.S.192.0/20     Services (ClusterIPs; kube-proxy in the namespace)
//   10.S.255.0/30     the link: .1 on this machine (the API server listens there), .2 in the namespace
//
// This machine routes 10.S.128.0/17 into the namespace, so pod IPs and ClusterIPs are reachable
// from here, as loopback addresses are for stand-ins.
/** The node pools of the local cluster (../topology.ts): one real node each, at most. */
export const REAL_NODE_POOLS = ["untrusted", "sentinel", "general"] as const;
export type NodePool = (typeof REAL_NODE_POOLS)[number];

/** At most this many real nodes per cluster (one pod /24 each below the Service range). */
export const MAX_REAL_NODES = 16;

/** The zone real nodes report (one machine is one zone). */
export const REAL_NODE_ZONE = "zone-a";

/** The first kubelet port in the namespace; node i listens on +i. */
const KUBELET_PORT = 10250;

export interface RealNodeSpec {
  /** Node name, e.g. "untrusted-real". */
  readonly name: string;
  readonly pool: NodePool;
  readonly index: number;
  readonly podCidr: string;
  /** The bridge's address, the pods' default gateway. */
  readonly gateway: string;
  /** CNI bridge in the namespace (at most 15 characters). */
  readonly bridge: string;
  /** CNI network name (also names host-local's allocations and CNI's cache files). */
  readonly network: string;
  readonly kubeletPort: number;
  /** The kubelet's cgroup root in every hierarchy (cgroupfs driver). */
  readonly cgroupRoot: string;
}

export interface RealNodesPlan {
  readonly slot: number;
  /** `ip netns` name: /run/netns/<netns>. */
  readonly netns: string;
  /** The link's end on this machine and in the namespace. */
  readonly hostInterface: string;
  readonly nodeInterface: string;
  readonly hostIp: string;
  readonly nodeIp: string;
  readonly linkPrefix: number;
  /** The link's network (hostIp and nodeIp are its two addresses). */
  readonly linkCidr: string;
  /** What this machine routes into the namespace (real pods and Services). */
  readonly routed: string;
  /** Pod ranges of all real nodes (kube-proxy's cluster CIDR). */
  readonly podCidr: string;
  readonly serviceCidr: string;
  /** Where KWOK nodes' pod ranges come from in a cluster with real nodes. */
  readonly kwokCidr: string;
  /** Cluster DNS: listens on the namespace's end of the link. */
  readonly dnsIp: string;
  /** Prefix of every cgroup this cluster's nodes create (cleanup finds them by it). */
  readonly cgroupPrefix: string;
  readonly nodes: readonly RealNodeSpec[];
}

/** The plan of the cluster whose pod network is 10.`slot`.0.0/16. */
export function realNodesPlan(slot: number, pools: readonly NodePool[]): RealNodesPlan {
  if (!Number.isInteger(slot) || slot < 1 || slot > 254) throw new Error(`pod network slot ${slot} is not 1–254`);
  const base = `10.${slot}`;
  if (pools.length === 0) throw new Error("a real-node plan needs at least one pool");
  if (pools.length > MAX_REAL_NODES) throw new Error(`at most ${MAX_REAL_NODES} real nodes per cluster`);
  const seen = new Set<string>();
  const cgroupPrefix = `krane-${slot}-`;
  const nodes = pools.map((pool, index): RealNodeSpec => {
    const name = seen.has(pool) ? `${pool}-real-${index + 1}` : `${pool}-real`;
    seen.add(pool);
    const third = 128 + index;
    return {
      name,
      pool,
      index,
      podCidr: `${base}.${third}.0/24`,
      gateway: `${base}.${third}.1`,
      bridge: `kr-${index}-${pool}`.slice(0, 15),
      network: `krane-${slot}-${index}`,
      kubeletPort: KUBELET_PORT + index,
      cgroupRoot: `/${cgroupPrefix}${name}`,
    };
  });
  return {
    slot,
    netns: `krane-${slot}`,
    hostInterface: `krane-${slot}`,
    nodeInterface: "host0",
    hostIp: `${base}.255.1`,
    nodeIp: `${base}.255.2`,
    linkPrefix: 30,
    linkCidr: `${base}.255.0/30`,
    routed: `${base}.128.0/17`,
    podCidr: `${base}.128.0/20`,
    serviceCidr: `${base}.192.0/20`,
    kwokCidr: `${base}.0.0/17`,
    dnsIp: `${base}.255.2`,
    cgroupPrefix,
    nodes,
  };
}

/** The pool list `krane cluster up --real-nodes` accepts: "all" or a comma list of pools. */
export function parseRealNodePools(value: string): NodePool[] {
  const words = value
    .split(",")
    .map((w) => w.trim())
    .filter((w) => w !== "");
  if (words.length === 1 && words[0] === "all") return [...REAL_NODE_POOLS];
  const pools: NodePool[] = [];
  for (const w of words) {
    if (!(REAL_NODE_POOLS as readonly string[]).includes(w))
      throw new Error(`--real-nodes: "${w}" is not a node pool (${REAL_NODE_POOLS.join(", ")}, or all)`);
    if (pools.includes(w as NodePool)) throw new Error(`--real-nodes: "${w}" is given twice`);
    pools.push(w as NodePool);
  }
  if (pools.length === 0)
    throw new Error("--real-nodes: name at least one pool (untrusted, sentinel, general, or all)");
  return pools;
}

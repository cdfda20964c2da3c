// What krane expects of a cluster and where it puts things there: namespaces, node pools,
// zones, the sandbox runtime and the sentinel's port. The local cluster (src/cluster), the
// agent's renderers, the sentinel proxy and the RBAC/admission manifests all agree on these.

/** The namespace every region's sentinels (and their routing tables) live in. */
export const SENTINEL_NAMESPACE = "sentinel";
/**
 * Where source builds' builder pods run (src/agent/builds): deploy/rbac/agent.yaml makes it and
 * lets the agent create pods and Secrets there alone; the fence holds them to gVisor on untrusted
 * nodes without a token.
 */
export const BUILDS_NAMESPACE = "krane-builds";
/** The port a sentinel listens on and its Service exposes. */
export const SENTINEL_PORT = 8040;
export const SENTINEL_PORT_NAME = "http";
/**
 * A second port of the sentinel's Service onto the same container port, marked appProtocol
 * kubernetes.io/h2c: the Gateway's gRPC rule goes there, so the Gateway speaks HTTP/2 to the
 * sentinel (which takes h2c with prior knowledge on SENTINEL_PORT) for gRPC and HTTP/1.1 for the
 * rest (WebSocket upgrades need it).
 */
export const SENTINEL_H2C_SERVICE_PORT = 8042;
export const SENTINEL_H2C_PORT_NAME = "h2c";
/** krane's image (one image, the `krane` entrypoint: ctrl, agent and sentinel). */
export const KRANE_IMAGE_REPOSITORY = "ghcr.io/krane-dev/krane";

/** The node label and taint key that separates node pools. */
export const NODE_CLASS_LABEL = "node-class";
export const NODE_CLASS = {
  /** User workloads (gVisor, overcommitted). */
  untrusted: "untrusted",
  /** Sentinels. */
  sentinel: "sentinel",
} as const;
export type NodeClass = (typeof NODE_CLASS)[keyof typeof NODE_CLASS];

/** The toleration of a node pool's taint. */
export function nodeClassToleration(cls: NodeClass) {
  return { key: NODE_CLASS_LABEL, operator: "Equal", value: cls, effect: "NoSchedule" } as const;
}

/** A pod spec's placement on one node pool: the pool's nodes selected, their taint tolerated. */
export function onNodeClass(cls: NodeClass) {
  return { nodeSelector: { [NODE_CLASS_LABEL]: cls }, tolerations: [nodeClassToleration(cls)] };
}

export const ZONE_LABEL = "topology.kubernetes.io/zone";

/**
 * A hard spread across zones of the pods `selector` matches. Zones whose nodes are tainted
 * (NotReady, unreachable) do not count, so losing a zone does not leave replacements Pending.
 */
export function zoneSpread(selector: Record<string, string>) {
  return {
    maxSkew: 1,
    topologyKey: ZONE_LABEL,
    whenUnsatisfiable: "DoNotSchedule",
    nodeTaintsPolicy: "Honor",
    labelSelector: { matchLabels: selector },
  } as const;
}

/** The RuntimeClass user workloads run with. */
export const RUNTIME_CLASS = "gvisor";

/** Where the agent runs, and its ServiceAccount (deploy/rbac/agent.yaml; the fence keys on it). */
export const AGENT_NAMESPACE = "krane-system";
export const AGENT_SERVICE_ACCOUNT = "krane-agent";
/** The Kubernetes user name of the agent's ServiceAccount, as admission and RBAC see it. */
export const AGENT_USERNAME = `system:serviceaccount:${AGENT_NAMESPACE}:${AGENT_SERVICE_ACCOUNT}`;
/** The sentinel pods' own ServiceAccount (read-only on the routing table in SENTINEL_NAMESPACE). */
export const SENTINEL_SERVICE_ACCOUNT = "krane-sentinel";

/**
 * Namespaces no user object may land in: Kubernetes' own, krane's (the agent's and the
 * sentinels'), and `default`. Every agent kind that applies into a workspace namespace refuses
 * these (isReservedNamespace), whatever ctrl sent.
 */
export const RESERVED_NAMESPACES: readonly string[] = [
  "default",
  "kube-system",
  "kube-public",
  "kube-node-lease",
  SENTINEL_NAMESPACE,
  AGENT_NAMESPACE,
  BUILDS_NAMESPACE,
];

/** Whether user objects must stay out of `namespace`: a reserved one, or any `kube-` namespace. */
export function isReservedNamespace(namespace: string): boolean {
  return RESERVED_NAMESPACES.includes(namespace) || namespace.startsWith("kube-");
}

/** Pod Security admission's enforce label, and the levels a workspace namespace may enforce. */
export const POD_SECURITY_ENFORCE_LABEL = "pod-security.kubernetes.io/enforce";
export const WORKSPACE_POD_SECURITY_LEVELS = ["baseline", "restricted"] as const;

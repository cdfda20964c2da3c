// What krane expects of a cluster and where it puts things there: namespaces, node pools,
// zones, the sandbox runtime and the sentinel's port. The local cluster (src/cluster), the
// agent's renderers, the sentinel proxy and the RBAC/admission manifests all agree on these.

/** The namespace every region's sentinels (and their routing tables) live in. */
export const SENTINEL_NAMESPACE = "sentinel";
/** The port a sentinel listens on and its Service exposes. */
export const SENTINEL_PORT = 8040;
export const SENTINEL_PORT_NAME = "http";
/** The ServiceAccount of krane's own sentinel pods (read-only on the routing table). */
export const SENTINEL_SERVICE_ACCOUNT = "krane-sentinel";
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

export const ZONE_LABEL = "topology.kubernetes.io/zone";

/** The RuntimeClass user workloads run with. */
export const RUNTIME_CLASS = "gvisor";

// The local Kubernetes: built from Go modules into a cache (build.ts), started on this machine
// with simulated zoned nodes (cluster.ts, topology.ts), each with its own pod network
// (pod-network.ts), and optionally pod stand-ins (standin/) or real nodes (nodes/, with the
// images of images.ts), stopped with nothing left behind.
export {
  ensureKubeAssets,
  findKubeAssets,
  ensureHelm,
  ensureGoBuild,
  GO_BUILDS,
  cacheRoot,
  KUBE_VERSION,
  HELM_VERSION,
  GoMissingError,
  type KubeAssets,
  type HelmAssets,
} from "./build.js";
export { FENCE_MANIFEST, AS_UNRESTRICTED_AGENT } from "./fence.js";
export {
  startCluster,
  loadCluster,
  getClusterStatus,
  clusterDir,
  LocalCluster,
  COMPONENTS,
  STANDIN,
  type StartOptions,
  type ClusterState,
} from "./cluster.js";
export { type PodBehaviour } from "./pods.js";
export { localAddress, podAddressMap, type PodNetwork } from "./pod-network.js";
export {
  ZONES,
  DEFAULT_NODE_PLAN,
  DEFAULT_NODE_CAPACITY,
  planForPods,
  renderNodes,
  type NodePlan,
  type NodeCapacity,
} from "./topology.js";

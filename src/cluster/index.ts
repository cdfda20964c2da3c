// The local Kubernetes: built from Go modules into a cache (build.ts), started on loopback
// with simulated zoned nodes (cluster.ts, topology.ts), stopped with nothing left behind.
export { ensureKubeAssets, findKubeAssets, ensureHelm, ensureGoBuild, GO_BUILDS, cacheRoot, KUBE_VERSION, HELM_VERSION, GoMissingError, type KubeAssets, type HelmAssets } from "./build.js";
export { startCluster, loadCluster, getClusterStatus, clusterDir, LocalCluster, COMPONENTS, type StartOptions, type ClusterState } from "./cluster.js";
export { type PodBehaviour } from "./pods.js";
export { ZONES, DEFAULT_NODE_PLAN, renderNodes, type NodePlan } from "./topology.js";

// Persistent volumes on real nodes, for claims such as the Helm chart's SQLite database: no
// dynamic provisioner runs here. Each real node gets a few pre-made `local` PersistentVolumes
// (directories under the node's state, bound to that node by node affinity) of the default
// StorageClass `local`, which binds a claim when its pod is scheduled (WaitForFirstConsumer), as
// Kubernetes' static local-volume setup does. A claim deleted leaves its volume Released
// (Retain): it is not handed to another claim with the old data in it.
import type { NodeDirs } from "./config.js";
import type { RealNodeSpec } from "./plan.js";

export const LOCAL_STORAGE_CLASS = "local";
/** Volumes per real node, and each one's capacity. */
export const VOLUMES_PER_NODE = 3;
export const VOLUME_CAPACITY = "10Gi";

export const localStorageClass = {
  apiVersion: "storage.k8s.io/v1",
  kind: "StorageClass",
  metadata: {
    name: LOCAL_STORAGE_CLASS,
    annotations: { "storageclass.kubernetes.io/is-default-class": "true" },
  },
  provisioner: "kubernetes.io/no-provisioner",
  volumeBindingMode: "WaitForFirstConsumer",
  reclaimPolicy: "Retain",
};

/** The directory of a node's i-th volume. */
export function volumePath(dirs: NodeDirs, i: number): string {
  return `${dirs.root}/volumes/${i}`;
}

export function localVolumes(node: RealNodeSpec, dirs: NodeDirs): object[] {
  return Array.from({ length: VOLUMES_PER_NODE }, (_, i) => ({
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: `${node.name}-${i}`, labels: { "krane.dev/local-volume-node": node.name } },
    spec: {
      capacity: { storage: VOLUME_CAPACITY },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Retain",
      storageClassName: LOCAL_STORAGE_CLASS,
      volumeMode: "Filesystem",
      local: { path: volumePath(dirs, i) },
      nodeAffinity: {
        required: {
          nodeSelectorTerms: [
            { matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: [node.name] }] },
          ],
        },
      },
    },
  }));
}

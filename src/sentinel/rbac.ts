// The sentinel's Kubernetes identity: applies the read-only RBAC shipped in
// deploy/rbac/sentinel.yaml (with an admin connection) and can mint a token for its
// ServiceAccount. Used by `krane dev`, the tests and the benchmark, so they run sentinels with
// exactly the role production gives them.
import { fileURLToPath } from "node:url";
import type { KubeConfig } from "@kubernetes/client-node";
import { SENTINEL_NAMESPACE, SENTINEL_SERVICE_ACCOUNT } from "../contracts/cluster.js";
import { applyManifestFile, serviceAccountKubeConfig } from "../kube/identity.js";
import { resources } from "../kube/resources.js";

export const SENTINEL_RBAC_MANIFEST = fileURLToPath(new URL("../../deploy/rbac/sentinel.yaml", import.meta.url));

/** Applies deploy/rbac/sentinel.yaml with `admin`. */
export async function applySentinelRbac(admin: KubeConfig): Promise<void> {
  const { namespaces, serviceAccounts, roles, roleBindings } = resources;
  await applyManifestFile(admin, SENTINEL_RBAC_MANIFEST, [namespaces, serviceAccounts, roles, roleBindings]);
}

/** A KubeConfig for the same cluster that authenticates as the sentinel's ServiceAccount. */
export function sentinelKubeConfigFrom(admin: KubeConfig, tokenSeconds = 3600): Promise<KubeConfig> {
  return serviceAccountKubeConfig(
    admin,
    SENTINEL_NAMESPACE,
    SENTINEL_SERVICE_ACCOUNT,
    tokenSeconds,
    SENTINEL_NAMESPACE,
  );
}

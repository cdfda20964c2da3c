// The agent's Kubernetes identity: installs the least-privilege RBAC shipped in
// deploy/rbac/agent.yaml (with an admin connection) and mints a ServiceAccount token for it,
// giving a KubeConfig that can do exactly what the agent is allowed to. Used by `krane dev`,
// the integration tests and the benchmarks, so all of them run the agent as in production.
import { fileURLToPath } from "node:url";
import type { KubeConfig } from "@kubernetes/client-node";
import { AGENT_NAMESPACE, AGENT_SERVICE_ACCOUNT } from "../contracts/cluster.js";
import { applyManifestFile, serviceAccountKubeConfig } from "../kube/identity.js";
import { resources } from "../kube/resources.js";

export const AGENT_RBAC_MANIFEST = fileURLToPath(new URL("../../deploy/rbac/agent.yaml", import.meta.url));

/**
 * Applies the agent's RBAC with `admin` and returns a KubeConfig for the same cluster that
 * authenticates as the agent's ServiceAccount (token valid for `tokenSeconds`).
 */
export async function agentKubeConfigFrom(admin: KubeConfig, tokenSeconds = 3600): Promise<KubeConfig> {
  const { namespaces, serviceAccounts, clusterRoles, clusterRoleBindings, roles, roleBindings } = resources;
  await applyManifestFile(admin, AGENT_RBAC_MANIFEST, [
    namespaces,
    serviceAccounts,
    clusterRoles,
    clusterRoleBindings,
    roles,
    roleBindings,
  ]);
  return serviceAccountKubeConfig(admin, AGENT_NAMESPACE, AGENT_SERVICE_ACCOUNT, tokenSeconds);
}

// The agent's Kubernetes identity: installs the least-privilege RBAC shipped in
// deploy/rbac/agent.yaml (with an admin connection) and mints a ServiceAccount token for it,
// giving a KubeConfig that can do exactly what the agent is allowed to. Used by `krane dev`,
// the integration tests and the benchmarks, so all of them run the agent as in production.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { KubeConfig } from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";
import { KubeClient } from "../kube/client.js";
import { isKubeObject, isRecord } from "../kube/object.js";
import { resources, type ResourceType } from "../kube/resources.js";

export const AGENT_RBAC_MANIFEST = fileURLToPath(new URL("../../deploy/rbac/agent.yaml", import.meta.url));
const AGENT_NAMESPACE = "krane-system";
const AGENT_SERVICE_ACCOUNT = "krane-agent";

/** The kinds the RBAC manifest may contain. */
const rbacKinds: Record<string, ResourceType> = Object.fromEntries(
  [resources.namespaces, resources.serviceAccounts, resources.clusterRoles, resources.clusterRoleBindings, resources.roles, resources.roleBindings].map(
    (r) => [r.kind, r],
  ),
);

/**
 * Applies the agent's RBAC with `admin` and returns a KubeConfig for the same cluster that
 * authenticates as the agent's ServiceAccount (token valid for `tokenSeconds`).
 */
export async function agentKubeConfigFrom(admin: KubeConfig, tokenSeconds = 3600): Promise<KubeConfig> {
  const kube = new KubeClient(admin, { fieldManager: "krane-install" });
  try {
    for (const doc of parseAllDocuments(readFileSync(AGENT_RBAC_MANIFEST, "utf8"))) {
      const obj: unknown = doc.toJS();
      if (!isKubeObject(obj)) continue;
      const r = rbacKinds[obj.kind ?? ""];
      if (!r) throw new Error(`unexpected kind ${obj.kind} in ${AGENT_RBAC_MANIFEST}`);
      await kube.apply(r, obj);
    }
    const answer = await kube.raw("POST", `/api/v1/namespaces/${AGENT_NAMESPACE}/serviceaccounts/${AGENT_SERVICE_ACCOUNT}/token`, {
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenRequest",
      spec: { expirationSeconds: tokenSeconds },
    });
    const token = isRecord(answer) && isRecord(answer.status) ? answer.status.token : undefined;
    if (typeof token !== "string") throw new Error("TokenRequest returned no token");
    const c = admin.getCurrentCluster();
    if (!c) throw new Error("the admin kubeconfig has no current cluster");
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [c],
      users: [{ name: AGENT_SERVICE_ACCOUNT, token }],
      contexts: [{ name: AGENT_SERVICE_ACCOUNT, cluster: c.name, user: AGENT_SERVICE_ACCOUNT }],
      currentContext: AGENT_SERVICE_ACCOUNT,
    });
    return kc;
  } finally {
    kube.close();
  }
}

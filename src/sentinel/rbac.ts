// The sentinel's Kubernetes identity: applies the read-only RBAC shipped in
// deploy/rbac/sentinel.yaml (with an admin connection) and can mint a token for its
// ServiceAccount. Used by `krane dev`, the tests and the benchmark, so they run sentinels with
// exactly the role production gives them.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { KubeConfig } from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";
import { SENTINEL_NAMESPACE, SENTINEL_SERVICE_ACCOUNT } from "../contracts/cluster.js";
import { KubeClient } from "../kube/client.js";
import { isKubeObject, isRecord } from "../kube/object.js";
import { resources, type ResourceType } from "../kube/resources.js";

export const SENTINEL_RBAC_MANIFEST = fileURLToPath(new URL("../../deploy/rbac/sentinel.yaml", import.meta.url));

const kinds: Record<string, ResourceType> = Object.fromEntries(
  [resources.namespaces, resources.serviceAccounts, resources.roles, resources.roleBindings].map((r) => [r.kind, r]),
);

/** Applies deploy/rbac/sentinel.yaml with `admin`. */
export async function applySentinelRbac(admin: KubeConfig): Promise<void> {
  const kube = new KubeClient(admin, { fieldManager: "krane-install" });
  try {
    for (const doc of parseAllDocuments(readFileSync(SENTINEL_RBAC_MANIFEST, "utf8"))) {
      const obj: unknown = doc.toJS();
      if (!isKubeObject(obj)) continue;
      const r = kinds[obj.kind ?? ""];
      if (!r) throw new Error(`unexpected kind ${obj.kind} in ${SENTINEL_RBAC_MANIFEST}`);
      await kube.apply(r, obj);
    }
  } finally {
    kube.close();
  }
}

/** A KubeConfig for the same cluster that authenticates as the sentinel's ServiceAccount. */
export async function sentinelKubeConfigFrom(admin: KubeConfig, tokenSeconds = 3600): Promise<KubeConfig> {
  const kube = new KubeClient(admin);
  try {
    const answer = await kube.raw("POST", `/api/v1/namespaces/${SENTINEL_NAMESPACE}/serviceaccounts/${SENTINEL_SERVICE_ACCOUNT}/token`, {
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
      users: [{ name: SENTINEL_SERVICE_ACCOUNT, token }],
      contexts: [{ name: SENTINEL_SERVICE_ACCOUNT, cluster: c.name, user: SENTINEL_SERVICE_ACCOUNT, namespace: SENTINEL_NAMESPACE }],
      currentContext: SENTINEL_SERVICE_ACCOUNT,
    });
    return kc;
  } finally {
    kube.close();
  }
}

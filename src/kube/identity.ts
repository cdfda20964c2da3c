// Installing a component's shipped identity and acting as it: applies an RBAC manifest from
// deploy/rbac/ with an admin connection, and mints a ServiceAccount token (TokenRequest) to build a
// KubeConfig for the same cluster that authenticates as that ServiceAccount. The agent and the
// sentinel (`krane dev`, tests, benchmarks) both run with exactly the role production gives them
// through these two functions.
import { readFileSync } from "node:fs";
import { KubeConfig } from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";
import { KubeClient } from "./client.js";
import { isKubeObject, isRecord } from "./object.js";
import type { ResourceType } from "./resources.js";

/** Applies every object of the manifest at `path`; a kind outside `allowed` is refused, naming the file. */
export async function applyManifestFile(
  admin: KubeConfig,
  path: string,
  allowed: readonly ResourceType[],
): Promise<void> {
  const kinds = new Map(allowed.map((r) => [r.kind, r]));
  const kube = new KubeClient(admin, { fieldManager: "krane-install" });
  try {
    for (const doc of parseAllDocuments(readFileSync(path, "utf8"))) {
      const obj: unknown = doc.toJS();
      if (!isKubeObject(obj)) continue;
      const r = kinds.get(obj.kind ?? "");
      if (!r) throw new Error(`unexpected kind ${obj.kind} in ${path}`);
      await kube.apply(r, obj);
    }
  } finally {
    kube.close();
  }
}

/**
 * A KubeConfig for the admin's current cluster that authenticates as ServiceAccount
 * `namespace/name` with a token valid for `tokenSeconds` (its context's namespace: `contextNamespace`).
 */
export async function serviceAccountKubeConfig(
  admin: KubeConfig,
  namespace: string,
  name: string,
  tokenSeconds: number,
  contextNamespace?: string,
): Promise<KubeConfig> {
  const kube = new KubeClient(admin);
  try {
    const answer = await kube.raw("POST", `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`, {
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
      users: [{ name, token }],
      contexts: [{ name, cluster: c.name, user: name, ...(contextNamespace ? { namespace: contextNamespace } : {}) }],
      currentContext: name,
    });
    return kc;
  } finally {
    kube.close();
  }
}

// Installs the agent's fence (deploy/rbac/fence.yaml: a ValidatingAdmissionPolicy and its
// binding) on a local cluster, and waits until the API server enforces it: a new policy reaches
// the admission plugin through an informer, so for a moment after its creation writes are not
// checked yet. Every local cluster gets it, so tests, benchmarks and `krane dev` run the agent
// exactly as fenced as in production; the Helm chart installed on such a cluster leaves it alone
// (labelled managed-by=krane and not Helm's: deploy/helm/krane/templates/fence.yaml).
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import { parseAllDocuments } from "yaml";
import { AGENT_USERNAME } from "../contracts/cluster.js";
import { createIfMissing, kubeRequest, type KubeEndpoint } from "./kube-http.js";

export const FENCE_MANIFEST = fileURLToPath(new URL("../../deploy/rbac/fence.yaml", import.meta.url));

const COLLECTIONS: Record<string, string> = {
  ValidatingAdmissionPolicy: "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
  ValidatingAdmissionPolicyBinding: "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
};

/** The objects of the fence manifest, in file order. */
export async function fenceObjects(file = FENCE_MANIFEST): Promise<{ kind: string; metadata: { name: string } }[]> {
  const out: { kind: string; metadata: { name: string } }[] = [];
  for (const doc of parseAllDocuments(await readFile(file, "utf8"))) {
    const obj = doc.toJS() as { kind?: unknown; metadata?: { name?: unknown } } | null;
    if (obj === null) continue;
    if (typeof obj.kind !== "string" || !(obj.kind in COLLECTIONS) || typeof obj.metadata?.name !== "string") {
      throw new Error(`${file}: unexpected object ${JSON.stringify(obj.kind)}`);
    }
    out.push(obj as { kind: string; metadata: { name: string } });
  }
  return out;
}

/**
 * Headers that make a request run as the agent's ServiceAccount with the rights of
 * system:masters: RBAC then allows everything, so whatever is refused was refused by the fence.
 */
export const AS_UNRESTRICTED_AGENT: Record<string, string | string[]> = {
  "Impersonate-User": AGENT_USERNAME,
  "Impersonate-Group": ["system:masters", "system:authenticated"],
};

/** Creates the fence's objects and resolves once the API server enforces them (or throws). */
export async function installFence(ep: KubeEndpoint, timeoutMs = 30_000): Promise<void> {
  for (const obj of await fenceObjects()) {
    const collection = COLLECTIONS[obj.kind];
    if (collection) await createIfMissing(ep, collection, obj);
  }
  // A dry-run write the fence must refuse: an unlabelled ConfigMap in `default`, made as the agent
  // with unrestricted RBAC. 403 naming the fence means it is live.
  const probe = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "krane-fence-probe", namespace: "default" } };
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await kubeRequest(
      ep,
      "POST",
      "/api/v1/namespaces/default/configmaps?dryRun=All",
      probe,
      "application/json",
      AS_UNRESTRICTED_AGENT,
    );
    if (res.status === 403 && res.body.includes("krane-agent-fence")) return;
    if (Date.now() > deadline)
      throw new Error(
        `the agent's fence was not enforced within ${timeoutMs / 1000}s (probe answered HTTP ${res.status}: ${res.body.slice(0, 300)})`,
      );
    await sleep(100);
  }
}

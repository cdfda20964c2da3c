// `krane agent --kubeconfig in-cluster`: the Kubernetes credentials a pod has — the API server
// from KUBERNETES_SERVICE_HOST/PORT, the ServiceAccount token and CA mounted under
// /var/run/secrets/kubernetes.io/serviceaccount (client-node re-reads the token file, so
// rotated bound tokens keep working). KRANE_IN_CLUSTER_ROOT moves that directory under another
// root, so the same code runs outside a pod (the in-cluster test, or a token projected
// elsewhere). Checked up front, so a missing piece is one clear error instead of a failing watch.
import { accessSync, constants } from "node:fs";
import { KubeConfig } from "@kubernetes/client-node";

export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";
export const IN_CLUSTER_ROOT_ENV = "KRANE_IN_CLUSTER_ROOT";

/** What is missing for in-cluster config; empty when everything is there. */
export function inClusterProblems(
  env: Record<string, string | undefined>,
  readable: (path: string) => boolean,
): string[] {
  const problems: string[] = [];
  const root = env[IN_CLUSTER_ROOT_ENV] ?? "";
  if (!env.KUBERNETES_SERVICE_HOST)
    problems.push("KUBERNETES_SERVICE_HOST is not set (is the agent running in a pod?)");
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!port) problems.push("KUBERNETES_SERVICE_PORT is not set (is the agent running in a pod?)");
  else if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65_535)
    problems.push(`KUBERNETES_SERVICE_PORT must be a port number, got "${port}"`);
  for (const file of ["token", "ca.crt"]) {
    const path = `${root}${SERVICE_ACCOUNT_DIR}/${file}`;
    if (!readable(path)) problems.push(`cannot read ${path} (is a ServiceAccount token mounted?)`);
  }
  return problems;
}

/** The in-cluster KubeConfig, or an error listing what is missing. */
export function loadInClusterConfig(env: Record<string, string | undefined> = process.env): KubeConfig {
  const problems = inClusterProblems(env, (path) => {
    try {
      accessSync(path, constants.R_OK);
      return true;
    } catch {
      return false;
    }
  });
  if (problems.length > 0) throw new Error(`--kubeconfig in-cluster:\n  ${problems.join("\n  ")}`);
  const kc = new KubeConfig();
  // loadFromCluster reads process.env; the checked values are the same.
  kc.loadFromCluster(env[IN_CLUSTER_ROOT_ENV] ?? "");
  return kc;
}

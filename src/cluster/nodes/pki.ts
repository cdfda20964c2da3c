// Credentials of a cluster with real nodes, beyond the control plane's own (../cluster.ts):
// a static API token per kubelet (user system:node:<name> in group system:nodes, which the Node
// authorizer and NodeRestriction admission confine to its own node), one for kube-proxy and one
// for the DNS server; and a client certificate the API server presents to the kubelets (for
// logs, exec and port-forward), from a CA only the kubelets trust. openssl makes the
// certificates (Node.js can verify certificates but not issue them).
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import type { RealNodesPlan } from "./plan.js";

const run = promisify(execFile);

export interface RealNodeCredentials {
  readonly tokens: { readonly nodes: Record<string, string>; readonly kubeProxy: string; readonly dns: string };
  /** Lines for the API server's --token-auth-file. */
  readonly tokenLines: string[];
  readonly kubeletClientCa: string;
  readonly apiserverClientCert: string;
  readonly apiserverClientKey: string;
}

/** The user the DNS server reads Services as (RBAC: ./rbac.ts). */
export const DNS_USER = "krane:cluster-dns";

export async function realNodeCredentials(pkiDir: string, plan: RealNodesPlan): Promise<RealNodeCredentials> {
  const token = (): string => randomBytes(24).toString("hex");
  const nodes: Record<string, string> = {};
  const tokenLines: string[] = [];
  for (const n of plan.nodes) {
    nodes[n.name] = token();
    tokenLines.push(`${nodes[n.name]},system:node:${n.name},node-${n.name},"system:nodes"`);
  }
  const kubeProxy = token();
  const dns = token();
  tokenLines.push(`${kubeProxy},system:kube-proxy,kube-proxy`, `${dns},${DNS_USER},cluster-dns`);

  const dir = join(pkiDir, "kubelet-client");
  await mkdir(dir, { recursive: true });
  const ca = join(dir, "ca.crt");
  const caKey = join(dir, "ca.key");
  const crt = join(dir, "apiserver.crt");
  const key = join(dir, "apiserver.key");
  const csr = join(dir, "apiserver.csr");
  const ext = join(dir, "client.ext");
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  await run("openssl", [
    "req",
    "-x509",
    ...ec,
    "-keyout",
    caKey,
    "-out",
    ca,
    "-days",
    "3650",
    "-subj",
    "/CN=krane local kubelet client CA",
  ]);
  await run("openssl", [
    "req",
    ...ec,
    "-keyout",
    key,
    "-out",
    csr,
    "-subj",
    "/O=system:masters/CN=kube-apiserver-kubelet-client",
  ]);
  await writeFile(ext, "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n");
  await run("openssl", [
    "x509",
    "-req",
    "-in",
    csr,
    "-CA",
    ca,
    "-CAkey",
    caKey,
    "-CAcreateserial",
    "-out",
    crt,
    "-days",
    "3650",
    "-extfile",
    ext,
  ]);
  return {
    tokens: { nodes, kubeProxy, dns },
    tokenLines,
    kubeletClientCa: ca,
    apiserverClientCert: crt,
    apiserverClientKey: key,
  };
}

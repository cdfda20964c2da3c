// The local cluster's certificates (a test and dev harness, started by cluster.ts with `tls:
// true`): cert-manager's own controllers (CERT_MANAGER_BUILD, ./build.ts) running against the API
// server with the admin kubeconfig, and a CA ClusterIssuer made the way a platform bootstraps a
// private CA with cert-manager alone: a self-signed ClusterIssuer issues the CA's certificate (a
// Certificate with isCA), and the CA ClusterIssuer signs with its Secret. Clients that trust the
// CA's certificate (caPem) verify every certificate the agent asks for.
import { join } from "node:path";
import { ensureCertManager } from "./build.js";
import { createIfMissing, getJson, installCrds, kubeRequest, type KubeEndpoint } from "./kube-http.js";
import { startComponent, waitUntilHealthy, type RunningComponent } from "./process.js";

export const CERT_MANAGER_NAMESPACE = "cert-manager";
/** The CA ClusterIssuer agents are given (`--certificate-issuer ClusterIssuer/krane-local-ca`). */
export const LOCAL_CA_ISSUER = "krane-local-ca";
const SELF_SIGNED_ISSUER = "krane-local-self-signed";
const CA_SECRET = "krane-local-ca";

export interface LocalCertificates {
  /** What an agent's --certificate-issuer names. */
  readonly issuer: string;
  /** The local CA's certificate (PEM): what a client trusts. */
  readonly caPem: string;
}

export interface CertificatesStart {
  readonly dir: string;
  readonly endpoint: KubeEndpoint;
  readonly kubeconfigPath: string;
  readonly log: (line: string) => void;
}

interface Conditioned {
  status?: { conditions?: { type: string; status: string; message?: string }[] };
}

function ready(obj: Conditioned): boolean {
  return obj.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
}

async function apply(ep: KubeEndpoint, path: string, obj: unknown): Promise<void> {
  const res = await kubeRequest(
    ep,
    "PATCH",
    `${path}?fieldManager=krane-local&force=true`,
    obj,
    "application/apply-patch+yaml",
  );
  if (res.status !== 200 && res.status !== 201) throw new Error(`apply ${path}: HTTP ${res.status}: ${res.body}`);
}

/** Starts cert-manager's controllers; resolves once the CA ClusterIssuer is Ready. */
export async function startCertificates(
  s: CertificatesStart,
  track: (c: RunningComponent) => Promise<void>,
): Promise<LocalCertificates> {
  const cm = await ensureCertManager(s.log);
  await installCrds(s.endpoint, cm.crds);
  await createIfMissing(s.endpoint, "/api/v1/namespaces", {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: CERT_MANAGER_NAMESPACE },
  });
  const proc = startComponent({
    name: "cert-manager",
    command: cm.bin,
    args: [`--kubeconfig=${s.kubeconfigPath}`, `--cluster-resource-namespace=${CERT_MANAGER_NAMESPACE}`],
    // Only what it needs: the admin kubeconfig (no proxy; it talks to nothing but the API server).
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" },
    logFile: join(s.dir, "logs", "cert-manager.log"),
  });
  await track(proc);
  const issuers = "/apis/cert-manager.io/v1/clusterissuers";
  await apply(s.endpoint, `${issuers}/${SELF_SIGNED_ISSUER}`, {
    apiVersion: "cert-manager.io/v1",
    kind: "ClusterIssuer",
    metadata: { name: SELF_SIGNED_ISSUER },
    spec: { selfSigned: {} },
  });
  await apply(s.endpoint, `/apis/cert-manager.io/v1/namespaces/${CERT_MANAGER_NAMESPACE}/certificates/${CA_SECRET}`, {
    apiVersion: "cert-manager.io/v1",
    kind: "Certificate",
    metadata: { name: CA_SECRET, namespace: CERT_MANAGER_NAMESPACE },
    spec: {
      isCA: true,
      commonName: "krane local CA",
      secretName: CA_SECRET,
      duration: "87600h",
      privateKey: { algorithm: "ECDSA", size: 256 },
      issuerRef: { group: "cert-manager.io", kind: "ClusterIssuer", name: SELF_SIGNED_ISSUER },
    },
  });
  await apply(s.endpoint, `${issuers}/${LOCAL_CA_ISSUER}`, {
    apiVersion: "cert-manager.io/v1",
    kind: "ClusterIssuer",
    metadata: { name: LOCAL_CA_ISSUER },
    spec: { ca: { secretName: CA_SECRET } },
  });
  await waitUntilHealthy(
    proc,
    async () => ready(await getJson<Conditioned>(s.endpoint, `${issuers}/${LOCAL_CA_ISSUER}`)),
    120_000,
    "the local CA ClusterIssuer Ready",
  );
  const secret = await getJson<{ data?: Record<string, string> }>(
    s.endpoint,
    `/api/v1/namespaces/${CERT_MANAGER_NAMESPACE}/secrets/${CA_SECRET}`,
  );
  const caPem = Buffer.from(secret.data?.["ca.crt"] ?? secret.data?.["tls.crt"] ?? "", "base64").toString("utf8");
  if (!caPem.includes("BEGIN CERTIFICATE")) throw new Error(`the local CA's Secret ${CA_SECRET} holds no certificate`);
  return { issuer: `ClusterIssuer/${LOCAL_CA_ISSUER}`, caPem };
}

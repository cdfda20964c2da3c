// The local cluster's resource metrics (a test and dev harness, started by cluster.ts with
// `metrics: true` on a cluster with real nodes): metrics-server (METRICS_SERVER_BUILD,
// ./build.ts), built unchanged from its Go module, runs on this machine as its own
// ServiceAccount kube-system/metrics-server with the RBAC of its own manifests, scrapes each real
// kubelet's /metrics/resource (the kubelet authenticates the ServiceAccount's token by webhook and
// authorizes nodes/metrics by SubjectAccessReview, as on any cluster) and serves
// metrics.k8s.io/v1beta1 (PodMetrics, NodeMetrics) through the API server's aggregation layer:
//
//  - the API server gets a front-proxy CA and client certificate (aggregationPki, openssl as in
//    nodes/pki.ts) and --enable-aggregator-routing, so it dials the endpoint's address itself
//    rather than a ClusterIP only the nodes' namespace routes;
//  - a selectorless Service kube-system/metrics-server with one EndpointSlice pointing at this
//    machine's end of the real nodes' link (the 1.36 aggregator resolves endpoints through
//    EndpointSlices only, so no v1 Endpoints object), and the module's APIService
//    v1beta1.metrics.k8s.io with the serving certificate as its caBundle.
//
// A real cluster installs metrics-server from its own manifests or Helm chart, as a Deployment.
import { execFile } from "node:child_process";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { parseAllDocuments } from "yaml";
import { createIfMissing, getJson, kubeRequest, type KubeEndpoint } from "./kube-http.js";
import { kubeconfig } from "./nodes/nodes.js";
import { ComponentStartError, startComponent, waitUntilHealthy, type RunningComponent } from "./process.js";

const run = promisify(execFile);

/** The metrics-server process's name in the cluster's state (stopped with the cluster). */
export const METRICS_SERVER = "metrics-server";
/** The APIService metrics-server registers. */
export const METRICS_API_SERVICE = "v1beta1.metrics.k8s.io";
/** Where PodMetrics and NodeMetrics are read through the API server. */
export const METRICS_API = "/apis/metrics.k8s.io/v1beta1";
/** How often metrics-server scrapes the kubelets: the smallest it accepts. */
export const METRICS_RESOLUTION_SECONDS = 10;

const NAMESPACE = "kube-system";
const SERVICE = "metrics-server";
const SERVICE_ACCOUNT = "metrics-server";
/** The common name of the API server's front-proxy client certificate (--requestheader-allowed-names). */
const FRONT_PROXY_CLIENT = "front-proxy-client";

/** What a started metrics-server tells its users (ClusterState.metrics). */
export interface LocalMetrics {
  /** The APIService serving metrics.k8s.io/v1beta1 (Available when the cluster started). */
  readonly apiService: string;
  /** The API path of PodMetrics and NodeMetrics, e.g. `${api}/namespaces/<ns>/pods`. */
  readonly api: string;
  /** How often the kubelets are scraped; a pod's CPU figure is the rate between two scrapes. */
  readonly resolutionSeconds: number;
}

/** The aggregation layer's certificates (made before the API server starts). */
export interface AggregationPki {
  /** The API server's client CA: it issues nothing (clients use tokens), see aggregationPki. */
  readonly clientCa: string;
  readonly frontProxyCa: string;
  readonly frontProxyClientCert: string;
  readonly frontProxyClientKey: string;
  /** metrics-server's serving certificate (self-signed; the APIService's caBundle) and key. */
  readonly servingCert: string;
  readonly servingKey: string;
}

const EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];

async function openssl(args: string[]): Promise<void> {
  try {
    await run("openssl", args);
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`openssl ${args[0] ?? ""}: ${(e.stderr || e.message).trim()}`);
  }
}

/**
 * The front-proxy CA and the client certificate the API server shows aggregated API servers
 * (they trust it through the extension-apiserver-authentication ConfigMap), metrics-server's
 * serving certificate for its Service's name and `hostIp`, and a client CA for the API server
 * that issues nothing: the ConfigMap then holds a client-ca-file, without which an aggregated
 * server logs errors about its missing content (every client here authenticates with a token).
 * Five openssl runs, 60–70 ms on a busy machine; only clusters with `metrics` make them.
 */
export async function aggregationPki(pkiDir: string, hostIp: string): Promise<AggregationPki> {
  const dir = join(pkiDir, "aggregation");
  await mkdir(dir, { recursive: true });
  const p = (f: string): string => join(dir, f);
  const frontProxy = (async () => {
    await openssl([
      "req",
      "-x509",
      ...EC,
      "-keyout",
      p("front-proxy-ca.key"),
      "-out",
      p("front-proxy-ca.crt"),
      "-days",
      "3650",
      "-subj",
      "/CN=krane local front-proxy CA",
    ]);
    await openssl([
      "req",
      ...EC,
      "-keyout",
      p("front-proxy-client.key"),
      "-out",
      p("front-proxy-client.csr"),
      "-subj",
      `/CN=${FRONT_PROXY_CLIENT}`,
    ]);
    await writeFile(p("client.ext"), "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n");
    await openssl([
      "x509",
      "-req",
      "-in",
      p("front-proxy-client.csr"),
      "-CA",
      p("front-proxy-ca.crt"),
      "-CAkey",
      p("front-proxy-ca.key"),
      "-CAcreateserial",
      "-out",
      p("front-proxy-client.crt"),
      "-days",
      "3650",
      "-extfile",
      p("client.ext"),
    ]);
  })();
  // The API server verifies it against the APIService's caBundle for the Service's DNS name.
  const serving = openssl([
    "req",
    "-x509",
    ...EC,
    "-keyout",
    p("metrics-server.key"),
    "-out",
    p("metrics-server.crt"),
    "-days",
    "3650",
    "-subj",
    `/CN=${SERVICE}.${NAMESPACE}.svc`,
    "-addext",
    `subjectAltName=DNS:${SERVICE}.${NAMESPACE}.svc,DNS:${SERVICE}.${NAMESPACE}.svc.cluster.local,IP:${hostIp}`,
    "-addext",
    "extendedKeyUsage=serverAuth",
  ]);
  const clientCa = openssl([
    "req",
    "-x509",
    ...EC,
    "-keyout",
    p("client-ca.key"),
    "-out",
    p("client-ca.crt"),
    "-days",
    "3650",
    "-subj",
    "/CN=krane local client CA (issues nothing)",
  ]);
  await Promise.all([frontProxy, serving, clientCa]);
  return {
    clientCa: p("client-ca.crt"),
    frontProxyCa: p("front-proxy-ca.crt"),
    frontProxyClientCert: p("front-proxy-client.crt"),
    frontProxyClientKey: p("front-proxy-client.key"),
    servingCert: p("metrics-server.crt"),
    servingKey: p("metrics-server.key"),
  };
}

/** The API server's aggregation-layer flags (kube-apiserver --help: "requestheader", "proxy-client"). */
export function aggregationArgs(pki: AggregationPki): string[] {
  return [
    "--client-ca-file",
    pki.clientCa,
    "--requestheader-client-ca-file",
    pki.frontProxyCa,
    "--requestheader-allowed-names",
    FRONT_PROXY_CLIENT,
    "--requestheader-username-headers",
    "X-Remote-User",
    "--requestheader-group-headers",
    "X-Remote-Group",
    "--requestheader-extra-headers-prefix",
    "X-Remote-Extra-",
    "--proxy-client-cert-file",
    pki.frontProxyClientCert,
    "--proxy-client-key-file",
    pki.frontProxyClientKey,
    // Proxy to the endpoint's address, not the Service's ClusterIP (routed only into the nodes' namespace).
    "--enable-aggregator-routing=true",
  ];
}

export interface MetricsStart {
  readonly dir: string;
  readonly endpoint: KubeEndpoint;
  /** The API server's URL and CA file (metrics-server's kubeconfig). */
  readonly server: string;
  readonly caFile: string;
  /** This machine's end of the real nodes' link: metrics-server listens there (not loopback, a valid endpoint). */
  readonly hostIp: string;
  readonly pki: AggregationPki;
  readonly build: { readonly bin: string; readonly rbac: string; readonly apiService: string };
  readonly freePort: (host: string) => Promise<number>;
  readonly log: (line: string) => void;
}

interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  spec?: Record<string, unknown>;
}

async function manifests(file: string): Promise<Manifest[]> {
  return parseAllDocuments(await readFile(file, "utf8"))
    .map((d) => d.toJS() as Manifest | null)
    .filter((m): m is Manifest => m !== null);
}

/** Where each kind of metrics-server's manifests is created. */
function collection(m: Manifest): string {
  const ns = m.metadata.namespace ?? NAMESPACE;
  switch (m.kind) {
    case "ServiceAccount":
      return `/api/v1/namespaces/${ns}/serviceaccounts`;
    case "ClusterRole":
      return "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    case "ClusterRoleBinding":
      return "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
    case "RoleBinding":
      return `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`;
    case "Role":
      return `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`;
    case "APIService":
      return "/apis/apiregistration.k8s.io/v1/apiservices";
    default:
      throw new Error(`metrics-server's manifests: no place for a ${m.kind} (${m.metadata.name})`);
  }
}

interface Conditioned {
  status?: { conditions?: { type: string; status: string; reason?: string; message?: string }[] };
}

/**
 * Starts metrics-server and registers its APIService; resolves once the APIService is Available
 * and PodMetrics can be listed through the API server (figures come one or two scrapes later).
 */
export async function startMetrics(
  s: MetricsStart,
  track: (c: RunningComponent) => Promise<void>,
): Promise<LocalMetrics> {
  const ep = s.endpoint;
  const started = Date.now();
  // Its ServiceAccount and RBAC as its own manifests declare them (nodes/metrics, pods, nodes;
  // the authentication ConfigMap; token and access reviews; the aggregated reader roles).
  for (const m of await manifests(s.build.rbac)) await createIfMissing(ep, collection(m), m);
  // The token a pod of its Deployment would get, for a process on this machine: long-lived, since
  // a detached cluster may run for weeks.
  const tokenRes = await kubeRequest(
    ep,
    "POST",
    `/api/v1/namespaces/${NAMESPACE}/serviceaccounts/${SERVICE_ACCOUNT}/token`,
    {
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenRequest",
      spec: { audiences: [], expirationSeconds: 10 * 365 * 24 * 3600 },
    },
  );
  if (tokenRes.status !== 201 && tokenRes.status !== 200)
    throw new Error(`metrics-server's token: HTTP ${tokenRes.status}: ${tokenRes.body.slice(0, 300)}`);
  const token = (JSON.parse(tokenRes.body) as { status: { token: string } }).status.token;
  const home = join(s.dir, "metrics-server");
  await mkdir(home, { recursive: true });
  const kc = join(home, "kubeconfig");
  await writeFile(kc, kubeconfig(s.server, s.caFile, `system:serviceaccount:${NAMESPACE}:${SERVICE_ACCOUNT}`, token), {
    mode: 0o600,
  });
  const servingPem = await readFile(s.pki.servingCert, "utf8");

  let port = 0;
  let proc: RunningComponent | undefined;
  for (let attempt = 1; ; attempt++) {
    port = await s.freePort(s.hostIp);
    proc = startComponent({
      name: METRICS_SERVER,
      command: s.build.bin,
      args: [
        `--kubeconfig=${kc}`,
        `--authentication-kubeconfig=${kc}`,
        `--authorization-kubeconfig=${kc}`,
        `--bind-address=${s.hostIp}`,
        `--secure-port=${port}`,
        `--tls-cert-file=${s.pki.servingCert}`,
        `--tls-private-key-file=${s.pki.servingKey}`,
        `--cert-dir=${home}`,
        // The kubelets serve self-signed certificates (no serving-certificate bootstrap here).
        "--kubelet-insecure-tls",
        "--kubelet-preferred-address-types=InternalIP",
        // Every real node of a cluster shares one address; each kubelet has its own port.
        "--kubelet-use-node-status-port",
        // Below 9/10 of the resolution, which metrics-server insists on.
        "--kubelet-request-timeout=5s",
        // Only the real nodes' kubelets report usage (KWOK's answer 404); NodeMetrics list them alone.
        "--node-selector=type=real",
        `--metric-resolution=${METRICS_RESOLUTION_SECONDS}s`,
        "--v=1",
      ],
      // Only what it needs: its kubeconfig (no proxy; it talks to the API server and the kubelets).
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" },
      logFile: join(s.dir, "logs", `${METRICS_SERVER}.log`),
    });
    await track(proc);
    try {
      // Listening: any HTTP answer on its port, with the serving certificate it was given.
      const self: KubeEndpoint = { server: `https://${s.hostIp}:${port}`, token, ca: servingPem };
      await waitUntilHealthy(proc, async () => (await kubeRequest(self, "GET", "/livez")).status > 0, 30_000, "listen");
      break;
    } catch (err) {
      if (attempt >= 3 || !(err instanceof ComponentStartError) || !/address already in use/i.test(err.tail)) throw err;
      s.log(`metrics-server lost port ${port} to another process; trying another`);
    }
  }

  await createIfMissing(ep, `/api/v1/namespaces/${NAMESPACE}/services`, {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: SERVICE, namespace: NAMESPACE, labels: { "k8s-app": SERVICE } },
    // No selector: its one endpoint is the process on this machine, in the EndpointSlice below.
    spec: { ports: [{ name: "https", port: 443, protocol: "TCP", targetPort: port }] },
  });
  await createIfMissing(ep, `/apis/discovery.k8s.io/v1/namespaces/${NAMESPACE}/endpointslices`, {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: `${SERVICE}-local`,
      namespace: NAMESPACE,
      labels: { "kubernetes.io/service-name": SERVICE, "endpointslice.kubernetes.io/managed-by": "krane.local" },
    },
    addressType: "IPv4",
    // The aggregator matches the slice's port to the Service's by name.
    ports: [{ name: "https", port, protocol: "TCP" }],
    endpoints: [{ addresses: [s.hostIp], conditions: { ready: true } }],
  });
  for (const m of await manifests(s.build.apiService)) {
    if (m.kind !== "APIService") throw new Error(`metrics-server's apiservice.yaml holds a ${m.kind}`);
    // Its manifest skips TLS verification; here the API server verifies the serving certificate.
    const spec: Record<string, unknown> = { ...m.spec, caBundle: Buffer.from(servingPem).toString("base64") };
    delete spec.insecureSkipTLSVerify;
    await createIfMissing(ep, collection(m), { ...m, spec });
  }

  let last = "not registered yet";
  const path = `/apis/apiregistration.k8s.io/v1/apiservices/${METRICS_API_SERVICE}`;
  try {
    await waitUntilHealthy(
      proc,
      async () => {
        const a = await getJson<Conditioned>(ep, path);
        const available = a.status?.conditions?.find((c) => c.type === "Available");
        last = available ? `${available.reason ?? available.status}: ${available.message ?? ""}` : "no condition yet";
        if (available?.status !== "True") return false;
        const list = await kubeRequest(ep, "GET", `${METRICS_API}/pods`);
        last = `listing PodMetrics: HTTP ${list.status} ${list.body.slice(0, 200)}`;
        return list.status === 200;
      },
      60_000,
      `serve ${METRICS_API_SERVICE} through the API server`,
    );
  } catch (err) {
    if (err instanceof ComponentStartError)
      throw new ComponentStartError(err.component, `${err.reason} (APIService ${last})`, err.tail);
    throw err;
  }
  s.log(`metrics-server serves ${METRICS_API} (${((Date.now() - started) / 1000).toFixed(1)}s to start and register)`);
  return { apiService: METRICS_API_SERVICE, api: METRICS_API, resolutionSeconds: METRICS_RESOLUTION_SECONDS };
}

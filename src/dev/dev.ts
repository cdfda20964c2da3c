// `krane dev`: the whole system on one machine with the embedded defaults — a real local
// Kubernetes, ctrl on SQLite, the agent of region `local` (running as its least-privilege
// ServiceAccount), and an example workspace, project, environment (with krane's own sentinel) and
// deployment — until stopped. Where the machine allows it (root, cgroups, network namespaces, a
// checkout to build the images from) the example's pods run as real containers on real nodes
// (the app under gVisor, the sentinel from krane's image); elsewhere pod stand-ins answer for
// them (KWOK nodes), and dev says which and why. With `--tls` the local cluster also runs its
// Gateway (Traefik) and cert-manager with a local CA, and the example gets a public endpoint
// served over HTTPS with its own certificate, as a platform with a Gateway and an issuer would
// serve it; off by default, since it costs two more builds and processes and a few seconds of
// start-up that the example's own traffic (through its sentinel) does not need. Everything it
// starts it also stops; a killed `krane dev` leaves its cluster to the cluster's reaper.
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { connect as tlsConnect } from "node:tls";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { pino, type Logger } from "pino";
import { Agent } from "../agent/agent.js";
import { agentKubeConfigFrom } from "../agent/rbac.js";
import { parseGatewayRef, parseIssuer } from "../agent/config.js";
import type { GatewaySettings } from "../agent/gateways/settings.js";
import { createApiClients, type ApiClients } from "../client/node.js";
import { startCluster, type LocalCluster } from "../cluster/index.js";
import { isCheckout } from "../cluster/checkout.js";
import { workloadImages, type WorkloadImages } from "../cluster/images.js";
import { realNodeSupport } from "../cluster/nodes/host.js";
import { applySentinelRbac } from "../sentinel/rbac.js";
import { startCtrl, type RunningCtrl } from "../ctrl/server/server.js";
import { addUserToken, generateToken } from "../ctrl/domain/tokens.js";
import type { GetEnvironmentStatusResponse } from "../gen/krane/ctrl/v1/api_pb.js";
import { InstanceStatus } from "../gen/krane/ctrl/v1/cluster_pb.js";
import { AGENT_NAMESPACE, AGENT_SERVICE_ACCOUNT, SENTINEL_NAMESPACE, SENTINEL_PORT } from "../contracts/cluster.js";
import { COMPONENT, LABEL_COMPONENT } from "../contracts/labels.js";
import { KubeClient } from "../kube/client.js";
import { isRecord } from "../kube/object.js";
import { resources } from "../kube/resources.js";

export interface DevOptions {
  /** Use this cluster instead of starting a local one. */
  kubeconfig?: string;
  /** ctrl's API port (0 picks a free one). */
  ctrlPort: number;
  /** Where ctrl's SQLite database lives; a temporary directory when unset. */
  dataDir?: string;
  /** Print progress lines here. */
  say: (line: string) => void;
  logLevel?: string;
  /** real: real nodes (fails where the machine cannot); standins: KWOK nodes and pod stand-ins; auto (default): real where possible. */
  nodes?: "auto" | "real" | "standins";
  /** Serve the example over HTTPS through the local Gateway, with a certificate from cert-manager. */
  tls?: boolean;
}

export const EXAMPLE = {
  workspace: "example",
  project: "hello",
  environment: "production",
  region: "local",
  replicas: 3,
  /** The hello app (test workload image; stand-ins answer for any image name). */
  image: "krane.local/hello:v1",
  /** What to deploy next: the same app reporting another image name. */
  nextImage: "krane.local/hello:v2",
} as const;

export interface DevSession {
  ctrlUrl: string;
  userToken: string;
  kubeconfigPath: string | undefined;
  api: ApiClients;
  cluster: LocalCluster | undefined;
  /** How the example's pods run: real containers, stand-ins, or on a cluster of your own. */
  nodes: "real" | "standins" | "own";
  /** With `tls`: the example's HTTPS address and the local CA's certificate file a client trusts. */
  https?: { url: string; caFile: string };
  stop(): Promise<void>;
}

/** Whether dev runs real nodes here, and if not, why (printed). */
async function chooseNodes(wanted: DevOptions["nodes"]): Promise<{ real: boolean; why: string }> {
  if (wanted === "standins") return { real: false, why: "pod stand-ins (--nodes standins)" };
  const support = await realNodeSupport();
  if (!support.ok) {
    if (wanted === "real") throw new Error(`--nodes real: ${support.reason}`);
    return { real: false, why: `pod stand-ins answer for the pods: ${support.reason}` };
  }
  if (!isCheckout()) {
    const why = "krane's image is built from a checkout, and this krane runs from a package";
    if (wanted === "real") throw new Error(`--nodes real: ${why}`);
    return { real: false, why: `pod stand-ins answer for the pods: ${why}` };
  }
  return { real: true, why: "real nodes: the app runs under gVisor, the sentinel as a container of krane's image" };
}

export async function startDev(opts: DevOptions): Promise<DevSession> {
  const log: Logger = pino({ level: opts.logLevel ?? "warn" }, pino.destination(2));
  const cleanups: (() => Promise<void>)[] = [];
  const stop = async () => {
    for (const fn of cleanups.reverse()) await fn().catch((err: unknown) => opts.say(`while stopping: ${String(err)}`));
    cleanups.length = 0;
  };
  try {
    let cluster: LocalCluster | undefined;
    let admin: KubeConfig;
    let nodes: DevSession["nodes"] = "own";
    let images: WorkloadImages | undefined;
    if (opts.kubeconfig && opts.tls)
      throw new Error(
        "--tls runs the local cluster's Gateway and cert-manager; with --kubeconfig, serve HTTPS with your cluster's own",
      );
    if (opts.kubeconfig) {
      admin = new KubeConfig();
      admin.loadFromFile(opts.kubeconfig);
      opts.say(`using the cluster of ${opts.kubeconfig}`);
    } else {
      const choice = await chooseNodes(opts.nodes);
      nodes = choice.real ? "real" : "standins";
      opts.say(`nodes: ${choice.why}`);
      opts.say("starting a local Kubernetes (the first run builds it: several minutes)…");
      const t0 = Date.now();
      if (choice.real) {
        images = await workloadImages(opts.say);
        cluster = await startCluster({
          name: "dev",
          log: opts.say,
          // The example needs an untrusted node (its pods) and a sentinel node; ctrl and the agent run here.
          realNodes: ["untrusted", "sentinel"],
          images: [images.krane, images.hello],
          gateway: opts.tls,
          tls: opts.tls,
        });
      } else {
        cluster = await startCluster({ name: "dev", log: opts.say, standins: true, gateway: opts.tls, tls: opts.tls });
      }
      cleanups.push(() => cluster!.stop());
      opts.say(`local Kubernetes ready in ${((Date.now() - t0) / 1000).toFixed(1)}s at ${cluster.server}`);
      admin = cluster.kubeConfig();
    }

    const dataDir = opts.dataDir ?? (await mkdtemp(join(tmpdir(), "krane-dev-")));
    if (!opts.dataDir) cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
    const ctrl: RunningCtrl = await startCtrl({
      databaseUrl: join(dataDir, "ctrl.db"),
      listen: { host: "127.0.0.1", port: opts.ctrlPort },
      opsListen: { host: "127.0.0.1", port: 0 },
      logger: log,
    });
    cleanups.push(() => ctrl.close());
    const userToken = generateToken("user");
    await addUserToken(ctrl.store, "dev", userToken);
    opts.say(`ctrl serving on ${ctrl.url} (SQLite in ${dataDir}); ops on ${ctrl.opsUrl ?? "-"}`);

    const api = createApiClients(ctrl.url, userToken);
    await api.regions.createRegion({ name: EXAMPLE.region });
    const { token: agentToken } = await api.regions.createClusterToken({ region: EXAMPLE.region, clusterName: "dev" });

    // krane's own sentinels read their routing table as ServiceAccount krane-sentinel.
    await applySentinelRbac(admin);
    // With --tls: the local Gateways, their HTTPS entry point and the local CA, as an agent on a
    // platform's cluster is given them (--public-gateway, --https-gateway-class, --certificate-issuer).
    const gws = cluster?.gateways;
    const certs = cluster?.certificates;
    const gateway: GatewaySettings | undefined =
      opts.tls && gws?.https && certs
        ? {
            public: parseGatewayRef(gws.public.ref),
            organization: parseGatewayRef(gws.organization.ref),
            certificateIssuer: parseIssuer(certs.issuer),
            endpointCertificates: true,
            https: gws.https,
          }
        : undefined;
    const agent = new Agent({
      ctrlUrl: ctrl.url,
      token: agentToken,
      region: EXAMPLE.region,
      kubeconfig: await agentKubeConfigFrom(admin, 24 * 3600),
      opsPort: 0,
      opsHost: "127.0.0.1",
      // The local cluster serves pod IPs on this machine at other addresses.
      podAddressMap: cluster?.podAddressMap,
      // On real nodes krane's own sentinel is krane's image as built from this checkout.
      ...(images ? { sentinelImage: images.krane.name } : {}),
      sentinelObserveIntervalMs: 1_000,
      ...(gateway ? { gateway } : {}),
      log,
    });
    await agent.start();
    cleanups.push(() => agent.stop());
    opts.say(
      `agent for region "${EXAMPLE.region}" running as ServiceAccount ${AGENT_NAMESPACE}/${AGENT_SERVICE_ACCOUNT}; ops on ${agent.opsUrl ?? "-"}`,
    );

    await createExample(api);
    opts.say(
      `deployed ${EXAMPLE.image} to ${EXAMPLE.project}/${EXAMPLE.environment} (${EXAMPLE.replicas} replicas in "${EXAMPLE.region}")`,
    );
    let https: DevSession["https"];
    if (gateway?.https && certs) {
      const { workspace, project, environment } = EXAMPLE;
      const { endpoint } = await api.endpoints.setEndpoint({ workspace, project, environment, visibility: "public" });
      const caFile = join(dataDir, "local-ca.pem");
      await writeFile(caFile, certs.caPem);
      // The generated hostname is under .localhost, which resolves to this machine; the Gateway's
      // HTTPS entry point is a port of its own there.
      const host = new URL(endpoint?.url ?? "https://localhost").hostname;
      https = { url: `https://${host}:${gateway.https.port}/`, caFile };
      opts.say(
        `HTTPS: ${https.url}, once the local CA (${caFile}) has signed its certificate and the Gateway serves it`,
      );
    }
    return {
      ctrlUrl: ctrl.url,
      userToken,
      kubeconfigPath: cluster?.kubeconfigPath ?? opts.kubeconfig,
      api,
      cluster,
      nodes,
      https,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

async function createExample(api: ApiClients): Promise<void> {
  const { workspace, project, environment } = EXAMPLE;
  await api.workspaces.createWorkspace({ slug: workspace, name: "Example workspace" });
  await api.projects.createProject({ workspace, slug: project });
  await api.environments.createEnvironment({
    workspace,
    project,
    slug: environment,
    regions: [{ region: EXAMPLE.region, replicas: EXAMPLE.replicas }],
    // krane's own sentinel (the default), one replica on a laptop.
    sentinel: { image: "", replicas: 1, cpuMillicores: 250n, memoryMib: 256n },
  });
  await api.deployments.createDeployment({
    workspace,
    project,
    environment,
    image: EXAMPLE.image,
    port: 8080,
    cpuMillicores: 500n,
    memoryMib: 512n,
    env: [{ name: "GREETING", value: "hello from krane" }],
    healthCheck: {
      method: "GET",
      path: "/healthz",
      intervalSeconds: 10,
      timeoutSeconds: 2,
      failureThreshold: 3,
      initialDelaySeconds: 1,
    },
  });
}

/**
 * Whether the HTTPS address serves its own certificate now: a TLS handshake with its hostname
 * (SNI), as curl makes it, whose certificate the local CA signed for that hostname. The Gateway
 * reports its listener Programmed a moment before it serves the certificate it loaded for it
 * (Traefik applies its new configuration after writing the status), so the endpoint's readiness
 * alone can be "ready" while the Gateway still presents its default certificate.
 */
export function servesItsCertificate(https: { url: string; caFile: string }, timeoutMs = 2_000): Promise<boolean> {
  const { hostname, port } = new URL(https.url);
  return new Promise((resolve) => {
    const socket = tlsConnect({
      host: "127.0.0.1",
      port: Number(port),
      servername: hostname,
      ca: readFileSync(https.caFile, "utf8"),
      timeout: timeoutMs,
    });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.once("secureConnect", () => done(socket.authorized));
    socket.once("timeout", () => done(false));
    socket.once("error", () => done(false));
  });
}

/**
 * Where the example environment's traffic enters on this machine: a sentinel pod's address as
 * the local cluster serves it (undefined on a cluster of your own, or before a sentinel runs).
 */
export async function exampleEntry(session: DevSession): Promise<string | undefined> {
  const cluster = session.cluster;
  if (!cluster) return undefined;
  const kube = new KubeClient(cluster.kubeConfig(), { fieldManager: "krane-dev" });
  try {
    const pods = await kube.list(resources.pods, {
      namespace: SENTINEL_NAMESPACE,
      labelSelector: `${LABEL_COMPONENT}=${COMPONENT.sentinel}`,
    });
    for (const pod of pods.items) {
      const ip = isRecord(pod.status) && typeof pod.status.podIP === "string" ? pod.status.podIP : "";
      if (ip !== "" && !pod.metadata.deletionTimestamp) return `http://${cluster.localAddress(ip)}:${SENTINEL_PORT}/`;
    }
    return undefined;
  } finally {
    kube.close();
  }
}

export async function exampleStatus(api: ApiClients): Promise<GetEnvironmentStatusResponse> {
  return api.status.getEnvironmentStatus({
    workspace: EXAMPLE.workspace,
    project: EXAMPLE.project,
    environment: EXAMPLE.environment,
  });
}

/**
 * True once every replica of the newest deployment runs and every sentinel is healthy — and, with
 * `served` (the local cluster, where this machine reaches the sentinel pods), serves ctrl's
 * current routing version, so the printed curl line answers.
 */
export function exampleConverged(s: GetEnvironmentStatusResponse, served = false): boolean {
  const newest = s.deployments[0];
  if (!newest || newest.regions.length === 0) return false;
  const running = newest.regions.every(
    (r) =>
      r.instances.filter((i) => i.status === InstanceStatus.RUNNING).length >= r.desiredReplicas &&
      r.desiredReplicas > 0,
  );
  const sentinels =
    s.sentinels.length > 0 &&
    s.sentinels.every((x) => x.availableReplicas >= x.desiredReplicas && x.desiredReplicas > 0);
  const routed =
    !served || s.sentinels.every((x) => x.routingVersion > 0n && x.servedRoutingVersion === x.routingVersion);
  return running && sentinels && routed;
}

// The local cluster's Gateways (a test and dev harness, started by cluster.ts with
// `gateway: true`): Traefik (TRAEFIK_BUILD, ./build.ts), a real Gateway API implementation,
// serving two Gateways the way a platform would: `krane-gateways/public` (the external one) and
// `krane-gateways/internal` (the organization one), each an HTTP listener on its own loopback
// port, admitting routes from namespaces krane manages. Traefik reads the cluster with the admin
// kubeconfig, writes route and Gateway status like any Gateway controller, and reaches the pod
// IPs of its backends through the pod-network proxy (./gateway/pod-proxy.ts), since those addresses are
// served at another offset on this machine.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { LABEL_MANAGED_BY, MANAGED_BY } from "../contracts/labels.js";
import { ensureTraefik } from "./build.js";
import { createIfMissing, getJson, installCrds, kubeRequest, type KubeEndpoint } from "./kube-http.js";
import { podAddressMap, type PodNetwork } from "./pod-network.js";
import { ComponentStartError, startComponent, waitUntilHealthy, type RunningComponent } from "./process.js";
import { nodeEntryArgs } from "./node-entry.js";

export const GATEWAY_NAMESPACE = "krane-gateways";
export const GATEWAY_CLASS = "krane-local";
export const TRAEFIK_CONTROLLER = "traefik.io/gateway-controller";

/** The Gateways the local cluster runs: what an agent's --public-gateway / --organization-gateway name. */
export interface LocalGateways {
  readonly public: { readonly ref: string; readonly port: number };
  readonly organization: { readonly ref: string; readonly port: number };
  /**
   * With `https`: Traefik's HTTPS entry point. A Gateway of class `className` with an HTTPS
   * listener on `port` is served there (the agent's --https-gateway; on a real cluster, 443).
   */
  readonly https?: { readonly className: string; readonly port: number };
}

export interface GatewayStart {
  readonly dir: string;
  readonly endpoint: KubeEndpoint;
  readonly kubeconfigPath: string;
  readonly network: PodNetwork;
  /** With real nodes: the pod range this machine routes into their namespace (reached as is, not mapped). */
  readonly realPods?: string;
  /** Also open an HTTPS entry point, for the Gateways an agent renders with TLS listeners. */
  readonly https?: boolean;
  readonly freePort: () => Promise<number>;
  readonly log: (line: string) => void;
}

function gatewayObject(name: string, port: number): unknown {
  return {
    apiVersion: "gateway.networking.k8s.io/v1",
    kind: "Gateway",
    metadata: { name, namespace: GATEWAY_NAMESPACE },
    spec: {
      gatewayClassName: GATEWAY_CLASS,
      listeners: [
        {
          name: "http",
          port,
          protocol: "HTTP",
          allowedRoutes: {
            namespaces: { from: "Selector", selector: { matchLabels: { [LABEL_MANAGED_BY]: MANAGED_BY } } },
          },
        },
      ],
    },
  };
}

async function programmed(ep: KubeEndpoint, name: string): Promise<boolean> {
  const gw = await getJson<{ status?: { conditions?: { type: string; status: string }[] } }>(
    ep,
    `/apis/gateway.networking.k8s.io/v1/namespaces/${GATEWAY_NAMESPACE}/gateways/${name}`,
  );
  return gw.status?.conditions?.some((c) => c.type === "Programmed" && c.status === "True") ?? false;
}

/** A start attempt lost the race for a port another process took after it was picked. */
function portTaken(err: unknown): boolean {
  return err instanceof ComponentStartError && /address already in use|EADDRINUSE|bind: /i.test(err.tail);
}

/** Creates or updates a Gateway (a retry moves its listener to a fresh port). */
async function putGateway(ep: KubeEndpoint, name: string, port: number): Promise<void> {
  const path = `/apis/gateway.networking.k8s.io/v1/namespaces/${GATEWAY_NAMESPACE}/gateways/${name}`;
  const res = await kubeRequest(
    ep,
    "PATCH",
    `${path}?fieldManager=krane-local&force=true`,
    gatewayObject(name, port),
    "application/apply-patch+yaml",
  );
  if (res.status !== 200 && res.status !== 201)
    throw new Error(`apply Gateway ${name}: HTTP ${res.status}: ${res.body.slice(0, 300)}`);
}

/**
 * Starts the pod proxy and Traefik; resolves once both Gateways are Programmed. Ports are picked
 * free and bound a moment later, so another process on this machine can take one first: the
 * attempt then starts again on fresh ports (three attempts, as cluster.ts does for its own).
 */
export async function startGateways(
  s: GatewayStart,
  track: (c: RunningComponent) => Promise<void>,
): Promise<LocalGateways> {
  const traefik = await ensureTraefik(s.log);
  await installCrds(s.endpoint, traefik.crds);
  await createIfMissing(s.endpoint, "/api/v1/namespaces", {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: GATEWAY_NAMESPACE },
  });
  await createIfMissing(s.endpoint, "/apis/gateway.networking.k8s.io/v1/gatewayclasses", {
    apiVersion: "gateway.networking.k8s.io/v1",
    kind: "GatewayClass",
    metadata: { name: GATEWAY_CLASS },
    spec: { controllerName: TRAEFIK_CONTROLLER },
  });

  let proxyPort = 0;
  for (let attempt = 1; ; attempt++) {
    try {
      proxyPort = await s.freePort();
      const proxyLog = join(s.dir, "logs", "pod-proxy.log");
      const proxy = startComponent({
        name: "pod-proxy",
        command: process.execPath,
        args: [
          ...nodeEntryArgs(import.meta.url, "./gateway/pod-proxy"),
          "--listen",
          `127.0.0.1:${proxyPort}`,
          "--map",
          podAddressMap(s.network),
          ...(s.realPods ? ["--direct", s.realPods] : []),
        ],
        logFile: proxyLog,
      });
      await track(proxy);
      const listening = `listening on 127.0.0.1:${proxyPort}`;
      await waitUntilHealthy(proxy, async () => (await readFile(proxyLog, "utf8")).includes(listening), 30_000);
      break;
    } catch (err) {
      if (attempt >= 3 || !portTaken(err)) throw err;
    }
  }
  for (let attempt = 1; ; attempt++) {
    const [publicPort, internalPort] = [await s.freePort(), await s.freePort()];
    const httpsPort = s.https ? await s.freePort() : undefined;
    await putGateway(s.endpoint, "public", publicPort);
    await putGateway(s.endpoint, "internal", internalPort);
    const gw = startComponent({
      name: "traefik",
      command: traefik.bin,
      args: [
        `--entryPoints.public.address=127.0.0.1:${publicPort}`,
        `--entryPoints.internal.address=127.0.0.1:${internalPort}`,
        // Traefik serves a Gateway listener on the entry point of the same port.
        ...(httpsPort === undefined ? [] : [`--entryPoints.https.address=127.0.0.1:${httpsPort}`]),
        "--providers.kubernetesGateway=true",
        // How long Traefik waits between applying two configurations of a provider (its default
        // 2 s). It writes a listener's status before it applies what the status says, so a
        // listener is Programmed up to this long before it serves its certificate; a test widens
        // it (KRANE_LOCAL_GATEWAY_THROTTLE) to show that a client is only told once it serves.
        `--providers.providersThrottleDuration=${process.env.KRANE_LOCAL_GATEWAY_THROTTLE ?? "2s"}`,
        // A test harness: no calls home.
        "--global.checkNewVersion=false",
        "--global.sendAnonymousUsage=false",
        "--log.level=INFO",
      ],
      // Only what Traefik needs: the admin kubeconfig and the pod proxy for its upstreams.
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? "",
        KUBECONFIG: s.kubeconfigPath,
        HTTP_PROXY: `socks5://127.0.0.1:${proxyPort}`,
        http_proxy: `socks5://127.0.0.1:${proxyPort}`,
      },
      logFile: join(s.dir, "logs", "traefik.log"),
    });
    await track(gw);
    try {
      await waitUntilHealthy(
        gw,
        async () => (await programmed(s.endpoint, "public")) && (await programmed(s.endpoint, "internal")),
        120_000,
      );
      return {
        public: { ref: `${GATEWAY_NAMESPACE}/public`, port: publicPort },
        organization: { ref: `${GATEWAY_NAMESPACE}/internal`, port: internalPort },
        ...(httpsPort === undefined ? {} : { https: { className: GATEWAY_CLASS, port: httpsPort } }),
      };
    } catch (err) {
      if (attempt >= 3 || !portTaken(err) || !gw.hasExited()) throw err;
    }
  }
}

// Pure rendering of a sentinel's Kubernetes objects (one routing proxy per environment and
// region, labelled as src/contracts/labels.ts says): the shared `sentinel`
// Namespace, the apps/v1 Deployment that runs the environment's routing proxy in this region,
// and the ClusterIP Service in front of it. No I/O here: the same output is server-side applied
// and compared with the watch caches for drift, so nothing empty is emitted (the API server
// would drop it and every resync would then see drift).
//
// The Service is owned by the Deployment. Its ownerReference needs the Deployment's uid, which
// only exists once the Deployment was applied, so it is a parameter: the drift check renders
// the Service without an owner (the owner is not something a resync can compare), the apply
// renders it with the uid the Deployment apply returned.
import { APP_PROTOCOL_H2C } from "../../contracts/protocols.js";
import type { ApplySentinel } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { KubeObject } from "../../kube/object.js";
import {
  COMPONENT as COMPONENTS,
  LABEL_MANAGED_BY,
  LABEL_SENTINEL_ID,
  MANAGED_BY,
  ownerLabels,
} from "../../contracts/labels.js";
import {
  AGENT_NAMESPACE,
  NODE_CLASS,
  onNodeClass,
  RUNTIME_CLASS,
  SENTINEL_NAMESPACE,
  SENTINEL_PORT,
  SENTINEL_PORT_NAME,
  SENTINEL_H2C_PORT_NAME,
  SENTINEL_H2C_SERVICE_PORT,
  SENTINEL_SERVICE_ACCOUNT,
  zoneSpread,
} from "../../contracts/cluster.js";
import { SENTINEL_OPS_PORT, SENTINEL_PEER_PORT, SENTINEL_PEER_PORT_NAME } from "../../contracts/routing.js";
import type { SentinelDefaults } from "./settings.js";

export { SENTINEL_NAMESPACE, SENTINEL_PORT };
export const COMPONENT = COMPONENTS.sentinel;
export const CONTAINER_NAME = "sentinel";
/** A custom sentinel image's probes (on its proxy port). */
export const READINESS_PATH = "/_krane/ready";
export const LIVENESS_PATH = "/_krane/live";

/** Requests are this fraction of the limits: proxies idle most of the time but may burst. */
export const REQUEST_DIVISOR = 2n;

export interface RenderedSentinel {
  readonly namespace: KubeObject;
  readonly deployment: KubeObject;
  readonly service: KubeObject;
}

export function sentinelLabels(s: ApplySentinel, region: string): Record<string, string> {
  return {
    ...ownerLabels(COMPONENT, region, s),
    [LABEL_SENTINEL_ID]: s.sentinelId,
  };
}

/** Selects the sentinel's pods (Deployment selector, Service selector, spread constraint). */
export function sentinelSelector(s: ApplySentinel): Record<string, string> {
  return { [LABEL_SENTINEL_ID]: s.sentinelId };
}

function resources(s: ApplySentinel): Record<string, Record<string, string>> {
  const smaller = (v: bigint): bigint => (v / REQUEST_DIVISOR > 0n ? v / REQUEST_DIVISOR : 1n);
  return {
    limits: { cpu: `${s.cpuMillicores}m`, memory: `${s.memoryMib}Mi` },
    requests: { cpu: `${smaller(s.cpuMillicores)}m`, memory: `${smaller(s.memoryMib)}Mi` },
  };
}

function httpProbe(path: string, port: number, timing: Record<string, number>): Record<string, unknown> {
  return { httpGet: { path, port, scheme: "HTTP" }, ...timing };
}

const readinessTiming = { initialDelaySeconds: 2, periodSeconds: 5, timeoutSeconds: 3, failureThreshold: 2 };
const livenessTiming = { initialDelaySeconds: 10, periodSeconds: 10, timeoutSeconds: 5, failureThreshold: 3 };

/** The grace period of krane's own sentinel pods: its drain delay and drain timeout, and a margin. */
export const SENTINEL_GRACE_SECONDS = 35;

/**
 * The proxy container. krane's own sentinel (isOwnSentinel) runs `krane sentinel` with the
 * read-only ServiceAccount of the routing table and probes on its ops port; a custom image gets
 * no Kubernetes token at all (it is tenant-chosen code: it must not read other environments'
 * routing tables) and is probed on its proxy port.
 */
function proxyContainer(
  s: ApplySentinel,
  region: string,
  own: boolean,
  defaults: SentinelDefaults,
): Record<string, unknown> {
  const ports: Array<Record<string, unknown>> = [
    { name: SENTINEL_PORT_NAME, containerPort: SENTINEL_PORT, protocol: "TCP" },
  ];
  if (own)
    ports.push(
      { name: "ops", containerPort: SENTINEL_OPS_PORT, protocol: "TCP" },
      { name: SENTINEL_PEER_PORT_NAME, containerPort: SENTINEL_PEER_PORT, protocol: "TCP" },
    );
  const container: Record<string, unknown> = {
    name: CONTAINER_NAME,
    image: own ? defaults.image : s.image,
    imagePullPolicy: "IfNotPresent",
    ports,
    env: [
      { name: "PORT", value: String(SENTINEL_PORT) },
      { name: "KRANE_REGION", value: region },
      { name: "KRANE_WORKSPACE_ID", value: s.workspaceId },
      { name: "KRANE_PROJECT_ID", value: s.projectId },
      { name: "KRANE_ENVIRONMENT_ID", value: s.environmentId },
      { name: "KRANE_SENTINEL_ID", value: s.sentinelId },
      // The replicas exchange rate-limit counts (src/sentinel/peers.ts): peers from the Service's
      // EndpointSlices, messages signed with the Secret the agent creates beside the Deployment
      // (optional: without it the pod still starts, and each replica counts alone).
      ...(own
        ? [
            { name: "KRANE_SENTINEL_PEER_SERVICE", value: s.k8sName },
            {
              name: "KRANE_SENTINEL_PEER_SECRET",
              valueFrom: { secretKeyRef: { name: peerSecretName(s.k8sName), key: PEER_SECRET_KEY, optional: true } },
            },
          ]
        : []),
    ],
    resources: resources(s),
    readinessProbe: own
      ? httpProbe("/readyz", SENTINEL_OPS_PORT, readinessTiming)
      : httpProbe(READINESS_PATH, SENTINEL_PORT, readinessTiming),
    livenessProbe: own
      ? httpProbe("/healthz", SENTINEL_OPS_PORT, livenessTiming)
      : httpProbe(LIVENESS_PATH, SENTINEL_PORT, livenessTiming),
    securityContext: own
      ? {
          allowPrivilegeEscalation: false,
          runAsNonRoot: true,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ["ALL"] },
        }
      : { allowPrivilegeEscalation: false },
  };
  if (own) container.args = ["sentinel"];
  return container;
}

export function renderSentinelNamespace(): KubeObject {
  // Shared by every region's agent on the cluster, so no region label and never deleted.
  return {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: SENTINEL_NAMESPACE, labels: { [LABEL_MANAGED_BY]: MANAGED_BY } },
  };
}

/** An image reference without its tag and digest ("reg:5000/krane:1@sha256:…" is "reg:5000/krane"). */
function repository(image: string): string {
  const name = image.split("@")[0] ?? "";
  const colon = name.lastIndexOf(":");
  return colon > name.lastIndexOf("/") ? name.slice(0, colon) : name;
}

/**
 * Whether the environment runs krane's own sentinel: no image named, or an image of the
 * repository of krane's own (the agent's `--sentinel-image`). krane's image run as a user's
 * sentinel only prints its help, so naming it can only mean krane's own; any tag counts (the
 * agent's image is run), so an image upgrade does not turn such an environment into a custom one.
 */
export function isOwnSentinel(s: ApplySentinel, defaults: SentinelDefaults): boolean {
  return s.image === "" || repository(s.image) === repository(defaults.image);
}

export function renderSentinelDeployment(s: ApplySentinel, region: string, defaults: SentinelDefaults): KubeObject {
  const own = isOwnSentinel(s, defaults);
  // Every label is on the pods too: the per-environment CiliumNetworkPolicy admits ingress from
  // pods labelled component=sentinel + environment id, and user deployments prefer the zones
  // of pods with those labels.
  const labels = sentinelLabels(s, region);
  const selector = sentinelSelector(s);
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: s.k8sName, namespace: SENTINEL_NAMESPACE, labels },
    spec: {
      replicas: s.replicas,
      selector: { matchLabels: selector },
      // Never below the wanted capacity while rolling: one extra pod at a time.
      strategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
      template: {
        metadata: { labels },
        spec: {
          // A sentinel image of the user's is user code: sandboxed like a workload, with no token.
          ...(own
            ? { serviceAccountName: SENTINEL_SERVICE_ACCOUNT, automountServiceAccountToken: true }
            : { automountServiceAccountToken: false, runtimeClassName: RUNTIME_CLASS }),
          enableServiceLinks: false,
          restartPolicy: "Always",
          // krane's sentinel keeps accepting for its drain delay (5 s) after SIGTERM, then lets
          // requests finish for its drain timeout (25 s): both inside the grace period.
          ...(own ? { terminationGracePeriodSeconds: SENTINEL_GRACE_SECONDS } : {}),
          ...onNodeClass(NODE_CLASS.sentinel),
          topologySpreadConstraints: [zoneSpread(selector)],
          containers: [proxyContainer(s, region, own, defaults)],
        },
      },
    },
  };
}

/** The Service; `ownerUid` is the applied Deployment's uid (omitted for drift comparison). */
export function renderSentinelService(s: ApplySentinel, region: string, ownerUid?: string): KubeObject {
  const metadata: KubeObject["metadata"] = {
    name: s.k8sName,
    namespace: SENTINEL_NAMESPACE,
    labels: sentinelLabels(s, region),
  };
  if (ownerUid !== undefined) {
    metadata.ownerReferences = [{ apiVersion: "apps/v1", kind: "Deployment", name: s.k8sName, uid: ownerUid }];
  }
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata,
    spec: {
      type: "ClusterIP",
      selector: sentinelSelector(s),
      ports: [
        { name: SENTINEL_PORT_NAME, port: SENTINEL_PORT, targetPort: SENTINEL_PORT, protocol: "TCP" },
        {
          name: SENTINEL_H2C_PORT_NAME,
          port: SENTINEL_H2C_SERVICE_PORT,
          targetPort: SENTINEL_PORT,
          protocol: "TCP",
          appProtocol: APP_PROTOCOL_H2C,
        },
        { name: SENTINEL_PEER_PORT_NAME, port: SENTINEL_PEER_PORT, targetPort: SENTINEL_PEER_PORT, protocol: "TCP" },
      ],
    },
  };
}

/**
 * The sentinel's ingress fence, a CiliumNetworkPolicy over its pods (Cilium denies an endpoint
 * every ingress its policies do not allow, port by port):
 *  - the proxy port from anywhere (Gateways, in the cluster or on hosts, and callers inside it);
 *  - krane's own sentinel also has the ops port (probes, /metrics) from the nodes and from the
 *    agent's namespace, and the rate-limit exchange's port from this sentinel's own replicas
 *    only (the HMAC behind it stays: a policy is a second fence, not the first).
 * A sentinel image of the user's listens on its proxy port alone, so that is all it is reached on.
 * Other scrapers of /metrics (a Prometheus) need a policy of the operator's allowing them:
 * Cilium adds policies up.
 */
export function renderSentinelNetworkPolicy(s: ApplySentinel, region: string, defaults: SentinelDefaults): KubeObject {
  const tcp = (port: number) => [{ ports: [{ port: String(port), protocol: "TCP" }] }];
  const ingress: Array<Record<string, unknown>> = [{ fromEntities: ["all"], toPorts: tcp(SENTINEL_PORT) }];
  if (isOwnSentinel(s, defaults))
    ingress.push(
      { fromEntities: ["host", "remote-node"], toPorts: tcp(SENTINEL_OPS_PORT) },
      {
        fromEndpoints: [{ matchLabels: { "k8s:io.kubernetes.pod.namespace": AGENT_NAMESPACE } }],
        toPorts: tcp(SENTINEL_OPS_PORT),
      },
      { fromEndpoints: [{ matchLabels: sentinelSelector(s) }], toPorts: tcp(SENTINEL_PEER_PORT) },
    );
  return {
    apiVersion: "cilium.io/v2",
    kind: "CiliumNetworkPolicy",
    metadata: { name: s.k8sName, namespace: SENTINEL_NAMESPACE, labels: sentinelLabels(s, region) },
    spec: { endpointSelector: { matchLabels: sentinelSelector(s) }, ingress },
  };
}

/** The Secret holding the HMAC key of the replicas' rate-limit exchange. */
export function peerSecretName(k8sName: string): string {
  return `${k8sName}-peers`;
}
export const PEER_SECRET_KEY = "secret";

/**
 * The exchange's Secret, created once with a random key before the Deployment (its pods read it
 * when they start), never read back nor compared (the agent may not read Secrets); deleted with
 * the sentinel.
 */
export function renderPeerSecret(s: ApplySentinel, region: string, key: string): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: peerSecretName(s.k8sName), namespace: SENTINEL_NAMESPACE, labels: sentinelLabels(s, region) },
    type: "Opaque",
    data: { [PEER_SECRET_KEY]: Buffer.from(key).toString("base64") },
  };
}

export function renderSentinel(
  s: ApplySentinel,
  region: string,
  defaults: SentinelDefaults,
  ownerUid?: string,
): RenderedSentinel {
  return {
    namespace: renderSentinelNamespace(),
    deployment: renderSentinelDeployment(s, region, defaults),
    service: renderSentinelService(s, region, ownerUid),
  };
}

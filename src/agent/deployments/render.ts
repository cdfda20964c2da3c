// Pure rendering of a deployment's Kubernetes objects (user code on the untrusted nodes, in
// gVisor, reachable only through its environment's sentinels):
//  - the workspace Namespace (created if missing, never deleted by an agent: namespaces are
//    shared by every region's agent on a cluster, so it carries no region label);
//  - the per-(environment, region) CiliumNetworkPolicy admitting ingress only from that
//    environment's sentinels (once a policy selects a pod, Cilium denies all other ingress);
//  - the ReplicaSet with every field of the ApplyDeployment message.
// Nothing here does I/O; the same output drives server-side apply and drift detection, so it
// never emits empty lists/objects (the API server would drop them and every resync would see
// drift).
import { createHash } from "node:crypto";
import { appProtocolFrom, DEFAULT_APP_PROTOCOL, LABEL_APP_PROTOCOL } from "../../contracts/protocols.js";
import type { ApplyDeployment } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { KubeObject } from "../../kube/object.js";
import {
  COMPONENT as COMPONENTS,
  LABEL_BUILD_ID,
  LABEL_COMPONENT,
  LABEL_DEPLOYMENT_ID,
  LABEL_ENVIRONMENT_ID,
  LABEL_MANAGED_BY,
  LABEL_REGION,
  MANAGED_BY,
  ownerLabels,
  workspaceNamespaceLabels,
} from "../../contracts/labels.js";
import {
  NODE_CLASS,
  onNodeClass,
  RUNTIME_CLASS,
  SENTINEL_NAMESPACE,
  ZONE_LABEL,
  zoneSpread,
} from "../../contracts/cluster.js";
import { pullSecretAnnotation, pullSecretPodParts } from "./pull-secret.js";
import { quotaAnnotation } from "./quota.js";
import { settingsPodParts } from "./settings.js";

export const COMPONENT = COMPONENTS.deployment;
export const CONTAINER_NAME = "app";
export const ANNOTATION_REVISION = "krane.dev/revision";
export const ANNOTATION_HEALTH_METHOD = "krane.dev/health-check-method";
/** Requests are this fraction of the limits (the untrusted pool is overcommitted 2:1). */
export const REQUEST_DIVISOR = 2n;

export interface RenderedDeployment {
  readonly namespace: KubeObject;
  readonly networkPolicy: KubeObject;
  readonly replicaSet: KubeObject;
}

export function deploymentLabels(d: ApplyDeployment, region: string): Record<string, string> {
  const labels: Record<string, string> = {
    ...ownerLabels(COMPONENT, region, d),
    [LABEL_DEPLOYMENT_ID]: d.deploymentId,
  };
  if (d.buildId !== "") labels[LABEL_BUILD_ID] = d.buildId;
  return labels;
}

export function selectorLabels(d: ApplyDeployment, region: string): Record<string, string> {
  // The region is part of the selector so two regions' ReplicaSets on one cluster never
  // select each other's pods.
  return { [LABEL_DEPLOYMENT_ID]: d.deploymentId, [LABEL_REGION]: region };
}

/** A DNS-1123 name from free-form parts; a hash suffix keeps sanitised names unique. */
export function safeName(prefix: string, ...parts: string[]): string {
  const raw = parts.join("-");
  let clean = raw
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .replace(/-+/g, "-")
    .replace(/^-|-$/g, "");
  if (clean !== raw || `${prefix}-${clean}`.length > 63) {
    const hash = createHash("sha256").update(raw).digest("hex").slice(0, 8);
    clean = `${clean.slice(0, 63 - prefix.length - 10).replace(/-$/, "")}-${hash}`;
  }
  return `${prefix}-${clean}`;
}

export function networkPolicyName(environmentId: string, region: string): string {
  return safeName("krane-ingress", environmentId, region);
}

function resources(d: ApplyDeployment): Record<string, Record<string, string>> {
  const cpu = d.cpuMillicores;
  const mem = d.memoryMib;
  const half = (v: bigint): bigint => (v / REQUEST_DIVISOR > 0n ? v / REQUEST_DIVISOR : 1n);
  return {
    limits: { cpu: `${cpu}m`, memory: `${mem}Mi` },
    requests: { cpu: `${half(cpu)}m`, memory: `${half(mem)}Mi` },
  };
}

function probe(d: ApplyDeployment): Record<string, unknown> | undefined {
  const hc = d.healthCheck;
  if (!hc || hc.path === "") return undefined;
  const p: Record<string, unknown> = { httpGet: { path: hc.path, port: d.port, scheme: "HTTP" } };
  if (hc.initialDelaySeconds > 0) p.initialDelaySeconds = hc.initialDelaySeconds;
  if (hc.intervalSeconds > 0) p.periodSeconds = hc.intervalSeconds;
  if (hc.timeoutSeconds > 0) p.timeoutSeconds = hc.timeoutSeconds;
  if (hc.failureThreshold > 0) p.failureThreshold = hc.failureThreshold;
  return p;
}

function env(d: ApplyDeployment, region: string): Array<Record<string, unknown>> {
  const vars: Array<Record<string, unknown>> = [
    { name: "PORT", value: String(d.port) },
    { name: "KRANE_WORKSPACE_ID", value: d.workspaceId },
    { name: "KRANE_PROJECT_ID", value: d.projectId },
    { name: "KRANE_ENVIRONMENT_ID", value: d.environmentId },
    { name: "KRANE_DEPLOYMENT_ID", value: d.deploymentId },
    { name: "KRANE_REGION", value: region },
    { name: "KRANE_REVISION", value: String(d.revision) },
  ];
  const optional: Array<[string, string]> = [
    ["KRANE_WORKSPACE_SLUG", d.workspaceSlug],
    ["KRANE_PROJECT_SLUG", d.projectSlug],
    ["KRANE_ENVIRONMENT_SLUG", d.environmentSlug],
    ["KRANE_BUILD_ID", d.buildId],
  ];
  for (const [name, value] of optional) if (value !== "") vars.push({ name, value });
  vars.push({ name: "KRANE_INSTANCE_ID", valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.name" } } });
  for (const e of d.env) vars.push({ name: e.name, value: e.value });
  return vars;
}

export function renderNamespace(d: ApplyDeployment): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Namespace",
    // managed-by, the workspace id and Pod Security `baseline` (a second fence: nothing
    // privileged runs here) — what the admission fence checks a workspace namespace by.
    metadata: { name: d.k8sNamespace, labels: workspaceNamespaceLabels(d.workspaceId) },
  };
}

export function renderNetworkPolicy(d: ApplyDeployment, region: string): KubeObject {
  return {
    apiVersion: "cilium.io/v2",
    kind: "CiliumNetworkPolicy",
    metadata: {
      name: networkPolicyName(d.environmentId, region),
      namespace: d.k8sNamespace,
      labels: ownerLabels(COMPONENT, region, d),
    },
    spec: {
      endpointSelector: {
        matchLabels: {
          [LABEL_MANAGED_BY]: MANAGED_BY,
          [LABEL_COMPONENT]: COMPONENT,
          [LABEL_REGION]: region,
          [LABEL_ENVIRONMENT_ID]: d.environmentId,
        },
      },
      ingress: [
        {
          fromEndpoints: [
            {
              matchLabels: {
                "k8s:io.kubernetes.pod.namespace": SENTINEL_NAMESPACE,
                [LABEL_COMPONENT]: COMPONENTS.sentinel,
                [LABEL_ENVIRONMENT_ID]: d.environmentId,
              },
            },
          ],
        },
      ],
    },
  };
}

export function renderReplicaSet(d: ApplyDeployment, region: string): KubeObject {
  const labels = deploymentLabels(d, region);
  const selector = selectorLabels(d, region);
  const podAnnotations: Record<string, string> = { [ANNOTATION_REVISION]: String(d.revision) };
  // Kubelet HTTP probes only GET; a POST health check is probed with GET and the wish is
  // recorded on the pod for whoever routes health checks.
  if (d.healthCheck && d.healthCheck.method !== "" && d.healthCheck.method !== "GET") {
    podAnnotations[ANNOTATION_HEALTH_METHOD] = d.healthCheck.method;
  }
  // HTTP/2 apps: the agent's routing table gives their port appProtocol kubernetes.io/h2c.
  const protocol = appProtocolFrom(d.protocol);
  const podLabels = protocol === DEFAULT_APP_PROTOCOL ? labels : { ...labels, [LABEL_APP_PROTOCOL]: protocol };
  const container: Record<string, unknown> = {
    name: CONTAINER_NAME,
    image: d.image,
    imagePullPolicy: "IfNotPresent",
    ports: [{ name: "http", containerPort: d.port, protocol: "TCP" }],
    env: env(d, region),
    resources: resources(d),
    securityContext: { allowPrivilegeEscalation: false },
  };
  if (d.command.length > 0) container.command = [...d.command];
  if (d.args.length > 0) container.args = [...d.args];
  // The revision's configuration and secrets (./settings.ts), as environment variables.
  const settings = settingsPodParts(d);
  if (settings.envFrom.length > 0) container.envFrom = settings.envFrom;
  if (settings.volumeMounts.length > 0) container.volumeMounts = settings.volumeMounts;
  const p = probe(d);
  if (p) {
    container.readinessProbe = p;
    container.livenessProbe = p;
  }
  const spec: Record<string, unknown> = {
    replicas: d.replicas,
    selector: { matchLabels: selector },
    template: {
      metadata: { labels: podLabels, annotations: podAnnotations },
      spec: {
        runtimeClassName: RUNTIME_CLASS,
        automountServiceAccountToken: false,
        enableServiceLinks: false,
        restartPolicy: "Always",
        ...onNodeClass(NODE_CLASS.untrusted),
        // Hard spread: the sentinel-zone affinity is only a preference and must not pile every
        // replica into one zone.
        topologySpreadConstraints: [zoneSpread(selector)],
        affinity: {
          podAffinity: {
            preferredDuringSchedulingIgnoredDuringExecution: [
              {
                weight: 50,
                podAffinityTerm: {
                  topologyKey: ZONE_LABEL,
                  namespaces: [SENTINEL_NAMESPACE],
                  labelSelector: {
                    matchLabels: { [LABEL_ENVIRONMENT_ID]: d.environmentId, [LABEL_COMPONENT]: COMPONENTS.sentinel },
                  },
                },
              },
            ],
          },
        },
        containers: [container],
        ...(settings.volumes.length > 0 ? { volumes: settings.volumes } : {}),
        // The workspace's private registries (./pull-secret.ts).
        ...pullSecretPodParts(d.pullSecret),
      },
    },
  };
  if (d.minReadySeconds > 0) spec.minReadySeconds = d.minReadySeconds;
  return {
    apiVersion: "apps/v1",
    kind: "ReplicaSet",
    metadata: {
      name: d.k8sName,
      namespace: d.k8sNamespace,
      labels,
      annotations: {
        [ANNOTATION_REVISION]: String(d.revision),
        ...pullSecretAnnotation(d.pullSecret),
        ...quotaAnnotation(d.workspaceQuota),
      },
    },
    spec,
  };
}

export function renderDeployment(d: ApplyDeployment, region: string): RenderedDeployment {
  return {
    namespace: renderNamespace(d),
    networkPolicy: renderNetworkPolicy(d, region),
    replicaSet: renderReplicaSet(d, region),
  };
}

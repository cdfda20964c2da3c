// The Kubernetes resource types krane touches, and their REST paths.
export interface ResourceType {
  readonly group: string; // "" for the core group
  readonly version: string;
  readonly kind: string;
  readonly plural: string;
  readonly namespaced: boolean;
  /** A field selector every list and watch of this type carries (a type that is read only in part). */
  readonly fieldSelector?: string;
}

export const resources = {
  namespaces: { group: "", version: "v1", kind: "Namespace", plural: "namespaces", namespaced: false },
  nodes: { group: "", version: "v1", kind: "Node", plural: "nodes", namespaced: false },
  pods: { group: "", version: "v1", kind: "Pod", plural: "pods", namespaced: true },
  services: { group: "", version: "v1", kind: "Service", plural: "services", namespaced: true },
  configMaps: { group: "", version: "v1", kind: "ConfigMap", plural: "configmaps", namespaced: true },
  endpointSlices: {
    group: "discovery.k8s.io",
    version: "v1",
    kind: "EndpointSlice",
    plural: "endpointslices",
    namespaced: true,
  },
  replicaSets: { group: "apps", version: "v1", kind: "ReplicaSet", plural: "replicasets", namespaced: true },
  deployments: { group: "apps", version: "v1", kind: "Deployment", plural: "deployments", namespaced: true },
  serviceAccounts: { group: "", version: "v1", kind: "ServiceAccount", plural: "serviceaccounts", namespaced: true },
  clusterRoles: {
    group: "rbac.authorization.k8s.io",
    version: "v1",
    kind: "ClusterRole",
    plural: "clusterroles",
    namespaced: false,
  },
  clusterRoleBindings: {
    group: "rbac.authorization.k8s.io",
    version: "v1",
    kind: "ClusterRoleBinding",
    plural: "clusterrolebindings",
    namespaced: false,
  },
  roles: { group: "rbac.authorization.k8s.io", version: "v1", kind: "Role", plural: "roles", namespaced: true },
  roleBindings: {
    group: "rbac.authorization.k8s.io",
    version: "v1",
    kind: "RoleBinding",
    plural: "rolebindings",
    namespaced: true,
  },
  secrets: { group: "", version: "v1", kind: "Secret", plural: "secrets", namespaced: true },
  resourceQuotas: { group: "", version: "v1", kind: "ResourceQuota", plural: "resourcequotas", namespaced: true },
  limitRanges: { group: "", version: "v1", kind: "LimitRange", plural: "limitranges", namespaced: true },
  // Why a pod does not start when its status cannot say (a volume that cannot be mounted): the
  // kubelet's and drivers' Warning events about pods, and nothing else of the Event API.
  podWarningEvents: {
    group: "",
    version: "v1",
    kind: "Event",
    plural: "events",
    namespaced: true,
    fieldSelector: "involvedObject.kind=Pod,type=Warning",
  },
  // CPU use of pods, from the resource metrics API (metrics-server): read-only, list only.
  podMetrics: { group: "metrics.k8s.io", version: "v1beta1", kind: "PodMetrics", plural: "pods", namespaced: true },
  jobs: { group: "batch", version: "v1", kind: "Job", plural: "jobs", namespaced: true },
  cronJobs: { group: "batch", version: "v1", kind: "CronJob", plural: "cronjobs", namespaced: true },
  secretProviderClasses: {
    group: "secrets-store.csi.x-k8s.io",
    version: "v1",
    kind: "SecretProviderClass",
    plural: "secretproviderclasses",
    namespaced: true,
  },
  ciliumNetworkPolicies: {
    group: "cilium.io",
    version: "v2",
    kind: "CiliumNetworkPolicy",
    plural: "ciliumnetworkpolicies",
    namespaced: true,
  },
  // Exposure (the gateway kind): Gateway API, cert-manager, Envoy Gateway.
  gateways: {
    group: "gateway.networking.k8s.io",
    version: "v1",
    kind: "Gateway",
    plural: "gateways",
    namespaced: true,
  },
  httpRoutes: {
    group: "gateway.networking.k8s.io",
    version: "v1",
    kind: "HTTPRoute",
    plural: "httproutes",
    namespaced: true,
  },
  referenceGrants: {
    group: "gateway.networking.k8s.io",
    version: "v1beta1",
    kind: "ReferenceGrant",
    plural: "referencegrants",
    namespaced: true,
  },
  certificates: {
    group: "cert-manager.io",
    version: "v1",
    kind: "Certificate",
    plural: "certificates",
    namespaced: true,
  },
  securityPolicies: {
    group: "gateway.envoyproxy.io",
    version: "v1alpha1",
    kind: "SecurityPolicy",
    plural: "securitypolicies",
    namespaced: true,
  },
} as const satisfies Record<string, ResourceType>;

/** The known resource type of an object (by apiVersion and kind), or undefined. */
export function resourceOf(obj: { apiVersion?: string; kind?: string }): ResourceType | undefined {
  for (const r of Object.values(resources) as ResourceType[]) {
    if (r.kind === obj.kind && apiVersionOf(r) === obj.apiVersion) return r;
  }
  return undefined;
}

export function apiVersionOf(r: ResourceType): string {
  return r.group === "" ? r.version : `${r.group}/${r.version}`;
}

/** The collection path (all namespaces when `namespace` is undefined) or an object path. */
export function resourcePath(r: ResourceType, namespace?: string, name?: string): string {
  const base = r.group === "" ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`;
  const ns = r.namespaced && namespace !== undefined ? `/namespaces/${encodeURIComponent(namespace)}` : "";
  const n = name !== undefined ? `/${encodeURIComponent(name)}` : "";
  return `${base}${ns}/${r.plural}${n}`;
}

// The agent's fence (deploy/rbac/fence.yaml) on a real API server, as the agent's ServiceAccount.
//
// Every escalation is tried twice: with the agent's real token (its RBAC and the fence together,
// as in production) and as the agent's user name with system:masters added by impersonation, so
// RBAC allows everything and only the fence stands in the way: the second run shows the fence
// holds on its own, even if the agent's RBAC were cluster-admin. The objects the agent really
// writes (its renderers' output) and the kinds it will write later must still pass.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { useCluster } from "../support/cluster.js";
import { kubeRequest, type KubeEndpoint, type KubeResponse } from "../../src/cluster/kube-http.js";
import { AS_UNRESTRICTED_AGENT } from "../../src/cluster/index.js";
import { agentKubeConfigFrom } from "../../src/agent/rbac.js";
import { renderDeployment } from "../../src/agent/deployments/render.js";
import { resizePatch } from "../../src/agent/deployments/boost.js";
import { renderRoutes, renderStatic } from "../../src/agent/gateways/render.js";
import { create } from "@bufbuild/protobuf";
import { ApplyGatewaySchema } from "../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { resourceOf, resourcePath } from "../../src/kube/resources.js";
import type { KubeObject } from "../../src/kube/object.js";
import { renderSentinel } from "../../src/agent/sentinels/render.js";
import { renderRevisionSlices, renderRoutingPolicy } from "../../src/agent/sentinels/routing.js";
import {
  workspaceNamespaceLabels,
  LABEL_MANAGED_BY,
  MANAGED_BY,
  LABEL_WORKSPACE_ID,
  LABEL_COMPONENT,
  LABEL_ENVIRONMENT_ID,
  LABEL_GATEWAY_ID,
} from "../../src/contracts/labels.js";
import { AGENT_NAMESPACE, SENTINEL_NAMESPACE, SENTINEL_SERVICE_ACCOUNT } from "../../src/contracts/cluster.js";
import { sampleDeployment } from "../unit/agent/deployments/fixtures.js";
import { sampleSentinel } from "../unit/agent/sentinels/fixtures.js";

const handle = useCluster();
const SENTINEL_DEFAULTS = { image: "ghcr.io/krane-dev/krane:test" };
let admin: KubeEndpoint;
let agentToken: string;

type Obj = Record<string, unknown>;
const KRANE = { [LABEL_MANAGED_BY]: MANAGED_BY };
const VICTIM_NS = "ws-victim";
const OTHER_NS = "team-b";

interface Identity {
  readonly name: string;
  /** True when RBAC allows everything, so a refusal must come from the fence. */
  readonly unrestricted: boolean;
  send(method: string, path: string, body?: unknown, contentType?: string): Promise<KubeResponse>;
}

function identities(): Identity[] {
  return [
    {
      name: "agent token (RBAC + fence)",
      unrestricted: false,
      send: (m, p, b, ct) => kubeRequest({ ...admin, token: agentToken }, m, p, b, ct),
    },
    {
      name: "agent with cluster-admin RBAC (fence alone)",
      unrestricted: true,
      send: (m, p, b, ct) => kubeRequest(admin, m, p, b, ct, AS_UNRESTRICTED_AGENT),
    },
  ];
}

async function adminSend(method: string, path: string, body?: unknown, contentType?: string): Promise<KubeResponse> {
  const res = await kubeRequest(admin, method, path, body, contentType);
  if (res.status >= 300) throw new Error(`admin ${method} ${path}: HTTP ${res.status} ${res.body.slice(0, 300)}`);
  return res;
}

// ---------------------------------------------------------------- objects

function userPodSpec(extra: Obj = {}): Obj {
  return {
    runtimeClassName: "gvisor",
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    nodeSelector: { "node-class": "untrusted" },
    tolerations: [{ key: "node-class", operator: "Equal", value: "untrusted", effect: "NoSchedule" }],
    containers: [{ name: "app", image: "ghcr.io/acme/web:1" }],
    ...extra,
  };
}

/** A sentinel of the user's image (default ServiceAccount, no token, gVisor), as the agent renders it. */
function sentinelPodSpec(extra: Obj = {}): Obj {
  return {
    automountServiceAccountToken: false,
    runtimeClassName: "gvisor",
    nodeSelector: { "node-class": "sentinel" },
    tolerations: [{ key: "node-class", operator: "Equal", value: "sentinel", effect: "NoSchedule" }],
    containers: [{ name: "sentinel", image: "ghcr.io/krane/sentinel:1" }],
    ...extra,
  };
}

function withContainer(extra: Obj, base = userPodSpec()): Obj {
  const [c] = base.containers as Obj[];
  return { ...base, containers: [{ ...c, ...extra }] };
}

function replicaSet(ns: string, name: string, labels: Record<string, string>, podSpec: Obj, image?: string): Obj {
  const spec = image ? withContainer({ image }, podSpec) : podSpec;
  return {
    apiVersion: "apps/v1",
    kind: "ReplicaSet",
    metadata: { name, namespace: ns, labels },
    spec: {
      replicas: 0,
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { ...labels, app: name } }, spec },
    },
  };
}

function deployment(ns: string, name: string, labels: Record<string, string>, podSpec: Obj): Obj {
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace: ns, labels },
    spec: {
      replicas: 0,
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { ...labels, app: name } }, spec: podSpec },
    },
  };
}

function cnp(ns: string, name: string, labels: Record<string, string>): Obj {
  return {
    apiVersion: "cilium.io/v2",
    kind: "CiliumNetworkPolicy",
    metadata: { name, namespace: ns, labels },
    spec: { endpointSelector: {}, ingress: [{}] },
  };
}

const OWNED = {
  ...KRANE,
  [LABEL_COMPONENT]: "deployment",
  [LABEL_WORKSPACE_ID]: "ws_victim",
  [LABEL_ENVIRONMENT_ID]: "env_v",
};

const rsPath = (ns: string, name = ""): string => `/apis/apps/v1/namespaces/${ns}/replicasets${name ? `/${name}` : ""}`;
const cnpPath = (ns: string, name = ""): string =>
  `/apis/cilium.io/v2/namespaces/${ns}/ciliumnetworkpolicies${name ? `/${name}` : ""}`;
const deployPath = (ns: string, name = ""): string =>
  `/apis/apps/v1/namespaces/${ns}/deployments${name ? `/${name}` : ""}`;
const core = (ns: string, plural: string, name = ""): string =>
  `/api/v1/namespaces/${ns}/${plural}${name ? `/${name}` : ""}`;
const MERGE = "application/merge-patch+json";
const APPLY = "application/apply-patch+yaml";
const applyQuery = "?fieldManager=krane&force=true";

interface Attempt {
  readonly name: string;
  readonly method: string;
  readonly path: string;
  readonly body?: unknown;
  readonly contentType?: string;
}

const post = (name: string, path: string, body: Obj): Attempt => ({ name, method: "POST", path, body });

/** A pods/resize of the app container's resources (strategic merge). */
function resize(name: string, ns: string, pod: string, resources: Obj): Attempt {
  return {
    name,
    method: "PATCH",
    path: core(ns, "pods", pod) + "/resize",
    body: { spec: { containers: [{ name: "app", resources }] } },
    contentType: "application/strategic-merge-patch+json",
  };
}

/**
 * A pod as its ReplicaSet makes it: the user pod spec with a revision's limits (requests half).
 * Never scheduled (no node has its class): the API server refuses to resize a pod on a node that
 * does not say it supports resizing, as KWOK's nodes do not, before admission would see it.
 */
function sizedPod(ns: string, name: string, labels: Record<string, string>): Obj {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: ns, labels },
    spec: withContainer(
      { resources: { limits: { cpu: "100m", memory: "128Mi" }, requests: { cpu: "50m", memory: "64Mi" } } },
      userPodSpec({ nodeSelector: { "node-class": "untrusted", "krane.dev/test": "never-scheduled" } }),
    ),
  };
}

/** Every way a compromised agent could try to escalate through the API server. Each must be refused. */
function escalations(): Attempt[] {
  let n = 0;
  const userRs = (name: string, podSpec: Obj): Attempt =>
    post(name, rsPath(VICTIM_NS), replicaSet(VICTIM_NS, `esc-rs-${++n}`, OWNED, podSpec));
  return [
    {
      name: "patch a non-krane ReplicaSet's image (other namespace)",
      method: "PATCH",
      path: rsPath(OTHER_NS, "payments"),
      body: { spec: { template: { spec: { containers: [{ name: "app", image: "evil/miner:1" }] } } } },
      contentType: "application/strategic-merge-patch+json",
    },
    {
      name: "patch a non-krane ReplicaSet's image (workspace namespace)",
      method: "PATCH",
      path: rsPath(VICTIM_NS, "hand-made"),
      body: { spec: { template: { spec: { containers: [{ name: "app", image: "evil/miner:1" }] } } } },
      contentType: "application/strategic-merge-patch+json",
    },
    {
      name: "server-side apply over a non-krane ReplicaSet",
      method: "PATCH",
      path: rsPath(OTHER_NS, "payments") + applyQuery,
      body: replicaSet(OTHER_NS, "payments", KRANE, userPodSpec(), "evil/miner:1"),
      contentType: APPLY,
    },
    { name: "delete a non-krane ReplicaSet", method: "DELETE", path: rsPath(OTHER_NS, "payments") },
    {
      name: "delete a non-krane network policy (other namespace)",
      method: "DELETE",
      path: cnpPath(OTHER_NS, "deny-all"),
    },
    {
      name: "delete a non-krane network policy (workspace namespace)",
      method: "DELETE",
      path: cnpPath(VICTIM_NS, "hand-made"),
    },
    {
      name: "replace a non-krane network policy with an allow-all",
      method: "PATCH",
      path: cnpPath(VICTIM_NS, "hand-made"),
      body: { spec: { endpointSelector: {}, ingress: [{ fromEntities: ["world"] }] } },
      contentType: MERGE,
    },
    post(
      "create a ReplicaSet in kube-system running a privileged ServiceAccount",
      rsPath("kube-system"),
      replicaSet(
        "kube-system",
        "esc-kube-system",
        KRANE,
        userPodSpec({ serviceAccountName: "clusterrole-aggregation-controller", automountServiceAccountToken: true }),
      ),
    ),
    post(
      "create a krane-labelled network policy in kube-system",
      cnpPath("kube-system"),
      cnp("kube-system", "esc-allow", KRANE),
    ),
    post("create a ConfigMap in its own namespace krane-system", core(AGENT_NAMESPACE, "configmaps"), {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "esc", namespace: AGENT_NAMESPACE, labels: KRANE },
    }),
    {
      name: "strip the krane labels from a krane ReplicaSet",
      method: "PATCH",
      path: rsPath(VICTIM_NS, "krane-web"),
      body: { metadata: { labels: { [LABEL_MANAGED_BY]: null } } },
      contentType: MERGE,
    },
    {
      name: "move a krane ReplicaSet to another tenant (workspace-id label)",
      method: "PATCH",
      path: rsPath(VICTIM_NS, "krane-web"),
      body: { metadata: { labels: { [LABEL_WORKSPACE_ID]: "ws_attacker" } } },
      contentType: MERGE,
    },
    {
      name: "drop a krane ReplicaSet's component label",
      method: "PATCH",
      path: rsPath(VICTIM_NS, "krane-web"),
      body: { metadata: { labels: { [LABEL_COMPONENT]: null } } },
      contentType: MERGE,
    },
    {
      name: "adopt a non-krane ReplicaSet by labelling it",
      method: "PATCH",
      path: rsPath(VICTIM_NS, "hand-made"),
      body: { metadata: { labels: KRANE } },
      contentType: MERGE,
    },
    {
      name: "scale a krane ReplicaSet through its scale subresource",
      method: "PATCH",
      path: rsPath(VICTIM_NS, "krane-web") + "/scale",
      body: { spec: { replicas: 50 } },
      contentType: MERGE,
    },
    resize("resize a non-krane pod's CPU limit (workspace namespace)", VICTIM_NS, "hand-made-pod", {
      limits: { cpu: "4" },
    }),
    resize("resize a non-krane pod's CPU limit (other namespace)", OTHER_NS, "payments-pod", { limits: { cpu: "4" } }),
    resize("resize a krane pod's memory limit", VICTIM_NS, "krane-pod", { limits: { memory: "8Gi" } }),
    resize("resize a krane pod's CPU request", VICTIM_NS, "krane-pod", { requests: { cpu: "60m" } }),
    {
      name: "write a krane pod's status subresource",
      method: "PATCH",
      path: core(VICTIM_NS, "pods", "krane-pod") + "/status",
      body: { status: { phase: "Failed" } },
      contentType: MERGE,
    },
    userRs("hostPath volume", userPodSpec({ volumes: [{ name: "root", hostPath: { path: "/" } }] })),
    userRs("hostNetwork", userPodSpec({ hostNetwork: true })),
    userRs("hostPID", userPodSpec({ hostPID: true })),
    userRs("hostIPC", userPodSpec({ hostIPC: true })),
    userRs("privileged container", withContainer({ securityContext: { privileged: true } })),
    userRs(
      "privileged init container",
      userPodSpec({ initContainers: [{ name: "init", image: "busybox", securityContext: { privileged: true } }] }),
    ),
    userRs("added capability", withContainer({ securityContext: { capabilities: { add: ["NET_ADMIN"] } } })),
    userRs("hostPort", withContainer({ ports: [{ containerPort: 8080, hostPort: 80 }] })),
    userRs("nodeName pinned to a general node", userPodSpec({ nodeName: "general-a-1" })),
    userRs("user workload without gvisor", userPodSpec({ runtimeClassName: undefined })),
    userRs("user workload with runc", userPodSpec({ runtimeClassName: "runc" })),
    userRs("user workload with a service-account token", userPodSpec({ automountServiceAccountToken: true })),
    userRs("user workload with the token by default", userPodSpec({ automountServiceAccountToken: undefined })),
    userRs("user workload with another ServiceAccount", userPodSpec({ serviceAccountName: "builder" })),
    userRs(
      "projected service-account token volume",
      userPodSpec({ volumes: [{ name: "tok", projected: { sources: [{ serviceAccountToken: { path: "token" } }] } }] }),
    ),
    userRs("user workload off the untrusted nodes", userPodSpec({ nodeSelector: { "node-class": "sentinel" } })),
    post("create a Pod directly without gvisor", core(VICTIM_NS, "pods"), {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "esc-pod", namespace: VICTIM_NS, labels: OWNED },
      spec: userPodSpec({ runtimeClassName: undefined }),
    }),
    post("create a privileged Pod directly in sentinel", core(SENTINEL_NAMESPACE, "pods"), {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "esc-pod", namespace: SENTINEL_NAMESPACE, labels: KRANE },
      spec: withContainer({ securityContext: { privileged: true } }, sentinelPodSpec()),
    }),
    post("create a DaemonSet on the host network", `/apis/apps/v1/namespaces/${VICTIM_NS}/daemonsets`, {
      apiVersion: "apps/v1",
      kind: "DaemonSet",
      metadata: { name: "esc-ds", namespace: VICTIM_NS, labels: OWNED },
      spec: {
        selector: { matchLabels: { app: "x" } },
        template: { metadata: { labels: { app: "x" } }, spec: userPodSpec({ hostNetwork: true }) },
      },
    }),
    post("create a Job with a hostPath volume", `/apis/batch/v1/namespaces/${VICTIM_NS}/jobs`, {
      apiVersion: "batch/v1",
      kind: "Job",
      metadata: { name: "esc-job", namespace: VICTIM_NS, labels: OWNED },
      spec: {
        template: {
          spec: userPodSpec({ restartPolicy: "Never", volumes: [{ name: "r", hostPath: { path: "/var/run" } }] }),
        },
      },
    }),
    post("create a CronJob without gvisor", `/apis/batch/v1/namespaces/${VICTIM_NS}/cronjobs`, {
      apiVersion: "batch/v1",
      kind: "CronJob",
      metadata: { name: "esc-cron", namespace: VICTIM_NS, labels: OWNED },
      spec: {
        schedule: "* * * * *",
        jobTemplate: {
          spec: { template: { spec: userPodSpec({ restartPolicy: "Never", runtimeClassName: undefined }) } },
        },
      },
    }),
    post(
      "sentinel Deployment on the host network",
      deployPath(SENTINEL_NAMESPACE),
      deployment(SENTINEL_NAMESPACE, "esc-snt-1", KRANE, sentinelPodSpec({ hostNetwork: true })),
    ),
    post(
      "sentinel Deployment with the default ServiceAccount's token",
      deployPath(SENTINEL_NAMESPACE),
      deployment(SENTINEL_NAMESPACE, "esc-snt-2", KRANE, sentinelPodSpec({ automountServiceAccountToken: true })),
    ),
    post(
      "sentinel Deployment with a foreign ServiceAccount",
      deployPath(SENTINEL_NAMESPACE),
      deployment(SENTINEL_NAMESPACE, "esc-snt-3", KRANE, sentinelPodSpec({ serviceAccountName: "admin" })),
    ),
    post(
      "sentinel Deployment of the user's image outside gVisor",
      deployPath(SENTINEL_NAMESPACE),
      deployment(SENTINEL_NAMESPACE, "esc-snt-5", KRANE, sentinelPodSpec({ runtimeClassName: undefined })),
    ),
    post(
      "sentinel Deployment off the sentinel nodes",
      deployPath(SENTINEL_NAMESPACE),
      deployment(
        SENTINEL_NAMESPACE,
        "esc-snt-4",
        KRANE,
        sentinelPodSpec({ nodeSelector: { "node-class": "general" } }),
      ),
    ),
    post("create a namespace that is not a workspace namespace", "/api/v1/namespaces", {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: "esc-plain" },
    }),
    post("create a workspace namespace that allows privileged pods", "/api/v1/namespaces", {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: {
        name: "ws-esc-privileged",
        labels: { ...workspaceNamespaceLabels("ws_esc"), "pod-security.kubernetes.io/enforce": "privileged" },
      },
    }),
    {
      name: "label kube-system as a workspace namespace",
      method: "PATCH",
      path: "/api/v1/namespaces/kube-system",
      body: { metadata: { labels: workspaceNamespaceLabels("ws_esc") } },
      contentType: MERGE,
    },
    {
      name: "move a workspace namespace to another workspace",
      method: "PATCH",
      path: `/api/v1/namespaces/${VICTIM_NS}`,
      body: { metadata: { labels: { [LABEL_WORKSPACE_ID]: "ws_attacker" } } },
      contentType: MERGE,
    },
    { name: "delete a namespace krane does not own", method: "DELETE", path: `/api/v1/namespaces/${OTHER_NS}` },
    {
      name: "label a node into the untrusted pool",
      method: "PATCH",
      path: "/api/v1/nodes/general-a-1",
      body: { metadata: { labels: { "node-class": "untrusted" } } },
      contentType: MERGE,
    },
    post("bind itself to cluster-admin", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: "esc-admin", labels: KRANE },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cluster-admin" },
      subjects: [{ kind: "ServiceAccount", name: "krane-agent", namespace: AGENT_NAMESPACE }],
    }),
    post(
      "a krane-labelled RoleBinding to admin in a workspace namespace",
      `/apis/rbac.authorization.k8s.io/v1/namespaces/${VICTIM_NS}/rolebindings`,
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name: "esc-admin", namespace: VICTIM_NS, labels: KRANE },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "admin" },
        subjects: [{ kind: "ServiceAccount", name: "default", namespace: VICTIM_NS }],
      },
    ),
    post(
      "mint a token for a kube-system ServiceAccount",
      "/api/v1/namespaces/kube-system/serviceaccounts/default/token",
      { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { expirationSeconds: 600 } },
    ),
    post("a service-account-token Secret", core(VICTIM_NS, "secrets"), {
      apiVersion: "v1",
      kind: "Secret",
      type: "kubernetes.io/service-account-token",
      metadata: {
        name: "esc-token",
        namespace: VICTIM_NS,
        labels: KRANE,
        annotations: { "kubernetes.io/service-account.name": "default" },
      },
    }),
    post("a ServiceAccount that mounts its token", core(VICTIM_NS, "serviceaccounts"), {
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: { name: "esc-sa", namespace: VICTIM_NS, labels: KRANE },
    }),
    post("a Service with externalIPs", core(VICTIM_NS, "services"), {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "esc-svc", namespace: VICTIM_NS, labels: KRANE },
      spec: { ports: [{ port: 80 }], externalIPs: ["10.0.0.1"] },
    }),
  ];
}

/** What the agent will write in later issues: the fence must already let it through (RBAC does not yet). */
function futureWrites(): Attempt[] {
  const ws = VICTIM_NS;
  return [
    post(
      "a Lease in krane-system (leader election)",
      `/apis/coordination.k8s.io/v1/namespaces/${AGENT_NAMESPACE}/leases`,
      {
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { name: "krane-agent", namespace: AGENT_NAMESPACE, labels: KRANE },
        spec: { holderIdentity: "agent-0", leaseDurationSeconds: 15 },
      },
    ),
    post(
      "a routing EndpointSlice in sentinel",
      `/apis/discovery.k8s.io/v1/namespaces/${SENTINEL_NAMESPACE}/endpointslices`,
      {
        apiVersion: "discovery.k8s.io/v1",
        kind: "EndpointSlice",
        metadata: {
          name: "rt-env",
          namespace: SENTINEL_NAMESPACE,
          labels: { ...KRANE, "endpointslice.kubernetes.io/managed-by": "krane" },
        },
        addressType: "IPv4",
        endpoints: [{ addresses: ["10.244.0.7"] }],
        ports: [{ port: 8080 }],
      },
    ),
    post("a routing policy ConfigMap in sentinel", core(SENTINEL_NAMESPACE, "configmaps"), {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "rt-env", namespace: SENTINEL_NAMESPACE, labels: KRANE },
      data: { "policy.json": "{}" },
    }),
    post(
      "a sentinel with its own ServiceAccount and token",
      deployPath(SENTINEL_NAMESPACE),
      deployment(
        SENTINEL_NAMESPACE,
        "snt-own-sa",
        KRANE,
        sentinelPodSpec({ serviceAccountName: SENTINEL_SERVICE_ACCOUNT, automountServiceAccountToken: true }),
      ),
    ),
    post("an HTTPRoute", `/apis/gateway.networking.k8s.io/v1/namespaces/${ws}/httproutes`, {
      apiVersion: "gateway.networking.k8s.io/v1",
      kind: "HTTPRoute",
      metadata: { name: "web", namespace: ws, labels: OWNED },
      spec: { parentRefs: [{ name: "public", namespace: "gateway" }] },
    }),
    post("a ConfigMap", core(ws, "configmaps"), {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "cfg", namespace: ws, labels: OWNED },
      data: { a: "b" },
    }),
    post("a Secret", core(ws, "secrets"), {
      apiVersion: "v1",
      kind: "Secret",
      type: "Opaque",
      metadata: { name: "sec", namespace: ws, labels: OWNED },
      stringData: { a: "b" },
    }),
    post("a Service", core(ws, "services"), {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "svc", namespace: ws, labels: OWNED },
      spec: { ports: [{ port: 80 }] },
    }),
    post("a Job", `/apis/batch/v1/namespaces/${ws}/jobs`, {
      apiVersion: "batch/v1",
      kind: "Job",
      metadata: { name: "job", namespace: ws, labels: OWNED },
      spec: { template: { spec: userPodSpec({ restartPolicy: "Never" }) } },
    }),
    post("a CronJob", `/apis/batch/v1/namespaces/${ws}/cronjobs`, {
      apiVersion: "batch/v1",
      kind: "CronJob",
      metadata: { name: "cron", namespace: ws, labels: OWNED },
      spec: {
        schedule: "*/5 * * * *",
        jobTemplate: { spec: { template: { spec: userPodSpec({ restartPolicy: "Never" }) } } },
      },
    }),
    post("a PodDisruptionBudget", `/apis/policy/v1/namespaces/${ws}/poddisruptionbudgets`, {
      apiVersion: "policy/v1",
      kind: "PodDisruptionBudget",
      metadata: { name: "pdb", namespace: ws, labels: OWNED },
      spec: { maxUnavailable: 1, selector: { matchLabels: { app: "web" } } },
    }),
    post("a HorizontalPodAutoscaler", `/apis/autoscaling/v2/namespaces/${ws}/horizontalpodautoscalers`, {
      apiVersion: "autoscaling/v2",
      kind: "HorizontalPodAutoscaler",
      metadata: { name: "hpa", namespace: ws, labels: OWNED },
      spec: {
        scaleTargetRef: { apiVersion: "apps/v1", kind: "ReplicaSet", name: "web" },
        minReplicas: 1,
        maxReplicas: 3,
      },
    }),
    post("a ServiceAccount without tokens", core(ws, "serviceaccounts"), {
      apiVersion: "v1",
      kind: "ServiceAccount",
      automountServiceAccountToken: false,
      metadata: { name: "release-sa", namespace: ws, labels: OWNED },
    }),
  ];
}

before(async () => {
  const cluster = await handle.ready();
  admin = cluster.endpoint();
  const kc = await agentKubeConfigFrom(cluster.kubeConfig());
  const token = kc.getCurrentUser()?.token;
  if (!token) throw new Error("no agent token");
  agentToken = token;
  // What other tenants and the platform own, and one object krane owns.
  await adminSend("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: OTHER_NS } });
  await adminSend("POST", "/api/v1/namespaces", {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: VICTIM_NS, labels: workspaceNamespaceLabels("ws_victim") },
  });
  await adminSend(
    "POST",
    rsPath(OTHER_NS),
    replicaSet(OTHER_NS, "payments", {}, { containers: [{ name: "app", image: "nginx:1" }] }),
  );
  await adminSend("POST", rsPath(VICTIM_NS), replicaSet(VICTIM_NS, "hand-made", {}, userPodSpec(), "nginx:1"));
  await adminSend("POST", rsPath(VICTIM_NS), replicaSet(VICTIM_NS, "krane-web", OWNED, userPodSpec()));
  await adminSend("POST", core(VICTIM_NS, "pods"), sizedPod(VICTIM_NS, "krane-pod", OWNED));
  await adminSend("POST", core(VICTIM_NS, "pods"), sizedPod(VICTIM_NS, "hand-made-pod", {}));
  await adminSend("POST", core(OTHER_NS, "pods"), sizedPod(OTHER_NS, "payments-pod", {}));
  await adminSend("POST", cnpPath(OTHER_NS), cnp(OTHER_NS, "deny-all", {}));
  await adminSend("POST", cnpPath(VICTIM_NS), cnp(VICTIM_NS, "hand-made", {}));
});

const figures: string[] = [];
after(() => {
  for (const f of figures) console.log(f);
});

describe("escalations are refused", () => {
  for (const who of identities()) {
    test(who.name, async () => {
      const list = escalations();
      const passed: string[] = [];
      const notByFence: string[] = [];
      for (const a of list) {
        const res = await who.send(a.method, a.path, a.body, a.contentType);
        if (res.status < 400) passed.push(`${a.name}: HTTP ${res.status}`);
        else if (who.unrestricted && !(res.status === 403 && res.body.includes("krane-agent-fence")))
          notByFence.push(`${a.name}: HTTP ${res.status} ${res.body.slice(0, 200)}`);
      }
      figures.push(`fence: ${who.name}: escalations refused ${list.length - passed.length} / tried ${list.length}`);
      assert.deepEqual(passed, [], "escalations that went through");
      assert.deepEqual(notByFence, [], "refusals that did not come from the fence");
    });
  }

  test("nothing the escalations aimed at changed", async () => {
    const get = async (path: string): Promise<Obj> => JSON.parse((await adminSend("GET", path)).body) as Obj;
    const image = (o: Obj): unknown => ((((o.spec as Obj).template as Obj).spec as Obj).containers as Obj[])[0]?.image;
    assert.equal(image(await get(rsPath(OTHER_NS, "payments"))), "nginx:1");
    assert.equal(image(await get(rsPath(VICTIM_NS, "hand-made"))), "nginx:1");
    const kraneWeb = await get(rsPath(VICTIM_NS, "krane-web"));
    assert.deepEqual((kraneWeb.metadata as Obj).labels, OWNED);
    assert.equal((kraneWeb.spec as Obj).replicas, 0);
    await get(cnpPath(OTHER_NS, "deny-all"));
    await get(cnpPath(VICTIM_NS, "hand-made"));
    const resources = async (ns: string, pod: string): Promise<unknown> =>
      ((((await get(core(ns, "pods", pod))).spec as Obj).containers as Obj[])[0] as Obj).resources;
    const sized = (sizedPod("", "", {}).spec as { containers: Obj[] }).containers[0]?.resources;
    assert.deepEqual(await resources(VICTIM_NS, "krane-pod"), sized);
    assert.deepEqual(await resources(VICTIM_NS, "hand-made-pod"), sized);
    assert.deepEqual(await resources(OTHER_NS, "payments-pod"), sized);
    const kubeSystemRs = JSON.parse((await adminSend("GET", rsPath("kube-system"))).body) as { items: unknown[] };
    assert.equal(kubeSystemRs.items.length, 0);
    const ns = JSON.parse((await adminSend("GET", "/api/v1/namespaces/kube-system")).body) as Obj;
    assert.equal(((ns.metadata as Obj).labels as Record<string, string>)[LABEL_WORKSPACE_ID], undefined);
    assert.equal((await kubeRequest(admin, "GET", "/api/v1/namespaces/esc-plain")).status, 404);
  });

  test("the agent holds no rights on admission objects (no API-created policy can guard them)", async () => {
    const res = await kubeRequest(
      { ...admin, token: agentToken },
      "DELETE",
      "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/krane-agent-fence",
    );
    assert.equal(res.status, 403);
    assert.equal(
      (
        await kubeRequest(
          admin,
          "GET",
          "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/krane-agent-fence",
        )
      ).status,
      200,
    );
  });
});

describe("the agent's own writes pass", () => {
  test("a user deployment as the deployment controller renders it: namespace, network policy, ReplicaSet; update; delete", async () => {
    const who = identities()[0];
    assert.ok(who);
    const d = sampleDeployment({ k8sNamespace: "ws-fenced", k8sName: "fenced-web", workspaceId: "ws_fenced" });
    const r = renderDeployment(d, "local");
    const created = await who.send("POST", "/api/v1/namespaces", r.namespace);
    assert.equal(created.status, 201, created.body);
    // Creating it again is what the agent does after a restart: the API server's answer is "exists".
    assert.equal((await who.send("POST", "/api/v1/namespaces", r.namespace)).status, 409);
    for (const [obj, path] of [
      [r.networkPolicy, cnpPath(d.k8sNamespace, r.networkPolicy.metadata.name ?? "")],
      [r.replicaSet, rsPath(d.k8sNamespace, d.k8sName)],
    ] as const) {
      const res = await who.send("PATCH", path + applyQuery, obj, APPLY);
      assert.equal(res.status, 201, `${obj.kind}: ${res.body.slice(0, 300)}`);
    }
    const rescaled = renderDeployment(
      sampleDeployment({
        k8sNamespace: "ws-fenced",
        k8sName: "fenced-web",
        workspaceId: "ws_fenced",
        replicas: 5,
        image: "ghcr.io/acme/web:2",
      }),
      "local",
    );
    const updated = await who.send("PATCH", rsPath(d.k8sNamespace, d.k8sName) + applyQuery, rescaled.replicaSet, APPLY);
    assert.equal(updated.status, 200, updated.body.slice(0, 300));
    assert.equal((await who.send("DELETE", rsPath(d.k8sNamespace, d.k8sName))).status, 200);
    assert.equal((await who.send("DELETE", cnpPath(d.k8sNamespace, r.networkPolicy.metadata.name ?? ""))).status, 200);
  });

  test("the startup CPU boost: a krane pod's CPU limit resized up and back, as boost.ts patches it", async () => {
    for (const who of identities()) {
      for (const cpu of ["1", "100m"]) {
        const res = await who.send(
          "PATCH",
          core(VICTIM_NS, "pods", "krane-pod") + "/resize",
          resizePatch(0, cpu),
          "application/json-patch+json",
        );
        assert.equal(res.status, 200, `${who.name}, cpu ${cpu}: ${res.body.slice(0, 300)}`);
        const pod = JSON.parse(res.body) as { spec: { containers: { resources: Obj }[] } };
        assert.deepEqual(pod.spec.containers[0]?.resources, {
          limits: { cpu, memory: "128Mi" },
          requests: { cpu: "50m", memory: "64Mi" },
        });
      }
    }
  });

  test("a sentinel as the sentinel controller renders it: Deployment and Service; delete", async () => {
    const who = identities()[0];
    assert.ok(who);
    const s = sampleSentinel();
    const r = renderSentinel(s, "local", SENTINEL_DEFAULTS);
    const ns = await who.send("POST", "/api/v1/namespaces", r.namespace);
    assert.ok(ns.status === 201 || ns.status === 409, ns.body);
    const dep = await who.send("PATCH", deployPath(SENTINEL_NAMESPACE, s.k8sName) + applyQuery, r.deployment, APPLY);
    assert.equal(dep.status, 201, dep.body.slice(0, 300));
    const uid = (JSON.parse(dep.body) as { metadata: { uid: string } }).metadata.uid;
    const svc = await who.send(
      "PATCH",
      core(SENTINEL_NAMESPACE, "services", s.k8sName) + applyQuery,
      renderSentinel(s, "local", SENTINEL_DEFAULTS, uid).service,
      APPLY,
    );
    assert.equal(svc.status, 201, svc.body.slice(0, 300));
    assert.equal((await who.send("DELETE", core(SENTINEL_NAMESPACE, "services", s.k8sName))).status, 200);
    assert.equal((await who.send("DELETE", deployPath(SENTINEL_NAMESPACE, s.k8sName))).status, 200);
  });

  test("krane's own sentinel (its ServiceAccount and token) and its routing table, as the agent renders them", async () => {
    const who = identities()[0];
    assert.ok(who);
    const s = sampleSentinel({ image: "", k8sName: "snt-own" });
    const r = renderSentinel(s, "local", SENTINEL_DEFAULTS);
    const dep = await who.send("PATCH", deployPath(SENTINEL_NAMESPACE, s.k8sName) + applyQuery, r.deployment, APPLY);
    assert.equal(dep.status, 201, dep.body.slice(0, 300));
    const cm = renderRoutingPolicy(s, "local");
    const cmRes = await who.send(
      "PATCH",
      core(SENTINEL_NAMESPACE, "configmaps", cm.metadata.name ?? "") + applyQuery,
      cm,
      APPLY,
    );
    assert.equal(cmRes.status, 201, cmRes.body.slice(0, 300));
    const pod = {
      metadata: { name: "p1", namespace: "ws-a" },
      spec: { nodeName: "untrusted-a-1", containers: [{ name: "app", ports: [{ containerPort: 8080 }] }] },
      status: {
        phase: "Running",
        podIP: "10.1.2.3",
        conditions: [
          { type: "ContainersReady", status: "True" },
          { type: "Ready", status: "True" },
        ],
      },
    };
    const [slice] = renderRevisionSlices(s, "local", "dep_1", [pod], () => "zone-a");
    assert.ok(slice);
    const slicePath = `/apis/discovery.k8s.io/v1/namespaces/${SENTINEL_NAMESPACE}/endpointslices/${slice.metadata.name ?? ""}`;
    const sl = await who.send("PATCH", slicePath + applyQuery, slice, APPLY);
    assert.equal(sl.status, 201, sl.body.slice(0, 300));
    for (const path of [
      slicePath,
      core(SENTINEL_NAMESPACE, "configmaps", cm.metadata.name ?? ""),
      deployPath(SENTINEL_NAMESPACE, s.k8sName),
    ]) {
      assert.equal((await who.send("DELETE", path)).status, 200, path);
    }
  });

  test("an environment's exposure as the gateway controller renders it: HTTPRoutes, ReferenceGrants, Certificate; a relabel to another gateway is refused", async () => {
    const who = identities()[0];
    assert.ok(who);
    const g = create(ApplyGatewaySchema, {
      workspaceId: "ws_fenced",
      projectId: "prj_1",
      environmentId: "env_fenced",
      gatewayId: "env_fenced",
      region: "local",
      k8sNamespace: "ws-fenced-gw",
      k8sName: "gw-shop-prod-abc123",
      routes: [
        {
          name: "public",
          visibility: "public",
          hostnames: ["p.apps.example"],
          pathPrefix: "/",
          auth: {
            hosts: ["p.apps.example"],
            jwt: { jwksUrl: "https://idp.example/jwks", issuer: "", audiences: [] },
            operations: [{ method: "GET", path: "/x", scopes: ["s"] }],
            defaultAction: "deny",
          },
        },
        {
          name: "domain-0123456789",
          visibility: "public",
          hostnames: ["www.shop.example"],
          pathPrefix: "/",
          certificate: true,
        },
      ],
    });
    const settings = {
      public: { namespace: "platform", name: "external", sectionName: "" },
      certificateIssuer: { kind: "ClusterIssuer" as const, name: "le" },
    };
    const ns = await who.send("POST", "/api/v1/namespaces", {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: g.k8sNamespace, labels: workspaceNamespaceLabels(g.workspaceId) },
    });
    assert.equal(ns.status, 201, ns.body);
    const objects = [...renderRoutes(g, "local", settings, "snt-fenced"), ...renderStatic(g, "local", settings)];
    assert.deepEqual(objects.map((o) => o.kind).sort(), [
      "Certificate",
      "HTTPRoute",
      "HTTPRoute",
      "ReferenceGrant",
      "ReferenceGrant",
    ]);
    const pathOf = (o: KubeObject): string => {
      const r = resourceOf(o);
      assert.ok(r, `${o.kind}`);
      return resourcePath(r, o.metadata.namespace, o.metadata.name);
    };
    for (const o of objects) {
      const res = await who.send("PATCH", pathOf(o) + applyQuery, o, APPLY);
      assert.equal(res.status, 201, `${o.kind} ${o.metadata.namespace}/${o.metadata.name}: ${res.body.slice(0, 300)}`);
    }
    // Moving a route to another environment's gateway (ownership label) is refused.
    const route = objects[0] as KubeObject;
    const moved = {
      ...route,
      metadata: { ...route.metadata, labels: { ...route.metadata.labels, [LABEL_GATEWAY_ID]: "env_other" } },
    };
    const refused = await who.send("PATCH", pathOf(route) + applyQuery, moved, APPLY);
    assert.equal(refused.status, 403, refused.body.slice(0, 300));
    assert.match(refused.body, /krane ownership labels/);
    for (const o of objects) assert.equal((await who.send("DELETE", pathOf(o))).status, 200, `${o.kind}`);
  });

  test("the kinds the agent will write later already fit the fence (dry run, RBAC lifted)", async () => {
    const who = identities()[1];
    assert.ok(who);
    const refused: string[] = [];
    for (const a of futureWrites()) {
      const res = await who.send(a.method, `${a.path}?dryRun=All`, a.body, a.contentType);
      if (res.status >= 300) refused.push(`${a.name}: HTTP ${res.status} ${res.body.slice(0, 300)}`);
    }
    assert.deepEqual(refused, []);
  });
});

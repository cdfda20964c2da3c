// Helpers for agent integration tests: install the agent's RBAC manifests on a real cluster,
// mint a ServiceAccount token for it (TokenRequest), and run agents that use exactly that
// identity — never the admin one.
import { readFileSync } from "node:fs";
import { KubeConfig } from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";
import { Registry } from "prom-client";
import type { LocalCluster } from "../../../src/cluster/index.js";
import { KubeClient } from "../../../src/kube/client.js";
import { isKubeObject, isRecord, type KubeObject } from "../../../src/kube/object.js";
import type { ResourceType } from "../../../src/kube/resources.js";
import { Agent, type AgentConfig } from "../../../src/agent/agent.js";
import { silentLogger } from "../../../src/agent/runtime/log.js";
import type { FakeCtrl } from "./fake-ctrl.js";

const kinds: Record<string, ResourceType> = {
  Namespace: { group: "", version: "v1", kind: "Namespace", plural: "namespaces", namespaced: false },
  ServiceAccount: { group: "", version: "v1", kind: "ServiceAccount", plural: "serviceaccounts", namespaced: true },
  ClusterRole: { group: "rbac.authorization.k8s.io", version: "v1", kind: "ClusterRole", plural: "clusterroles", namespaced: false },
  ClusterRoleBinding: { group: "rbac.authorization.k8s.io", version: "v1", kind: "ClusterRoleBinding", plural: "clusterrolebindings", namespaced: false },
  Role: { group: "rbac.authorization.k8s.io", version: "v1", kind: "Role", plural: "roles", namespaced: true },
  RoleBinding: { group: "rbac.authorization.k8s.io", version: "v1", kind: "RoleBinding", plural: "rolebindings", namespaced: true },
};

export function adminKube(cluster: LocalCluster): KubeClient {
  return new KubeClient(cluster.kubeConfig(), { fieldManager: "test-admin" });
}

/** Applies deploy/rbac/agent.yaml and returns a KubeConfig authenticated as the agent's ServiceAccount. */
export async function agentKubeConfig(cluster: LocalCluster): Promise<KubeConfig> {
  const admin = adminKube(cluster);
  try {
    for (const doc of parseAllDocuments(readFileSync("deploy/rbac/agent.yaml", "utf8"))) {
      const obj: unknown = doc.toJS();
      if (!isKubeObject(obj)) continue;
      const r = kinds[obj.kind ?? ""];
      if (!r) throw new Error(`unexpected kind ${obj.kind} in deploy/rbac/agent.yaml`);
      await admin.apply(r, obj);
    }
    const answer = await admin.raw("POST", "/api/v1/namespaces/krane-system/serviceaccounts/krane-agent/token", {
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenRequest",
      spec: { expirationSeconds: 3600 },
    });
    const token = isRecord(answer) && isRecord(answer.status) ? answer.status.token : undefined;
    if (typeof token !== "string") throw new Error("TokenRequest returned no token");
    const base = cluster.kubeConfig();
    const c = base.getCurrentCluster();
    if (!c) throw new Error("admin kubeconfig has no cluster");
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [c],
      users: [{ name: "krane-agent", token }],
      contexts: [{ name: "krane-agent", cluster: c.name, user: "krane-agent" }],
      currentContext: "krane-agent",
    });
    return kc;
  } finally {
    admin.close();
  }
}

export function startAgent(
  kc: KubeConfig,
  ctrl: FakeCtrl,
  region: string,
  extra: Partial<AgentConfig> = {},
): Agent {
  return new Agent({
    ctrlUrl: ctrl.url,
    token: ctrl.token,
    region,
    kubeconfig: kc,
    log: silentLogger,
    registry: new Registry(),
    opsPort: 0,
    opsHost: "127.0.0.1",
    resyncPeriodMs: 2_000,
    concurrency: 8,
    heartbeatMs: 1_000,
    callTimeoutMs: 3_000,
    runtime: {
      reconnect: { baseMs: 100, capMs: 1_000, minMs: 50 },
      retry: { baseMs: 100, capMs: 1_000, minMs: 50 },
      breaker: { failureThreshold: 3, openMs: 500 },
    },
    ...extra,
  });
}

/** Kubernetes write requests (apply, create, delete) the agent has made so far. */
export async function kubeWrites(agent: Agent): Promise<number> {
  const metric = agent.registry.getSingleMetric("krane_agent_kube_requests_total");
  if (!metric) return 0;
  const { values } = await metric.get();
  let n = 0;
  for (const v of values) if (["apply", "create", "delete"].includes(String(v.labels.verb))) n += v.value;
  return n;
}

export async function getObject(kube: KubeClient, r: ResourceType, ns: string, name: string): Promise<KubeObject | undefined> {
  return kube.get(r, ns, name);
}

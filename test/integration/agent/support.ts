// Helpers for agent integration tests: install the agent's RBAC manifests on a real cluster,
// mint a ServiceAccount token for it (TokenRequest), and run agents that use exactly that
// identity — never the admin one.
import { KubeConfig } from "@kubernetes/client-node";
import { Registry } from "prom-client";
import type { LocalCluster } from "../../../src/cluster/index.js";
import { KubeClient } from "../../../src/kube/client.js";
import { type KubeObject } from "../../../src/kube/object.js";
import type { ResourceType } from "../../../src/kube/resources.js";
import { Agent, type AgentConfig } from "../../../src/agent/agent.js";
import { agentKubeConfigFrom } from "../../../src/agent/rbac.js";
import { silentLogger } from "../../../src/base/log.js";

export function adminKube(cluster: LocalCluster): KubeClient {
  return new KubeClient(cluster.kubeConfig(), { fieldManager: "test-admin" });
}

/** Applies deploy/rbac/agent.yaml and returns a KubeConfig authenticated as the agent's ServiceAccount. */
export function agentKubeConfig(cluster: LocalCluster): Promise<KubeConfig> {
  return agentKubeConfigFrom(cluster.kubeConfig());
}

/** An agent with short periods for tests (not started), talking to a test ctrl. */
export function startAgent(
  kc: KubeConfig,
  ctrl: { readonly url: string; readonly token: string },
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

/**
 * An agent for routed-traffic tests (not started): startAgent's test settings as the region's
 * ServiceAccount with a fresh agent token, no ops port, a 10 s resync, and the local cluster's
 * pod addresses mapped so that it reaches its sentinel pods' stand-ins.
 */
export async function routingAgent(
  cluster: LocalCluster,
  ctrl: { readonly url: string; agentToken(region: string): Promise<string> },
  region: string,
  extra: Partial<AgentConfig> = {},
): Promise<Agent> {
  return startAgent(await agentKubeConfig(cluster), { url: ctrl.url, token: await ctrl.agentToken(region) }, region, {
    opsPort: -1,
    resyncPeriodMs: 10_000,
    podAddressMap: cluster.podAddressMap,
    ...extra,
  });
}

/** Kubernetes writes of objects (apply, create, delete; not its leader-election Lease) the agent has made so far, by "verb resource". */
export async function kubeWritesBy(agent: Agent): Promise<Record<string, number>> {
  const metric = agent.registry.getSingleMetric("krane_agent_kube_requests_total");
  const out: Record<string, number> = {};
  if (!metric) return out;
  const { values } = await metric.get();
  for (const v of values) {
    if (!["apply", "create", "delete"].includes(String(v.labels.verb)) || v.labels.resource === "leases") continue;
    const k = `${String(v.labels.verb)} ${String(v.labels.resource)}`;
    out[k] = (out[k] ?? 0) + v.value;
  }
  return out;
}

/** Kubernetes writes of objects the agent has made so far (see kubeWritesBy). */
export async function kubeWrites(agent: Agent): Promise<number> {
  return Object.values(await kubeWritesBy(agent)).reduce((a, b) => a + b, 0);
}

export async function getObject(
  kube: KubeClient,
  r: ResourceType,
  ns: string,
  name: string,
): Promise<KubeObject | undefined> {
  return kube.get(r, ns, name);
}

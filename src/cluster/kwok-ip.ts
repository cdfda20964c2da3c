// KWOK gives pods their IPs from one pool per node CIDR, and creates a node's pool the first time
// a pod on that node needs an address. KWOK 0.8 creates it with a load followed by a store, not
// one atomic step: two pods that start on a fresh node at the same moment can each create a pool
// and each take its first address, so two pods share one IP. Every request for the second pod
// then reaches the first (the sentinel's suites saw exactly that). So before the cluster is
// handed out, one pod per KWOK node is started, which creates every pool while nothing races,
// and deleted again (its address goes back into the pool).
import { kubeRequest, type KubeEndpoint } from "./kube-http.js";

const NAMESPACE = "kube-system";
const IMAGE = "krane.local/kwok-ip-pool:warm";

export function warmupPodName(node: string): string {
  return `kwok-ip-pool-${node}`.slice(0, 63).replace(/-+$/, "");
}

/** The bare pod that makes KWOK create `node`'s address pool: bound to the node, tolerating its taints. */
export function warmupPod(node: string): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: warmupPodName(node), namespace: NAMESPACE, labels: { "app.kubernetes.io/name": "kwok-ip-pool" } },
    spec: {
      nodeName: node,
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: 0,
      tolerations: [{ operator: "Exists" }],
      containers: [{ name: "pool", image: IMAGE }],
    },
  };
}

interface PodStatus {
  status?: { podIP?: string };
}

/** Polls until `probe` holds; fails (with KWOK's log when KWOK exited) saying `what` did not happen. */
export type Wait = (probe: () => Promise<boolean>, what: string) => Promise<void>;

/** Creates every KWOK node's pool, one pod per node (all at once: the pools are distinct), then deletes the pods. */
export async function warmKwokIpPools(ep: KubeEndpoint, nodes: readonly string[], wait: Wait): Promise<void> {
  const base = `/api/v1/namespaces/${NAMESPACE}/pods`;
  await Promise.all(
    nodes.map(async (node) => {
      const name = warmupPodName(node);
      // Refused until the controller-manager has made kube-system's default ServiceAccount.
      await wait(async () => {
        const made = await kubeRequest(ep, "POST", base, warmupPod(node));
        return made.status === 201 || made.status === 409;
      }, `create ${name}`);
      await wait(async () => {
        const res = await kubeRequest(ep, "GET", `${base}/${name}`);
        return res.status === 200 && Boolean((JSON.parse(res.body) as PodStatus).status?.podIP);
      }, `give ${name} a pod IP`);
      const del = await kubeRequest(ep, "DELETE", `${base}/${name}`, { gracePeriodSeconds: 0 });
      if (del.status !== 200 && del.status !== 202 && del.status !== 404)
        throw new Error(`deleting ${name}: HTTP ${del.status}: ${del.body.slice(0, 300)}`);
      await wait(async () => (await kubeRequest(ep, "GET", `${base}/${name}`)).status === 404, `remove ${name}`);
    }),
  );
}

// The local cluster's resource metrics on real nodes (src/cluster/metrics.ts): metrics-server,
// registered with the API server's aggregation layer, reads the real kubelet's figures, so a pod
// that burns CPU under gVisor shows it at /apis/metrics.k8s.io/v1beta1 (the path krane's agent
// reads), an idle one shows far less, PodMetrics carry the pod's labels, and the cluster-wide list
// filters by labelSelector. Without real nodes `metrics` is refused.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { startCluster } from "../../../src/cluster/index.js";
import { kubeRequest, type KubeEndpoint } from "../../../src/cluster/kube-http.js";
import { METRICS_API, METRICS_API_SERVICE } from "../../../src/cluster/metrics.js";
import { parseQuantity } from "../../../src/kube/quantity.js";
import { eventually } from "../../support/cluster.js";
import { realNodesSkip, useRealCluster } from "../../support/real-nodes.js";

const skip = await realNodesSkip();
const NS = "metrics-test";

interface PodMetrics {
  metadata: { name: string; namespace: string; labels?: Record<string, string> };
  timestamp: string;
  window: string;
  containers: { name: string; usage: { cpu: string; memory: string } }[];
}

/** A CPU quantity ("123456789n", "250u", "12m", "1") in millicores, as the agent reads it. */
function millicores(q: string): number {
  const m = parseQuantity(q);
  if (m === undefined) throw new Error(`not a CPU quantity: ${q}`);
  return m;
}

const cpuOf = (p: PodMetrics): number => p.containers.reduce((sum, c) => sum + millicores(c.usage.cpu), 0);

async function get<T>(ep: KubeEndpoint, path: string): Promise<{ status: number; body: T | undefined; text: string }> {
  const res = await kubeRequest(ep, "GET", path);
  return { status: res.status, body: res.status === 200 ? (JSON.parse(res.body) as T) : undefined, text: res.body };
}

/** A pod on the untrusted real node, under gVisor, limited to half a core. */
function pod(name: string, role: string, command?: string[]): unknown {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: NS, labels: { "krane.test/metrics": role } },
    spec: {
      runtimeClassName: "gvisor",
      automountServiceAccountToken: false,
      nodeSelector: { "node-class": "untrusted" },
      tolerations: [{ key: "node-class", operator: "Equal", value: "untrusted", effect: "NoSchedule" }],
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: "app",
          image: "krane.local/hello:v1",
          ...(command ? { command } : {}),
          resources: {
            requests: { cpu: "500m", memory: "128Mi" },
            limits: { cpu: "500m", memory: "128Mi" },
          },
        },
      ],
    },
  };
}

it("metrics without real nodes is refused before anything starts", async () => {
  await assert.rejects(startCluster({ name: "metrics-refused", metrics: true }), /give realNodes too/);
});

describe("metrics-server on real nodes", { skip }, () => {
  const h = useRealCluster(["untrusted"], { metrics: true });

  it(
    "a busy gVisor pod's CPU shows through the API server, far above an idle one's; labels and labelSelector work",
    { timeout: 4 * 60_000 },
    async (t) => {
      const cluster = await h.ready();
      assert.equal(cluster.metrics?.apiService, METRICS_API_SERVICE);
      const ep = cluster.endpoint();
      const created = (r: { status: number; body: string }) => assert.ok(r.status === 201, r.body.slice(0, 300));
      created(
        await kubeRequest(ep, "POST", "/api/v1/namespaces", {
          apiVersion: "v1",
          kind: "Namespace",
          metadata: { name: NS },
        }),
      );
      created(
        await kubeRequest(
          ep,
          "POST",
          `/api/v1/namespaces/${NS}/pods`,
          pod("busy", "busy", ["node", "-e", "for(;;){}"]),
        ),
      );
      // The hello app serving nothing: idle.
      created(await kubeRequest(ep, "POST", `/api/v1/namespaces/${NS}/pods`, pod("idle", "idle")));

      const running = await eventually(
        "both pods Running",
        async () => {
          const list = await get<{ items: { metadata: { name: string }; status: { phase?: string } }[] }>(
            ep,
            `/api/v1/namespaces/${NS}/pods`,
          );
          const phases = (list.body?.items ?? []).map((p) => p.status.phase);
          return phases.length === 2 && phases.every((p) => p === "Running") ? Date.now() : undefined;
        },
        90_000,
      );

      // The busy pod's first figure, then one that shows the loop (the first may average in its start).
      let first: number | undefined;
      const busy = await eventually(
        "the busy pod's CPU above 100m in its PodMetrics",
        async () => {
          const r = await get<PodMetrics>(ep, `${METRICS_API}/namespaces/${NS}/pods/busy`);
          if (!r.body) return undefined;
          first ??= Date.now();
          return cpuOf(r.body) > 100 ? r.body : undefined;
        },
        120_000,
      );
      const firstAfter = ((first ?? Date.now()) - running) / 1000;
      t.diagnostic(
        `first figure ${firstAfter.toFixed(1)}s after Running; busy ${cpuOf(busy).toFixed(0)}m over ${busy.window}`,
      );
      assert.equal(busy.containers.length, 1);
      assert.equal(busy.containers[0]?.name, "app");
      assert.ok(cpuOf(busy) < 700, `the 500m limit holds (${cpuOf(busy)}m)`);
      // PodMetrics carry the pod's labels as they are (the API server adds the node's topology labels).
      const busyPod = await get<{ metadata: { labels?: Record<string, string> } }>(
        ep,
        `/api/v1/namespaces/${NS}/pods/busy`,
      );
      assert.equal(busy.metadata.labels?.["krane.test/metrics"], "busy");
      assert.deepEqual(busy.metadata.labels, busyPod.body?.metadata.labels, "PodMetrics carry the pod's labels");

      // Idle once its start is out of the window (a figure averages the last 10 s, and starting
      // Node.js under gVisor takes CPU): below 50m within a minute.
      let lastIdle = "none";
      const idle = await eventually(
        "the idle pod's CPU below 50m in its PodMetrics",
        async () => {
          const r = await get<PodMetrics>(ep, `${METRICS_API}/namespaces/${NS}/pods/idle`);
          if (r.body) lastIdle = `${cpuOf(r.body)}m`;
          return r.body && cpuOf(r.body) < 50 ? r.body : undefined;
        },
        60_000,
      ).catch((err: unknown) => {
        throw new Error(`${String(err)}; the idle pod's last figure: ${lastIdle}`);
      });
      assert.ok(cpuOf(idle) * 5 < cpuOf(busy), `idle ${cpuOf(idle)}m, busy ${cpuOf(busy)}m`);

      // What the agent lists: cluster-wide, by label.
      const selected = await get<{ items: PodMetrics[] }>(
        ep,
        `${METRICS_API}/pods?labelSelector=${encodeURIComponent("krane.test/metrics=busy")}`,
      );
      assert.equal(selected.status, 200, selected.text.slice(0, 300));
      assert.deepEqual(
        selected.body?.items.map((p) => `${p.metadata.namespace}/${p.metadata.name}`),
        [`${NS}/busy`],
      );
      const inNamespace = await get<{ items: PodMetrics[] }>(ep, `${METRICS_API}/namespaces/${NS}/pods`);
      assert.deepEqual(inNamespace.body?.items.map((p) => p.metadata.name).sort(), ["busy", "idle"]);

      // The node's own figure comes from the same kubelet.
      const node = await get<{ usage: { cpu: string } }>(ep, `${METRICS_API}/nodes/untrusted-real`);
      assert.equal(node.status, 200, node.text.slice(0, 300));
      assert.ok(millicores(node.body?.usage.cpu ?? "0") > 100, `node ${node.body?.usage.cpu}`);
    },
  );
});

// The local cluster is a real Kubernetes: server-side apply, scheduling by zone, taints and
// node pools, KWOK making pods Ready with IPs, garbage collection, field-manager conflicts and
// the CRDs krane relies on.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type V1Pod,
  type V1ReplicaSet,
} from "@kubernetes/client-node";
import { eventually, useCluster } from "../support/cluster.js";
import { NODE_CLASS_LABEL as NODE_CLASS_KEY, ZONE_LABEL as ZONE_KEY } from "../../src/contracts/cluster.js";

const h = useCluster();
const apply = setHeaderOptions("Content-Type", PatchStrategy.ServerSideApply);

function errorCode(err: unknown): number | undefined {
  return typeof err === "object" && err !== null && "code" in err ? Number((err as { code: unknown }).code) : undefined;
}

async function ensureNamespace(core: CoreV1Api, name: string): Promise<void> {
  await core.patchNamespace(
    { name, body: { apiVersion: "v1", kind: "Namespace", metadata: { name } }, fieldManager: "krane" },
    apply,
  );
}

test("a server-side applied ReplicaSet runs 3 gVisor pods on untrusted nodes in 3 zones, and its pods go with it", async () => {
  const kc = h.cluster.kubeConfig();
  const apps = kc.makeApiClient(AppsV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  await ensureNamespace(core, "ssa");
  const labels = { app: "web", "app.kubernetes.io/managed-by": "krane" };
  const rs: V1ReplicaSet = {
    apiVersion: "apps/v1",
    kind: "ReplicaSet",
    metadata: { name: "web", namespace: "ssa", labels },
    spec: {
      replicas: 3,
      selector: { matchLabels: { app: "web" } },
      template: {
        metadata: { labels },
        spec: {
          runtimeClassName: "gvisor",
          automountServiceAccountToken: false,
          tolerations: [{ key: NODE_CLASS_KEY, operator: "Equal", value: "untrusted", effect: "NoSchedule" }],
          nodeSelector: { [NODE_CLASS_KEY]: "untrusted" },
          topologySpreadConstraints: [
            {
              maxSkew: 1,
              topologyKey: ZONE_KEY,
              whenUnsatisfiable: "DoNotSchedule",
              labelSelector: { matchLabels: { app: "web" } },
            },
          ],
          containers: [{ name: "app", image: "example.com/web:1", ports: [{ containerPort: 8080 }] }],
        },
      },
    },
  };
  const applied = await apps.patchNamespacedReplicaSet(
    { name: "web", namespace: "ssa", body: rs, fieldManager: "krane", force: true },
    apply,
  );
  assert.equal(applied.metadata?.managedFields?.[0]?.manager, "krane");
  assert.equal(applied.metadata?.managedFields?.[0]?.operation, "Apply");

  const pods = await eventually("3 ready pods with IPs", async () => {
    const list = await core.listNamespacedPod({ namespace: "ssa", labelSelector: "app=web" });
    const ready = list.items.filter(
      (p: V1Pod) => p.status?.podIP && p.status.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
    );
    return ready.length === 3 ? ready : undefined;
  });
  const nodes = await core.listNode();
  const nodeByName = new Map(nodes.items.map((n) => [n.metadata?.name, n]));
  const zones = new Set<string>();
  for (const pod of pods) {
    assert.equal(pod.spec?.runtimeClassName, "gvisor");
    const node = nodeByName.get(pod.spec?.nodeName);
    assert.ok(node, `pod ${pod.metadata?.name} is on a known node`);
    assert.equal(node.metadata?.labels?.[NODE_CLASS_KEY], "untrusted", "user pods land only on untrusted nodes");
    zones.add(node.metadata?.labels?.[ZONE_KEY] ?? "");
  }
  assert.deepEqual([...zones].sort(), ["zone-a", "zone-b", "zone-c"]);

  await apps.deleteNamespacedReplicaSet({ name: "web", namespace: "ssa", propagationPolicy: "Background" });
  await eventually("the garbage collector to remove the pods", async () => {
    const list = await core.listNamespacedPod({ namespace: "ssa", labelSelector: "app=web" });
    return list.items.length === 0 ? true : undefined;
  });
});

test("pods without the untrusted toleration never land on tainted pools", async () => {
  const kc = h.cluster.kubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  await ensureNamespace(core, "plain");
  for (let i = 0; i < 6; i++) {
    await core.createNamespacedPod({
      namespace: "plain",
      body: { metadata: { name: `p${i}` }, spec: { containers: [{ name: "c", image: "example.com/x:1" }] } },
    });
  }
  const pods = await eventually("6 scheduled pods", async () => {
    const list = await core.listNamespacedPod({ namespace: "plain" });
    return list.items.every((p) => p.spec?.nodeName) && list.items.length === 6 ? list.items : undefined;
  });
  for (const p of pods) assert.match(p.spec?.nodeName ?? "", /^general-/);
});

test("pods that start at the same moment on one node get distinct IPs, and no warm-up pod is left", async () => {
  // KWOK 0.8 creates a node's address pool on its first pod without a lock, so two pods racing
  // on a fresh node could share an address (kwok-ip.ts); the cluster creates every pool first.
  const kc = h.cluster.kubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  await ensureNamespace(core, "burst");
  const nodes = (await core.listNode()).items.map((n) => n.metadata?.name ?? "");
  assert.ok(nodes.length >= 4);
  await Promise.all(
    nodes.flatMap((node) =>
      Array.from({ length: 6 }, (_, i) =>
        core.createNamespacedPod({
          namespace: "burst",
          body: {
            metadata: { name: `${node}-${i}` },
            spec: {
              nodeName: node,
              tolerations: [{ operator: "Exists" }],
              containers: [{ name: "c", image: "example.com/x:1" }],
            },
          },
        }),
      ),
    ),
  );
  const pods = await eventually(`${nodes.length * 6} pods with an IP`, async () => {
    const list = await core.listNamespacedPod({ namespace: "burst" });
    return list.items.length === nodes.length * 6 && list.items.every((p) => p.status?.podIP) ? list.items : undefined;
  });
  const byIp = new Map<string, string[]>();
  for (const p of pods)
    byIp.set(p.status?.podIP ?? "", [...(byIp.get(p.status?.podIP ?? "") ?? []), p.metadata?.name ?? ""]);
  assert.deepEqual(
    [...byIp].filter(([, names]) => names.length > 1),
    [],
  );
  const left = await core.listNamespacedPod({
    namespace: "kube-system",
    labelSelector: "app.kubernetes.io/name=kwok-ip-pool",
  });
  assert.deepEqual(
    left.items.map((p) => p.metadata?.name),
    [],
  );
});

test("a second field manager conflicts with krane's fields (409) unless it forces", async () => {
  const kc = h.cluster.kubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  await ensureNamespace(core, "conflict");
  const cm = (value: string) => ({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "cfg", namespace: "conflict" },
    data: { key: value },
  });
  await core.patchNamespacedConfigMap(
    { name: "cfg", namespace: "conflict", body: cm("krane"), fieldManager: "krane" },
    apply,
  );
  await assert.rejects(
    core.patchNamespacedConfigMap(
      { name: "cfg", namespace: "conflict", body: cm("other"), fieldManager: "someone-else" },
      apply,
    ),
    (err: unknown) => {
      assert.equal(errorCode(err), 409);
      assert.match(String((err as { body?: unknown }).body), /conflict/i);
      return true;
    },
  );
  const forced = await core.patchNamespacedConfigMap(
    { name: "cfg", namespace: "conflict", body: cm("other"), fieldManager: "someone-else", force: true },
    apply,
  );
  assert.equal(forced.data?.key, "other");
});

test("a CiliumNetworkPolicy and an HTTPRoute can be applied and read back", async () => {
  const kc = h.cluster.kubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  await ensureNamespace(core, "net");
  const cnp = {
    apiVersion: "cilium.io/v2",
    kind: "CiliumNetworkPolicy",
    metadata: { name: "allow-sentinels", namespace: "net" },
    spec: {
      endpointSelector: { matchLabels: { "krane.dev/environment-id": "env_1" } },
      ingress: [
        {
          fromEndpoints: [
            { matchLabels: { "app.kubernetes.io/component": "sentinel", "krane.dev/environment-id": "env_1" } },
          ],
          toPorts: [{ ports: [{ port: "8080", protocol: "TCP" }] }],
        },
      ],
    },
  };
  await custom.patchNamespacedCustomObject(
    {
      group: "cilium.io",
      version: "v2",
      namespace: "net",
      plural: "ciliumnetworkpolicies",
      name: "allow-sentinels",
      body: cnp,
      fieldManager: "krane",
      force: true,
    },
    apply,
  );
  const readCnp = (await custom.getNamespacedCustomObject({
    group: "cilium.io",
    version: "v2",
    namespace: "net",
    plural: "ciliumnetworkpolicies",
    name: "allow-sentinels",
  })) as typeof cnp;
  assert.deepEqual(readCnp.spec, cnp.spec);

  const route = {
    apiVersion: "gateway.networking.k8s.io/v1",
    kind: "HTTPRoute",
    metadata: { name: "web", namespace: "net" },
    spec: {
      parentRefs: [{ name: "public", namespace: "gateway" }],
      hostnames: ["web.example.com"],
      rules: [
        { matches: [{ path: { type: "PathPrefix", value: "/" } }], backendRefs: [{ name: "sentinel", port: 8040 }] },
      ],
    },
  };
  await custom.patchNamespacedCustomObject(
    {
      group: "gateway.networking.k8s.io",
      version: "v1",
      namespace: "net",
      plural: "httproutes",
      name: "web",
      body: route,
      fieldManager: "krane",
      force: true,
    },
    apply,
  );
  const readRoute = (await custom.getNamespacedCustomObject({
    group: "gateway.networking.k8s.io",
    version: "v1",
    namespace: "net",
    plural: "httproutes",
    name: "web",
  })) as { spec: { hostnames: string[]; rules: { backendRefs: { name: string; port: number }[] }[] } };
  assert.deepEqual(readRoute.spec.hostnames, ["web.example.com"]);
  assert.equal(readRoute.spec.rules[0]?.backendRefs[0]?.port, 8040);

  // The schema is enforced: an unknown protocol is refused as invalid.
  const bad = structuredClone(cnp);
  bad.metadata.name = "bad";
  const firstPort = bad.spec.ingress[0]?.toPorts[0]?.ports[0];
  assert.ok(firstPort);
  firstPort.protocol = "HTTP";
  await assert.rejects(
    custom.patchNamespacedCustomObject(
      {
        group: "cilium.io",
        version: "v2",
        namespace: "net",
        plural: "ciliumnetworkpolicies",
        name: "bad",
        body: bad,
        fieldManager: "krane",
        force: true,
      },
      apply,
    ),
    (err: unknown) => errorCode(err) === 422,
  );
});

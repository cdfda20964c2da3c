// The caches' transforms must never change what a reader sees: every reading of a trimmed
// object equals the reading of the full object, for arbitrary objects (and the trimmed object
// is smaller).
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { create } from "@bufbuild/protobuf";
import { ApplyDeploymentSchema, ApplySentinelSchema } from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { instanceKey, podToInstance } from "../../../../src/agent/deployments/status.js";
import { endpointOf } from "../../../../src/agent/sentinels/routing.js";
import { renderReplicaSet } from "../../../../src/agent/deployments/render.js";
import { renderSentinelDeployment } from "../../../../src/agent/sentinels/render.js";
import { observeSentinel } from "../../../../src/agent/sentinels/status.js";
import { findDrift } from "../../../../src/agent/runtime/drift.js";
import { share, SHARE_WEIGHT, SharedShape } from "../../../../src/agent/runtime/trim.js";
import { SENTINEL_NAMESPACE } from "../../../../src/contracts/cluster.js";
import { cachedBy } from "../../../support/kind-caches.js";
import { resources } from "../../../../src/kube/resources.js";
import type { KubeObject } from "../../../../src/kube/object.js";

const managedFields = [
  { manager: "kube-controller-manager", operation: "Update", fieldsV1: { "f:status": { "f:phase": {} } } },
];

const arbPod: fc.Arbitrary<KubeObject> = fc
  .record({
    name: fc.string({ minLength: 1, maxLength: 10 }),
    phase: fc.constantFrom("Pending", "Running", "Succeeded", "Failed", "Unknown"),
    ip: fc.option(fc.ipV4(), { nil: undefined }),
    ready: fc.boolean(),
    containersReady: fc.boolean(),
    waiting: fc.option(fc.constantFrom("CrashLoopBackOff", "ContainerCreating", "ErrImagePull"), { nil: undefined }),
    deleting: fc.boolean(),
    node: fc.option(fc.constantFrom("untrusted-a-1", "untrusted-b-1"), { nil: undefined }),
    port: fc.integer({ min: 1, max: 65535 }),
    cpu: fc.constantFrom("100m", "1", "2500m"),
    mem: fc.constantFrom("64Mi", "1Gi", "512Mi"),
    probe: fc.option(
      fc.record({
        path: fc.constantFrom("/healthz", "/", "/ready?full=1"),
        byName: fc.boolean(),
        scheme: fc.option(fc.constantFrom("HTTP", "HTTPS"), { nil: undefined }),
      }),
      { nil: undefined },
    ),
  })
  .map((p) => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: p.name,
      namespace: "ws-a",
      resourceVersion: "7",
      labels: { "krane.dev/deployment-id": "dep_1" },
      managedFields,
      annotations: { "krane.dev/revision": "3" },
      ...(p.deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
    },
    spec: {
      ...(p.node ? { nodeName: p.node } : {}),
      runtimeClassName: "gvisor",
      tolerations: [{ key: "node-class", operator: "Equal", value: "untrusted", effect: "NoSchedule" }],
      containers: [
        {
          name: "app",
          image: "registry.example.com/app:1",
          env: [{ name: "PORT", value: String(p.port) }],
          ports: [{ name: "http", containerPort: p.port, protocol: "TCP" }],
          resources: { limits: { cpu: p.cpu, memory: p.mem }, requests: { cpu: "50m", memory: "32Mi" } },
          ...(p.probe
            ? {
                readinessProbe: {
                  httpGet: { path: p.probe.path, port: p.probe.byName ? "http" : p.port, scheme: p.probe.scheme },
                  periodSeconds: 1,
                  failureThreshold: 3,
                },
              }
            : {}),
        },
      ],
    },
    status: {
      phase: p.phase,
      ...(p.ip ? { podIP: p.ip, podIPs: [{ ip: p.ip }] } : {}),
      hostIP: "10.0.0.1",
      startTime: "2026-01-01T00:00:00Z",
      conditions: [
        {
          type: "Ready",
          status: p.ready ? "True" : "False",
          lastTransitionTime: "2026-01-01T00:00:05Z",
          lastProbeTime: null,
        },
        {
          type: "ContainersReady",
          status: p.containersReady ? "True" : "False",
          lastTransitionTime: "2026-01-01T00:00:04Z",
        },
        { type: "PodScheduled", status: "True", lastTransitionTime: "2026-01-01T00:00:01Z" },
      ],
      containerStatuses: [
        {
          name: "app",
          ready: p.ready,
          restartCount: 2,
          image: "x",
          imageID: "y",
          state: p.waiting ? { waiting: { reason: p.waiting, message: "m" } } : { running: { startedAt: "t" } },
        },
      ],
    },
  }));

test("trimmed pods give the same instance as the full pods, and are smaller", () => {
  const trim = cachedBy(resources.pods);
  const zone = (n: string): string => `zone-of-${n}`;
  fc.assert(
    fc.property(arbPod, (pod) => {
      const trimmed = trim(pod);
      assert.deepEqual(podToInstance(trimmed, zone), podToInstance(pod, zone));
      assert.deepEqual(endpointOf(trimmed), endpointOf(pod), "the routing table reads the same endpoint");
      assert.equal(instanceKey(trimmed), instanceKey(pod));
      assert.ok(JSON.stringify(trimmed).length < JSON.stringify(pod).length);
      assert.equal(trimmed.metadata.resourceVersion, "7", "the resourceVersion is kept (the informer needs it)");
      assert.equal((trimmed.metadata as Record<string, unknown>).managedFields, undefined);
    }),
  );
});

test("rendered kinds keep every rendered field (no drift after trimming) and lose managedFields", () => {
  const rsTrim = cachedBy(resources.replicaSets);
  const depTrim = cachedBy(resources.deployments, SENTINEL_NAMESPACE);
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 50 }), fc.string({ maxLength: 8 }), (replicas, image) => {
      const d = create(ApplyDeploymentSchema, {
        workspaceId: "ws_1",
        projectId: "prj_1",
        environmentId: "env_1",
        deploymentId: "dep_1",
        k8sNamespace: "ws-a",
        k8sName: "dep-1",
        image: `img${image}`,
        port: 8080,
        replicas,
        cpuMillicores: 100n,
        memoryMib: 64n,
        revision: 2n,
      });
      const rendered = renderReplicaSet(d, "eu");
      const live = {
        ...structuredClone(rendered),
        metadata: { ...structuredClone(rendered.metadata), managedFields, resourceVersion: "9", uid: "u" },
        status: { replicas, readyReplicas: 0 },
      };
      const t = rsTrim(live);
      assert.equal(findDrift(rendered, t), undefined);
      assert.equal((t.metadata as Record<string, unknown>).managedFields, undefined);
      assert.equal(t.status, undefined, "ReplicaSet status is read by nobody");

      const s = create(ApplySentinelSchema, {
        workspaceId: "ws_1",
        projectId: "prj_1",
        environmentId: "env_1",
        sentinelId: "snt_1",
        k8sName: "snt-1",
        image: "s:1",
        replicas,
        cpuMillicores: 100n,
        memoryMib: 64n,
        region: "eu",
      });
      const dep = renderSentinelDeployment(s, "eu", { image: "krane:test" });
      const liveDep = {
        ...structuredClone(dep),
        metadata: { ...structuredClone(dep.metadata), managedFields },
        status: { availableReplicas: replicas },
      };
      const td = depTrim(liveDep);
      assert.equal(findDrift(dep, td), undefined);
      assert.deepEqual(observeSentinel(td), observeSentinel(liveDep), "sentinel health still reads Deployment status");
    }),
  );
});

test("nodes keep only their labels (the zone)", () => {
  const node = {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name: "n1", resourceVersion: "3", labels: { "topology.kubernetes.io/zone": "zone-a" }, managedFields },
    status: { images: [{ names: ["a"], sizeBytes: 1 }], capacity: { cpu: "32" } },
  };
  const t = cachedBy(resources.nodes)(node);
  assert.deepEqual(t.metadata.labels, { "topology.kubernetes.io/zone": "zone-a" });
  assert.equal(t.status, undefined);
});

test("a shared value equals what was given, for any JSON value", () => {
  fc.assert(
    fc.property(fc.jsonValue(), (v) => {
      const before = structuredClone(v);
      assert.deepEqual(share(structuredClone(v)), before);
    }),
    { numRuns: 500 },
  );
});

test("equal small subtrees become one frozen object, whatever their key order; large ones stay, their parts shared", () => {
  const a = { spec: { tolerations: [{ key: "k", operator: "Equal", value: "u" }], nodeSelector: { x: "1", y: "2" } } };
  const b = { spec: { nodeSelector: { y: "2", x: "1" }, tolerations: [{ value: "u", operator: "Equal", key: "k" }] } };
  const sa = share(a);
  const sb = share(b);
  assert.equal(sa, sb, "the second is the first's shared copy");
  assert.ok(Object.isFrozen(sa) && Object.isFrozen(sa.spec.nodeSelector));
  assert.throws(() => {
    (sa.spec.nodeSelector as Record<string, string>).x = "changed";
  }, TypeError);
  assert.notEqual(share({ n: 1 }), share({ n: 2 }), "different values are not shared");
  assert.notEqual(share({ n: 1 }), share([1]), "an array is not an object");
  assert.notEqual(share({ n: 0 }), share({ n: -0 }), "-0 is not 0");

  const big = (tag: string): { tag: string; env: { name: string; value: string }[] } => ({
    tag,
    env: Array.from({ length: SHARE_WEIGHT }, (_, i) => ({ name: `V${i}`, value: "same" })),
  });
  const x = share(big("x"));
  const y = share(big("y"));
  assert.ok(!Object.isFrozen(x) && !Object.isFrozen(x.env), "too large to be shared");
  assert.equal(x.env[3], y.env[3], "its small parts are");
});

test("a rendered ReplicaSet and its live copy share their pod template's repeated parts", () => {
  const d = create(ApplyDeploymentSchema, {
    deploymentId: "dep_share",
    environmentId: "env_share",
    k8sNamespace: "ws",
    k8sName: "web-share",
    image: "ghcr.io/acme/web:1",
    port: 8080,
    cpuMillicores: 100n,
    memoryMib: 64n,
    healthCheck: { path: "/healthz" },
  });
  const rendered = share(renderReplicaSet(d, "eu"));
  // What the API server answers: the same fields in its own (sorted) key order, and its defaults.
  const sorted = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(sorted)
      : v !== null && typeof v === "object"
        ? Object.fromEntries(
            Object.entries(v)
              .sort(([p], [q]) => p.localeCompare(q))
              .map(([k, x]) => [k, sorted(x)]),
          )
        : v;
  const live = sorted({ ...structuredClone(rendered), metadata: { ...rendered.metadata, resourceVersion: "7" } });
  const cached = cachedBy(resources.replicaSets)(live as KubeObject);
  assert.equal(findDrift(rendered, cached), undefined);
  const spec = (o: KubeObject): Record<string, unknown> =>
    ((o.spec as Record<string, unknown>).template as { spec: Record<string, unknown> }).spec;
  for (const part of ["tolerations", "nodeSelector", "affinity"])
    assert.equal(spec(cached)[part], spec(rendered)[part], `${part} is one object`);
});

test("kinds sharing a cache: the status is kept when any of them reads it; two different cuts are refused", () => {
  const obj = (): KubeObject =>
    ({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "d", resourceVersion: "1", managedFields },
      spec: { replicas: 2 },
      status: { availableReplicas: 2 },
    }) as KubeObject;
  const shape = new SharedShape("deployments");
  const transform = shape.transform();
  shape.add({ readsStatus: false });
  assert.equal(transform(obj()).status, undefined);
  shape.add({ readsStatus: true });
  assert.deepEqual(transform(obj()).status, { availableReplicas: 2 }, "read once declared by a second kind");
  const pods = new SharedShape("pods");
  pods.add({ readsStatus: false, trim: (o) => o });
  assert.throws(() => pods.add({ readsStatus: false, trim: (o) => ({ ...o }) }), /pods: kinds sharing its cache/);
});

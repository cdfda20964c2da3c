import { test } from "node:test";
import assert from "node:assert/strict";
import { create, type DescField } from "@bufbuild/protobuf";
import { ApplySentinelSchema, type ApplySentinel } from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import {
  peerSecretName,
  renderPeerSecret,
  renderSentinel,
  renderSentinelDeployment,
  renderSentinelNetworkPolicy,
  renderSentinelService,
} from "../../../../src/agent/sentinels/render.js";
import { validateApplySentinel } from "../../../../src/agent/sentinels/validate.js";
import { findDrift } from "../../../../src/agent/runtime/drift.js";
import { sampleSentinel } from "./fixtures.js";

const REGION = "local";
const DEFAULTS = { image: "ghcr.io/krane-dev/krane:test" };

// Fields that do not show up in the Deployment on purpose, and where they go instead.
const renderedElsewhere: Record<string, string> = {
  region: "validated against the agent's region (a mismatch is rejected); the agent's own region is rendered",
  routing: "rendered into the routing policy ConfigMap (test/unit/agent/sentinels/routing.test.ts)",
  autoscale:
    "the region's autoscaling policy: checked here (validate.test.ts), decided on by the agent, not the sentinel's pods",
  autoscale_region: "the region's count as ctrl holds it: read by the agent's autoscaler (src/agent/autoscale)",
};

/** A different, still valid value for one field of the message. */
function mutate(s: ApplySentinel, field: DescField): ApplySentinel {
  const copy = create(ApplySentinelSchema, { ...s });
  const rec = copy as unknown as Record<string, unknown>;
  const v = rec[field.localName];
  if (typeof v === "string") rec[field.localName] = field.localName === "k8sName" ? `${v}-x` : `${v}x`;
  else if (typeof v === "number") rec[field.localName] = v + 1;
  else if (typeof v === "bigint") rec[field.localName] = v + 1n;
  else throw new Error(`no mutation for field ${field.name} (${field.fieldKind}); extend this test`);
  return copy;
}

test("field coverage: every ApplySentinel field reaches the rendered Deployment", () => {
  const base = sampleSentinel();
  assert.equal(validateApplySentinel(base, REGION), undefined);
  const baseJson = JSON.stringify(renderSentinelDeployment(base, REGION, DEFAULTS));
  const missing: string[] = [];
  for (const field of ApplySentinelSchema.fields) {
    if (field.name in renderedElsewhere) continue;
    const changed = mutate(base, field);
    assert.equal(validateApplySentinel(changed, REGION), undefined, `mutated ${field.name} must stay valid`);
    if (JSON.stringify(renderSentinelDeployment(changed, REGION, DEFAULTS)) === baseJson) missing.push(field.name);
  }
  assert.deepEqual(missing, [], `fields that do not reach the Deployment: ${missing.join(", ")}`);
  for (const name of Object.keys(renderedElsewhere)) {
    assert.ok(
      ApplySentinelSchema.fields.some((f) => f.name === name),
      `stale entry in renderedElsewhere: ${name}`,
    );
  }
});

interface Dep {
  metadata: { name: string; namespace: string; labels: Record<string, string> };
  spec: {
    replicas: number;
    selector: { matchLabels: Record<string, string> };
    strategy: { type: string; rollingUpdate: { maxUnavailable: number; maxSurge: number } };
    template: {
      metadata: { labels: Record<string, string> };
      spec: {
        nodeSelector: Record<string, string>;
        tolerations: Array<Record<string, string>>;
        topologySpreadConstraints: Array<{
          maxSkew: number;
          topologyKey: string;
          labelSelector: { matchLabels: Record<string, string> };
        }>;
        automountServiceAccountToken: boolean;
        containers: Array<{
          name: string;
          image: string;
          ports: Array<{ containerPort: number; protocol: string }>;
          env: Array<{ name: string; value: string }>;
          resources: { limits: Record<string, string>; requests: Record<string, string> };
          readinessProbe: { httpGet: { port: number; path: string } };
          livenessProbe: { httpGet: { port: number; path: string } };
        }>;
      };
    };
  };
}

const EXPECTED_LABELS = {
  "app.kubernetes.io/managed-by": "krane",
  "app.kubernetes.io/component": "sentinel",
  "krane.dev/region": REGION,
  "krane.dev/workspace-id": "ws_1",
  "krane.dev/project-id": "proj_1",
  "krane.dev/environment-id": "env_1",
  "krane.dev/sentinel-id": "snt_1",
};

test("the Deployment: namespace, labels, selector, strategy, placement, probes, resources", () => {
  const d = renderSentinelDeployment(sampleSentinel(), REGION, DEFAULTS) as unknown as Dep;
  assert.equal(d.metadata.name, "snt-web-production-ab12cd34");
  assert.equal(d.metadata.namespace, "sentinel");
  assert.deepEqual(d.metadata.labels, EXPECTED_LABELS);
  assert.equal(d.spec.replicas, 3);
  assert.deepEqual(d.spec.selector.matchLabels, { "krane.dev/sentinel-id": "snt_1" });
  assert.deepEqual(d.spec.strategy, { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } });
  const pod = d.spec.template;
  // The selector must select the pod template, and the labels that the per-environment network
  // policy and the deployments' sentinel-zone affinity match on must be on the pods.
  for (const [k, v] of Object.entries(d.spec.selector.matchLabels)) assert.equal(pod.metadata.labels[k], v);
  assert.equal(pod.metadata.labels["app.kubernetes.io/component"], "sentinel");
  assert.equal(pod.metadata.labels["krane.dev/environment-id"], "env_1");
  assert.deepEqual(pod.spec.nodeSelector, { "node-class": "sentinel" });
  assert.deepEqual(pod.spec.tolerations, [
    { key: "node-class", operator: "Equal", value: "sentinel", effect: "NoSchedule" },
  ]);
  assert.equal(pod.spec.topologySpreadConstraints.length, 1);
  const tsc = pod.spec.topologySpreadConstraints[0];
  assert.equal(tsc?.maxSkew, 1);
  assert.equal(tsc?.topologyKey, "topology.kubernetes.io/zone");
  assert.deepEqual(tsc?.labelSelector.matchLabels, { "krane.dev/sentinel-id": "snt_1" });
  assert.equal(pod.spec.automountServiceAccountToken, false);
  const c = pod.spec.containers[0];
  assert.ok(c);
  assert.equal(c.image, "ghcr.io/krane/sentinel:1.0.0");
  assert.deepEqual(
    c.ports.map((p) => p.containerPort),
    [8040],
  );
  assert.equal(c.readinessProbe.httpGet.port, 8040);
  assert.equal(c.livenessProbe.httpGet.port, 8040);
  assert.deepEqual(c.resources, {
    limits: { cpu: "250m", memory: "256Mi" },
    requests: { cpu: "125m", memory: "128Mi" },
  });
  const env = new Map(c.env.map((e) => [e.name, e.value]));
  assert.equal(env.get("PORT"), "8040");
  assert.equal(env.get("KRANE_SENTINEL_ID"), "snt_1");
  assert.equal(env.get("KRANE_REGION"), REGION);
});

test("requests never round down to zero", () => {
  const d = renderSentinelDeployment(
    sampleSentinel({ cpuMillicores: 1n, memoryMib: 1n }),
    REGION,
    DEFAULTS,
  ) as unknown as Dep;
  assert.deepEqual(d.spec.template.spec.containers[0]?.resources.requests, { cpu: "1m", memory: "1Mi" });
});

test("the Service: ClusterIP on 8040, same labels, selects the pods, owned by the Deployment when its uid is known", () => {
  const s = sampleSentinel();
  const svc = renderSentinelService(s, REGION, "uid-123") as unknown as {
    metadata: { name: string; namespace: string; labels: Record<string, string>; ownerReferences: unknown[] };
    spec: {
      type: string;
      selector: Record<string, string>;
      ports: Array<{ port: number; targetPort: number; protocol: string; appProtocol?: string }>;
    };
  };
  assert.equal(svc.metadata.name, s.k8sName);
  assert.equal(svc.metadata.namespace, "sentinel");
  assert.deepEqual(svc.metadata.labels, EXPECTED_LABELS);
  assert.deepEqual(svc.metadata.ownerReferences, [
    { apiVersion: "apps/v1", kind: "Deployment", name: s.k8sName, uid: "uid-123" },
  ]);
  assert.equal(svc.spec.type, "ClusterIP");
  assert.deepEqual(svc.spec.selector, { "krane.dev/sentinel-id": "snt_1" });
  assert.deepEqual(
    svc.spec.ports.map((p) => [p.port, p.targetPort, p.protocol, p.appProtocol]),
    // 8042: the same container port for the Gateway's gRPC rule, spoken to in HTTP/2.
    [
      [8040, 8040, "TCP", undefined],
      [8042, 8040, "TCP", "kubernetes.io/h2c"],
      // 8043: the replicas' rate-limit exchange (its EndpointSlices list the peers).
      [8043, 8043, "TCP", undefined],
    ],
  );
  // Without a uid (the drift check) there is no owner, and everything else is identical.
  const bare = renderSentinelService(s, REGION);
  assert.equal(bare.metadata.ownerReferences, undefined);
  assert.equal(findDrift(bare, svc), undefined);
});

test("render is pure and emits nothing empty (empty values would look like drift forever)", () => {
  const s = sampleSentinel({ replicas: 0 });
  const a = JSON.stringify(renderSentinel(s, REGION, DEFAULTS, "u"));
  const b = JSON.stringify(renderSentinel(s, REGION, DEFAULTS, "u"));
  assert.equal(a, b);
  const walk = (v: unknown, path: string): void => {
    if (Array.isArray(v)) {
      assert.ok(v.length > 0, `empty list at ${path}`);
      v.forEach((x, i) => walk(x, `${path}[${i}]`));
    } else if (typeof v === "object" && v !== null) {
      assert.ok(Object.keys(v).length > 0, `empty object at ${path}`);
      for (const [k, x] of Object.entries(v)) walk(x, `${path}.${k}`);
    } else {
      assert.notEqual(v, undefined, `undefined at ${path}`);
    }
  };
  walk(JSON.parse(a), "");
  // A rendered object matches itself: no drift, so a resync writes nothing.
  const r = renderSentinel(s, REGION, DEFAULTS);
  assert.equal(findDrift(r.deployment, JSON.parse(JSON.stringify(r.deployment))), undefined);
});

test("krane's own sentinel (no image named): krane's image as `krane sentinel`, the routing table's ServiceAccount, probes on the ops port, locked down", () => {
  const d = renderSentinelDeployment(sampleSentinel({ image: "" }), REGION, DEFAULTS) as unknown as {
    spec: { template: { spec: Record<string, unknown> & { containers: Array<Record<string, unknown>> } } };
  };
  const pod = d.spec.template.spec;
  assert.equal(pod.serviceAccountName, "krane-sentinel");
  assert.equal(pod.automountServiceAccountToken, true);
  const c = pod.containers[0] as Record<string, unknown> & {
    readinessProbe: { httpGet: { port: number; path: string } };
    livenessProbe: { httpGet: { port: number; path: string } };
  };
  assert.equal(c.image, DEFAULTS.image);
  assert.deepEqual(c.args, ["sentinel"]);
  assert.deepEqual([c.readinessProbe.httpGet.path, c.readinessProbe.httpGet.port], ["/readyz", 8041]);
  assert.deepEqual([c.livenessProbe.httpGet.path, c.livenessProbe.httpGet.port], ["/healthz", 8041]);
  // The replicas' rate-limit exchange: its port, its Service, its key from the peer Secret (optional).
  assert.deepEqual(
    (c.ports as { name: string; containerPort: number }[]).map((p) => [p.name, p.containerPort]),
    [
      ["http", 8040],
      ["ops", 8041],
      ["peers", 8043],
    ],
  );
  const s = sampleSentinel({ image: "" });
  const env = c.env as { name: string; value?: string; valueFrom?: unknown }[];
  assert.deepEqual(
    env.filter((e) => e.name.startsWith("KRANE_SENTINEL_PEER")),
    [
      { name: "KRANE_SENTINEL_PEER_SERVICE", value: s.k8sName },
      {
        name: "KRANE_SENTINEL_PEER_SECRET",
        valueFrom: { secretKeyRef: { name: peerSecretName(s.k8sName), key: "secret", optional: true } },
      },
    ],
  );
  const secret = renderPeerSecret(s, REGION, "k".repeat(43));
  assert.deepEqual([secret.metadata.name, secret.metadata.namespace], [`${s.k8sName}-peers`, "sentinel"]);
  assert.equal(
    Buffer.from(String((secret.data as Record<string, string>).secret), "base64").toString(),
    "k".repeat(43),
  );
  assert.deepEqual(c.securityContext, {
    allowPrivilegeEscalation: false,
    runAsNonRoot: true,
    readOnlyRootFilesystem: true,
    capabilities: { drop: ["ALL"] },
  });
  // A custom image never gets a Kubernetes token (it is tenant-chosen code).
  const custom = renderSentinelDeployment(sampleSentinel(), REGION, DEFAULTS) as unknown as {
    spec: { template: { spec: Record<string, unknown> } };
  };
  assert.equal(custom.spec.template.spec.automountServiceAccountToken, false);
  assert.equal(custom.spec.template.spec.serviceAccountName, undefined);
  const customEnv = (custom.spec.template.spec.containers as { env: { name: string }[] }[])[0]?.env ?? [];
  assert.ok(!customEnv.some((e) => e.name.startsWith("KRANE_SENTINEL_PEER")), "no exchange key for a custom image");
  // and runs sandboxed like a workload; krane's own sentinel runs on the node's default runtime.
  assert.equal(custom.spec.template.spec.runtimeClassName, "gvisor");
  assert.equal(pod.runtimeClassName, undefined);
});

test("an environment naming krane's own image (any tag or digest) gets krane's own sentinel, run as the agent's image", () => {
  // The install notes once printed krane's image for `krane env create --sentinel-image`: run as
  // a user's image it only printed krane's help and crash-looped.
  type Pod = {
    spec: {
      template: {
        spec: Record<string, unknown> & { containers: Array<Record<string, unknown> & { args?: string[] }> };
      };
    };
  };
  const own = renderSentinelDeployment(sampleSentinel({ image: "" }), REGION, DEFAULTS);
  for (const image of [
    DEFAULTS.image,
    "ghcr.io/krane-dev/krane:0.0.9",
    "ghcr.io/krane-dev/krane",
    "ghcr.io/krane-dev/krane@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
  ]) {
    const d = renderSentinelDeployment(sampleSentinel({ image }), REGION, DEFAULTS) as unknown as Pod;
    assert.deepEqual(d, own, image);
    assert.deepEqual(d.spec.template.spec.containers[0]?.args, ["sentinel"], image);
  }
  // With a registry port, the port is not a tag.
  const ported = { image: "registry.local:5000/krane:1.2.3" };
  const p = renderSentinelDeployment(sampleSentinel({ image: "registry.local:5000/krane:1.2.2" }), REGION, ported);
  assert.equal((p as unknown as Pod).spec.template.spec.serviceAccountName, "krane-sentinel");
  // Another repository stays a user's image: sandboxed, no token, no `sentinel` argument.
  for (const image of [
    "ghcr.io/krane-dev/krane-fork:test",
    "ghcr.io/krane-dev/kran:test",
    "krane:test",
    "registry.local:5000/krane:1.2.3",
  ]) {
    const d = renderSentinelDeployment(sampleSentinel({ image }), REGION, DEFAULTS) as unknown as Pod;
    const pod = d.spec.template.spec;
    assert.equal(pod.runtimeClassName, "gvisor", image);
    assert.equal(pod.serviceAccountName, undefined, image);
    assert.equal(pod.containers[0]?.image, image);
    assert.equal(pod.containers[0]?.args, undefined, image);
  }
});

test("the ingress policy covers exactly the ports the pods listen on; the peers' port only from the same sentinel's pods", () => {
  interface Rule {
    fromEntities?: string[];
    fromEndpoints?: { matchLabels: Record<string, string> }[];
    toPorts: { ports: { port: string; protocol: string }[] }[];
  }
  for (const image of ["", "ghcr.io/acme/proxy:2"]) {
    const s = sampleSentinel({ image });
    const d = renderSentinelDeployment(s, REGION, DEFAULTS) as unknown as {
      spec: {
        selector: { matchLabels: Record<string, string> };
        template: { spec: { containers: { ports: { containerPort: number }[] }[] } };
      };
    };
    const listened = d.spec.template.spec.containers.flatMap((c) => c.ports.map((p) => String(p.containerPort)));
    const obj = renderSentinelNetworkPolicy(s, REGION, DEFAULTS);
    const cnp = obj as unknown as {
      metadata: { name: string; namespace: string; labels: Record<string, string> };
      spec: { endpointSelector: { matchLabels: Record<string, string> }; ingress: Rule[] };
    };
    assert.equal(cnp.metadata.name, s.k8sName);
    assert.equal(cnp.metadata.namespace, "sentinel");
    assert.equal(cnp.metadata.labels["krane.dev/sentinel-id"], s.sentinelId);
    assert.deepEqual(cnp.spec.endpointSelector.matchLabels, d.spec.selector.matchLabels, "over the sentinel's pods");
    const covered = new Set(cnp.spec.ingress.flatMap((r) => r.toPorts.flatMap((t) => t.ports.map((p) => p.port))));
    assert.deepEqual([...covered].sort(), [...new Set(listened)].sort(), `image ${JSON.stringify(image)}`);
    for (const r of cnp.spec.ingress) {
      const ports = r.toPorts.flatMap((t) => t.ports.map((p) => p.port));
      const entities = r.fromEntities ?? [];
      if (ports.includes("8043"))
        assert.deepEqual(r, {
          fromEndpoints: [{ matchLabels: d.spec.selector.matchLabels }],
          toPorts: [{ ports: [{ port: "8043", protocol: "TCP" }] }],
        });
      if (ports.includes("8041")) assert.ok(!entities.some((e) => e === "all" || e === "world"));
    }
    // Rendered twice, the same; and it matches itself (no drift on a resync).
    assert.equal(JSON.stringify(cnp), JSON.stringify(renderSentinelNetworkPolicy(s, REGION, DEFAULTS)));
    assert.equal(findDrift(obj, JSON.parse(JSON.stringify(obj))), undefined);
  }
});

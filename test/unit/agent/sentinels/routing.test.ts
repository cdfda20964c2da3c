import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { AutoscalePolicySchema } from "../../../../src/gen/krane/ctrl/v1/autoscale_pb.js";
import { RoutingPolicySchema } from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { renderRevisionSlices, renderRoutingPolicy, routingPolicyOf } from "../../../../src/agent/sentinels/routing.js";
import { parseRoutingPolicy, routingSelector } from "../../../../src/contracts/routing.js";
import { findDrift } from "../../../../src/agent/runtime/drift.js";
import type { KubeObject } from "../../../../src/kube/object.js";
import { sampleSentinel } from "./fixtures.js";

const REGION = "local";
const ready = [
  { type: "ContainersReady", status: "True" },
  { type: "Ready", status: "True", lastTransitionTime: "2026-01-01T00:00:00Z" },
];

function pod(
  name: string,
  opts: { ip?: string; running?: boolean; deleting?: boolean; node?: string } = {},
): KubeObject {
  return {
    metadata: {
      name,
      namespace: "ws-a",
      labels: {},
      ...(opts.deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
    },
    spec: { nodeName: opts.node ?? "untrusted-a-1", containers: [{ name: "app", ports: [{ containerPort: 8080 }] }] },
    status: { phase: "Running", podIP: opts.ip ?? "127.1.0.5", conditions: opts.running === false ? [] : ready },
  };
}

const zone = (node: string): string => (node.includes("-a-") ? "zone-a" : "zone-b");

test("a revision's slice lists only RUNNING pods with an IP that are not terminating, sorted, with zone and target", () => {
  const s = sampleSentinel();
  const [slice, ...rest] = renderRevisionSlices(
    s,
    REGION,
    "dep_1",
    [
      pod("b", { ip: "127.1.0.2", node: "untrusted-b-1" }),
      pod("a", { ip: "127.1.0.1" }),
      pod("pending", { ip: "127.1.0.3", running: false }),
      pod("going", { ip: "127.1.0.4", deleting: true }),
      pod("noip", { ip: "" }),
    ],
    zone,
  );
  assert.equal(rest.length, 0);
  assert.ok(slice);
  const eps = slice.endpoints as Array<{
    addresses: string[];
    zone: string;
    targetRef: { name: string };
    conditions: Record<string, boolean>;
  }>;
  assert.deepEqual(
    eps.map((e) => e.addresses[0]),
    ["127.1.0.1", "127.1.0.2"],
  );
  assert.deepEqual(
    eps.map((e) => e.zone),
    ["zone-a", "zone-b"],
  );
  assert.deepEqual(eps[0]?.targetRef.name, "a");
  assert.deepEqual(eps[0]?.conditions, { ready: true, serving: true, terminating: false });
  assert.deepEqual(slice.ports, [{ name: "http", port: 8080, protocol: "TCP" }]);
  assert.equal(slice.metadata.namespace, "sentinel");
  const labels = slice.metadata.labels ?? {};
  assert.equal(labels["krane.dev/deployment-id"], "dep_1");
  assert.equal(labels["krane.dev/sentinel-id"], s.sentinelId);
  assert.equal(labels["endpointslice.kubernetes.io/managed-by"], "agent.krane.dev");
  // What the sentinel selects by.
  for (const part of routingSelector(s.environmentId, REGION).split(",")) {
    const [k, v] = part.split("=");
    assert.equal(labels[k ?? ""], v, part);
  }
});

test("pods whose containers run but are not ready yet are listed not ready, with the readiness probe's path", () => {
  const starting = (
    name: string,
    ip: string,
    probe: Record<string, unknown> | undefined,
    state: Record<string, unknown> = { running: { startedAt: "2026-01-01T00:00:00Z" } },
  ): KubeObject => {
    const p = pod(name, { ip, running: false });
    const container = { name: "app", ports: [{ name: "http", containerPort: 8080 }], readinessProbe: probe };
    return {
      ...p,
      spec: { ...(p.spec as Record<string, unknown>), containers: [container] },
      status: { ...(p.status as Record<string, unknown>), containerStatuses: [{ name: "app", state }] },
    };
  };
  const http = { httpGet: { path: "/healthz", port: 8080 } };
  const render = (pods: KubeObject[]): KubeObject | undefined =>
    renderRevisionSlices(sampleSentinel(), REGION, "dep_1", pods, zone)[0];
  const slice = render([
    starting("b", "127.1.0.2", http),
    starting("waiting", "127.1.0.3", http, { waiting: { reason: "ContainerCreating" } }),
    { ...starting("going", "127.1.0.4", http), metadata: { name: "going", deletionTimestamp: "2026-01-01T00:00:00Z" } },
  ]);
  const eps = (slice?.endpoints ?? []) as Array<{ addresses: string[]; conditions: Record<string, boolean> }>;
  assert.deepEqual(
    eps.map((e) => [e.addresses[0], e.conditions.ready, e.conditions.serving, e.conditions.terminating]),
    [["127.1.0.2", false, false, false]],
    "a container not started yet, or a pod terminating, is not listed at all",
  );
  assert.equal(slice?.metadata.annotations?.["krane.dev/readiness-path"], "/healthz");
  // By the port's name too; the default path is "/".
  const named = render([starting("b", "127.1.0.2", { httpGet: { port: "http" } })]);
  assert.equal(named?.metadata.annotations?.["krane.dev/readiness-path"], "/");
  // Nothing the sentinel could probe as the kubelet does: no annotation (it waits for Ready).
  for (const probe of [
    undefined,
    { tcpSocket: { port: 8080 } },
    { httpGet: { path: "/healthz", port: 9090 } },
    { httpGet: { path: "/healthz", port: 8080, scheme: "HTTPS" } },
    { httpGet: { path: "/a b", port: 8080 } },
  ])
    assert.equal(render([starting("b", "127.1.0.2", probe)])?.metadata.annotations, undefined, JSON.stringify(probe));
  // Once one instance of the revision is ready, only ready ones are listed, as before: nothing to
  // probe, no annotation, no extra write while a revision serves.
  const serving = render([pod("a", { ip: "127.1.0.1" }), starting("b", "127.1.0.2", http)]);
  assert.deepEqual(
    ((serving?.endpoints ?? []) as Array<{ addresses: string[] }>).map((e) => e.addresses[0]),
    ["127.1.0.1"],
  );
  assert.equal(serving?.metadata.annotations, undefined);
});

test("a revision whose last pod stops being routable renders a slice without endpoints, which is drift against one with them", () => {
  const s = sampleSentinel();
  const [withOne] = renderRevisionSlices(s, REGION, "dep_1", [pod("a")], zone);
  const [none] = renderRevisionSlices(s, REGION, "dep_1", [pod("a", { deleting: true })], zone);
  assert.ok(withOne && none);
  assert.equal(none.endpoints, null);
  assert.notEqual(findDrift(none, withOne), undefined, "stale endpoints must be seen and removed");
  const live = structuredClone(none) as Record<string, unknown>;
  delete live.endpoints; // what the API server stores
  assert.equal(findDrift(none, live as KubeObject), undefined, "and then it is current: no write loop");
  assert.deepEqual(renderRevisionSlices(s, REGION, "dep_1", [], zone), [], "no pod: no slice (pruned)");
});

test("more than 1,000 endpoints are split over several slices with stable names", () => {
  const pods = Array.from({ length: 2_345 }, (_, i) =>
    pod(`p${String(i).padStart(5, "0")}`, { ip: `127.2.${Math.floor(i / 250)}.${(i % 250) + 1}` }),
  );
  const slices = renderRevisionSlices(sampleSentinel(), REGION, "dep_big", pods, zone);
  assert.deepEqual(
    slices.map((x) => (x.endpoints as unknown[]).length),
    [1000, 1000, 345],
  );
  assert.deepEqual(new Set(slices.map((x) => x.metadata.name)).size, 3);
  assert.ok(slices.every((x) => (x.metadata.name ?? "").length <= 253));
});

test("the policy ConfigMap carries ctrl's policy (default: by instances) in the contract's format", () => {
  const plain = renderRoutingPolicy(sampleSentinel(), REGION);
  const p0 = parseRoutingPolicy((plain.data as Record<string, string>)["policy.json"] ?? "");
  assert.deepEqual(p0, { version: 0, environmentId: "env_1", mode: "instances", revisions: [] });
  const s = sampleSentinel({
    routing: create(RoutingPolicySchema, {
      version: 7n,
      mode: "weighted",
      revisions: [
        { deploymentId: "dep_a", weight: 80 },
        { deploymentId: "dep_b", weight: 20 },
      ],
    }),
  });
  assert.deepEqual(routingPolicyOf(s), {
    version: 7,
    environmentId: "env_1",
    mode: "weighted",
    revisions: [
      { deploymentId: "dep_a", weight: 80 },
      { deploymentId: "dep_b", weight: 20 },
    ],
  });
  const cm = renderRoutingPolicy(s, REGION);
  assert.deepEqual(parseRoutingPolicy((cm.data as Record<string, string>)["policy.json"] ?? ""), routingPolicyOf(s));
  assert.equal(cm.metadata.labels?.["krane.dev/sentinel-id"], s.sentinelId);
});

test("scale to zero: the policy carries the hold bounds, the environment's bound spread over its sentinel pods", () => {
  const s = sampleSentinel({
    replicas: 3,
    autoscale: create(AutoscalePolicySchema, {
      minReplicas: 0,
      maxReplicas: 4,
      concurrencyTarget: 10,
      scaleUpWindowSeconds: 0,
      scaleDownWindowSeconds: 300,
      scaleToZero: { idleSeconds: 300, maxHeldRequests: 1000, heldTimeoutSeconds: 30 },
    }),
  });
  const p = parseRoutingPolicy((renderRoutingPolicy(s, REGION).data as Record<string, string>)["policy.json"] ?? "");
  assert.deepEqual(p.hold, { maxHeld: 334, timeoutMs: 30_000 }, "1,000 over 3 pods, rounded up");
  const none = parseRoutingPolicy(
    (renderRoutingPolicy(sampleSentinel(), REGION).data as Record<string, string>)["policy.json"] ?? "",
  );
  assert.equal(none.hold, undefined, "no scale to zero: nothing held");
  assert.throws(
    () => parseRoutingPolicy(JSON.stringify({ ...p, hold: { maxHeld: 0, timeoutMs: 10 } })),
    /hold\.maxHeld must be an integer 1–100000/,
  );
  assert.throws(
    () => parseRoutingPolicy(JSON.stringify({ ...p, hold: { maxHeld: 5, timeoutMs: -1 } })),
    /hold\.timeoutMs/,
  );
});

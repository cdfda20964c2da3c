import { test } from "node:test";
import assert from "node:assert/strict";
import { InstanceStatus } from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { instancesFingerprint, instancesOf, podToInstance } from "../../../../src/agent/deployments/status.js";
import type { KubeObject } from "../../../../src/kube/object.js";

function pod(name: string, status: Record<string, unknown>, extra: Partial<KubeObject["metadata"]> = {}): KubeObject {
  return {
    metadata: { name, namespace: "ws-1", ...extra },
    spec: {
      nodeName: "node-a-1",
      containers: [
        { name: "app", ports: [{ containerPort: 8080 }], resources: { limits: { cpu: "500m", memory: "256Mi" } } },
      ],
    },
    status,
  };
}

const zone = (): string => "zone-a";
const ready = [
  { type: "ContainersReady", status: "True" },
  { type: "Ready", status: "True", lastTransitionTime: "2026-01-01T00:00:00Z" },
];

test("a pod maps to the instance ctrl is told of (status, address, resources)", () => {
  const running = podToInstance(pod("a", { phase: "Running", podIP: "10.0.0.1", conditions: ready }), zone);
  assert.equal(running?.status, InstanceStatus.RUNNING);
  assert.equal(running?.address, "10.0.0.1:8080");
  assert.equal(running?.cpuMillicores, 500n);
  assert.equal(running?.memoryMib, 256n);
  assert.equal(running?.zone, "zone-a");
  assert.equal(running?.readySinceUnixMs, BigInt(Date.parse("2026-01-01T00:00:00Z")));

  const notReady = podToInstance(
    pod("b", { phase: "Running", podIP: "10.0.0.2", conditions: [{ type: "ContainersReady", status: "False" }] }),
    zone,
  );
  assert.equal(notReady?.status, InstanceStatus.PENDING);
  assert.equal(notReady?.readySinceUnixMs, 0n);

  const crashing = podToInstance(
    pod("c", {
      phase: "Running",
      podIP: "10.0.0.3",
      containerStatuses: [{ name: "app", state: { waiting: { reason: "CrashLoopBackOff" } } }],
    }),
    zone,
  );
  assert.equal(crashing?.status, InstanceStatus.FAILED);

  assert.equal(podToInstance(pod("d", { phase: "Pending" }), zone), undefined, "no IP yet");
  assert.equal(podToInstance(pod("e", { phase: "Failed", podIP: "10.0.0.5" }), zone), undefined, "terminal");
  assert.equal(podToInstance(pod("f", { phase: "Succeeded", podIP: "10.0.0.6" }), zone), undefined, "terminal");
  const gone = { deletionTimestamp: "2026-01-01T00:00:00Z" };
  const g = podToInstance(pod("g", { phase: "Running", podIP: "10.0.0.7", conditions: ready }, gone), zone);
  assert.equal(g?.status, InstanceStatus.TERMINATING, "a ready pod being deleted is terminating, not running");
  assert.equal(g?.readySinceUnixMs, 0n, "and no longer ready");
  const h = podToInstance(pod("h", { phase: "Pending" }, gone), zone);
  assert.equal(h?.status, InstanceStatus.TERMINATING, "terminating without an IP is still reported");
  assert.equal(h?.address, "");
  assert.equal(
    podToInstance(pod("i", { phase: "Failed", podIP: "10.0.0.8" }, gone), zone),
    undefined,
    "terminal wins over terminating",
  );
});

test("instance sets are sorted and fingerprints change only when the set does", () => {
  const p1 = pod("b", { phase: "Running", podIP: "10.0.0.1", conditions: ready });
  const p2 = pod("a", { phase: "Pending", podIP: "10.0.0.2" });
  const set = instancesOf([p1, p2], zone);
  assert.deepEqual(
    set.map((i) => i.k8sName),
    ["a", "b"],
  );
  const fp = instancesFingerprint("dep-1", set);
  assert.equal(instancesFingerprint("dep-1", instancesOf([p2, p1], zone)), fp);
  const p2ready = pod("a", { phase: "Running", podIP: "10.0.0.2", conditions: ready });
  assert.notEqual(instancesFingerprint("dep-1", instancesOf([p1, p2ready], zone)), fp);
});

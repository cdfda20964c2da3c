import { test } from "node:test";
import assert from "node:assert/strict";
import { Health } from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { observationFingerprint, observeSentinel, sentinelHealth } from "../../../../src/agent/sentinels/status.js";
import type { KubeObject } from "../../../../src/kube/object.js";

function deployment(spec: Record<string, unknown>, status: Record<string, unknown> | undefined): KubeObject {
  const d: KubeObject = { metadata: { name: "snt-a", namespace: "sentinel" }, spec };
  if (status) d.status = status;
  return d;
}

test("health: paused at 0 replicas, healthy with any available replica, unhealthy otherwise", () => {
  assert.equal(sentinelHealth(0, 0), Health.PAUSED);
  // Scaled to zero wins even while old pods are still available.
  assert.equal(sentinelHealth(0, 2), Health.PAUSED);
  assert.equal(sentinelHealth(3, 1), Health.HEALTHY);
  assert.equal(sentinelHealth(3, 3), Health.HEALTHY);
  assert.equal(sentinelHealth(3, 0), Health.UNHEALTHY);
  assert.equal(sentinelHealth(1, 0), Health.UNHEALTHY);
});

test("observation reads spec.replicas and status.availableReplicas, with API-server defaults", () => {
  assert.deepEqual(observeSentinel(deployment({ replicas: 3 }, { availableReplicas: 2, replicas: 3 })), {
    k8sName: "snt-a",
    availableReplicas: 2,
    health: Health.HEALTHY,
  });
  // A fresh Deployment has no status counters yet.
  assert.deepEqual(observeSentinel(deployment({ replicas: 3 }, undefined)), {
    k8sName: "snt-a",
    availableReplicas: 0,
    health: Health.UNHEALTHY,
  });
  assert.deepEqual(observeSentinel(deployment({ replicas: 0 }, {})), {
    k8sName: "snt-a",
    availableReplicas: 0,
    health: Health.PAUSED,
  });
  // spec.replicas omitted means 1, not 0.
  assert.equal(observeSentinel(deployment({}, {})).health, Health.UNHEALTHY);
});

test("fingerprints change exactly when the reported fields change", () => {
  const a = observeSentinel(deployment({ replicas: 3 }, { availableReplicas: 2 }));
  const b = observeSentinel(deployment({ replicas: 3 }, { availableReplicas: 2, updatedReplicas: 3 }));
  const c = observeSentinel(deployment({ replicas: 3 }, { availableReplicas: 3 }));
  const d = observeSentinel(deployment({ replicas: 0 }, { availableReplicas: 2 }));
  assert.equal(observationFingerprint(a), observationFingerprint(b));
  assert.notEqual(observationFingerprint(a), observationFingerprint(c));
  assert.notEqual(observationFingerprint(a), observationFingerprint(d));
});

// The desired-state store keeps a compact copy of each desired state: equal to what arrived, in
// every field, and rendered from that copy; objects whose prototype carries values are kept as
// they are.
import { test } from "node:test";
import assert from "node:assert/strict";
import { create, equals, fromBinary, toBinary } from "@bufbuild/protobuf";
import { ApplyDeploymentSchema, type ApplyDeployment } from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { compact, DesiredStore } from "../../../../src/agent/runtime/desired.js";
import type { KubeObject } from "../../../../src/kube/object.js";

function decoded(): ApplyDeployment {
  const sent = create(ApplyDeploymentSchema, {
    deploymentId: "dep_1",
    k8sNamespace: "ws",
    k8sName: "web-1",
    image: "ghcr.io/acme/web:1",
    port: 8080,
    env: [{ name: "GREETING", value: "hello" }],
    replicas: 2,
    cpuMillicores: 100n,
    memoryMib: 64n,
    healthCheck: { path: "/healthz", intervalSeconds: 10 },
    revision: 3n,
  });
  // As the stream hands it over: decoded from the wire.
  return fromBinary(ApplyDeploymentSchema, toBinary(ApplyDeploymentSchema, sent));
}

test("an apply keeps a copy equal to the decoded message, and renders from it", () => {
  const msg = decoded();
  const seen: ApplyDeployment[] = [];
  const store = new DesiredStore<ApplyDeployment, never>((d) => {
    seen.push(d);
    return [{ metadata: { name: d.k8sName } } as KubeObject];
  });
  const e = store.apply("dep_1", msg);
  assert.equal(e.type, "apply");
  if (e.type !== "apply") return;
  assert.notEqual(e.desired, msg, "a copy is kept, not the decoded object");
  assert.ok(equals(ApplyDeploymentSchema, e.desired, msg));
  assert.equal(e.desired.$typeName, "krane.ctrl.v1.ApplyDeployment");
  assert.deepEqual(Object.keys(e.desired), Object.keys(msg));
  assert.equal(e.desired.healthCheck, msg.healthCheck, "nested messages are shared, not copied");
  assert.deepEqual(seen, [e.desired]);
  assert.equal(store.desiredOf("dep_1"), e.desired);
});

test("an object whose prototype holds values, an array or a primitive is kept as it is", () => {
  const withDefaults = Object.create({ minReadySeconds: 5 }) as { $typeName: string };
  withDefaults.$typeName = "x";
  assert.equal(compact(withDefaults), withDefaults);
  const list = [1, 2];
  assert.equal(compact(list), list);
  assert.equal(compact("s"), "s");
  assert.equal(compact(null), null);
});

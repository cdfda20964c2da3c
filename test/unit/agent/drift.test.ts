import { test } from "node:test";
import assert from "node:assert/strict";
import { findDrift, parseQuantity } from "../../../src/agent/runtime/drift.js";

test("extra live fields (defaults, status) are not drift", () => {
  const rendered = { spec: { replicas: 2, template: { spec: { containers: [{ name: "a", image: "x" }] } } } };
  const live = {
    status: { replicas: 2 },
    spec: { replicas: 2, template: { spec: { dnsPolicy: "ClusterFirst", containers: [{ name: "a", image: "x", terminationMessagePath: "/dev/x" }] } } },
  };
  assert.equal(findDrift(rendered, live), undefined);
});

test("a changed owned field, a missing one or a different list length is drift", () => {
  assert.equal(findDrift({ spec: { replicas: 2 } }, { spec: { replicas: 5 } }), ".spec.replicas");
  assert.equal(findDrift({ metadata: { labels: { a: "1" } } }, { metadata: {} }), ".metadata.labels");
  assert.equal(findDrift({ l: [1, 2] }, { l: [1] }), ".l");
  assert.equal(findDrift({ l: [{ n: "a" }] }, { l: [{ n: "b" }] }), ".l[0].n");
});

test("quantities compare by value", () => {
  assert.equal(findDrift({ memory: "1024Mi", cpu: "1000m" }, { memory: "1Gi", cpu: "1" }), undefined);
  assert.equal(findDrift({ cpu: "500m" }, { cpu: "0.5" }), undefined);
  assert.notEqual(findDrift({ cpu: "500m" }, { cpu: "1" }), undefined);
  assert.equal(parseQuantity("128Mi"), 128 * 2 ** 20 * 1000);
  assert.equal(parseQuantity("abc"), undefined);
});

// Recreate: old revisions to 0, wait for their pods to be gone, then the new one at full size.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { RECREATE, condition, deployment, input, messages, plan, rev, sizes } from "./helpers.js";

const dep = (over = {}) => deployment("v2", { replicas: 3, strategy: RECREATE, ...over });
const A = { desired: 3, max: 3 };

describe("Recreate", () => {
  it("first scales every active old revision to 0, oldest first", () => {
    const out = plan(input(dep(), [rev("v0", 1, 1, A), rev("v1", 2, 3, A), rev("v2", 3, 0)]));
    assert.deepEqual(sizes(out), { v0: 0, v1: 0, v2: 0 });
    assert.deepEqual(messages(out), [
      "Scaled down replica set v0 from 1 to 0",
      "Scaled down replica set v1 from 3 to 0",
    ]);
  });

  it("waits while old pods still exist", () => {
    const out = plan(input(dep(), [rev("v1", 1, 0, { ...A, status: [2, 0, 0] }), rev("v2", 2, 0)]));
    assert.deepEqual(sizes(out), { v1: 0, v2: 0 });
    assert.deepEqual(out.events, []);
  });

  it("waits while old pods are still terminating, as Kubernetes does by looking at the pods", () => {
    const terminating = rev("v1", 1, 0, A);
    (terminating["status"] as Record<string, number>)["terminatingReplicas"] = 1;
    const out = plan(input(dep(), [terminating, rev("v2", null, 0)]));
    assert.deepEqual(out.revisions[1], { name: "v2", revision: null, replicas: 0 });
    assert.deepEqual(out.events, []);
    // The new revision's own terminating pods do not hold it back.
    const own = rev("v2", 2, 0);
    (own["status"] as Record<string, number>)["terminatingReplicas"] = 2;
    assert.deepEqual(sizes(plan(input(dep(), [rev("v1", 1, 0, A), own]))), { v1: 0, v2: 3 });
  });

  it("scales the new revision to the full count once old pods are gone", () => {
    const out = plan(input(dep(), [rev("v1", 1, 0, A), rev("v2", 2, 0)]));
    assert.deepEqual(sizes(out), { v1: 0, v2: 3 });
    assert.deepEqual(messages(out), ["Scaled up replica set v2 from 0 to 3"]);
  });

  it("does not create the new revision's replica set before old pods are gone", () => {
    const out = plan(input(dep(), [rev("v1", 1, 0, { ...A, status: [1, 0, 0] }), rev("v2", null, 0)]));
    assert.deepEqual(out.revisions[1], { name: "v2", revision: null, replicas: 0 });
  });

  it("creates it directly at full size afterwards (NewReplicaSetCreated)", () => {
    const out = plan(input(dep(), [rev("v1", 1, 0, A), rev("v2", null, 0)]));
    assert.deepEqual(out.revisions[1], { name: "v2", revision: 2, replicas: 3, desiredReplicas: 3, maxReplicas: 3 });
    assert.deepEqual(messages(out), ["Scaled up replica set v2 from 0 to 3"]);
    assert.equal(condition(out, "Progressing")?.reason, "NewReplicaSetCreated");
    assert.equal(condition(out, "Progressing")?.message, 'Created new replica set "v2"');
  });

  it("reports Available only when every replica is available (maxUnavailable is 0)", () => {
    const partly = plan(input(dep(), [rev("v1", 1, 0, A), rev("v2", 2, 3, { ...A, status: [3, 2, 2] })]));
    assert.equal(condition(partly, "Available")?.status, "False");
    assert.equal(condition(partly, "Available")?.reason, "MinimumReplicasUnavailable");
    const all = plan(input(dep(), [rev("v1", 1, 0, A), rev("v2", 2, 3, A)]));
    assert.equal(condition(all, "Available")?.status, "True");
  });
});

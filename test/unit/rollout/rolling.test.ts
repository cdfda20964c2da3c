// RollingUpdate: new-revision sizing and old-revision scale-down (unhealthy pods first).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { deployment, input, messages, plan, rev, rolling, sizes } from "./helpers.js";

const A = { desired: 10, max: 13 }; // annotations written at a scale with 10 replicas, surge 3

describe("new revision size", () => {
  it("grows the new revision by the surge (25% of 10 rounds up to 3)", () => {
    const out = plan(input(deployment("v2"), [rev("v1", 1, 10, A), rev("v2", 2, 0)]));
    assert.deepEqual(sizes(out), { v1: 10, v2: 3 });
    assert.deepEqual(messages(out), ["Scaled up replica set v2 from 0 to 3"]);
    // The scale writes the replica annotations of the current spec.
    assert.deepEqual(out.revisions[1], { name: "v2", revision: 2, replicas: 3, desiredReplicas: 10, maxReplicas: 13 });
  });

  it("keeps the new revision when the total is already at replicas + maxSurge", () => {
    const out = plan(input(deployment("v2"), [rev("v1", 1, 10, A), rev("v2", 2, 3, { ...A, status: [3, 0, 0] })]));
    assert.deepEqual(sizes(out), { v1: 10, v2: 3 });
    assert.deepEqual(out.events, []);
  });

  it("never grows the new revision beyond replicas", () => {
    // surge 4 (100% of 4): room for 4 more, but v2 only needs 2 → 4.
    const dep = deployment("v2", { replicas: 4, strategy: rolling("100%", 0) });
    const out = plan(input(dep, [rev("v1", 1, 4, { desired: 4, max: 8 }), rev("v2", 2, 2, { desired: 4, max: 8 })]));
    assert.deepEqual(sizes(out), { v1: 4, v2: 4 });
  });

  it("uses only the room left under the cap", () => {
    // 4 replicas, surge 1: cap 5, total 2 + 1 = 3 → room 2, need 3 → v2 1 + 2 = 3.
    const dep = deployment("v2", { replicas: 4, strategy: rolling(1, 0) });
    const out = plan(input(dep, [rev("v1", 1, 2, { desired: 4, max: 5 }), rev("v2", 2, 1, { desired: 4, max: 5 })]));
    assert.deepEqual(sizes(out), { v1: 2, v2: 3 });
  });

  it("scales a new revision that is larger than replicas down to replicas", () => {
    const dep = deployment("v2", { replicas: 5 });
    const out = plan(input(dep, [rev("v1", 1, 0), rev("v2", 2, 7, { desired: 5, max: 7 })]));
    assert.deepEqual(sizes(out), { v1: 0, v2: 5 });
    assert.deepEqual(messages(out), ["Scaled down replica set v2 from 7 to 5"]);
  });

  it("with maxSurge 0 and maxUnavailable 0, removes one old pod first (unavailable becomes 1)", () => {
    const dep = deployment("v2", { strategy: rolling(0, 0) });
    const out = plan(input(dep, [rev("v1", 1, 10, { desired: 10, max: 10 }), rev("v2", 2, 0)]));
    // New revision cannot grow (cap 10 reached); 10 available − 9 minimum = 1 old pod may go.
    assert.deepEqual(sizes(out), { v1: 9, v2: 0 });
    assert.deepEqual(messages(out), ["Scaled down replica set v1 from 10 to 9"]);
  });
});

describe("old revision scale-down", () => {
  it("removes old pods once new ones are available, keeping replicas − maxUnavailable", () => {
    const out = plan(input(deployment("v2"), [rev("v1", 1, 10, A), rev("v2", 2, 3, A)]));
    // 13 available − 10 minimum = 3.
    assert.deepEqual(sizes(out), { v1: 7, v2: 3 });
    assert.deepEqual(messages(out), ["Scaled down replica set v1 from 10 to 7"]);
  });

  it("removes only as many old pods as new ones became available", () => {
    const out = plan(input(deployment("v2"), [rev("v1", 1, 10, A), rev("v2", 2, 3, { ...A, status: [3, 1, 1] })]));
    // Budget 13 − 10 − (3 − 1 unavailable) = 1; 11 available − 10 minimum = 1 → v1 9.
    assert.deepEqual(sizes(out), { v1: 9, v2: 3 });
  });

  it("scales oldest revisions down first", () => {
    const dep = deployment("v3", { strategy: rolling(3, 2) });
    const revs = [rev("v1", 1, 4, A), rev("v2", 2, 4, A), rev("v3", 3, 5, A)];
    // 13 total, min 8, v3 fully available → budget 13 − 8 = 5: v1 4 → 0, v2 4 → 3.
    const out = plan(input(dep, revs));
    assert.deepEqual(sizes(out), { v1: 0, v2: 3, v3: 5 });
    assert.deepEqual(messages(out), [
      "Scaled down replica set v1 from 4 to 0",
      "Scaled down replica set v2 from 4 to 3",
    ]);
  });

  it("cleans up unhealthy old pods first, then available ones", () => {
    const dep = deployment("v2", { strategy: rolling(3, 2) });
    const out = plan(input(dep, [rev("v1", 1, 8, { ...A, status: [8, 6, 6] }), rev("v2", 2, 5, A)]));
    // maxScaledDown 13 − 8 − 0 = 5: 2 unhealthy go (8 → 6); then 6 + 5 available − 8 = 3 more (6 → 3).
    assert.deepEqual(sizes(out), { v1: 3, v2: 5 });
    assert.deepEqual(messages(out), [
      "Scaled down replica set v1 from 8 to 6",
      "Scaled down replica set v1 from 6 to 3",
    ]);
  });

  it("removes an older crashlooping revision when rolling over to a third", () => {
    const dep = deployment("v3", { strategy: rolling(3, 2) });
    const out = plan(input(dep, [rev("v1", 1, 8, A), rev("v2", 2, 5, { ...A, status: [5, 0, 0] }), rev("v3", 3, 0)]));
    // v3 cannot grow (13 = cap); budget 13 − 8 − 0 = 5 takes v2's 5 unavailable pods; 8 available = min.
    assert.deepEqual(sizes(out), { v1: 8, v2: 0, v3: 0 });
    assert.deepEqual(messages(out), ["Scaled down replica set v2 from 5 to 0"]);
  });

  it("follows Kubernetes' worked example: crashlooping v2, node failure, then undo to v1", () => {
    const dep = (target: string) => deployment(target, { strategy: rolling(3, 2) });
    // v2 crashloops at 5, v1 at 8 with one pod lost to a node failure: 13 − 8 − 5 = 0, nothing moves.
    const stuck = plan(
      input(dep("v2"), [rev("v1", 1, 8, { ...A, status: [8, 7, 7] }), rev("v2", 2, 5, { ...A, status: [5, 0, 0] })]),
    );
    assert.deepEqual(sizes(stuck), { v1: 8, v2: 5 });
    assert.deepEqual(stuck.events, []);

    // After undo v1 is the new revision (numbered 3): 13 − 8 − 1 = 4 crashlooping pods go.
    const undone = plan(
      input(dep("v1"), [rev("v1", 1, 8, { ...A, status: [8, 7, 7] }), rev("v2", 2, 5, { ...A, status: [5, 0, 0] })]),
    );
    assert.deepEqual(sizes(undone), { v1: 8, v2: 1 });
    assert.equal(undone.revisions[0]?.revision, 3);
    assert.deepEqual(messages(undone), ["Scaled down replica set v2 from 5 to 1"]);

    // 9 pods in total: v1 may grow to 10.
    const next = plan(
      input(dep("v1"), [rev("v1", 3, 8, { ...A, status: [8, 7, 7] }), rev("v2", 2, 1, { ...A, status: [1, 0, 0] })]),
    );
    assert.deepEqual(sizes(next), { v1: 10, v2: 1 });
    assert.deepEqual(messages(next), ["Scaled up replica set v1 from 8 to 10"]);
  });

  it("gives up for the pass when an old revision reports more available pods than its size", () => {
    // Kubernetes' cleanup errors on v2 (5 wanted, 7 available) after trimming v1, and the error is
    // swallowed: no further scale-down this pass.
    const dep = deployment("v3", { strategy: rolling(3, 0) });
    const revs = [
      rev("v1", 1, 2, { ...A, status: [2, 0, 0] }),
      rev("v2", 2, 5, { ...A, status: [7, 7, 7] }),
      rev("v3", 3, 6, A),
    ];
    const out = plan(input(dep, revs));
    assert.deepEqual(sizes(out), { v1: 0, v2: 5, v3: 6 });
    assert.deepEqual(messages(out), ["Scaled down replica set v1 from 2 to 0"]);
  });
});

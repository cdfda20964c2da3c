// Scaling events: proportional scaling with leftovers and tie-breaks, one active revision,
// saturation, and Recreate's refusal to scale several active revisions.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Deployment, ReplicaSet } from "../../../src/rollout/model.js";
import { replicaSetFraction } from "../../../src/rollout/proportional.js";
import { RECREATE, deployment, input, messages, plan, rev, rolling, sizes } from "./helpers.js";

describe("proportional scaling", () => {
  it("spreads new replicas by share: 10 → 15 with v1 8 and v2 5 gives 3 and 2", () => {
    const dep = deployment("v2", { replicas: 15, strategy: rolling(3, 2), status: { replicas: 13 } });
    const out = plan(
      input(dep, [rev("v1", 1, 8, { desired: 10, max: 13 }), rev("v2", 2, 5, { desired: 10, max: 13 })]),
    );
    // allowed 18, toAdd 5; v1 round(8·18/13)=11 → +3; v2 round(5·18/13)=7 → +2.
    assert.deepEqual(sizes(out), { v1: 11, v2: 7 });
    assert.deepEqual(messages(out), ["Scaled up replica set v1 from 8 to 11", "Scaled up replica set v2 from 5 to 7"]);
    for (const r of out.revisions) assert.deepEqual([r.desiredReplicas, r.maxReplicas], [15, 18]);
  });

  it("names each revision's own direction in its event, even against the overall direction", () => {
    // toAdd +2, but v1's stale max-replicas (20) gives it round(6·10/20) − 6 = −3; v2 gets
    // round(2·10/4) − 2 = +3; the leftover +2 goes back to v1. v1 shrinks while the total grows.
    const dep = deployment("v2", { replicas: 10, strategy: rolling(0, 1) });
    const out = plan(input(dep, [rev("v1", 1, 6, { desired: 8, max: 20 }), rev("v2", 2, 2, { desired: 8, max: 4 })]));
    assert.deepEqual(sizes(out), { v1: 5, v2: 5 });
    assert.deepEqual(messages(out), ["Scaled down replica set v1 from 6 to 5", "Scaled up replica set v2 from 2 to 5"]);
  });

  it("computes shares exactly where Kubernetes' int32 product would wrap (40,000 × 62,500)", () => {
    const dep = deployment("v2", { replicas: 50_000, strategy: rolling("25%", 0), status: { replicas: 50_000 } });
    const a = { desired: 40_000, max: 50_000 };
    const out = plan(input(dep, [rev("v1", 1, 40_000, a), rev("v2", 2, 10_000, a)]));
    assert.deepEqual(sizes(out), { v1: 50_000, v2: 12_500 });
  });

  it("rounds a share exactly even when size × max passes 2^53 (where a float product loses digits)", () => {
    const d = {
      name: "d",
      replicas: 2144607460,
      strategyType: "RollingUpdate",
      maxSurge: 0,
      maxUnavailable: 1,
    } as unknown as Deployment;
    const rs = { replicas: 2147483092, maxReplicas: 287176 } as unknown as ReplicaSet;
    // 2147483092 × 2144607460 / 287176 = 16037232426550.4998 exactly; a float64 product rounds to …551.
    assert.equal(replicaSetFraction(rs, d, 0), 16037232426550 - 2147483092);
  });

  it("never gives a size outside 0 … 2^31−1, even from a tiny stale max-replicas annotation", () => {
    // Scaling down overall, but v2's max-replicas of 1 makes its share 1000 × (2^31−1): kept at the int32 limit.
    const max = 2147483647;
    const dep = deployment("v2", { replicas: max, strategy: rolling(0, 1), status: { replicas: 5 } });
    const out = plan(
      input(dep, [rev("v1", 1, max, { desired: 1, max: max }), rev("v2", 2, 1000, { desired: 1, max: 1 })]),
    );
    for (const r of out.revisions) assert.ok(r.replicas >= 0 && r.replicas <= max, `${r.name}: ${r.replicas}`);
  });

  it("gives the rounding leftover to the largest revision", () => {
    const dep = deployment("v3", { replicas: 11, strategy: rolling(0, 1) });
    const a = { desired: 10, max: 10 };
    const out = plan(input(dep, [rev("v1", 1, 4, a), rev("v2", 2, 3, a), rev("v3", 3, 3, a)]));
    // toAdd 1; every share rounds to +0 (4.4, 3.3, 3.3) → the 1 goes to v1.
    assert.deepEqual(sizes(out), { v1: 5, v2: 3, v3: 3 });
    assert.deepEqual(messages(out), ["Scaled up replica set v1 from 4 to 5"]);
    // Unchanged sizes still get the new annotations.
    assert.deepEqual(
      out.revisions.map((r) => r.desiredReplicas),
      [11, 11, 11],
    );
  });

  it("on equal sizes scales the newer revision up first (and rounds halves away from zero)", () => {
    const dep = deployment("v2", { replicas: 11, strategy: rolling(0, 1) });
    const a = { desired: 10, max: 10 };
    const out = plan(input(dep, [rev("v1", 1, 5, a), rev("v2", 2, 5, a)]));
    // toAdd 1; v2 first: round(5.5) = 6 → +1, nothing left for v1.
    assert.deepEqual(sizes(out), { v1: 5, v2: 6 });
    assert.deepEqual(messages(out), ["Scaled up replica set v2 from 5 to 6"]);
  });

  it("on equal sizes scales the older revision down first", () => {
    const dep = deployment("v2", { replicas: 9, strategy: rolling(0, 1) });
    const a = { desired: 10, max: 10 };
    const out = plan(input(dep, [rev("v1", 1, 5, a), rev("v2", 2, 5, a)]));
    // toAdd −1; round(4.5) = 5 → 0 for both; leftover −1 to the first (older) one.
    assert.deepEqual(sizes(out), { v1: 4, v2: 5 });
    assert.deepEqual(messages(out), ["Scaled down replica set v1 from 5 to 4"]);
  });

  it("breaks ties on equal creation time by name", () => {
    const dep = deployment("b", { replicas: 11, strategy: rolling(0, 1) });
    const t = "2025-12-01T00:00:00Z";
    const a = { desired: 10, max: 10, createdAt: t };
    const out = plan(input(dep, [rev("b", 2, 5, a), rev("a", 1, 5, a)]));
    // Same timestamp: "b" sorts after "a", so it counts as newer and is scaled up first.
    assert.deepEqual(sizes(out), { b: 6, a: 5 });
  });

  it("scales every active revision to 0 when replicas becomes 0", () => {
    const dep = deployment("v2", { replicas: 0, strategy: rolling(3, 2) });
    const a = { desired: 10, max: 13 };
    const out = plan(input(dep, [rev("v1", 1, 8, a), rev("v2", 2, 5, a)]));
    assert.deepEqual(sizes(out), { v1: 0, v2: 0 });
    assert.deepEqual(messages(out), [
      "Scaled down replica set v1 from 8 to 0",
      "Scaled down replica set v2 from 5 to 0",
    ]);
    // max-replicas = 0 + maxSurge 3.
    assert.deepEqual(
      out.revisions.map((r) => [r.desiredReplicas, r.maxReplicas]),
      [
        [0, 3],
        [0, 3],
      ],
    );
  });

  it("falls back to the deployment's status.replicas when max-replicas is unknown", () => {
    const dep = deployment("v2", { replicas: 20, strategy: rolling(2, 0), status: { replicas: 11 } });
    const out = plan(input(dep, [rev("v1", 1, 7, { desired: 10 }), rev("v2", 2, 5, { desired: 10, max: 12 })]));
    // toAdd 22 − 12 = 10; v1 round(7·22/11) = 14 → +7; v2 round(5·22/12) = 9 → +4, capped at 3.
    assert.deepEqual(sizes(out), { v1: 14, v2: 8 });
  });

  it("treats an unknown share as 0 when status.replicas is 0 too, the leftover still going to the largest", () => {
    const dep = deployment("v2", { replicas: 20, strategy: rolling(2, 0), status: { replicas: 0 } });
    const out = plan(input(dep, [rev("v1", 1, 7, { desired: 10 }), rev("v2", 2, 5, { desired: 10, max: 12 })]));
    // v1 +0; v2 +4; leftover 6 → v1.
    assert.deepEqual(sizes(out), { v1: 13, v2: 9 });
  });
});

describe("scaling events with at most one active revision", () => {
  it("gives the only active revision the whole count, even an old one", () => {
    const dep = deployment("v2", { replicas: 12 });
    const out = plan(input(dep, [rev("v1", 1, 10, { desired: 10, max: 13 }), rev("v2", 2, 0)]));
    assert.deepEqual(sizes(out), { v1: 12, v2: 0 });
    assert.deepEqual(messages(out), ["Scaled up replica set v1 from 10 to 12"]);
  });
});

describe("a stale desired-replicas annotation", () => {
  it("is rewritten when the only active revision already has the right size (Kubernetes leaves it: the event never settles)", () => {
    const out = plan(input(deployment("v1"), [rev("v1", 1, 10, { desired: 7, max: 9 })]));
    assert.deepEqual(out.events, [], "no size changed: no event");
    assert.deepEqual(out.revisions[0], { name: "v1", revision: 1, replicas: 10, desiredReplicas: 10, maxReplicas: 13 });
  });

  it("mid-rollout, a scale to exactly the old revision's size lets the rolling update go on", () => {
    // maxSurge 0: the new revision was created at 0 while the old one ran 5 → 3; the count then
    // became 3 (an autoscaler's decision). Kubernetes sees the same scaling event at every pass.
    const dep = deployment("v2", {
      replicas: 3,
      strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: 0, maxUnavailable: "50%" } },
    });
    const first = plan(input(dep, [rev("v1", 1, 3, { desired: 5, max: 5 }), rev("v2", 2, 0, { desired: 5, max: 5 })]));
    assert.deepEqual(sizes(first), { v1: 3, v2: 0 });
    assert.equal(first.revisions.find((r) => r.name === "v1")?.desiredReplicas, 3);
    const next = plan(input(dep, [rev("v1", 1, 3, { desired: 3, max: 3 }), rev("v2", 2, 0, { desired: 5, max: 5 })]));
    assert.notDeepEqual(sizes(next), { v1: 3, v2: 0 }, "the rolling update moves");
  });
});

describe("saturation", () => {
  it("scales old revisions to 0 once the new one runs every replica available", () => {
    const dep = deployment("v2");
    const out = plan(
      input(dep, [rev("v1", 1, 2, { desired: 12, max: 15 }), rev("v2", 2, 10, { desired: 10, max: 13 })]),
    );
    assert.deepEqual(sizes(out), { v1: 0, v2: 10 });
    assert.deepEqual(messages(out), ["Scaled down replica set v1 from 2 to 0"]);
  });

  it("is not saturated while the new revision's pods are not all available", () => {
    const dep = deployment("v2", { status: { replicas: 12 } });
    const revs = [
      rev("v1", 1, 2, { desired: 12, max: 15 }),
      rev("v2", 2, 10, { desired: 10, max: 13, status: [10, 9, 9] }),
    ];
    const out = plan(input(dep, revs));
    // Proportional instead: allowed 13, total 12 → toAdd 1; v2 round(10·13/13) = +0; v1 round(2·13/15) = 2 → +0; leftover → v2 (largest).
    assert.deepEqual(sizes(out), { v1: 2, v2: 11 });
  });
});

describe("Recreate scaling events", () => {
  it("does not scale several active revisions proportionally", () => {
    const dep = deployment("v2", { replicas: 15, strategy: RECREATE });
    const a = { desired: 10, max: 10 };
    const out = plan(input(dep, [rev("v1", 1, 8, a), rev("v2", 2, 5, a)]));
    assert.deepEqual(sizes(out), { v1: 8, v2: 5 });
    assert.deepEqual(out.events, []);
  });
});

// maxSurge rounds up, maxUnavailable rounds down, both 0 → maxUnavailable 1; clamped to replicas.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { maxSurge, maxUnavailable, resolveFenceposts } from "../../../src/rollout/fenceposts.js";
import type { Deployment } from "../../../src/rollout/model.js";
import type { IntOrPercent } from "../../../src/rollout/types.js";

function dep(
  replicas: number,
  surge: IntOrPercent,
  unavailable: IntOrPercent,
  type: Deployment["strategyType"] = "RollingUpdate",
): Deployment {
  return {
    name: "d",
    replicas,
    strategyType: type,
    maxSurge: surge,
    maxUnavailable: unavailable,
    progressDeadlineSeconds: 600,
    revisionHistoryLimit: 10,
    paused: false,
    rollbackTo: null,
    target: "v1",
  };
}

describe("resolveFenceposts", () => {
  const table: [
    desired: number,
    surge: IntOrPercent,
    unavailable: IntOrPercent,
    expSurge: number,
    expUnavailable: number,
  ][] = [
    [10, "39%", "39%", 4, 3], // 3.9 up, 3.9 down
    [3, "25%", "25%", 1, 0], // 0.75 up → 1, 0.75 down → 0
    [10, "25%", "25%", 3, 2], // 2.5 → 3 and 2
    [10, "20%", "20%", 2, 2], // exact
    [7, "29%", "29%", 3, 2], // 2.03
    [30, "10%", "10%", 3, 3], // 3.0 exactly in floating point
    [10, 0, 0, 0, 1], // both 0 → 1 unavailable
    [10, "0%", "0%", 0, 1],
    [3, "0%", "25%", 0, 1], // unavailable rounds down to 0, surge 0 → 1
    [1, "0%", "50%", 0, 1],
    [0, "25%", "25%", 0, 1], // nothing to scale, still the 0/0 rule
    [10, 5, 1, 5, 1], // integers taken as is
    [4, "100%", "100%", 4, 4],
  ];
  for (const [desired, s, u, es, eu] of table) {
    it(`${desired} replicas, maxSurge ${s}, maxUnavailable ${u} → surge ${es}, unavailable ${eu}`, () => {
      assert.deepEqual(resolveFenceposts(s, u, desired), { surge: es, unavailable: eu });
    });
  }
});

describe("maxUnavailable / maxSurge of a deployment", () => {
  it("clamps maxUnavailable to the replica count", () => {
    assert.equal(maxUnavailable(dep(2, 0, 5)), 2);
  });
  it("is 0 unavailable for a deployment scaled to 0", () => {
    assert.equal(maxUnavailable(dep(0, 0, 0)), 0);
  });
  it("is 0/0 for Recreate whatever the parameters say", () => {
    assert.equal(maxUnavailable(dep(10, 3, 3, "Recreate")), 0);
    assert.equal(maxSurge(dep(10, 3, 3, "Recreate")), 0);
  });
  it("uses the resolved surge for a rolling update", () => {
    assert.equal(maxSurge(dep(10, "25%", 0)), 3);
    assert.equal(maxUnavailable(dep(10, "25%", 0)), 0);
  });
});

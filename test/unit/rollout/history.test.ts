// Revision-history cleanup after a completed rollout: keep revisionHistoryLimit old revisions,
// delete the lowest-numbered ones that are fully scaled down, never the target.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { at, deployment, input, plan, rev } from "./helpers.js";

const A = { desired: 10, max: 13 };
const complete = { replicas: 10, updatedReplicas: 10, readyReplicas: 10, availableReplicas: 10 };
const olds = [rev("v1", 1, 0), rev("v2", 2, 0), rev("v3", 3, 0), rev("v4", 4, 0)];

function run(over: Record<string, unknown>, revs = [...olds, rev("v5", 5, 10, A)]) {
  return plan(input(deployment("v5", { status: complete, ...over }), revs));
}

describe("revision history cleanup", () => {
  it("deletes the oldest revisions beyond the limit", () => {
    assert.deepEqual(run({ revisionHistoryLimit: 2 }).delete, ["v1", "v2"]);
  });

  it("keeps everything within the limit", () => {
    assert.deepEqual(run({ revisionHistoryLimit: 4 }).delete, []);
  });

  it("never cleans up with a null limit", () => {
    assert.deepEqual(run({ revisionHistoryLimit: null }).delete, []);
  });

  it("limit 0 deletes every fully scaled-down old revision but never the target", () => {
    const out = run({ revisionHistoryLimit: 0 });
    assert.deepEqual(out.delete, ["v1", "v2", "v3", "v4"]);
    // Every input revision is still listed.
    assert.equal(out.revisions.length, 5);
  });

  it("skips a revision that still has pods, and the skip uses up its slot", () => {
    const revs = [
      rev("v1", 1, 0, { status: [1, 0, 0] }),
      rev("v2", 2, 0),
      rev("v3", 3, 0),
      rev("v4", 4, 0),
      rev("v5", 5, 10, A),
    ];
    assert.deepEqual(run({ revisionHistoryLimit: 2 }, revs).delete, ["v2"]);
  });

  it("skips a revision that is still meant to have replicas", () => {
    // v1 wants 1 pod that does not exist yet; v5 has one unavailable pod, so no scale-down happens
    // this pass (11 − 10 − 1 = 0) and the pass reaches the cleanup.
    const revs = [
      rev("v1", 1, 1, { status: [0, 0, 0], ...A }),
      rev("v2", 2, 0),
      rev("v5", 5, 10, { ...A, status: [10, 9, 9] }),
    ];
    const out = run({ revisionHistoryLimit: 0 }, revs);
    assert.deepEqual(out.events, []);
    assert.deepEqual(out.delete, ["v2"]);
  });

  it("orders by revision number, not creation time", () => {
    const revs = [
      rev("a", 3, 0, { createdAt: at(-3000) }),
      rev("b", 1, 0, { createdAt: at(-2000) }),
      rev("c", 2, 0, { createdAt: at(-1000) }),
      rev("v5", 5, 10, A),
    ];
    assert.deepEqual(run({ revisionHistoryLimit: 1 }, revs).delete, ["b", "c"]);
  });

  it("waits for the rollout to be complete (judged on the stored status)", () => {
    assert.deepEqual(run({ revisionHistoryLimit: 0, status: { ...complete, updatedReplicas: 7 } }).delete, []);
  });
});

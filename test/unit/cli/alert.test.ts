// `krane alert add`'s flags: --above / --below (exactly one, a number), --window and --for (5m by
// default, 1m with a window: "restarts > 3 in 10m" fires on the minute the count passes 3), and
// how a rule's condition reads ("in 10m" only for a window longer than a minute).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { bound, conditionText, timing } from "../../../src/cli/alert.js";

describe("krane alert add", () => {
  it("takes one bound", () => {
    assert.deepEqual(bound({ above: "3" }), { op: ">", threshold: 3 });
    assert.deepEqual(bound({ below: "0.5" }), { op: "<", threshold: 0.5 });
    assert.throws(() => bound({}), /give one of --above and --below/);
    assert.throws(() => bound({ above: "1", below: "2" }), /give one of/);
    assert.throws(() => bound({ above: "-1" }), /--above: expected a number/);
  });

  it("defaults --for to 5m, or 1m with a window", () => {
    assert.deepEqual(timing({ window: "1m" }), { windowSeconds: 60, forSeconds: 300 });
    assert.deepEqual(timing({ window: "10m" }), { windowSeconds: 600, forSeconds: 60 });
    assert.deepEqual(timing({ window: "10m", for: "3m" }), { windowSeconds: 600, forSeconds: 180 });
    assert.throws(() => timing({ window: "ten" }), /expected a duration/);
  });

  it("reads a condition with its window", () => {
    assert.equal(
      conditionText({ metric: "restarts", op: ">", threshold: 3, windowSeconds: 600 }),
      "restarts > 3 in 10m",
    );
    assert.equal(conditionText({ metric: "error_rate", op: ">", threshold: 2, windowSeconds: 60 }), "error_rate > 2");
    assert.equal(conditionText({ metric: "error_rate", op: ">", threshold: 2, windowSeconds: 0 }), "error_rate > 2");
  });
});

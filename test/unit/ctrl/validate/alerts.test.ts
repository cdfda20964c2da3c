// AlertService's validation: a good rule goes through as asked (`for` in ms); an unknown metric,
// operator, a negative or non-finite bound, an error rate over 100 %, a `for` that is not whole
// minutes or out of 1..60 minutes, a window likewise, and a bad name are each refused naming the
// field; a window left out (0) is one minute.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { validateAddAlertRule } from "../../../../src/ctrl/validate/alerts.js";

const GOOD = {
  workspace: "acme",
  project: "shop",
  environment: "prod",
  name: "errors",
  metric: "error_rate",
  op: ">",
  threshold: 2,
  forSeconds: 300,
};

describe("alert rule validation", () => {
  it("takes a good rule", () => {
    assert.deepEqual(validateAddAlertRule(GOOD), {
      ref: { workspace: "acme", project: "shop", environment: "prod" },
      name: "errors",
      metric: "error_rate",
      op: ">",
      threshold: 2,
      forMs: 300_000,
      windowMs: 60_000,
    });
    const restarts = validateAddAlertRule({ ...GOOD, metric: "restarts", threshold: 3, windowSeconds: 600 });
    assert.equal(restarts.windowMs, 600_000);
    assert.equal(restarts.metric, "restarts");
  });

  it("refuses bad input naming the field", () => {
    const cases: [Partial<typeof GOOD & { windowSeconds: number }>, RegExp][] = [
      [{ metric: "cpu" }, /^metric: is not a known metric \(one of error_rate, p50_ms/],
      [{ op: ">=" }, /^op: /],
      [{ threshold: -1 }, /^threshold: /],
      [{ threshold: Number.NaN }, /^threshold: /],
      [{ threshold: 101 }, /^threshold: is a percentage/],
      [{ forSeconds: 90 }, /^for_seconds: must be whole minutes/],
      [{ forSeconds: 0 }, /^for_seconds: must be between 60 and 3600/],
      [{ forSeconds: 7200 }, /^for_seconds: /],
      [{ windowSeconds: 90 }, /^window_seconds: must be whole minutes/],
      [{ windowSeconds: -60 }, /^window_seconds: must be between 60 and 3600/],
      [{ windowSeconds: 7200 }, /^window_seconds: /],
      [{ name: "Bad Name" }, /^name: /],
      [{ environment: "" }, /^environment: /],
    ];
    for (const [over, message] of cases)
      assert.throws(
        () => validateAddAlertRule({ ...GOOD, ...over }),
        (e: Error & { code?: string }) => {
          assert.equal(e.code, "invalid_argument", e.message);
          assert.match(e.message, message);
          return true;
        },
      );
    // A latency bound may be past 100.
    assert.equal(validateAddAlertRule({ ...GOOD, metric: "p99_ms", threshold: 500 }).threshold, 500);
  });
});

// `krane metrics`' pure parts: the sparkline scales to the largest step, steps with nothing
// stored are zeros, the table's row shows the range's totals; and ctrl's shaping of stored points
// into series (rates over the step, or over what has passed of the newest one; totals from the
// merged histogram).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { metricsRows, sparkline, stepValues } from "../../../src/cli/metrics.js";
import { MetricsSeriesSchema } from "../../../src/gen/krane/ctrl/v1/live_pb.js";
import { MINUTE_MS, emptySums, type Point } from "../../../src/ctrl/history/sums.js";
import { historySeries } from "../../../src/ctrl/read/metric-history.js";

describe("krane metrics", () => {
  it("sparklines", () => {
    assert.equal(sparkline([0, 1, 2, 4, 8]), "▁▂▃▅█");
    assert.equal(sparkline([0, 0]), "▁▁");
    assert.equal(sparkline([]), "");
  });

  it("steps without points are zeros; only the last `width` steps", () => {
    const pts = [
      { atMs: 60_000, value: 3 },
      { atMs: 180_000, value: 5 },
    ];
    assert.deepEqual(stepValues(pts, 0, 240_000, 60_000), [0, 3, 0, 5]);
    assert.deepEqual(stepValues(pts, 0, 240_000, 60_000, 2), [0, 5]);
  });

  it("a row per series with the range's totals", () => {
    const s = create(MetricsSeriesSchema, {
      revision: 3n,
      region: "eu",
      instance: "",
      points: [{ atUnixMs: 0n, requestsPerSecond: 2 }],
      total: {
        requests: 120n,
        requestsPerSecond: 2,
        errorRatePercent: 5,
        p50Ms: 250,
        p95Ms: 1000,
        p99Ms: -1,
        restarts: 1n,
      },
    });
    assert.deepEqual(metricsRows([s], 0, 60_000, 60_000), [
      ["r3", "eu", "(all)", "120", "2.00", "█", "5.00%", "≤250ms", "≤1s", ">30s", "-", "-", "1"],
    ]);
  });
});

describe("history series", () => {
  const p = (atMs: number, requests: number, slot: number): Point => {
    const sums = emptySums();
    sums.requests = requests;
    sums.errors = requests / 10;
    sums.latency[slot] = requests;
    return { environmentId: "env_a", deploymentId: "dep_1", region: "eu", instance: "", atMs, sums };
  };

  it("rates per step, the newest over what has passed; totals from the merged histogram", () => {
    const [s] = historySeries([p(MINUTE_MS, 600, 7), p(0, 600, 3)], 0, MINUTE_MS + 30_000, MINUTE_MS);
    assert.ok(s);
    assert.deepEqual(
      s.points.map((x) => [x.atMs, x.requestsPerSecond]),
      [
        [0, 10],
        [MINUTE_MS, 20],
      ],
    );
    assert.equal(s.total.requests, 1200);
    assert.equal(s.total.errorRatePercent, 10);
    assert.equal(s.total.requestsPerSecond, 1200 / 90);
    // Half at ≤ 10 ms, half at ≤ 250 ms: p50 in the first, p95 in the second.
    assert.equal(s.total.p50Ms, 10);
    assert.equal(s.total.p95Ms, 250);
  });
});

// Charts' buckets: requests per bucket and per second, error rate, and the percentile's bucket
// bound, per revision; the bucket still filling divides by the time it covers.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { bucketMetrics, quantileMs } from "../../../../src/ctrl/read/metrics.js";

const row = (dep: string, to: number, ok: number, bad: number, latency: number[]) => ({
  deployment_id: dep,
  from_ms: to - 10_000,
  to_ms: to,
  r2xx: ok,
  r3xx: 0,
  r4xx: 0,
  r5xx: bad,
  latency: JSON.stringify(latency),
});

describe("bucketMetrics", () => {
  it("adds reports up per revision and bucket", () => {
    const m = bucketMetrics(
      [
        row("a", 10_000, 50, 0, [0, 0, 0, 50]),
        row("a", 20_000, 40, 10, [0, 0, 0, 0, 0, 0, 0, 50]),
        row("a", 70_000, 6, 0, [6]),
        row("b", 15_000, 1, 1, []),
      ],
      0,
      60_000,
    );
    const a = m.get("a") ?? [];
    assert.equal(a.length, 2);
    assert.equal(a[0]?.requests, 100);
    assert.equal(a[0]?.requestsPerSecond, 100 / 60);
    assert.equal(a[0]?.errorRatePercent, 10);
    assert.equal(a[0]?.p50Ms, 10);
    assert.equal(a[0]?.p99Ms, 250);
    // The newest bucket is still filling: 6 requests over the 10 s it covers so far.
    assert.equal(a[1]?.requestsPerSecond, 0.6);
    assert.equal(m.get("b")?.[0]?.p50Ms, null);
  });

  it("quantileMs: the bound of the bucket holding the rank, -1 past the last, null without timings", () => {
    assert.equal(quantileMs([], 0.5), null);
    assert.equal(quantileMs([1, 1], 0.5), 1);
    assert.equal(quantileMs([1, 1], 0.99), 2.5);
    assert.equal(quantileMs([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5], 0.5), -1);
  });
});

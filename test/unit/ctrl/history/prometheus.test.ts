// ctrl's /metrics view of the metrics history: one series per revision (regions added up, no
// instance or region label), the busiest `cap` only, the rest counted as omitted; a failing
// read leaves the gauges empty and the scrape still answers.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Registry } from "prom-client";
import { registerHistoryMetrics, revisionFigures } from "../../../../src/ctrl/history/prometheus.js";
import { MINUTE_MS, emptySums, type Point } from "../../../../src/ctrl/history/sums.js";

function p(dep: string, region: string, requests: number, errors = 0): Point {
  const sums = emptySums();
  sums.requests = requests;
  sums.errors = errors;
  sums.latency[6] = requests; // ≤ 100 ms
  return { environmentId: "env_a", deploymentId: dep, region, instance: "", atMs: 0, sums };
}

describe("history on /metrics", () => {
  it("adds regions up per revision and keeps the busiest", () => {
    const { kept, omitted } = revisionFigures([p("dep_1", "eu", 60, 6), p("dep_1", "us", 60), p("dep_2", "eu", 6)], 1);
    assert.equal(omitted, 1);
    assert.equal(kept.length, 1);
    assert.equal(kept[0]?.deploymentId, "dep_1");
    assert.equal(kept[0]?.requestsPerSecond, 2);
    assert.equal(kept[0]?.errorRatio, 0.05);
    assert.equal(kept[0]?.quantiles.get("0.99"), 0.1);
  });

  it("exposes the gauges with bounded labels; a failed read leaves them empty", async () => {
    const registry = new Registry();
    let fail = false;
    let asked = 0;
    registerHistoryMetrics(
      registry,
      async (at) => {
        asked = at;
        if (fail) throw new Error("database down");
        return [p("dep_1", "eu", 120)];
      },
      () => 10 * MINUTE_MS + 5_000,
    );
    const text = await registry.metrics();
    assert.equal(asked, 9 * MINUTE_MS, "the last complete minute");
    assert.match(text, /krane_revision_requests_per_second\{environment_id="env_a",deployment_id="dep_1"\} 2\n/);
    assert.match(
      text,
      /krane_revision_latency_seconds\{environment_id="env_a",deployment_id="dep_1",quantile="0.5"\} 0.1/,
    );
    assert.doesNotMatch(text, /region=|instance=/);
    fail = true;
    const r2 = new Registry();
    registerHistoryMetrics(
      r2,
      () => Promise.reject(new Error("down")),
      () => 0,
    );
    assert.doesNotMatch(await r2.metrics(), /deployment_id=/);
  });
});

// The sentinel's per-request figures: kept in RequestStats, exposed in Prometheus text format
// under the contract's names (src/contracts/routing.ts) when scraped.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SENTINEL_METRICS } from "../../../src/contracts/routing.js";
import { createSentinelMetrics, DURATION_BUCKETS, instanceKey, instanceKeys } from "../../../src/sentinel/metrics.js";

test("requests by revision and status class, and a cumulative latency histogram, appear at scrape time", async () => {
  let inFlight = 3;
  const m = createSentinelMetrics(() => [{ revision: "dep_a", routable: 2, ejected: 1 }], undefined, false);
  m.inFlightNow = () => inFlight;
  const samples: [string, string, number][] = [
    ["dep_a", "2xx", 0.0005],
    ["dep_a", "2xx", 0.003],
    ["dep_a", "5xx", 0.2],
    ["dep_b", "2xx", 40],
    ["none", "5xx", 0.0001],
  ];
  for (const [rev, code, s] of samples) m.stats.record(rev, code, s);
  const text = await m.registry.metrics();
  const line = (l: string): number => {
    const found = text.split("\n").find((x) => x.startsWith(`${l} `));
    assert.ok(found, `missing ${l} in\n${text}`);
    return Number(found.slice(l.length + 1));
  };
  const R = SENTINEL_METRICS.requests;
  const D = SENTINEL_METRICS.duration;
  assert.equal(line(`${R}{revision="dep_a",code="2xx"}`), 2);
  assert.equal(line(`${R}{revision="dep_a",code="5xx"}`), 1);
  assert.equal(line(`${R}{revision="none",code="5xx"}`), 1);
  assert.equal(line(`${D}_bucket{le="0.001",revision="dep_a"}`), 1);
  assert.equal(line(`${D}_bucket{le="0.005",revision="dep_a"}`), 2);
  assert.equal(line(`${D}_bucket{le="0.25",revision="dep_a"}`), 3);
  assert.equal(line(`${D}_bucket{le="30",revision="dep_b"}`), 0, "40 s is above every bucket");
  assert.equal(line(`${D}_bucket{le="+Inf",revision="dep_b"}`), 1);
  assert.equal(line(`${D}_count{revision="dep_a"}`), 3);
  assert.ok(Math.abs(line(`${D}_sum{revision="dep_a"}`) - 0.2035) < 1e-9);
  assert.equal(line("krane_sentinel_in_flight_requests"), 3);
  assert.equal(line('krane_sentinel_endpoints{revision="dep_a",state="ejected"}'), 1);
  // Buckets are cumulative and end at the count.
  for (const rev of ["dep_a", "dep_b", "none"]) {
    let prev = 0;
    for (const le of DURATION_BUCKETS) {
      const v = line(`${D}_bucket{le="${le}",revision="${rev}"}`);
      assert.ok(v >= prev);
      prev = v;
    }
    assert.equal(line(`${D}_bucket{le="+Inf",revision="${rev}"}`), line(`${D}_count{revision="${rev}"}`));
  }
  inFlight = 0;
  m.stats.record("dep_a", "2xx", 0.001);
  const again = await m.registry.metrics();
  assert.ok(
    again.includes(`${R}{revision="dep_a",code="2xx"} 3`),
    "a second scrape sees new requests and no double counting",
  );
  assert.ok(again.includes("krane_sentinel_in_flight_requests 0"));
  assert.equal(m.stats.count("dep_a", "2xx"), 3);
});

test("figures of revisions gone from the table for 10 minutes are dropped", () => {
  const m = createSentinelMetrics(() => [], undefined, false);
  m.stats.record("old", "2xx", 0.01);
  m.stats.record("new", "2xx", 0.01);
  m.stats.record("none", "5xx", 0.01);
  const keep = new Set(["new"]);
  m.stats.forgetExcept(keep, 0);
  m.stats.forgetExcept(keep, 599_999);
  assert.equal(m.stats.count("old", "2xx"), 1, "kept for a while (a scrape still sees its last values)");
  m.stats.forgetExcept(keep, 600_000);
  assert.equal(m.stats.count("old", "2xx"), 0);
  assert.equal(m.stats.count("new", "2xx"), 1);
  assert.equal(m.stats.count("none", "5xx"), 1, "the sentinel's own answers stay");
});

test("requests per instance are exposed apart from the revision's, and forgotten 10 minutes after the instance left", async () => {
  const m = createSentinelMetrics(() => [], undefined, false);
  m.instanceStats.record(instanceKey("dep_a", "web-1"), "2xx", 0.004);
  m.instanceStats.record(instanceKey("dep_a", "web-1"), "5xx", 0.3);
  m.instanceStats.record(instanceKey("dep_a", "web-2"), "2xx", 0.002);
  const text = await m.registry.metrics();
  const IR = SENTINEL_METRICS.instanceRequests;
  const ID = SENTINEL_METRICS.instanceDuration;
  assert.ok(text.includes(`${IR}{revision="dep_a",instance="web-1",code="2xx"} 1`), text);
  assert.ok(text.includes(`${IR}{revision="dep_a",instance="web-1",code="5xx"} 1`));
  assert.ok(text.includes(`${ID}_bucket{le="0.005",revision="dep_a",instance="web-1"} 1`));
  assert.ok(text.includes(`${ID}_bucket{le="+Inf",revision="dep_a",instance="web-2"} 1`));
  assert.ok(
    !text.includes(`${SENTINEL_METRICS.requests}{`),
    "the revisions' series hold only what was recorded for them",
  );
  const table = {
    revisions: [{ deploymentId: "dep_a", endpoints: [{ pod: "web-2" }], starting: [{ pod: undefined }] }],
  };
  assert.deepEqual([...instanceKeys(table)], [instanceKey("dep_a", "web-2")]);
  m.instanceStats.forgetExcept(instanceKeys(table), 0);
  m.instanceStats.forgetExcept(instanceKeys(table), 600_000);
  const after = await m.registry.metrics();
  assert.ok(!after.includes('instance="web-1"'), "web-1 left the table 10 minutes ago");
  assert.ok(after.includes('instance="web-2"'));
});

// The metrics history's pure core: histograms merge bucket by bucket (the merge of two minutes is
// the histogram of all their observations, in any order), a percentile read from a histogram lies
// in the bucket that holds the true one (the resolution of the sentinel's buckets), a rollup of
// minutes into hours keeps every sum, and the per-environment series bound admits what is there
// and no more than the cap.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { LATENCY_BUCKETS_MS } from "../../../../src/contracts/analysis.js";
import {
  HOUR_MS,
  MINUTE_MS,
  SLOTS,
  addInto,
  admitSeries,
  busiest,
  columnsToSums,
  emptySums,
  figures,
  mergeSums,
  rollup,
  sumsToColumns,
  type MetricSums,
  type Point,
} from "../../../../src/ctrl/history/sums.js";

/** The histogram of observations (ms), as the sentinel counts them (a value on a bound is in that bucket). */
function histogram(ms: readonly number[]): MetricSums {
  const s = emptySums();
  for (const v of ms) {
    let i = 0;
    while (i < LATENCY_BUCKETS_MS.length && v > (LATENCY_BUCKETS_MS[i] ?? Infinity)) i++;
    s.latency[i] = (s.latency[i] ?? 0) + 1;
    s.requests++;
  }
  return s;
}

/** The nearest-rank quantile of raw observations. */
function trueQuantile(ms: readonly number[], q: number): number {
  const sorted = [...ms].sort((a, b) => a - b);
  return sorted[Math.max(1, Math.ceil(sorted.length * q)) - 1] ?? NaN;
}

const latencies = fc.array(fc.double({ min: 0.01, max: 40_000, noNaN: true }), { minLength: 1, maxLength: 300 });

const sums = fc
  .record({
    requests: fc.nat(10_000),
    errors: fc.nat(10_000),
    latency: fc.array(fc.nat(1_000), { minLength: SLOTS, maxLength: SLOTS }),
    cpuMillicoresSum: fc.nat(100_000),
    memoryBytesSum: fc.nat(1_000_000_000),
    usageSamples: fc.nat(100),
    restarts: fc.nat(10),
  })
  .map((s): MetricSums => ({ ...s, latency: [...s.latency] }));

describe("metric sums", () => {
  it("merging histograms gives the histogram of all observations, in any order", () => {
    fc.assert(
      fc.property(latencies, latencies, (a, b) => {
        const merged = mergeSums([histogram(a), histogram(b)]);
        assert.deepEqual(merged.latency, histogram([...a, ...b]).latency);
        assert.deepEqual(mergeSums([histogram(b), histogram(a)]), merged);
      }),
    );
  });

  it("a percentile lies within the bucket that holds the true one", () => {
    fc.assert(
      fc.property(latencies, fc.constantFrom(0.5, 0.95, 0.99), (ms, q) => {
        const f = figures(histogram(ms), MINUTE_MS);
        const got = q === 0.5 ? f.p50Ms : q === 0.95 ? f.p95Ms : f.p99Ms;
        const truth = trueQuantile(ms, q);
        assert.ok(got !== null);
        const i = LATENCY_BUCKETS_MS.findIndex((b) => b === got);
        const upper = got;
        const lower =
          i <= 0
            ? got === Infinity
              ? LATENCY_BUCKETS_MS[LATENCY_BUCKETS_MS.length - 1]
              : 0
            : LATENCY_BUCKETS_MS[i - 1];
        assert.ok(truth > (lower ?? 0) && truth <= upper, `q ${q}: true ${truth} not in (${lower}, ${upper}]`);
      }),
    );
  });

  it("rates, error rate and means", () => {
    const s = emptySums();
    s.requests = 600;
    s.errors = 30;
    s.cpuMillicoresSum = 300;
    s.memoryBytesSum = 3_000;
    s.usageSamples = 3;
    const f = figures(s, MINUTE_MS);
    assert.equal(f.requestsPerSecond, 10);
    assert.equal(f.errorRatePercent, 5);
    assert.equal(f.cpuMillicores, 100);
    assert.equal(f.memoryBytes, 1_000);
    assert.equal(f.p50Ms, null);
    assert.equal(figures(emptySums(), MINUTE_MS).cpuMillicores, null);
  });

  it("columns round-trip, bigint strings included", () => {
    fc.assert(
      fc.property(sums, (s) => {
        const cols = sumsToColumns(s);
        assert.deepEqual(columnsToSums(cols), s);
        const asStrings = Object.fromEntries(Object.entries(cols).map(([k, v]) => [k, String(v)]));
        assert.deepEqual(columnsToSums(asStrings as unknown as typeof cols), s);
      }),
    );
  });

  it("a rollup of minutes into hours keeps every sum of every series", () => {
    const point = fc.record({
      environmentId: fc.constantFrom("env_a", "env_b"),
      deploymentId: fc.constantFrom("dep_1", "dep_2"),
      region: fc.constantFrom("eu", "us"),
      instance: fc.constant(""),
      atMs: fc
        .integer({ min: 0, max: 5 * 60 - 1 })
        .map((m) => 1_800_000_000_000 - (1_800_000_000_000 % HOUR_MS) + m * MINUTE_MS),
      sums,
    });
    fc.assert(
      fc.property(fc.array(point, { maxLength: 60 }), (minutes: Point[]) => {
        const hours = rollup(minutes, HOUR_MS);
        assert.deepEqual(mergeSums(hours.map((h) => h.sums)), mergeSums(minutes.map((m) => m.sums)));
        for (const h of hours) {
          assert.equal(h.atMs % HOUR_MS, 0);
          const mine = minutes.filter(
            (m) =>
              m.environmentId === h.environmentId &&
              m.deploymentId === h.deploymentId &&
              m.region === h.region &&
              m.atMs - (m.atMs % HOUR_MS) === h.atMs,
          );
          assert.deepEqual(h.sums, mergeSums(mine.map((m) => m.sums)));
        }
        // Rolling up again changes nothing.
        assert.deepEqual(rollup(hours, HOUR_MS), hours);
      }),
    );
  });

  it("the series bound admits the series already stored, and new ones up to the cap", () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.string({ maxLength: 3 }), { maxLength: 20 }),
        fc.array(fc.string({ maxLength: 3 }), { maxLength: 40 }),
        fc.integer({ min: 1, max: 16 }),
        (existing, incoming, cap) => {
          const have = new Set(existing);
          const admitted = admitSeries(have, incoming, cap);
          for (const id of incoming) if (have.has(id)) assert.ok(admitted.has(id));
          const fresh = [...admitted].filter((id) => !have.has(id));
          assert.ok(have.size + fresh.length <= Math.max(cap, have.size));
          for (const id of admitted) assert.ok(incoming.includes(id));
        },
      ),
    );
  });

  it("an hour keeps each environment's busiest series", () => {
    const p = (env: string, dep: string, requests: number): Point => {
      const sums = emptySums();
      sums.requests = requests;
      return { environmentId: env, deploymentId: dep, region: "eu", instance: "", atMs: 0, sums };
    };
    const kept = busiest([p("a", "1", 5), p("a", "2", 50), p("a", "3", 20), p("b", "1", 1)], 2);
    assert.deepEqual(kept.map((k) => `${k.environmentId}/${k.deploymentId}`).sort(), ["a/2", "a/3", "b/1"]);
  });

  it("addInto adds bucket by bucket", () => {
    const a = emptySums();
    a.latency[3] = 2;
    const b = emptySums();
    b.latency[3] = 5;
    b.latency[14] = 1;
    addInto(a, b);
    assert.equal(a.latency[3], 7);
    assert.equal(a.latency[14], 1);
  });
});

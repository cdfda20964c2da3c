// The pure core of measurement collection: the strict Prometheus text parser (on the real
// sentinel's exposition, produced by its prom-client registry), increments between readings,
// restarts (counters that go down, a new process start time), new and vanished pods, and the
// report built from a round. Property tests: increments are never negative, and the sum of a
// pod's increments over any sequence of readings without restarts is its last reading minus its
// first.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { Registry } from "prom-client";
import { LATENCY_BUCKETS_MS } from "../../../../src/contracts/analysis.js";
import { buildReport, MAX_MEASUREMENTS_PER_REPORT } from "../../../../src/agent/sentinels/collector.js";
import {
  IncrementTracker,
  instanceKey,
  parseExposition,
  parseSampleLine,
  parseSentinelMetrics,
  podIncrements,
  POD_CLOCK_SLACK_MS,
  readingFitsPod,
  SLOTS,
  type PodReading,
  type RevisionCounters,
} from "../../../../src/agent/sentinels/measure.js";
import { createSentinelMetrics, instanceKey as sentinelInstanceKey } from "../../../../src/sentinel/metrics.js";

async function sentinelText(
  record: (m: ReturnType<typeof createSentinelMetrics>) => void,
  defaults = false,
): Promise<string> {
  const m = createSentinelMetrics(() => [], new Registry(), defaults);
  record(m);
  return m.registry.metrics();
}

function reading(revs: Record<string, { c?: number[]; b?: number[]; other?: number }>, startedMs?: number): PodReading {
  const revisions = new Map<string, RevisionCounters>();
  for (const [k, v] of Object.entries(revs)) {
    const buckets = new Array<number>(SLOTS).fill(0);
    (v.b ?? []).forEach((x, i) => (buckets[i] = x));
    revisions.set(k, { classes: [...(v.c ?? [0, 0, 0, 0])], other: v.other ?? 0, buckets });
  }
  return { startedMs, revisions, instances: new Map() };
}

describe("parser", () => {
  it("reads the real sentinel's exposition: classes, non-cumulative buckets, start time", async () => {
    const text = await sentinelText((m) => {
      for (let i = 0; i < 7; i++) m.stats.record("dep_a", "2xx", 0.003);
      m.stats.record("dep_a", "5xx", 0.2);
      m.stats.record("dep_a", "aborted", 40);
      m.stats.record("dep_b", "4xx", 0.0005);
      m.stats.record("none", "5xx", 0.001);
    }, true);
    const r = parseSentinelMetrics(text);
    assert.ok(r.startedMs !== undefined && r.startedMs > 0, "process_start_time_seconds read");
    assert.deepEqual(
      [...r.revisions.keys()].sort(),
      ["dep_a", "dep_b"],
      "the sentinel's own revision-less answers are skipped",
    );
    const a = r.revisions.get("dep_a");
    assert.deepEqual(a?.classes, [7, 0, 0, 1]);
    assert.equal(a?.other, 1);
    const idx = (ms: number): number => LATENCY_BUCKETS_MS.findIndex((b) => b === ms);
    assert.equal(a?.buckets[idx(5)], 7, "3 ms lands in the 5 ms bucket");
    assert.equal(a?.buckets[idx(250)], 1);
    assert.equal(a?.buckets[SLOTS - 1], 1, "40 s lands in +Inf");
    assert.equal(
      a?.buckets.reduce((x, y) => x + y, 0),
      9,
    );
    assert.deepEqual(r.revisions.get("dep_b")?.classes, [0, 0, 1, 0]);
    assert.equal(r.revisions.get("dep_b")?.buckets[0], 1);
  });

  it("reads the real sentinel's per-instance series apart from the revisions'", async () => {
    const text = await sentinelText((m) => {
      m.stats.record("dep_a", "2xx", 0.003);
      m.stats.record("dep_a", "5xx", 0.2);
      m.instanceStats.record(sentinelInstanceKey("dep_a", "web-1"), "2xx", 0.003);
      m.instanceStats.record(sentinelInstanceKey("dep_a", "web-2"), "5xx", 0.2);
    });
    const r = parseSentinelMetrics(text);
    assert.deepEqual([...r.revisions.keys()], ["dep_a"]);
    assert.deepEqual([...r.instances.keys()].sort(), [instanceKey("dep_a", "web-1"), instanceKey("dep_a", "web-2")]);
    assert.deepEqual(r.instances.get(instanceKey("dep_a", "web-2"))?.classes, [0, 0, 0, 1]);
    assert.equal(
      r.instances.get(instanceKey("dep_a", "web-1"))?.buckets.reduce((x, y) => x + y, 0),
      1,
    );
    assert.throws(
      () => parseSentinelMetrics('krane_sentinel_instance_requests_total{revision="dep_a",code="2xx"} 1\n'),
      /without a valid instance label/,
    );
  });

  it("parses labels with escapes, timestamps and special values", () => {
    const s = parseSampleLine('m_total{a="x\\"y",b="1\\\\2\\n",} 3.5e2 1700000000000');
    assert.equal(s.name, "m_total");
    assert.equal(s.labels.get("a"), 'x"y');
    assert.equal(s.labels.get("b"), "1\\2\n");
    assert.equal(s.value, 350);
    assert.equal(parseSampleLine("up +Inf").value, Infinity);
    assert.ok(Number.isNaN(parseSampleLine("up NaN").value));
    assert.ok(Number.isNaN(parseSampleLine("up Nan").value), "as prom-client writes it");
    assert.equal(parseExposition("# HELP x y\n# TYPE x counter\n\nx 1\r\ny 2\n", new Set(["x"])).length, 1);
  });

  it("refuses malformed lines, naming the line", () => {
    for (const bad of [
      "1abc 1",
      "m{a=1} 1",
      'm{a="1" 1',
      'm{a="\\x"} 1',
      "m",
      "m one",
      'm{a="1",a="2"} 1',
      "m 1 2 3",
      "m 1 x",
    ]) {
      assert.throws(() => parseExposition(`# ok\n${bad}\n`), /line 2/, bad);
    }
  });

  it("refuses sentinel samples that cannot be counters or a histogram", () => {
    const base = 'krane_sentinel_requests_total{revision="dep_a",code="2xx"}';
    assert.throws(() => parseSentinelMetrics(`${base} -1`), /non-negative integer/);
    assert.throws(() => parseSentinelMetrics(`${base} 1.5`), /non-negative integer/);
    assert.throws(() => parseSentinelMetrics('krane_sentinel_requests_total{code="2xx"} 1'), /without a revision/);
    assert.throws(
      () => parseSentinelMetrics('krane_sentinel_request_duration_seconds_bucket{revision="dep_a",le="0.3"} 1'),
      /unexpected bucket/,
    );
    assert.throws(
      () => parseSentinelMetrics('krane_sentinel_request_duration_seconds_bucket{revision="dep_a",le="+Inf"} 1'),
      /lacks bucket 0/,
    );
    const lines = LATENCY_BUCKETS_MS.map(
      (ms, i) =>
        `krane_sentinel_request_duration_seconds_bucket{revision="dep_a",le="${ms / 1000}"} ${i === 0 ? 5 : 1}`,
    );
    assert.throws(
      () =>
        parseSentinelMetrics(
          [...lines, 'krane_sentinel_request_duration_seconds_bucket{revision="dep_a",le="+Inf"} 5'].join("\n"),
        ),
      /not cumulative/,
    );
  });
});

describe("increments", () => {
  it("are the difference to the previous reading", () => {
    const inc = podIncrements(
      reading({ a: { c: [10, 0, 1, 2], b: [5, 8] } }, 1),
      reading({ a: { c: [15, 0, 1, 4], b: [6, 14] }, b: { c: [1, 0, 0, 0], b: [1] } }, 1),
    );
    assert.deepEqual(inc.get("a")?.classes, [5, 0, 0, 2]);
    assert.deepEqual(inc.get("a")?.buckets.slice(0, 2), [1, 6]);
    assert.deepEqual(inc.get("b")?.classes, [1, 0, 0, 0], "a revision new in this reading counts from 0");
  });

  it("count from 0 after a restart: a counter went down, or the process start time changed", () => {
    const prev = reading({ a: { c: [100, 0, 0, 0], b: [100] } }, 1);
    assert.deepEqual(
      podIncrements(prev, reading({ a: { c: [3, 0, 0, 0], b: [3] } }, 1)).get("a")?.classes,
      [3, 0, 0, 0],
    );
    // Counters above the old ones but a new process: still all new.
    assert.deepEqual(
      podIncrements(prev, reading({ a: { c: [120, 0, 0, 0], b: [120] } }, 2)).get("a")?.classes,
      [120, 0, 0, 0],
    );
    // Only the latency slots went down (a restart between scrapes with as many requests).
    assert.deepEqual(
      podIncrements(reading({ a: { c: [5, 0, 0, 0], b: [0, 5] } }), reading({ a: { c: [6, 0, 0, 0], b: [6, 0] } }))
        .get("a")
        ?.buckets.slice(0, 2),
      [6, 0],
    );
    assert.equal(podIncrements(prev, prev).size, 0, "nothing new, nothing reported");
  });

  it("are never negative, and add up to last minus first without restarts (property)", () => {
    const counters = fc.array(fc.nat(1_000), { minLength: 4 + SLOTS, maxLength: 4 + SLOTS });
    fc.assert(
      fc.property(fc.array(counters, { minLength: 1, maxLength: 8 }), fc.boolean(), (steps, monotonic) => {
        // Monotonic: each step adds to the last (no restart); otherwise arbitrary values.
        const readings: PodReading[] = [];
        let acc = new Array<number>(4 + SLOTS).fill(0);
        for (const s of steps) {
          acc = monotonic ? acc.map((v, i) => v + (s[i] ?? 0)) : s;
          readings.push(reading({ a: { c: acc.slice(0, 4), b: acc.slice(4) } }, 7));
        }
        const total = new Array<number>(4 + SLOTS).fill(0);
        for (let i = 1; i < readings.length; i++) {
          const inc = podIncrements(readings[i - 1], readings[i] as PodReading).get("a");
          const all = inc ? [...inc.classes, ...inc.buckets] : new Array<number>(4 + SLOTS).fill(0);
          assert.ok(
            all.every((v) => v >= 0),
            "never negative",
          );
          all.forEach((v, j) => (total[j] = (total[j] ?? 0) + v));
        }
        if (monotonic) {
          const first = readings[0]?.revisions.get("a");
          const last = readings.at(-1)?.revisions.get("a");
          const f = [...(first?.classes ?? []), ...(first?.buckets ?? [])];
          const l = [...(last?.classes ?? []), ...(last?.buckets ?? [])];
          assert.deepEqual(
            total,
            l.map((v, j) => v - (f[j] ?? 0)),
          );
        }
      }),
    );
  });
});

describe("IncrementTracker", () => {
  it("sums pods per environment and revision; baselines pods that predate it; remembers pods that leave", () => {
    const t = new IncrementTracker();
    const p = (n: number, startedMs = 0): PodReading => reading({ dep_a: { c: [n, 0, 0, 0], b: [n] } }, startedMs);
    // Round 1 (agent just started): baseline only, nothing counted twice.
    assert.deepEqual(t.round(100_000, [{ pod: "s/p1", environmentId: "env_1", reading: p(50) }]), []);
    // Round 2: p1 +10; p2 appears, started after the previous round → all of its traffic is new.
    let r = t.round(200_000, [
      { pod: "s/p1", environmentId: "env_1", reading: p(60) },
      { pod: "s/p2", environmentId: "env_1", reading: p(4, 150_000) },
      // A pod that started long ago but is new to us: baseline.
      { pod: "s/p3", environmentId: "env_1", reading: p(1_000, 10) },
    ]);
    assert.equal(r.length, 1);
    assert.deepEqual(r[0]?.inc.classes, [14, 0, 0, 0]);
    assert.equal(t.lastRoundMs, 200_000);
    // Round 3: p1's scrape failed (its reading stays as the baseline); p2 restarted; p3 +1.
    r = t.round(300_000, [
      { pod: "s/p1", environmentId: "env_1", reading: undefined },
      { pod: "s/p2", environmentId: "env_1", reading: p(2, 290_000) },
      { pod: "s/p3", environmentId: "env_1", reading: p(1_001, 10) },
    ]);
    assert.deepEqual(r[0]?.inc.classes, [3, 0, 0, 0]);
    // Round 4: p1 answers again: both intervals' increments; p3 leaves the targets.
    r = t.round(400_000, [
      { pod: "s/p1", environmentId: "env_1", reading: p(75) },
      { pod: "s/p2", environmentId: "env_1", reading: p(2, 290_000) },
    ]);
    assert.deepEqual(r[0]?.inc.classes, [15, 0, 0, 0]);
    // The same p3 process returns: only what is new since its last reading counts.
    r = t.round(500_000, [{ pod: "s/p3", environmentId: "env_1", reading: p(1_011, 10) }]);
    assert.deepEqual(r[0]?.inc.classes, [10, 0, 0, 0]);
    // p1 returns after it left, restarted: from 0.
    t.round(600_000, []);
    r = t.round(700_000, [{ pod: "s/p1", environmentId: "env_1", reading: p(5, 650_000) }]);
    assert.deepEqual(r[0]?.inc.classes, [5, 0, 0, 0]);
  });

  it("a new pod's address answered by an older pod's process is not that pod's reading", () => {
    const t = new IncrementTracker();
    const p = (n: number, startedMs: number): PodReading => reading({ dep_a: { c: [n, 0, 0, 0] } }, startedMs);
    // The old pod's process started after the tracker's first round, so all its traffic is new.
    t.round(100_000, []);
    assert.deepEqual(
      t.round(200_000, [{ pod: "s/old", environmentId: "env_1", reading: p(1_200, 150_000) }])[0]?.inc.classes,
      [1_200, 0, 0, 0],
    );
    // The old pod is deleted; a new pod created at 500 s gets its address while the old process
    // drains. Its scrape reaches the old process (started at 150 s): not counted, and no baseline.
    const created = 500_000;
    assert.deepEqual(
      t.round(510_000, [{ pod: "s/new", environmentId: "env_1", reading: p(1_250, 150_000), podCreatedMs: created }]),
      [],
    );
    // The new pod's own process: counted from 0, and the old one's traffic was counted once.
    const r = t.round(520_000, [
      { pod: "s/new", environmentId: "env_1", reading: p(7, 512_000), podCreatedMs: created },
    ]);
    assert.deepEqual(r[0]?.inc.classes, [7, 0, 0, 0]);
    // Within the clock slack (the node's clock a little behind the API server's) it is the pod's own.
    assert.equal(readingFitsPod(p(1, created - POD_CLOCK_SLACK_MS + 1), created), true);
    assert.equal(readingFitsPod(p(1, created - POD_CLOCK_SLACK_MS - 1), created), false);
    assert.equal(readingFitsPod(p(1, 0), undefined), true);
  });

  it("sums each instance's increments over the region's sentinel pods, beside the revision's", () => {
    const t = new IncrementTracker();
    const p = (n: number): PodReading => ({
      ...reading({ dep_a: { c: [n, 0, 0, 0] } }, 1),
      instances: new Map([[instanceKey("dep_a", "web-1"), { classes: [n, 0, 0, 0], other: 0, buckets: [] }]]),
    });
    t.round(1, [
      { pod: "s/p1", environmentId: "env_1", reading: p(0) },
      { pod: "s/p2", environmentId: "env_1", reading: p(0) },
    ]);
    const r = t.round(2, [
      { pod: "s/p1", environmentId: "env_1", reading: p(3) },
      { pod: "s/p2", environmentId: "env_1", reading: p(4) },
    ]);
    assert.deepEqual(
      r.map((x) => [x.deploymentId, x.instance, x.inc.classes[0]]),
      [
        ["dep_a", undefined, 7],
        ["dep_a", "web-1", 7],
      ],
    );
  });

  it("keeps environments apart", () => {
    const t = new IncrementTracker();
    const p = (n: number): PodReading => reading({ dep_a: { c: [n, 0, 0, 0] } }, 1);
    t.round(1, [
      { pod: "s1/p", environmentId: "env_1", reading: p(0) },
      { pod: "s2/p", environmentId: "env_2", reading: p(0) },
    ]);
    const r = t.round(2, [
      { pod: "s1/p", environmentId: "env_1", reading: p(1) },
      { pod: "s2/p", environmentId: "env_2", reading: p(2) },
    ]);
    assert.deepEqual(r.map((x) => [x.environmentId, x.inc.classes[0]]).sort(), [
      ["env_1", 1],
      ["env_2", 2],
    ]);
  });
});

describe("buildReport", () => {
  it("carries the window and counts, nothing when empty, and at most the busiest MAX entries", () => {
    assert.equal(buildReport("eu", 1, 2, []), undefined);
    const inc = (n: number): { classes: number[]; buckets: number[] } => ({
      classes: [n, 0, 0, 1],
      buckets: new Array<number>(SLOTS).fill(1),
    });
    const one = buildReport("eu", 1_000, 2_000, [{ environmentId: "env_1", deploymentId: "dep_a", inc: inc(3) }]);
    assert.equal(one?.region, "eu");
    assert.equal(one?.fromUnixMs, 1_000n);
    assert.equal(one?.toUnixMs, 2_000n);
    assert.equal(one?.revisions[0]?.responses2xx, 3n);
    assert.equal(one?.revisions[0]?.responses5xx, 1n);
    assert.equal(one?.revisions[0]?.latencyBuckets.length, SLOTS);
    const many = Array.from({ length: MAX_MEASUREMENTS_PER_REPORT + 10 }, (_, i) => ({
      environmentId: "env_1",
      deploymentId: `dep_${i}`,
      inc: inc(i),
    }));
    const r = buildReport("eu", 1, 2, many);
    assert.equal(r?.revisions.length, MAX_MEASUREMENTS_PER_REPORT);
    assert.ok(!r?.revisions.some((x) => x.deploymentId === "dep_0"), "the quietest are left out");
  });

  it("carries instances only beside their revision's figures", () => {
    const inc = { classes: [5, 0, 0, 0], buckets: new Array<number>(SLOTS).fill(0) };
    const r = buildReport("eu", 1, 2, [
      { environmentId: "env_1", deploymentId: "dep_a", inc },
      { environmentId: "env_1", deploymentId: "dep_a", instance: "web-1", inc },
      { environmentId: "env_1", deploymentId: "dep_b", instance: "web-9", inc },
    ]);
    assert.deepEqual(
      r?.instances.map((i) => [i.deploymentId, i.instance, i.responses2xx]),
      [["dep_a", "web-1", 5n]],
    );
    assert.equal(
      buildReport("eu", 1, 2, [{ environmentId: "env_1", deploymentId: "dep_a", instance: "web-1", inc }]),
      undefined,
      "instances alone make no report",
    );
  });
});

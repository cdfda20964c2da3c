// Alert rules' evaluator (src/ctrl/history/alerts.ts), by properties over random minute series
// (error rates, with gaps): transitions alternate firing, resolved, firing…; a firing comes only
// after the condition was seen to hold for the `for` duration with no two missing minutes in a
// row, a resolution only on a minute with data that does not hold; folding the series in any two
// parts (a ctrl restart between them, the state stored) gives what folding it whole gives; one
// missing minute never resolves or resets an episode, a long silence never resolves one.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { INITIAL_STATE, evaluate, metricValue, type AlertCondition } from "../../../../src/ctrl/history/alerts.js";
import { emptySums, type MetricSums } from "../../../../src/ctrl/history/sums.js";

const MIN = 60_000;
const T0 = 1_800_000_000_000 - (1_800_000_000_000 % MIN);
const RULE: AlertCondition = { metric: "error_rate", op: ">", threshold: 2, forMs: 3 * MIN };

function minute(requests: number, errors: number): MetricSums {
  const s = emptySums();
  s.requests = requests;
  s.errors = errors;
  return s;
}

/** A series: per minute undefined (a gap) or the sums of that minute. */
const series = fc.array(
  fc.option(
    fc
      .tuple(fc.integer({ min: 0, max: 200 }), fc.integer({ min: 0, max: 100 }))
      .map(([r, e]) => minute(r, Math.min(r, e))),
    { nil: undefined, freq: 4 },
  ),
  { maxLength: 60 },
);

function toMap(list: readonly (MetricSums | undefined)[]): Map<number, MetricSums> {
  const m = new Map<number, MetricSums>();
  list.forEach((s, i) => s && m.set(T0 + i * MIN, s));
  return m;
}

const condition = fc.record({
  metric: fc.constant("error_rate" as const),
  op: fc.constantFrom(">" as const, "<" as const),
  threshold: fc.integer({ min: 0, max: 100 }),
  forMs: fc.integer({ min: 1, max: 6 }).map((n) => n * MIN),
});

describe("alert evaluator", () => {
  it("alternates firing and resolved, firing only after the condition held for `for`", () => {
    fc.assert(
      fc.property(condition, series, (c, list) => {
        const m = toMap(list);
        const { transitions } = evaluate(c, INITIAL_STATE, T0, T0 + list.length * MIN, m);
        transitions.forEach((t, i) => assert.equal(t.kind, i % 2 === 0 ? "firing" : "resolved"));
        for (const t of transitions) {
          const last = (t.toMs - MIN - T0) / MIN;
          if (t.kind === "resolved") {
            // Decided by a minute with data that did not hold.
            const s = list[last];
            assert.ok(s, "a resolution needs data");
            const v = metricValue(c.metric, s);
            assert.ok(v !== null && !(c.op === ">" ? v > c.threshold : v < c.threshold));
            continue;
          }
          assert.ok(t.toMs - t.fromMs >= c.forMs);
          let gapRun = 0;
          for (let at = t.fromMs; at < t.toMs; at += MIN) {
            const s = list[(at - T0) / MIN];
            if (s === undefined) {
              gapRun++;
              assert.ok(gapRun <= 1, "no two missing minutes in a firing episode");
              continue;
            }
            gapRun = 0;
            const v = metricValue(c.metric, s);
            assert.ok(v !== null && (c.op === ">" ? v > c.threshold : v < c.threshold), "every minute held");
          }
        }
      }),
    );
  });

  it("folds in two parts (the state stored between them) as in one", () => {
    fc.assert(
      fc.property(condition, series, fc.nat(), (c, list, cut) => {
        const m = toMap(list);
        const end = T0 + list.length * MIN;
        const split = T0 + (list.length === 0 ? 0 : cut % (list.length + 1)) * MIN;
        const whole = evaluate(c, INITIAL_STATE, T0, end, m);
        const first = evaluate(c, INITIAL_STATE, T0, split, m);
        const second = evaluate(c, JSON.parse(JSON.stringify(first.state)) as typeof first.state, split, end, m);
        assert.deepEqual([...first.transitions, ...second.transitions], whole.transitions);
        assert.deepEqual(second.state, whole.state);
      }),
    );
  });

  it("one missing minute inside an episode neither resolves nor resets it; silence never resolves", () => {
    fc.assert(
      fc.property(
        fc.array(fc.boolean(), { minLength: 10, maxLength: 60 }),
        fc.integer({ min: 2, max: 30 }),
        (gaps, silence) => {
          // Every minute with data has 10 % errors; no two gaps in a row.
          const list: (MetricSums | undefined)[] = gaps.map((g, i) =>
            g && !gaps[i - 1] && i > 0 ? undefined : minute(100, 10),
          );
          const { transitions, state } = evaluate(RULE, INITIAL_STATE, T0, T0 + list.length * MIN, toMap(list));
          assert.deepEqual(
            transitions.map((t) => [t.kind, t.fromMs, t.toMs]),
            [["firing", T0, T0 + 3 * MIN]],
          );
          const quiet = evaluate(RULE, state, T0 + list.length * MIN, T0 + (list.length + silence) * MIN, new Map());
          assert.deepEqual(quiet.transitions, []);
          assert.equal(quiet.state.phase, "firing");
        },
      ),
    );
  });

  it("fires once per episode, with its value and window, and resolves on the first good minute", () => {
    const list = [
      minute(100, 0),
      minute(100, 5),
      minute(100, 6),
      undefined,
      minute(100, 9),
      minute(100, 7),
      minute(100, 1),
      minute(0, 0),
    ];
    const { transitions, state } = evaluate(RULE, INITIAL_STATE, T0, T0 + list.length * MIN, toMap(list));
    assert.deepEqual(transitions, [
      { kind: "firing", value: 6, fromMs: T0 + MIN, toMs: T0 + 4 * MIN },
      { kind: "resolved", value: 1, fromMs: T0 + MIN, toMs: T0 + 7 * MIN },
    ]);
    assert.equal(state.phase, "inactive");
  });

  it("two missing minutes end a pending episode; a minute without requests has no latency", () => {
    const list = [minute(100, 5), minute(100, 5), undefined, undefined, minute(100, 5), minute(100, 5)];
    const rule = { ...RULE, forMs: 4 * MIN };
    assert.deepEqual(evaluate(rule, INITIAL_STATE, T0, T0 + list.length * MIN, toMap(list)).transitions, []);
    // With data in its place, the same minutes fire.
    const full = list.map((s) => s ?? minute(100, 5));
    assert.equal(evaluate(rule, INITIAL_STATE, T0, T0 + full.length * MIN, toMap(full)).transitions.length, 1);
    assert.equal(metricValue("p99_ms", minute(0, 0)), null);
    assert.equal(metricValue("error_rate", minute(0, 0)), 0);
    assert.equal(metricValue("request_rate", minute(120, 0)), 2);
  });
});

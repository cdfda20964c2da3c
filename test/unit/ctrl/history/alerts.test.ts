// Alert rules' evaluator (src/ctrl/history/alerts.ts), by properties over random minute series
// (error rates, with gaps): transitions alternate firing, resolved, firing…; a firing comes only
// after the condition was seen to hold for the `for` duration with no two missing minutes in a
// row, a resolution only on a minute with data that does not hold; folding the series in any two
// parts (a ctrl restart between them, the state stored) gives what folding it whole gives; one
// missing minute never resolves or resets an episode, a long silence never resolves one. With a
// window, each minute's value is that of the window ending with it (checked against sums added up
// here by hand), and a restarts rule with a one-minute `for` is firing exactly after the minutes
// whose window counts more restarts than its bound.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { INITIAL_STATE, evaluate, metricValue, type AlertCondition } from "../../../../src/ctrl/history/alerts.js";
import { emptySums, type MetricSums } from "../../../../src/ctrl/history/sums.js";

const MIN = 60_000;
const T0 = 1_800_000_000_000 - (1_800_000_000_000 % MIN);
const RULE: AlertCondition = { metric: "error_rate", op: ">", threshold: 2, forMs: 3 * MIN, windowMs: MIN };

function minute(requests: number, errors: number, restarts = 0): MetricSums {
  const s = emptySums();
  s.requests = requests;
  s.errors = errors;
  s.restarts = restarts;
  return s;
}

/** The error rate over the window of `windowMin` minutes ending with minute `i`, added up by hand. */
function windowErrorRate(list: readonly (MetricSums | undefined)[], i: number, windowMin: number): number {
  let requests = 0;
  let errors = 0;
  for (let j = Math.max(0, i - windowMin + 1); j <= i; j++) {
    requests += list[j]?.requests ?? 0;
    errors += list[j]?.errors ?? 0;
  }
  return requests > 0 ? (100 * errors) / requests : 0;
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
  windowMs: fc.integer({ min: 1, max: 6 }).map((n) => n * MIN),
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
            const v = windowErrorRate(list, last, c.windowMs / MIN);
            assert.ok(!(c.op === ">" ? v > c.threshold : v < c.threshold));
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
            const v = windowErrorRate(list, (at - T0) / MIN, c.windowMs / MIN);
            assert.ok(c.op === ">" ? v > c.threshold : v < c.threshold, "every minute held");
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

  it("a restarts rule with a one-minute `for` fires after exactly the minutes whose window passes the bound", () => {
    fc.assert(
      fc.property(
        fc.array(fc.option(fc.integer({ min: 0, max: 3 }), { nil: undefined, freq: 4 }), { maxLength: 40 }),
        fc.integer({ min: 1, max: 10 }),
        fc.integer({ min: 0, max: 8 }),
        (counts, windowMin, threshold) => {
          const rule: AlertCondition = {
            metric: "restarts",
            op: ">",
            threshold,
            forMs: MIN,
            windowMs: windowMin * MIN,
          };
          const list = counts.map((n) => (n === undefined ? undefined : minute(0, 0, n)));
          const m = toMap(list);
          let state = INITIAL_STATE;
          let firings = 0;
          list.forEach((s, i) => {
            const before = state.phase;
            const r = evaluate(rule, state, T0 + i * MIN, T0 + (i + 1) * MIN, m);
            state = r.state;
            if (r.transitions.some((t) => t.kind === "firing")) firings++;
            if (s === undefined) {
              // A missing minute changes nothing a one-minute rule shows.
              assert.equal(state.phase, before);
              return;
            }
            let sum = 0;
            for (let j = Math.max(0, i - windowMin + 1); j <= i; j++) sum += counts[j] ?? 0;
            assert.equal(state.phase, sum > threshold ? "firing" : "inactive", `minute ${i}: ${sum} restarts`);
            assert.equal(state.lastValue, sum);
          });
          // As many firings as the whole fold gives.
          const whole = evaluate(rule, INITIAL_STATE, T0, T0 + list.length * MIN, m);
          assert.equal(whole.transitions.filter((t) => t.kind === "firing").length, firings);
        },
      ),
    );
  });

  it("restarts > 3 in 10 minutes fires on the fourth restart and resolves when the first leaves the window", () => {
    const counts = [1, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    const list = counts.map((n) => minute(50, 0, n));
    const rule: AlertCondition = { metric: "restarts", op: ">", threshold: 3, forMs: MIN, windowMs: 10 * MIN };
    const { transitions } = evaluate(rule, INITIAL_STATE, T0, T0 + list.length * MIN, toMap(list));
    assert.deepEqual(transitions, [
      { kind: "firing", value: 4, fromMs: T0 + 3 * MIN, toMs: T0 + 4 * MIN },
      { kind: "resolved", value: 3, fromMs: T0 + 3 * MIN, toMs: T0 + 11 * MIN },
    ]);
    // Its minutes before the first folded one count: the window reaches back into them.
    const late = evaluate(rule, INITIAL_STATE, T0 + 3 * MIN, T0 + 4 * MIN, toMap(list));
    assert.equal(late.transitions[0]?.value, 4);
    // Over one minute, the same minutes never pass 3.
    assert.deepEqual(
      evaluate({ ...rule, windowMs: MIN }, INITIAL_STATE, T0, T0 + list.length * MIN, toMap(list)).transitions,
      [],
    );
    assert.equal(metricValue("restarts", minute(0, 0, 2)), 2);
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

// Alert rules' pure core: a rule (a metric of an environment, a comparison, a bound and a `for`
// duration) folded over the environment's minutes of the metrics history, one closed minute at a
// time, into a state (inactive, pending, firing) and the transitions to notify (firing,
// resolved). ../domain/alerts.ts stores the state after each fold, with the notifications, in one
// transaction.
//
// A minute's value is the environment's figure over the rule's window ending with that minute
// (one minute unless the rule names a longer one: "restarts > 3 in 10 minutes"), every revision,
// region and instance added up (../history/sums.ts figures; sums add exactly, so a window's error
// rate or p99 is that of all its requests). A minute with points but no requests is an
// observation: its error rate is 0 and its latencies unknown, so a rule on them does not hold.
//
// Gaps (a minute with no point at all: no agent reported) are not observations. One missing
// minute is bridged: it counts as the minute before it (a late or lost report neither resets a
// pending rule nor resolves a firing one). From the second missing minute in a row the rule knows
// nothing: pending goes back to inactive (the condition was not seen to hold for `for`), firing
// stays firing (silence is no all-clear; the next minute with data decides).
import { addInto, emptySums, figures, type MetricSums } from "./sums.js";

export const ALERT_METRICS = {
  error_rate: "percent of requests answered 5xx",
  p50_ms: "median latency (ms)",
  p95_ms: "95th-percentile latency (ms)",
  p99_ms: "99th-percentile latency (ms)",
  request_rate: "requests per second",
  restarts: "instance restarts",
} as const;

export type AlertMetric = keyof typeof ALERT_METRICS;
export type AlertOp = ">" | "<";
export type AlertPhase = "inactive" | "pending" | "firing";

export function isAlertMetric(name: string): name is AlertMetric {
  return Object.hasOwn(ALERT_METRICS, name);
}

export interface AlertCondition {
  readonly metric: AlertMetric;
  readonly op: AlertOp;
  readonly threshold: number;
  /** How long the condition must hold before the rule fires (a whole number of minutes, ≥ 1). */
  readonly forMs: number;
  /** The span each minute's value covers, ending with that minute (whole minutes, ≥ 1). */
  readonly windowMs: number;
}

export interface AlertState {
  readonly phase: AlertPhase;
  /** The start of the first minute of the current episode (pending or firing); 0 when inactive. */
  readonly sinceMs: number;
  /** Missing minutes in a row just before the next one. */
  readonly gapRun: number;
  /** Whether the last minute that had data held the condition. */
  readonly lastHeld: boolean;
  /** The last value seen (null: none yet, or no latencies). */
  readonly lastValue: number | null;
}

export const INITIAL_STATE: AlertState = { phase: "inactive", sinceMs: 0, gapRun: 0, lastHeld: false, lastValue: null };

export interface AlertTransition {
  readonly kind: "firing" | "resolved";
  /** The minute's value that decided it. */
  readonly value: number | null;
  /** The episode: from the start of its first minute to the end of the deciding minute. */
  readonly fromMs: number;
  readonly toMs: number;
}

const MINUTE_MS = 60_000;
/** Missing minutes in a row that are bridged. */
export const BRIDGED_GAP = 1;

/**
 * The value of `metric` over sums covering `spanMs` (one minute unless given; null: not known,
 * e.g. latencies without requests). Restarts are a count over the span, not a rate.
 */
export function metricValue(metric: AlertMetric, s: MetricSums, spanMs = MINUTE_MS): number | null {
  const f = figures(s, spanMs);
  switch (metric) {
    case "error_rate":
      return f.errorRatePercent;
    case "p50_ms":
      return f.p50Ms;
    case "p95_ms":
      return f.p95Ms;
    case "p99_ms":
      return f.p99Ms;
    case "request_rate":
      return f.requestsPerSecond;
    case "restarts":
      return f.restarts;
  }
}

export function holds(c: AlertCondition, value: number | null): boolean {
  if (value === null) return false;
  return c.op === ">" ? value > c.threshold : value < c.threshold;
}

/**
 * The sums of the window ending with minute `atMs` (the minutes of it that have points), or
 * undefined when minute `atMs` itself has none (a gap, whatever came before it).
 */
export function windowSums(
  minutes: ReadonlyMap<number, MetricSums>,
  atMs: number,
  windowMs: number,
): MetricSums | undefined {
  const own = minutes.get(atMs);
  if (own === undefined || windowMs <= MINUTE_MS) return own;
  const acc = emptySums();
  for (let at = atMs - windowMs + MINUTE_MS; at <= atMs; at += MINUTE_MS) {
    const s = minutes.get(at);
    if (s) addInto(acc, s);
  }
  return acc;
}

/**
 * Folds minute `atMs` (the sums of the window ending with it, or undefined for a gap) into `state`; returns the new state and
 * the transition it caused, if any.
 */
export function step(
  c: AlertCondition,
  state: AlertState,
  atMs: number,
  sums: MetricSums | undefined,
): { state: AlertState; transition?: AlertTransition } {
  let held: boolean;
  let value: number | null;
  let gapRun = 0;
  if (sums === undefined) {
    gapRun = state.gapRun + 1;
    if (gapRun > BRIDGED_GAP) {
      // Nothing known: a pending episode ends, a firing one waits for data.
      if (state.phase === "pending") return { state: { ...INITIAL_STATE, gapRun, lastValue: state.lastValue } };
      return { state: { ...state, gapRun } };
    }
    held = state.lastHeld;
    value = state.lastValue;
  } else {
    value = metricValue(c.metric, sums, c.windowMs);
    held = holds(c, value);
  }
  const end = atMs + MINUTE_MS;
  const base = { gapRun, lastHeld: held, lastValue: value };
  if (!held) {
    const next: AlertState = { ...INITIAL_STATE, ...base };
    if (state.phase === "firing")
      return { state: next, transition: { kind: "resolved", value, fromMs: state.sinceMs, toMs: end } };
    return { state: next };
  }
  if (state.phase === "firing") return { state: { ...state, ...base } };
  const sinceMs = state.phase === "pending" ? state.sinceMs : atMs;
  if (end - sinceMs >= c.forMs)
    return {
      state: { phase: "firing", sinceMs, ...base },
      transition: { kind: "firing", value, fromMs: sinceMs, toMs: end },
    };
  return { state: { phase: "pending", sinceMs, ...base } };
}

/**
 * Folds the minutes `fromMs`, `fromMs` + 1 min, … before `untilMs` (gaps where `minutes` has
 * none); `minutes` holds, for a windowed rule, the window's minutes before `fromMs` too.
 */
export function evaluate(
  c: AlertCondition,
  state: AlertState,
  fromMs: number,
  untilMs: number,
  minutes: ReadonlyMap<number, MetricSums>,
): { state: AlertState; transitions: AlertTransition[] } {
  const transitions: AlertTransition[] = [];
  let s = state;
  for (let at = fromMs; at < untilMs; at += MINUTE_MS) {
    const r = step(c, s, at, windowSums(minutes, at, c.windowMs));
    s = r.state;
    if (r.transition) transitions.push(r.transition);
  }
  return { state: s, transitions };
}

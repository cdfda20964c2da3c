// The analysis judge: one check of the new revision's sample against a step's rules. Pure.
// A sample too small to judge (fewer requests than the rules' minimum) is inconclusive, never a
// pass; a missing sample is inconclusive too (nothing was routed to it yet). The reason always
// names the measurement, with the figures, so an abort says why.
import { LATENCY_BUCKETS_MS, latencyQuantileMs, type RevisionSample } from "../../contracts/analysis.js";
import type { AnalysisRules, VerdictResult } from "./types.js";

export interface Judgement {
  readonly result: VerdictResult;
  readonly reason: string;
}

const fmt = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });

/** Percent of requests that were not 5xx; null without requests. */
export function successRate(s: RevisionSample): number | null {
  if (s.requests <= 0) return null;
  return (100 * (s.requests - s.byClass["5xx"])) / s.requests;
}

/** The p99 latency in ms of a sample (`latencyQuantileMs`: an upper bound; Infinity past the last bound). */
export function p99Ms(s: RevisionSample): number | null {
  return latencyQuantileMs(s.latencyBuckets, 0.99);
}

/** Judges one check. `stable` is informational (named in the reason when the canary fails). */
export function judge(rules: AnalysisRules, canary: RevisionSample | undefined, stable?: RevisionSample): Judgement {
  const n = canary?.requests ?? 0;
  if (canary === undefined || n < Math.max(1, rules.minRequests)) {
    return {
      result: "inconclusive",
      reason: `${fmt.format(n)} requests < ${fmt.format(Math.max(1, rules.minRequests))} needed to judge`,
    };
  }
  const over = `over ${fmt.format(n)} requests`;
  if (rules.minSuccessRatePercent !== null) {
    const rate = successRate(canary) ?? 0;
    if (rate < rules.minSuccessRatePercent) {
      const st = stable !== undefined ? successRate(stable) : null;
      const cmp = st === null ? "" : ` (stable ${fmt.format(st)} %)`;
      return {
        result: "fail",
        reason: `success rate ${fmt.format(rate)} % < ${fmt.format(rules.minSuccessRatePercent)} % ${over}${cmp}`,
      };
    }
  }
  if (rules.maxP99Ms !== null) {
    const p = p99Ms(canary);
    if (p === null) return { result: "inconclusive", reason: `no latency observations ${over}` };
    if (p > rules.maxP99Ms) {
      const shown =
        p === Infinity
          ? `> ${fmt.format(LATENCY_BUCKETS_MS[LATENCY_BUCKETS_MS.length - 1] ?? 0)}`
          : `≤ ${fmt.format(p)}`;
      return { result: "fail", reason: `p99 ${shown} ms > ${fmt.format(rules.maxP99Ms)} ms ${over}` };
    }
  }
  const parts: string[] = [];
  if (rules.minSuccessRatePercent !== null) parts.push(`success rate ${fmt.format(successRate(canary) ?? 0)} %`);
  if (rules.maxP99Ms !== null) parts.push(`p99 ≤ ${fmt.format(p99Ms(canary) ?? 0)} ms`);
  return { result: "pass", reason: `${parts.join(", ") || "answered"} ${over}` };
}

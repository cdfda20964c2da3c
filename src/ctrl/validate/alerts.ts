// Validation of AlertService requests: a rule's name, metric, comparison, bound and `for`
// duration. Pure.
import { ALERT_METRICS, isAlertMetric, type AlertCondition, type AlertOp } from "../history/alerts.js";
import { invalidArgument } from "../errors.js";
import { validateEnvironmentRef } from "./api.js";
import type { EnvironmentRef } from "./types.js";
import * as r from "./rules.js";

export interface AlertRuleInput extends AlertCondition {
  readonly ref: EnvironmentRef;
  readonly name: string;
}

/** `for` bounds (seconds): whole minutes, 1 to 60. */
export const FOR_SECONDS = { min: 60, max: 3_600 } as const;
/** Window bounds (seconds): whole minutes, 1 to 60 (0 in a request: one minute). */
export const WINDOW_SECONDS = { min: 60, max: 3_600 } as const;

export function validateAddAlertRule(req: {
  workspace: string;
  project: string;
  environment: string;
  name: string;
  metric: string;
  op: string;
  threshold: number;
  forSeconds: number;
  windowSeconds?: number;
}): AlertRuleInput {
  const ref = validateEnvironmentRef(req);
  const name = r.slug("name", req.name);
  if (!isAlertMetric(req.metric))
    throw invalidArgument("metric", `is not a known metric (one of ${Object.keys(ALERT_METRICS).join(", ")})`);
  if (req.op !== ">" && req.op !== "<") throw invalidArgument("op", 'must be ">" or "<"');
  const op: AlertOp = req.op;
  if (!Number.isFinite(req.threshold) || req.threshold < 0)
    throw invalidArgument("threshold", "must be a number of at least 0");
  if (req.metric === "error_rate" && req.threshold > 100)
    throw invalidArgument("threshold", "is a percentage: at most 100");
  const forSeconds = r.intRange("for_seconds", req.forSeconds, FOR_SECONDS.min, FOR_SECONDS.max);
  if (forSeconds % 60 !== 0) throw invalidArgument("for_seconds", "must be whole minutes");
  const windowSeconds = r.intRange("window_seconds", req.windowSeconds || 60, WINDOW_SECONDS.min, WINDOW_SECONDS.max);
  if (windowSeconds % 60 !== 0) throw invalidArgument("window_seconds", "must be whole minutes");
  return {
    ref,
    name,
    metric: req.metric,
    op,
    threshold: req.threshold,
    forMs: forSeconds * 1000,
    windowMs: windowSeconds * 1000,
  };
}

export function validateAlertRuleRef(req: { workspace: string; project: string; environment: string; name: string }): {
  ref: EnvironmentRef;
  name: string;
} {
  return { ref: validateEnvironmentRef(req), name: r.slug("name", req.name) };
}

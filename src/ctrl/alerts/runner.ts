// Alert rules' evaluation, a part on ctrl's Manager: a DueWork whose keys are the rules with a
// closed minute not evaluated yet (a minute closes `settleMs` after its end, leaving the agents'
// reports of it time to arrive). Each run folds the rule's new minutes and stores its state with
// the notifications it causes (../domain/alerts.ts), so a ctrl restart resumes where the last
// commit left off, and replicas running the same rule notify once.
import { DueWork } from "../../retry/due.js";
import { Result } from "../../retry/queue.js";
import type { Store } from "../db/store.js";
import { dueAlertRules, evaluateAlertRule } from "../domain/alerts.js";

export interface AlertRunnerOptions {
  readonly store: Store;
  /** How long after a minute's end it is evaluated (default 30 s: agents report every few seconds). */
  readonly settleMs?: number;
  /** Between sweeps (default 15 s). */
  readonly sweepIntervalMs?: number;
  /** Told of a sweep or run that failed (the next sweep, or the run's backoff, tries again). */
  readonly onError: (err: unknown) => void;
}

export const DEFAULT_ALERT_SETTLE_MS = 30_000;

/** The part; its sweep() resolves once the rules it found due are evaluated (tests). */
export function alertRunner(o: AlertRunnerOptions): DueWork {
  const settleMs = o.settleMs ?? DEFAULT_ALERT_SETTLE_MS;
  return new DueWork({
    name: "alert rules",
    due: (limit) => dueAlertRules(o.store.db, o.store.clock(), settleMs, limit),
    reconcile: async (id) => {
      await evaluateAlertRule(o.store, id, settleMs);
      return Result.done;
    },
    sweepIntervalMs: o.sweepIntervalMs ?? 15_000,
    sweepLimit: 200,
    concurrency: 2,
    // A rule that failed is tried again well within its next minute.
    retry: { baseMs: 500, capMs: 20_000, minMs: 250 },
    sweepAtStart: true,
    sweepWaitsForRuns: true,
    onSweepError: o.onError,
    onResult: (_id, r) => r.type === "retry" && o.onError(r.error),
  });
}

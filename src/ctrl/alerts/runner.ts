// Alert rules' evaluation, a part on ctrl's Manager: a DueWork whose keys are the rules with a
// closed minute not evaluated yet (a minute closes `settleMs` after its end, leaving the agents'
// reports of it time to arrive). Each run folds the rule's new minutes and stores its state with
// the notifications it causes (../domain/alerts.ts), so a ctrl restart resumes where the last commit
// left off, and replicas running the same rule notify once.
import { pino, type Logger } from "pino";
import type { Runnable } from "../../base/lifecycle.js";
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
  readonly logger?: Logger;
  /** Told of a sweep or run that failed (the outage log). */
  readonly onError?: (err: unknown) => void;
}

export const DEFAULT_ALERT_SETTLE_MS = 30_000;

export class AlertRunner implements Runnable {
  readonly name = "alert rules";
  readonly #work: DueWork;

  constructor(o: AlertRunnerOptions) {
    const log = o.logger ?? pino({ level: "silent" });
    const settleMs = o.settleMs ?? DEFAULT_ALERT_SETTLE_MS;
    const failed = (err: unknown): void => {
      if (o.onError) o.onError(err);
      else log.warn({ err: err instanceof Error ? err.message : String(err) }, "alert evaluation failed");
    };
    this.#work = new DueWork({
      name: this.name,
      due: (limit) => dueAlertRules(o.store.db, o.store.clock(), settleMs, limit),
      reconcile: async (id) => {
        await evaluateAlertRule(o.store, id, settleMs);
        return Result.done;
      },
      sweepIntervalMs: o.sweepIntervalMs ?? 15_000,
      sweepLimit: 200,
      concurrency: 2,
      retry: { baseMs: 1_000, capMs: 60_000, minMs: 500 },
      sweepAtStart: true,
      sweepWaitsForRuns: true,
      onSweepError: failed,
      onResult: (_key, r) => {
        if (r.type === "retry") failed(r.error);
      },
    });
  }

  start(): void {
    this.#work.start();
  }

  /** One sweep now, resolved once its runs are done (tests). */
  sweep(): Promise<void> {
    return this.#work.sweep();
  }

  stop(): Promise<void> {
    return this.#work.stop();
  }
}

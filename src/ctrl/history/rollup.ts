// The metrics history's upkeep, a part on ctrl's Manager: a DueWork whose keys are the hours to
// roll up from their minutes ("hour:<unix ms>") and "prune" (minutes past 7 days, hours past 30).
// An hour is computed once it is over, and again at every sweep while a late report may still
// add to it (the agents' reports are accepted up to `lateMs` after their window); each run
// replaces the hour's rows, so several ctrl replicas doing the same work agree.
import { pino, type Logger } from "pino";
import type { Runnable } from "../../base/lifecycle.js";
import { upkeepWork, type DueWork } from "../../retry/due.js";
import { Result } from "../../retry/queue.js";
import type { Store } from "../db/store.js";
import { hoursToRoll, pruneHistory, rollupHour } from "./store.js";

const PRUNE = "prune";

export interface HistoryRollupOptions {
  readonly store: Store;
  /** How late a report may add to a minute (ms). */
  readonly lateMs: number;
  /** Between sweeps (default 60 s). */
  readonly sweepIntervalMs?: number;
  /** Between prunes (default 10 min). */
  readonly pruneIntervalMs?: number;
  readonly logger?: Logger;
  /** Told of a sweep or run that failed (the outage log). */
  readonly onError?: (err: unknown) => void;
}

export class HistoryRollup implements Runnable {
  readonly name = "metrics history";
  readonly #o: HistoryRollupOptions;
  readonly #work: DueWork;
  #prunedAt = -Infinity;

  constructor(o: HistoryRollupOptions) {
    this.#o = o;
    const log = o.logger ?? pino({ level: "silent" });
    const failed = (err: unknown): void => {
      if (o.onError) o.onError(err);
      else log.warn({ err: err instanceof Error ? err.message : String(err) }, "metrics history upkeep failed");
    };
    this.#work = upkeepWork(
      {
        name: this.name,
        due: (limit) => this.#due(limit),
        reconcile: (key) => this.#run(key),
        sweepIntervalMs: o.sweepIntervalMs ?? 60_000,
        sweepLimit: 48,
        retry: { baseMs: 1_000, capMs: 60_000, minMs: 500 },
      },
      failed,
    );
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

  async #due(limit: number): Promise<string[]> {
    const now = this.#o.store.clock();
    const hours = await hoursToRoll(this.#o.store.db, now, this.#o.lateMs, limit);
    const keys = hours.map((h) => `hour:${h}`);
    if (now - this.#prunedAt >= (this.#o.pruneIntervalMs ?? 600_000)) keys.push(PRUNE);
    return keys;
  }

  async #run(key: string): Promise<Result> {
    const store = this.#o.store;
    if (key === PRUNE) {
      await pruneHistory(store.db, store.clock());
      this.#prunedAt = store.clock();
      return Result.done;
    }
    await rollupHour(store.db, Number(key.slice("hour:".length)));
    return Result.done;
  }
}

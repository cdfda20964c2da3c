// ctrl's periodic upkeep, as PeriodicWork on a WorkQueue (src/retry/periodic.ts): each task runs
// on its interval, never overlaps itself, and backs off (UPKEEP_RETRY) after a failure, which
// goes through the outage log.
import type { Runnable } from "../../base/lifecycle.js";
import type { BackoffPolicy } from "../../retry/backoff.js";
import { PeriodicWork, type PeriodicTask } from "../../retry/periodic.js";

/** Backoff of ctrl's periodic upkeep (compaction, key pruning, the deletion sweep) after a failed run. */
export const UPKEEP_RETRY: BackoffPolicy = { baseMs: 1_000, capMs: 60_000, minMs: 500 };

/** An upkeep task and what its failure is logged as. */
export interface UpkeepTask extends PeriodicTask {
  /** "outbox compaction failed; retrying" … */
  readonly failure: string;
}

export class Upkeep implements Runnable {
  readonly name = "upkeep";
  readonly #work: PeriodicWork;

  constructor(tasks: readonly UpkeepTask[], failed: (what: string) => (err: unknown) => void) {
    const onFailure = new Map(tasks.map((t) => [t.name, failed(t.failure)]));
    this.#work = new PeriodicWork({
      retry: UPKEEP_RETRY,
      tasks,
      onError: (task, err) => onFailure.get(task)?.(err),
    });
  }

  start(): void {
    this.#work.start();
  }

  stop(): Promise<void> {
    return this.#work.stop();
  }
}

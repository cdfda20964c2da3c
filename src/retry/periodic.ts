// Periodic work on the WorkQueue: each task is one key. A run that succeeds asks to run again
// after the task's interval (a requeue); a run that fails is retried with the key's own
// full-jitter backoff, and is back on its interval after the next success. So a task never runs
// twice at once (a slow run pushes the next one back instead of piling up, as a bare setInterval
// would), a failing task backs off instead of failing on every tick, and `trigger` runs a task
// now, coalesced with a run in progress.
import type { BackoffPolicy } from "./backoff.js";
import { Result, WorkQueue } from "./queue.js";

export interface PeriodicTask {
  /** The task's key: unique among the tasks of one PeriodicWork. */
  readonly name: string;
  /** Time between the end of a successful run and the next one; the first run is this long after start. */
  readonly everyMs: number;
  run(signal: AbortSignal): Promise<void>;
}

export interface PeriodicWorkOptions {
  readonly tasks: readonly PeriodicTask[];
  /** The backoff of a failed run (per task). */
  readonly retry: BackoffPolicy;
  /** Told of every failed run (logs); the run is retried whatever it says. */
  readonly onError?: (task: string, err: unknown) => void;
}

export class PeriodicWork {
  readonly #tasks: ReadonlyMap<string, PeriodicTask>;
  readonly #queue: WorkQueue;
  #started = false;

  constructor(o: PeriodicWorkOptions) {
    this.#tasks = new Map(o.tasks.map((t) => [t.name, t]));
    if (this.#tasks.size !== o.tasks.length) throw new Error("periodic tasks need distinct names");
    this.#queue = new WorkQueue({
      concurrency: Math.max(1, o.tasks.length),
      retry: o.retry,
      reconcile: async (name, signal) => {
        const task = this.#tasks.get(name);
        if (task === undefined) return Result.done;
        await task.run(signal);
        return Result.requeueAfter(task.everyMs);
      },
      onResult: (name, result) => {
        if (result.type === "retry") o.onError?.(name, result.error);
      },
    });
  }

  /** Schedules every task's first run, one interval from now (idempotent). */
  start(): void {
    if (this.#started) return;
    this.#started = true;
    for (const t of this.#tasks.values()) this.#queue.addAfter(t.name, t.everyMs);
  }

  /** Runs a task as soon as it is not running (then again one interval later). */
  trigger(name: string): void {
    if (this.#tasks.has(name)) this.#queue.add(name);
  }

  /** Stops the schedule and waits for runs in flight (their signal is aborted). */
  stop(): Promise<void> {
    return this.#queue.stop();
  }
}

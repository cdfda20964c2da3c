// Progress lines of a long build (the first run builds the local Kubernetes from source, which
// takes minutes): which step runs, how many are left, the time spent so far, and a "still
// working" line at an interval so a slow step never looks like a hang. Pure formatting plus one
// timer; the caller decides where lines go.

/** "45s", "3m05s", "1h02m". */
export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, "0")}m`;
}

export interface Step {
  /** What the step does, e.g. "building kube-apiserver". */
  readonly what: string;
}

export interface ProgressOptions {
  readonly log: (line: string) => void;
  /** How often a running step says it is still running (default 30 s; 0: never). */
  readonly heartbeatMs?: number;
  readonly now?: () => number;
}

/** Runs steps in order, logging "[i/n] what (k left, elapsed)" before and a line after each. */
export class Progress {
  readonly #started: number;
  readonly #now: () => number;
  #done = 0;

  constructor(
    readonly total: number,
    private readonly opts: ProgressOptions,
  ) {
    this.#now = opts.now ?? Date.now;
    this.#started = this.#now();
  }

  elapsed(): string {
    return formatDuration(this.#now() - this.#started);
  }

  /** The line logged when step `index` (1-based) starts. */
  startLine(index: number, what: string): string {
    const left = this.total - index;
    return `[${index}/${this.total}] ${what} (${left === 0 ? "last step" : `${left} more after this`}, ${this.elapsed()} elapsed)`;
  }

  async step<T>(what: string, run: () => Promise<T>): Promise<T> {
    const index = ++this.#done;
    const stepStarted = this.#now();
    this.opts.log(this.startLine(index, what));
    const every = this.opts.heartbeatMs ?? 30_000;
    const timer =
      every > 0
        ? setInterval(
            () =>
              this.opts.log(
                `[${index}/${this.total}] … still ${what} (${formatDuration(this.#now() - stepStarted)} on this step, ${this.elapsed()} elapsed)`,
              ),
            every,
          )
        : undefined;
    timer?.unref();
    try {
      return await run();
    } finally {
      if (timer) clearInterval(timer);
    }
  }
}

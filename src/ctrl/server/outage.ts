// Tracks an outage of one dependency (ctrl's database) so it is logged once when it starts and
// once when it ends, not once per failing call: the first failure marks it down (warn, with the
// reason), then a cheap probe runs every interval while it is down, and its first success marks
// it up again (warn, with how long it lasted and how many failures it swallowed). The gauge
// krane_ctrl_dependency_up{dependency} tells Prometheus the same.
import type { Logger } from "pino";
import type { Gauge } from "prom-client";
import type { DependencyFailure } from "./dependency-errors.js";

export interface OutageWatchOptions {
  readonly dependency: string;
  /** Resolves when the dependency answers again. */
  readonly probe: () => Promise<void>;
  readonly log: Logger;
  readonly gauge?: Gauge<"dependency">;
  /** Probe interval while down (default 1 s). */
  readonly intervalMs?: number;
  readonly now?: () => number;
}

export class OutageWatch {
  readonly #o: OutageWatchOptions;
  #down: { since: number; failures: number } | undefined;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(opts: OutageWatchOptions) {
    this.#o = opts;
    opts.gauge?.set({ dependency: opts.dependency }, 1);
  }

  get down(): boolean {
    return this.#down !== undefined;
  }

  /** A call failed on the dependency. */
  failed(f: DependencyFailure): void {
    if (this.#down) {
      this.#down.failures++;
      return;
    }
    this.#down = { since: this.#now(), failures: 1 };
    this.#o.gauge?.set({ dependency: this.#o.dependency }, 0);
    this.#o.log.warn(
      { dependency: this.#o.dependency, reason: f.reason },
      `${this.#o.dependency} unavailable: calls that need it answer unavailable until it is back`,
    );
    this.#schedule();
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
  }

  #schedule(): void {
    if (this.#closed) return;
    this.#timer = setTimeout(() => void this.#check(), this.#o.intervalMs ?? 1000);
    this.#timer.unref();
  }

  async #check(): Promise<void> {
    const down = this.#down;
    if (!down || this.#closed) return;
    try {
      await this.#o.probe();
    } catch {
      this.#schedule();
      return;
    }
    this.#down = undefined;
    this.#o.gauge?.set({ dependency: this.#o.dependency }, 1);
    this.#o.log.warn(
      { dependency: this.#o.dependency, downMs: this.#now() - down.since, failures: down.failures },
      `${this.#o.dependency} available again`,
    );
  }

  #now(): number {
    return (this.#o.now ?? Date.now)();
  }
}

// Runnables and the manager that starts and stops them, shaped like controller-runtime's
// `mgr.Add`: a process is a list of parts, each started in the order added and stopped in the
// reverse order, so what a part needs is still running while it stops. A stop that hangs is
// named: `step()` says which part (or which step of it) the stop is waiting on.
export interface Runnable {
  /** Named in a stuck stop ("shutdown stuck at …"). */
  readonly name: string;
  /** Starts the part; resolves once it is ready (listening, its loops scheduled). */
  start?(signal: AbortSignal): Promise<void> | void;
  /** Resolves once the part has nothing queued or running (tests and drains wait on it). */
  idle?(): Promise<void>;
  /**
   * Stops the part; resolves once stopped. A part whose stop has steps of its own names each
   * through `step`, so a stuck one is told apart.
   */
  stop(step: (name: string) => void): Promise<void> | void;
}

/** A runnable from a name and a stop (a part with nothing to start). */
export function onStop(name: string, stop: (step: (name: string) => void) => Promise<void> | void): Runnable {
  return { name, stop };
}

/** A runnable from a name, a start and a stop. */
export function part(name: string, start: () => Promise<void> | void, stop: () => Promise<void> | void): Runnable {
  return { name, start, stop };
}

export class Manager {
  readonly #parts: Runnable[] = [];
  readonly #started: Runnable[] = [];
  readonly #stop = new AbortController();
  #step = "starting";
  #begun = false;
  #stopping: Promise<void> | undefined;

  /** Adds a part (before start); returns it, so construction and registration read as one line. */
  add<R extends Runnable>(part: R): R {
    if (this.#begun) throw new Error(`${part.name}: added after the manager started`);
    this.#parts.push(part);
    return part;
  }

  /**
   * Starts every part in the order added. When one fails to start, it and the parts already
   * started are stopped (in reverse) and the error is thrown: a stop must cope with a part whose
   * start failed halfway.
   */
  async start(): Promise<void> {
    this.#begun = true;
    for (const part of this.#parts) {
      this.#step = `starting ${part.name}`;
      try {
        await part.start?.(this.#stop.signal);
      } catch (err) {
        this.#started.push(part);
        await this.stop().catch(() => undefined);
        throw err;
      }
      this.#started.push(part);
    }
    this.#step = "running";
  }

  /** Resolves once every part is idle. */
  async idle(): Promise<void> {
    await Promise.all(this.#parts.map((p) => p.idle?.()));
  }

  /** Stops the started parts in the reverse order of adding them; safe to call twice. */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      this.#stop.abort();
      let failure: unknown;
      for (const part of [...this.#started].reverse()) {
        this.#step = part.name;
        try {
          await part.stop((name) => (this.#step = name));
        } catch (err) {
          // The rest still stop; the first failure is reported once they have.
          failure ??= err;
        }
      }
      this.#step = "stopped";
      if (failure !== undefined) throw failure;
    })();
    return this.#stopping;
  }

  /** What the manager is doing: "starting …", "running", the part or step a stop waits on, "stopped". */
  step(): string {
    return this.#step;
  }
}

// One value read from the database and kept fresh on change hints, for many readers at once: the
// core of every live view. A hint marks the value dirty; the follower reads it again at once
// after a quiet spell, but at most once per `coalesceMs` while hints keep coming (so a burst of
// commits is one read), and hints of the slow kind (`poke(false)`: a cluster's heartbeat) at most
// once per `slowMs`. Readers wait for a version newer than the one they have and take only the
// newest value: a reader that does not keep up skips values, it never queues them. A failed read
// is tried again with backoff while readers wait on the value they have; a read that throws a
// `FinalError` (the environment is gone) ends every reader with it.
import { setTimeout as sleep } from "node:timers/promises";
import { Backoff, type BackoffPolicy } from "../../retry/backoff.js";

/** Delays between attempts of a failed read: from 100 ms, never above 5 s. */
export const FOLLOW_RETRY: BackoffPolicy = { baseMs: 200, capMs: 5_000, minMs: 100 };

/** A read failure that no retry will mend: readers end with it. */
export class FinalError extends Error {
  constructor(cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
  }
}

export interface FollowerOptions {
  /** Least time between two reads while hints keep coming (ms). */
  coalesceMs: number;
  /** Least time between two reads prompted only by slow hints (ms). */
  slowMs: number;
  onError?: (err: unknown) => void;
}

export class Follower<T> {
  private value: T | undefined;
  private final: FinalError | undefined;
  version = 0;
  private dirty = false;
  private dirtyUrgent = false;
  private running = false;
  private closed = false;
  private lastReadAt = -Infinity;
  private lastUrgentAt = -Infinity;
  private readonly stop = new AbortController();
  private waiters = new Set<() => void>();
  private readonly backoff = new Backoff(FOLLOW_RETRY);
  /** Readers attached (the owner drops the follower at 0). */
  readers = 0;

  constructor(
    private readonly read: () => Promise<T>,
    private readonly opts: FollowerOptions,
  ) {
    this.poke(true);
  }

  /** Something this value shows may have changed; `urgent` false: only its slow parts. */
  poke(urgent = true): void {
    if (this.closed || this.final) return;
    this.dirty = true;
    if (urgent) this.dirtyUrgent = true;
    if (!this.running) void this.loop();
  }

  private async loop(): Promise<void> {
    this.running = true;
    try {
      while (this.dirty && !this.closed) {
        const now = performance.now();
        const since = this.dirtyUrgent ? this.lastReadAt : Math.max(this.lastReadAt, this.lastUrgentAt);
        const gap = this.dirtyUrgent ? this.opts.coalesceMs : this.opts.slowMs;
        const wait = since + gap - now;
        if (wait > 0) await sleep(wait, undefined, { signal: this.stop.signal }).catch(() => undefined);
        if (this.closed) return;
        const urgent = this.dirtyUrgent;
        this.dirty = false;
        this.dirtyUrgent = false;
        this.lastReadAt = performance.now();
        if (urgent) this.lastUrgentAt = this.lastReadAt;
        try {
          const v = await this.read();
          this.backoff.reset();
          this.value = v;
          this.version++;
        } catch (err) {
          if (err instanceof FinalError) {
            this.final = err;
          } else {
            this.opts.onError?.(err);
            // Read again after a pause; readers keep the value they have meanwhile.
            this.dirty = true;
            this.dirtyUrgent = true;
            await sleep(this.backoff.next(), undefined, { signal: this.stop.signal }).catch(() => undefined);
            continue;
          }
        }
        this.wakeAll();
        if (this.final) return;
      }
    } finally {
      this.running = false;
    }
  }

  /**
   * The newest value once its version is above `after` (resolves at once when it already is),
   * or undefined when `signal` aborts first. Throws the FinalError that ended the follower.
   */
  async next(after: number, signal: AbortSignal): Promise<{ value: T; version: number } | undefined> {
    for (;;) {
      if (this.final) throw this.final;
      if (this.version > after && this.value !== undefined) return { value: this.value, version: this.version };
      if (signal.aborted || this.closed) return undefined;
      await new Promise<void>((resolve) => {
        const done = (): void => {
          signal.removeEventListener("abort", done);
          this.waiters.delete(done);
          resolve();
        };
        this.waiters.add(done);
        signal.addEventListener("abort", done, { once: true });
      });
    }
  }

  private wakeAll(): void {
    const w = [...this.waiters];
    this.waiters.clear();
    for (const f of w) f();
  }

  close(): void {
    this.closed = true;
    this.stop.abort();
    this.wakeAll();
  }
}

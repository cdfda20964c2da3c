// A keyed, coalescing serializer: at most one run per key at a time, and at most one queued
// behind it. Requests that arrive while a run is queued join it (it has not started, so it will
// see whatever they changed); requests during a run queue exactly one more.
export class CoalescingQueue {
  private readonly keys = new Map<string, { queued: Promise<void> | null; tail: Promise<void> }>();

  /** Runs `fn` for `key` after any current run; joins an already queued run instead. */
  run(key: string, fn: () => Promise<void>): Promise<void> {
    let s = this.keys.get(key);
    if (s === undefined) {
      s = { queued: null, tail: Promise.resolve() };
      this.keys.set(key, s);
    }
    if (s.queued !== null) return s.queued;
    const state = s;
    const p = state.tail.then(() => {
      state.queued = null;
      return fn();
    });
    state.queued = p;
    const tail = p.catch(() => undefined);
    state.tail = tail;
    void tail.then(() => {
      if (state.tail === tail && state.queued === null) this.keys.delete(key);
    });
    return p;
  }

  /** Resolves when every run started so far has finished. */
  async idle(): Promise<void> {
    while (this.keys.size > 0) await Promise.all([...this.keys.values()].map((s) => s.tail));
  }
}

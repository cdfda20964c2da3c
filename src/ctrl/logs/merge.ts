// The time-ordered merge of many instances' lines (pure). Lines arrive per instance in order but
// interleaved across instances and regions, each batch a little late; the merger holds each entry
// for `holdMs` after it arrived (following) or until every source ended (not following) and
// releases entries in (time, arrival) order, so lines of one instance keep their order even with
// equal timestamps. While following, a live line (written after `liveFromMs`, the call's start)
// whose own time is already `maxAgeMs` old goes at once: an earlier line still to come would have
// to be later still, and the hold would only add to a delay the line already has. History (a
// backlog that arrives all at once, from --since or --tail) is always held by arrival: its age
// says nothing about what is still to come. The merger holds at most `capacity` entries: past
// that, the newest are dropped and a "dropped" marker per instance says how many.

export interface MergeEntry {
  /** Sort key: unix ns. */
  readonly ns: bigint;
  /** Region and instance: drops are counted per source. */
  readonly source: string;
}

interface Held<T> {
  readonly e: T;
  readonly seq: number;
  readonly at: number;
}

export interface MergeOptions {
  readonly holdMs: number;
  /** Live entries whose own time is at least this old (wall clock, ms) are not held. */
  readonly maxAgeMs?: number;
  /** Entries older than this (unix ms) are history: held by arrival whatever their age. */
  readonly liveFromMs?: number;
  readonly capacity: number;
}

export class LogMerger<T extends MergeEntry> {
  readonly #o: MergeOptions;
  #held: Held<T>[] = [];
  #sorted = true;
  #seq = 0;
  /** Lines dropped per source since the last drops() call, with the first dropped entry. */
  readonly #drops = new Map<string, { first: T; n: number }>();

  constructor(o: MergeOptions) {
    this.#o = o;
  }

  get size(): number {
    return this.#held.length;
  }

  /** Holds an entry; false when there was no room (counted in drops()). */
  add(e: T, now: number): boolean {
    if (this.#held.length >= this.#o.capacity) {
      const d = this.#drops.get(e.source);
      if (d) d.n++;
      else this.#drops.set(e.source, { first: e, n: 1 });
      return false;
    }
    const last = this.#held[this.#held.length - 1];
    if (last && last.e.ns > e.ns) this.#sorted = false;
    this.#held.push({ e, seq: this.#seq++, at: now });
    return true;
  }

  /** The drops since the last call: per source, how many and the first one dropped. */
  drops(): { first: T; n: number }[] {
    const out = [...this.#drops.values()];
    this.#drops.clear();
    return out;
  }

  /**
   * Releases, in time order, the entries held at least holdMs (all of them when `all`), stopping
   * at the first one still to be held: a later-arriving line with an earlier time can still go
   * before it.
   */
  take(now: number, all = false): T[] {
    this.#sort();
    let n = 0;
    if (all) n = this.#held.length;
    else while (n < this.#held.length && this.#due(this.#held[n] as Held<T>) <= now) n++;
    return this.#release(n);
  }

  /** Releases the `n` oldest entries by time, held long enough or not (a merge past its room). */
  takeOldest(n: number): T[] {
    this.#sort();
    return this.#release(Math.min(n, this.#held.length));
  }

  #sort(): void {
    if (this.#sorted) return;
    this.#held.sort((a, b) => (a.e.ns < b.e.ns ? -1 : a.e.ns > b.e.ns ? 1 : a.seq - b.seq));
    this.#sorted = true;
  }

  #release(n: number): T[] {
    if (n === 0) return [];
    const out = this.#held.slice(0, n).map((h) => h.e);
    this.#held = this.#held.slice(n);
    return out;
  }

  /** When an entry may go (ms): holdMs after it arrived, or once its own time is maxAgeMs old. */
  #due(h: Held<T>): number {
    const byArrival = h.at + this.#o.holdMs;
    const age = this.#o.maxAgeMs;
    if (age === undefined) return byArrival;
    const ms = Number(h.e.ns / 1_000_000n);
    return ms < (this.#o.liveFromMs ?? 0) ? byArrival : Math.min(byArrival, ms + age);
  }

  /** When the next entry is due (ms), or undefined when nothing is held. */
  nextDue(): number | undefined {
    if (this.#held.length === 0) return undefined;
    let min = Number.POSITIVE_INFINITY;
    for (const h of this.#held) min = Math.min(min, this.#due(h));
    return min;
  }
}

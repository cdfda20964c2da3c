// The time-ordered merge of many instances' lines (pure). Lines arrive per instance in order but
// interleaved across instances and regions, each batch a little late; the merger holds each entry
// for `holdMs` after it arrived (following) or until every source ended (not following) and
// releases entries in (time, arrival) order, so lines of one instance keep their order even with
// equal timestamps. It holds at most `capacity` entries: past that, the newest are dropped and a
// "dropped" marker per instance says how many.

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
    else while (n < this.#held.length && now - (this.#held[n] as Held<T>).at >= this.#o.holdMs) n++;
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

  /** When the next entry is due (ms), or undefined when nothing is held. */
  nextDue(): number | undefined {
    if (this.#held.length === 0) return undefined;
    let min = Number.POSITIVE_INFINITY;
    for (const h of this.#held) if (h.at < min) min = h.at;
    return min + this.#o.holdMs;
  }
}

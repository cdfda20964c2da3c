// Per-process fan-out of one (kind, region) stream to its watchers.
//
// A StreamFeed keeps a bounded, contiguous tail of the newest outbox rows. When a poke says the
// stream moved, the feed reads the new rows once (by cursor, so lost or merged pokes are
// harmless) and wakes its watchers; each watcher then copies what it still needs at its own
// pace. Watchers never block the feed or each other: a slow watcher that falls behind the tail
// reads the outbox itself. Feeds exist only while someone watches.
import type { ChangeNotifier, Poke } from "../store/notify.js";
import type { OutboxChange, StreamPosition } from "../store/outbox.js";
import type { ObjectKind } from "../store/schema.js";

export interface FeedSource {
  position(region: string, kind: ObjectKind): Promise<StreamPosition>;
  readOutbox(region: string, kind: ObjectKind, after: number, limit: number): Promise<OutboxChange[]>;
}

export interface FeedOptions {
  /** Rows kept in memory per feed. */
  tailSize?: number;
  /** Rows per outbox read. */
  pageSize?: number;
  /** Backstop re-read of every live feed, in case a poke was lost (ms; 0 disables). */
  safetyIntervalMs?: number;
  onError?: (err: unknown) => void;
}

/** What a watcher gets from the feed: rows after its cursor, or "miss" (read the outbox). */
export type TailRead = OutboxChange[] | "miss";

/** Pure: the rows of a contiguous tail after `after`, at most `max`. */
export function readTail(tail: readonly OutboxChange[], loaded: number, after: number, max: number): TailRead {
  if (after >= loaded) return [];
  const first = tail[0];
  if (!first || after < first.version - 1) return "miss";
  const start = after - first.version + 1;
  return tail.slice(start, start + max);
}

export class StreamFeed {
  private tail: OutboxChange[] = [];
  /** Highest version this feed has read (its tail ends here). */
  private loaded = 0;
  private ready: Promise<void>;
  private fetching = false;
  private dirty = false;
  private closed = false;
  private wake: { promise: Promise<void>; resolve: () => void };
  watchers = 0;

  constructor(
    readonly kind: ObjectKind,
    readonly region: string,
    private readonly source: FeedSource,
    private readonly tailSize: number,
    private readonly pageSize: number,
    private readonly onError: (err: unknown) => void,
  ) {
    this.wake = StreamFeed.deferred();
    this.ready = this.init();
  }

  private static deferred(): { promise: Promise<void>; resolve: () => void } {
    let resolve = (): void => undefined;
    const promise = new Promise<void>((r) => (resolve = r));
    return { promise, resolve };
  }

  private async init(): Promise<void> {
    const pos = await this.source.position(this.region, this.kind);
    this.loaded = Math.max(this.loaded, pos.head);
    if (this.dirty) this.poke();
  }

  whenReady(): Promise<void> {
    return this.ready;
  }

  /** The stream may have moved past `version` (or anywhere, when undefined). */
  poke(version?: number): void {
    if (this.closed) return;
    if (version !== undefined && version <= this.loaded) return;
    this.dirty = true;
    if (this.fetching) return;
    this.fetching = true;
    void this.ready
      .then(() => this.fetchLoop())
      .catch((err: unknown) => {
        this.onError(err);
        // Try again soon; watchers keep waiting meanwhile.
        setTimeout(() => this.poke(), 500).unref();
      })
      .finally(() => {
        this.fetching = false;
      });
  }

  private async fetchLoop(): Promise<void> {
    while (this.dirty && !this.closed) {
      this.dirty = false;
      const rows = await this.source.readOutbox(this.region, this.kind, this.loaded, this.pageSize);
      if (rows.length === 0) continue;
      const first = rows[0];
      if (first && first.version !== this.loaded + 1) this.tail = []; // compacted past us: restart the tail
      for (const r of rows) this.tail.push(r);
      const last = rows[rows.length - 1];
      if (last) this.loaded = last.version;
      if (this.tail.length > this.tailSize) this.tail.splice(0, this.tail.length - this.tailSize);
      if (rows.length === this.pageSize) this.dirty = true;
      const w = this.wake;
      this.wake = StreamFeed.deferred();
      w.resolve();
    }
  }

  read(after: number, max: number): TailRead {
    return readTail(this.tail, this.loaded, after, max);
  }

  get head(): number {
    return this.loaded;
  }

  /** Resolves the next time the feed reads new rows. Take it before reading, then wait. */
  nextChange(): Promise<void> {
    return this.wake.promise;
  }

  close(): void {
    this.closed = true;
    this.wake.resolve();
  }
}

/** All feeds of one ctrl process, keyed by (kind, region), driven by the change notifier. */
export class FeedHub {
  private readonly feeds = new Map<string, StreamFeed>();
  private readonly unsubscribe: () => void;
  private readonly timer: NodeJS.Timeout | null;
  private readonly tailSize: number;
  private readonly pageSize: number;
  private readonly onError: (err: unknown) => void;

  constructor(
    private readonly source: FeedSource,
    notifier: ChangeNotifier,
    options: FeedOptions = {},
  ) {
    this.tailSize = options.tailSize ?? 4096;
    this.pageSize = options.pageSize ?? 1000;
    this.onError = options.onError ?? (() => undefined);
    this.unsubscribe = notifier.subscribe((p) => this.onPoke(p));
    const interval = options.safetyIntervalMs ?? 5000;
    this.timer = interval > 0 ? setInterval(() => this.onPoke(null), interval) : null;
    this.timer?.unref();
  }

  private onPoke(p: Poke | null): void {
    if (p === null) {
      for (const f of this.feeds.values()) f.poke();
      return;
    }
    this.feeds.get(`${p.kind}/${p.region}`)?.poke(p.version);
  }

  /** Joins the feed of a stream; call `release` when the watcher ends. */
  async acquire(kind: ObjectKind, region: string): Promise<{ feed: StreamFeed; release: () => void }> {
    const key = `${kind}/${region}`;
    let feed = this.feeds.get(key);
    if (!feed) {
      feed = new StreamFeed(kind, region, this.source, this.tailSize, this.pageSize, this.onError);
      this.feeds.set(key, feed);
    }
    feed.watchers++;
    const f = feed;
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      f.watchers--;
      if (f.watchers === 0 && this.feeds.get(key) === f) {
        this.feeds.delete(key);
        f.close();
      }
    };
    try {
      await f.whenReady();
    } catch (err) {
      // A feed that could not learn its head is useless: drop it so the next watcher retries.
      if (this.feeds.get(key) === f) this.feeds.delete(key);
      f.close();
      release();
      throw err;
    }
    return { feed: f, release };
  }

  get size(): number {
    return this.feeds.size;
  }

  close(): void {
    this.unsubscribe();
    if (this.timer) clearInterval(this.timer);
    for (const f of this.feeds.values()) f.close();
    this.feeds.clear();
  }
}

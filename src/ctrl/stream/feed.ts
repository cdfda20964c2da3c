// Per-process fan-out of one (kind, region) stream to its watchers.
//
// A StreamFeed keeps a bounded, contiguous tail of the newest outbox rows. When a poke says the
// stream moved, the feed reads the new rows once (by cursor, so lost or merged pokes are
// harmless) and wakes its watchers; each watcher then copies what it still needs at its own
// pace. Watchers never block the feed or each other: a slow watcher that falls behind the tail
// reads the outbox itself. Feeds exist only while someone watches. A failed outbox read is
// tried again with backoff (FEED_RETRY, through src/retry) while watchers keep waiting.
//
// Reads are coalesced: a poke after a quiet spell is read at once, but a feed reads
// at most once per `coalesceMs` (2 ms) while changes keep coming, so under a stream of commits
// one read and one wake-up carry several changes, and each watcher writes them to its HTTP/2
// connection in one go (one socket write for several messages instead of one per change).
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import type { BackoffPolicy } from "../../retry/backoff.js";
import { retry } from "../../retry/retry.js";
import type { ChangeNotifier, Poke } from "../db/notify.js";
import type { OutboxChange, StreamPosition } from "../db/outbox.js";
import type { KindName } from "../db/schema.js";

/** Delays between attempts of a failed outbox read: from 50 ms, never above 1 s. */
export const FEED_RETRY: BackoffPolicy = { baseMs: 100, capMs: 1000, minMs: 50 };
/** Least time between two outbox reads of one feed while changes keep coming. */
export const FEED_COALESCE_MS = 2;

export interface FeedSource {
  position(region: string, kind: KindName): Promise<StreamPosition>;
  readOutbox(region: string, kind: KindName, after: number, limit: number): Promise<OutboxChange[]>;
}

export interface FeedOptions {
  /** Rows kept in memory per feed. */
  tailSize?: number;
  /** Rows per outbox read. */
  pageSize?: number;
  /** Backstop re-read of every live feed, in case a poke was lost (ms; 0 disables). */
  safetyIntervalMs?: number;
  /** Least time between two outbox reads of a feed while changes keep coming (ms; 0: none). */
  coalesceMs?: number;
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
  private readonly stop = new AbortController();
  private wake: { promise: Promise<void>; resolve: () => void };
  /** When the last outbox read started (performance.now()). */
  private lastReadAt = -Infinity;
  watchers = 0;

  constructor(
    readonly kind: KindName,
    readonly region: string,
    private readonly source: FeedSource,
    private readonly tailSize: number,
    private readonly pageSize: number,
    private readonly onError: (err: unknown) => void,
    private readonly coalesceMs = 0,
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
    const attempt = (n: number): Promise<void> => {
      // A failed attempt had taken the dirty mark: the next one reads again.
      if (n > 1) this.dirty = true;
      return this.fetchLoop();
    };
    void this.ready
      .then(() =>
        retry(attempt, {
          policy: FEED_RETRY,
          retryable: () => !this.closed,
          signal: this.stop.signal,
          onRetry: (err) => this.onError(err),
        }),
      )
      .catch((err: unknown) => {
        if (!this.closed) this.onError(err);
      })
      .finally(() => {
        this.fetching = false;
      });
  }

  private async fetchLoop(): Promise<void> {
    while (this.dirty && !this.closed) {
      // Pokes that arrive while we wait only keep the dirty mark: one read takes them all.
      const wait = this.lastReadAt + this.coalesceMs - performance.now();
      if (wait > 0) await sleep(wait, undefined, { signal: this.stop.signal });
      if (this.closed) return;
      this.dirty = false;
      this.lastReadAt = performance.now();
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
    this.stop.abort();
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
  private readonly coalesceMs: number;
  private readonly onError: (err: unknown) => void;

  constructor(
    private readonly source: FeedSource,
    notifier: ChangeNotifier,
    options: FeedOptions = {},
  ) {
    this.tailSize = options.tailSize ?? 4096;
    this.pageSize = options.pageSize ?? 1000;
    this.coalesceMs = options.coalesceMs ?? FEED_COALESCE_MS;
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
  async acquire(kind: KindName, region: string): Promise<{ feed: StreamFeed; release: () => void }> {
    const key = `${kind}/${region}`;
    let feed = this.feeds.get(key);
    if (!feed) {
      feed = new StreamFeed(kind, region, this.source, this.tailSize, this.pageSize, this.onError, this.coalesceMs);
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

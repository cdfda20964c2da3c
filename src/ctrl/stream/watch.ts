// The watch logic behind every kind's Watch… stream, independent of the wire format.
//
// A watcher resumes from its cursor when the outbox still holds every version after it;
// otherwise (cursor 0, compacted away, or ahead of the head after a database reset) it first
// gets a snapshot of the region's desired state: SnapshotStart, every object, SnapshotEnd with
// the head version the snapshot corresponds to. Then it follows the feed: changes in version
// order as they commit, each exactly once.
//
// Bookmarks ("up to date at version N", N the position of this stream: every change up to it was
// sent; 0 when there is none yet) make a live stream distinguishable from a dead one. Every
// stream starts with one, so the agent learns at once that ctrl accepted it (a resumed stream may
// have nothing else to say for hours) and how often ctrl will speak; and any stream that has been
// quiet for the keepalive interval gets one, including while a large region's snapshot is read.
import { readOutbox, readSnapshot, streamPosition, type OutboxChange, type StreamPosition } from "../db/outbox.js";
import type { KindName } from "../db/schema.js";
import type { Store } from "../db/store.js";
import type { FeedHub, FeedSource } from "./feed.js";

export type WatchEvent =
  | { type: "snapshot_start" }
  | { type: "snapshot_object"; objectId: string; payload: Uint8Array }
  | { type: "snapshot_end"; head: number }
  | { type: "change"; change: OutboxChange }
  /** Up to date at `version` (0 inside a snapshot); the next message follows within `keepaliveMs`. */
  | { type: "bookmark"; version: number; keepaliveMs: number };

/** How long a watch stream may be quiet before ctrl sends a bookmark (ms). */
export const DEFAULT_STREAM_KEEPALIVE_MS = 10_000;

/** Pure: can a watcher at `cursor` resume from the outbox, or does it need a snapshot? */
export function planResume(cursor: number, pos: StreamPosition): "resume" | "snapshot" {
  if (cursor === 0) return "snapshot";
  if (cursor < pos.compactedThrough) return "snapshot";
  if (cursor > pos.head) return "snapshot";
  return "resume";
}

/** The watcher fell behind the retained outbox while streaming; it must reconnect. */
export class CursorCompactedError extends Error {
  constructor(readonly cursor: number) {
    super(`the outbox no longer holds the changes after version ${cursor}; reconnect to get a snapshot`);
    this.name = "CursorCompactedError";
  }
}

export function storeFeedSource(store: Store): FeedSource {
  return {
    position: (region, kind) => streamPosition(store.db, region, kind),
    readOutbox: (region, kind, after, limit) => readOutbox(store.db, region, kind, after, limit),
  };
}

export interface WatchParams {
  kind: KindName;
  region: string;
  cursor: number;
  /** Ends the watch (client gone or server shutting down). */
  signal: AbortSignal;
  batchSize?: number;
  /** A bookmark is sent when the stream has been quiet this long (default DEFAULT_STREAM_KEEPALIVE_MS). */
  keepaliveMs?: number;
}

const QUIET = Symbol("quiet");

/**
 * Waits for `p` at most `ms`, or until `signal` aborts: its value, or QUIET when it had not
 * settled by then (it may still settle later: a rejection after that is dropped here, and seen
 * by the next wait on the same promise).
 */
function within<T>(p: Promise<T>, ms: number, signal: AbortSignal): Promise<T | typeof QUIET> {
  if (signal.aborted) return Promise.resolve(QUIET);
  return new Promise<T | typeof QUIET>((resolve, reject) => {
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener("abort", quiet);
    };
    const quiet = (): void => {
      done();
      resolve(QUIET);
    };
    const timer = setTimeout(quiet, ms);
    signal.addEventListener("abort", quiet, { once: true });
    p.then(
      (v) => {
        done();
        resolve(v);
      },
      (err: unknown) => {
        done();
        reject(err);
      },
    );
  });
}

/** Snapshot objects per batch: a batch is written to a watcher's connection in one go. */
const SNAPSHOT_BATCH = 500;

/**
 * The watch as batches of events: each batch is what is ready for the watcher at once (a slice
 * of the snapshot, or every change the feed holds after its cursor, up to `batchSize`), so a
 * writer can put a whole batch on the wire in one write.
 */
export async function* watchBatches(store: Store, hub: FeedHub, params: WatchParams): AsyncGenerator<WatchEvent[]> {
  const { kind, region, signal } = params;
  const batchSize = params.batchSize ?? 500;
  const keepaliveMs = params.keepaliveMs ?? DEFAULT_STREAM_KEEPALIVE_MS;
  const bookmark = (version: number): WatchEvent[] => [{ type: "bookmark", version, keepaliveMs }];
  let cursor = params.cursor;
  // Join the feed before looking at the head, so no commit falls between the two.
  const { feed, release } = await hub.acquire(kind, region);
  try {
    const pos = await streamPosition(store.db, region, kind);
    if (planResume(cursor, pos) === "snapshot") {
      // The start goes out before the region is read, so the agent hears from ctrl at once;
      // bookmarks cover a read that takes longer than the keepalive interval.
      yield [...bookmark(0), { type: "snapshot_start" }];
      const reading = readSnapshot(store.db, store.dialect, region, kind);
      // A stream ended while reading must not leave the read's failure unhandled.
      reading.catch(() => undefined);
      let snap = await within(reading, keepaliveMs, signal);
      while (snap === QUIET) {
        if (signal.aborted) return;
        yield bookmark(0);
        snap = await within(reading, keepaliveMs, signal);
      }
      for (let i = 0; i < snap.objects.length; i += SNAPSHOT_BATCH) {
        if (signal.aborted) return;
        yield snap.objects
          .slice(i, i + SNAPSHOT_BATCH)
          .map((o): WatchEvent => ({ type: "snapshot_object", objectId: o.objectId, payload: o.payload }));
      }
      yield [{ type: "snapshot_end", head: snap.head }];
      cursor = snap.head;
    } else {
      yield bookmark(cursor);
    }
    while (!signal.aborted) {
      const next = feed.nextChange();
      let batch = feed.read(cursor, batchSize);
      if (batch === "miss") {
        batch = await readOutbox(store.db, region, kind, cursor, batchSize);
        const first = batch[0];
        if (first && first.version !== cursor + 1) throw new CursorCompactedError(cursor);
        if (!first && cursor < (await streamPosition(store.db, region, kind)).compactedThrough)
          throw new CursorCompactedError(cursor);
      }
      const last = batch[batch.length - 1];
      if (last) {
        if (signal.aborted) return;
        yield batch.map((change): WatchEvent => ({ type: "change", change }));
        cursor = last.version;
      } else if ((await within(next, keepaliveMs, signal)) === QUIET && !signal.aborted) {
        yield bookmark(cursor);
      }
    }
  } finally {
    release();
  }
}

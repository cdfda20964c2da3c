// The watch logic behind every kind's Watch… stream, independent of the wire format.
//
// A watcher resumes from its cursor when the outbox still holds every version after it;
// otherwise (cursor 0, compacted away, or ahead of the head after a database reset) it first
// gets a snapshot of the region's desired state: SnapshotStart, every object, SnapshotEnd with
// the head version the snapshot corresponds to. Then it follows the feed: changes in version
// order as they commit, each exactly once.
import { readOutbox, readSnapshot, streamPosition, type OutboxChange, type StreamPosition } from "../db/outbox.js";
import type { KindName } from "../db/schema.js";
import type { Store } from "../db/store.js";
import type { FeedHub, FeedSource } from "./feed.js";

export type WatchEvent =
  | { type: "snapshot_start" }
  | { type: "snapshot_object"; objectId: string; payload: Uint8Array }
  | { type: "snapshot_end"; head: number }
  | { type: "change"; change: OutboxChange };

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
}

function abortable(p: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = (): void => {
      signal.removeEventListener("abort", done);
      resolve();
    };
    signal.addEventListener("abort", done, { once: true });
    void p.then(done, done);
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
  let cursor = params.cursor;
  // Join the feed before looking at the head, so no commit falls between the two.
  const { feed, release } = await hub.acquire(kind, region);
  try {
    const pos = await streamPosition(store.db, region, kind);
    if (planResume(cursor, pos) === "snapshot") {
      const snap = await readSnapshot(store.db, store.dialect, region, kind);
      yield [{ type: "snapshot_start" }];
      for (let i = 0; i < snap.objects.length; i += SNAPSHOT_BATCH) {
        if (signal.aborted) return;
        yield snap.objects
          .slice(i, i + SNAPSHOT_BATCH)
          .map((o): WatchEvent => ({ type: "snapshot_object", objectId: o.objectId, payload: o.payload }));
      }
      yield [{ type: "snapshot_end", head: snap.head }];
      cursor = snap.head;
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
      } else {
        await abortable(next, signal);
      }
    }
  } finally {
    release();
  }
}

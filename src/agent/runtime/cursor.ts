// The version cursor of one desired-state stream, as a pure state machine: what a resumed stream,
// a snapshot and a bookmark each do to the version this agent has applied up to.
//
// The stream loop feeds it decoded messages; it answers what to do and where the cursor is.
// Rules:
//  - an apply/delete outside a snapshot is handled (queued, or rejected and reported) and the
//    cursor moves to its version — "accepted" is enough because the work queue retries it for
//    as long as this process (and therefore this in-memory cursor) lives; a restart begins at 0,
//    which makes ctrl send a snapshot;
//  - the cursor never moves backwards;
//  - SnapshotStart opens a snapshot: keys are collected, the cursor does not move (items carry 0);
//  - SnapshotEnd garbage-collects managed objects whose keys the snapshot did not name and moves
//    the cursor to the snapshot's head version;
//  - a stream that breaks inside a snapshot drops it (reconnect() below): the cursor is still
//    where it was, so ctrl sends a fresh snapshot;
//  - a bookmark ("up to date at version N") moves the cursor to N outside a snapshot, and does
//    nothing inside one.

export type StreamEvent<D, Del> =
  | { readonly type: "apply"; readonly version: bigint; readonly key: string; readonly desired: D }
  | { readonly type: "delete"; readonly version: bigint; readonly key: string; readonly ref: Del }
  | { readonly type: "snapshot-start"; readonly version: bigint }
  | { readonly type: "snapshot-end"; readonly version: bigint; readonly head: bigint }
  /** ctrl is up to date at `version` and sends something again within `keepaliveMs`. */
  | { readonly type: "bookmark"; readonly version: bigint; readonly keepaliveMs: number }
  /** A message without a state this agent knows (a newer ctrl's). */
  | { readonly type: "empty"; readonly version: bigint };

export interface CursorState {
  readonly cursor: bigint;
  /** Keys named by the snapshot in progress; undefined outside a snapshot. */
  readonly snapshotKeys: ReadonlySet<string> | undefined;
}

export type CursorAction<D, Del> =
  | { readonly type: "apply"; readonly key: string; readonly desired: D }
  | { readonly type: "delete"; readonly key: string; readonly ref: Del }
  /** Delete every managed object of the region whose key is not in `keep`. */
  | { readonly type: "collect-garbage"; readonly keep: ReadonlySet<string> }
  | { readonly type: "snapshot-started" };

export function initialCursor(cursor: bigint = 0n): CursorState {
  return { cursor, snapshotKeys: undefined };
}

export function maxBig(a: bigint, b: bigint): bigint {
  return a > b ? a : b;
}

export function cursorStep<D, Del>(
  s: CursorState,
  ev: StreamEvent<D, Del>,
): { state: CursorState; actions: CursorAction<D, Del>[] } {
  switch (ev.type) {
    case "snapshot-start":
      return { state: { cursor: s.cursor, snapshotKeys: new Set() }, actions: [{ type: "snapshot-started" }] };
    case "snapshot-end": {
      if (!s.snapshotKeys) {
        // An end without a start: nothing to collect against; just trust the head.
        return { state: { cursor: maxBig(s.cursor, ev.head), snapshotKeys: undefined }, actions: [] };
      }
      return {
        state: { cursor: ev.head, snapshotKeys: undefined },
        actions: [{ type: "collect-garbage", keep: s.snapshotKeys }],
      };
    }
    case "apply":
    case "delete": {
      const action: CursorAction<D, Del> =
        ev.type === "apply"
          ? { type: "apply", key: ev.key, desired: ev.desired }
          : { type: "delete", key: ev.key, ref: ev.ref };
      if (s.snapshotKeys) {
        // The set belongs to the snapshot in progress and is extended in place (a snapshot can
        // name thousands of keys; copying it per message would be quadratic).
        const keys = s.snapshotKeys as Set<string>;
        if (ev.type === "apply") keys.add(ev.key);
        else keys.delete(ev.key);
        return { state: { cursor: s.cursor, snapshotKeys: keys }, actions: [action] };
      }
      return { state: { cursor: maxBig(s.cursor, ev.version), snapshotKeys: undefined }, actions: [action] };
    }
    case "bookmark":
    case "empty":
      if (s.snapshotKeys) return { state: s, actions: [] };
      return { state: { cursor: maxBig(s.cursor, ev.version), snapshotKeys: undefined }, actions: [] };
  }
}

/** The stream broke: a snapshot in progress is abandoned, the cursor stays. */
export function cursorReconnect(s: CursorState): CursorState {
  return { cursor: s.cursor, snapshotKeys: undefined };
}

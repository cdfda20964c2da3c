import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  cursorReconnect,
  cursorStep,
  initialCursor,
  type CursorState,
  type StreamEvent,
} from "../../../../src/agent/runtime/cursor.js";

type Ev = StreamEvent<string, string>;

function run(events: Ev[], start: CursorState = initialCursor()): { state: CursorState; actions: string[] } {
  let state = start;
  const actions: string[] = [];
  for (const ev of events) {
    const r = cursorStep(state, ev);
    state = r.state;
    for (const a of r.actions) {
      if (a.type === "collect-garbage") actions.push(`gc keep=${[...a.keep].sort().join(",")}`);
      else if (a.type === "snapshot-started") actions.push("snapshot");
      else actions.push(`${a.type} ${a.key}`);
    }
  }
  return { state, actions };
}

test("applies and deletes move the cursor to their version", () => {
  const r = run([
    { type: "apply", version: 3n, key: "a", desired: "A" },
    { type: "delete", version: 5n, key: "b", ref: "B" },
  ]);
  assert.equal(r.state.cursor, 5n);
  assert.deepEqual(r.actions, ["apply a", "delete b"]);
});

test("a snapshot collects keys, garbage-collects the rest and jumps to the head", () => {
  const r = run([
    { type: "snapshot-start", version: 0n },
    { type: "apply", version: 0n, key: "a", desired: "A" },
    { type: "apply", version: 0n, key: "b", desired: "B" },
    { type: "snapshot-end", version: 0n, head: 42n },
    { type: "apply", version: 43n, key: "c", desired: "C" },
  ]);
  assert.deepEqual(r.actions, ["snapshot", "apply a", "apply b", "gc keep=a,b", "apply c"]);
  assert.equal(r.state.cursor, 43n);
  assert.equal(r.state.snapshotKeys, undefined);
});

test("the cursor does not move inside a snapshot, and a broken snapshot is dropped", () => {
  let { state } = run([{ type: "apply", version: 7n, key: "x", desired: "X" }]);
  ({ state } = run(
    [
      { type: "snapshot-start", version: 0n },
      { type: "apply", version: 0n, key: "a", desired: "A" },
    ],
    state,
  ));
  assert.equal(state.cursor, 7n);
  state = cursorReconnect(state);
  assert.equal(state.cursor, 7n);
  assert.equal(state.snapshotKeys, undefined);
  // An end without its start does not garbage-collect anything.
  const r = run([{ type: "snapshot-end", version: 0n, head: 9n }], state);
  assert.deepEqual(r.actions, []);
  assert.equal(r.state.cursor, 9n);
});

test("a bookmark moves the cursor to its version outside a snapshot, and does nothing inside one", () => {
  const bookmark = (version: bigint): Ev => ({ type: "bookmark", version, keepaliveMs: 1000 });
  assert.deepEqual(run([bookmark(0n)], initialCursor(4n)), { state: initialCursor(4n), actions: [] });
  assert.equal(run([bookmark(9n)], initialCursor(4n)).state.cursor, 9n);
  assert.equal(run([bookmark(3n)], initialCursor(4n)).state.cursor, 4n, "never backwards");
  const inSnapshot = run([{ type: "snapshot-start", version: 0n }, bookmark(0n), bookmark(50n)], initialCursor(4n));
  assert.equal(inSnapshot.state.cursor, 4n);
  assert.deepEqual(inSnapshot.actions, ["snapshot"]);
});

test("property: the cursor never decreases outside snapshot ends and equals the max version seen", () => {
  fc.assert(
    fc.property(fc.array(fc.bigInt({ min: 1n, max: 1000n }), { maxLength: 50 }), (versions) => {
      let state = initialCursor();
      let max = 0n;
      for (const v of versions) {
        const before = state.cursor;
        state = cursorStep<string, string>(state, { type: "apply", version: v, key: "k", desired: "d" }).state;
        assert.ok(state.cursor >= before);
        if (v > max) max = v;
      }
      assert.equal(state.cursor, max);
    }),
  );
});

import { test } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import { DesiredStateStream } from "../../../src/agent/runtime/stream.js";
import type { CursorAction, StreamEvent } from "../../../src/agent/runtime/cursor.js";
import type { Logger } from "../../../src/agent/runtime/log.js";

type Ev = StreamEvent<string, string>;

function recordingLogger(): Logger & { errors: string[] } {
  const errors: string[] = [];
  return { errors, debug() {}, info() {}, warn() {}, error: (_o, msg) => errors.push(msg ?? "") };
}

test("reconnects after failures and resumes from the cursor; snapshot then live changes", async () => {
  const ac = new AbortController();
  const cursors: bigint[] = [];
  const actions: string[] = [];
  let attempt = 0;
  const stream = new DesiredStateStream<Ev, string, string>({
    name: "t",
    reconnect: { baseMs: 1, capMs: 5 },
    log: recordingLogger(),
    decode: (e) => e,
    onAction: (a: CursorAction<string, string>) =>
      actions.push(
        a.type === "collect-garbage"
          ? `gc:${[...a.keep].join(",")}`
          : a.type === "snapshot-started"
            ? "snap"
            : `${a.type}:${a.key}`,
      ),
    open: (cursor, _signal, onOpen) => {
      cursors.push(cursor);
      attempt++;
      const n = attempt;
      return (async function* (): AsyncGenerator<Ev> {
        if (n === 1) throw new ConnectError("down", Code.Unavailable);
        onOpen();
        if (n === 2) {
          yield { type: "snapshot-start", version: 0n };
          yield { type: "apply", version: 0n, key: "a", desired: "A" };
          // Broken mid-snapshot: must not advance the cursor.
          throw new ConnectError("reset", Code.Unavailable);
        }
        if (n === 3) {
          yield { type: "snapshot-start", version: 0n };
          yield { type: "apply", version: 0n, key: "a", desired: "A" };
          yield { type: "snapshot-end", version: 0n, head: 10n };
          yield { type: "apply", version: 11n, key: "b", desired: "B" };
          return; // server ends the stream cleanly
        }
        ac.abort();
      })();
    },
  });
  await stream.run(ac.signal);
  assert.deepEqual(cursors, [0n, 0n, 0n, 11n]);
  assert.deepEqual(actions, ["snap", "apply:a", "snap", "apply:a", "gc:a", "apply:b"]);
  assert.equal(stream.cursor, 11n);
});

test("credential errors are logged loudly and retried no faster than the floor", async () => {
  const ac = new AbortController();
  const log = recordingLogger();
  const opens: number[] = [];
  const stream = new DesiredStateStream<Ev, string, string>({
    name: "t",
    reconnect: { baseMs: 1, capMs: 1 },
    authRetryFloorMs: 30,
    log,
    decode: (e) => e,
    onAction: () => {},
    open: () => {
      opens.push(performance.now());
      if (opens.length === 3) ac.abort();
      return {
        [Symbol.asyncIterator]: () => ({
          next: () => Promise.reject(new ConnectError("no", Code.Unauthenticated)),
        }),
      };
    },
  });
  await stream.run(ac.signal);
  assert.equal(log.errors.length, 2);
  const [a = 0, b = 0] = opens;
  assert.ok(b - a >= 29, "waited at least the floor between attempts");
  assert.equal(stream.connected, false);
});

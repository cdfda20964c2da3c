import { test } from "node:test";
import assert from "node:assert/strict";
import { KeyedWorkQueue } from "../../../src/agent/runtime/workqueue.js";

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve: () => void = () => {};
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

test("one key runs in order and the latest waiting item wins", async () => {
  const seen: string[] = [];
  const gate = deferred();
  const q = new KeyedWorkQueue<string>({
    concurrency: 4,
    retry: { baseMs: 1, capMs: 5 },
    handle: async (_k, item) => {
      seen.push(`start ${item}`);
      if (item === "v1") await gate.promise;
      seen.push(`end ${item}`);
    },
  });
  q.add("a", "v1");
  q.add("a", "v2");
  q.add("a", "v3"); // replaces v2, which never started
  gate.resolve();
  await q.drained();
  assert.deepEqual(seen, ["start v1", "end v1", "start v3", "end v3"]);
});

test("different keys run in parallel up to the bound", async () => {
  let running = 0;
  let peak = 0;
  const q = new KeyedWorkQueue<number>({
    concurrency: 3,
    retry: { baseMs: 1, capMs: 5 },
    handle: async () => {
      running++;
      peak = Math.max(peak, running);
      await new Promise((r) => setTimeout(r, 5));
      running--;
    },
  });
  for (let i = 0; i < 20; i++) q.add(`k${i}`, i);
  await q.drained();
  assert.equal(peak, 3);
});

test("a failing key retries with backoff without blocking other keys", async () => {
  const done: string[] = [];
  let failures = 0;
  const q = new KeyedWorkQueue<string>({
    concurrency: 1,
    retry: { baseMs: 5, capMs: 20 },
    handle: async (k, item) => {
      if (k === "bad" && failures < 3) {
        failures++;
        throw new Error("boom");
      }
      done.push(`${k}:${item}`);
    },
  });
  q.add("bad", "x");
  q.add("good1", "y");
  q.add("good2", "z");
  await q.drained();
  assert.equal(failures, 3);
  // The good keys did not wait for the bad key's retries.
  assert.deepEqual(done.slice(0, 2), ["good1:y", "good2:z"]);
  assert.deepEqual(done[2], "bad:x");
});

test("a newer item replaces one waiting for a retry and runs at once", async () => {
  const seen: string[] = [];
  const q = new KeyedWorkQueue<string>({
    concurrency: 1,
    retry: { baseMs: 60_000, capMs: 60_000, minMs: 60_000 },
    handle: async (_k, item) => {
      seen.push(item);
      if (item === "broken") throw new Error("nope");
    },
  });
  q.add("a", "broken");
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(q.retrying, 1);
  q.add("a", "fixed");
  await q.drained();
  assert.deepEqual(seen, ["broken", "fixed"]);
});

test("stop cancels pending retries", async () => {
  const q = new KeyedWorkQueue<string>({
    concurrency: 1,
    retry: { baseMs: 60_000, capMs: 60_000, minMs: 60_000 },
    handle: async () => {
      throw new Error("always");
    },
  });
  q.add("a", "x");
  await new Promise((r) => setTimeout(r, 10));
  await q.stop();
  assert.equal(q.size, 0);
});

import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { Result, WorkQueue } from "../../../src/retry/queue.js";

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve: () => void = () => {};
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

const fast = { baseMs: 1, capMs: 5 };

test("a key added while it runs runs exactly once more, reading the latest state", async () => {
  const state = new Map<string, string>([["a", "v1"]]);
  const seen: string[] = [];
  const gate = deferred();
  const q = new WorkQueue({
    concurrency: 4,
    retry: fast,
    reconcile: async (k) => {
      const v = state.get(k) ?? "";
      seen.push(`start ${v}`);
      if (v === "v1") await gate.promise;
      seen.push(`end ${v}`);
      return Result.done;
    },
  });
  q.add("a");
  await new Promise((r) => setImmediate(r));
  state.set("a", "v2");
  q.add("a");
  state.set("a", "v3");
  q.add("a"); // coalesces with the previous add: v2 is never seen
  gate.resolve();
  await q.drained();
  assert.deepEqual(seen, ["start v1", "end v1", "start v3", "end v3"]);
});

test("different keys run in parallel up to the bound, one key never twice at once", async () => {
  let running = 0;
  let peak = 0;
  const active = new Set<string>();
  const q = new WorkQueue({
    concurrency: 3,
    retry: fast,
    reconcile: async (k) => {
      assert.ok(!active.has(k), `${k} ran twice at once`);
      active.add(k);
      running++;
      peak = Math.max(peak, running);
      await new Promise((r) => setTimeout(r, 5));
      running--;
      active.delete(k);
      return Result.done;
    },
  });
  for (let i = 0; i < 20; i++) q.add(`k${i % 7}`);
  await q.drained();
  assert.equal(peak, 3);
});

test("a failing key retries with backoff without blocking other keys", async () => {
  const done: string[] = [];
  let failures = 0;
  const q = new WorkQueue({
    concurrency: 1,
    retry: { baseMs: 5, capMs: 20 },
    reconcile: async (k) => {
      if (k === "bad" && failures < 3) {
        failures++;
        throw new Error("boom");
      }
      done.push(k);
      return Result.done;
    },
  });
  q.add("bad");
  q.add("good1");
  q.add("good2");
  await q.drained();
  assert.equal(failures, 3);
  assert.deepEqual(done, ["good1", "good2", "bad"]);
});

test("add() runs a key waiting for a retry at once, and it waits again after failing again", async () => {
  let runs = 0;
  const q = new WorkQueue({
    concurrency: 1,
    retry: { baseMs: 60_000, capMs: 60_000, minMs: 60_000 },
    reconcile: async () => {
      runs++;
      return Result.retry(new Error("nope"));
    },
  });
  q.add("a");
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(q.retrying, 1);
  q.add("a");
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(runs, 2, "the wait was cancelled");
  assert.equal(q.retrying, 1);
  await q.stop();
});

test("terminal results are not retried; requeue-after runs again later and does not count as work", async () => {
  const runs = new Map<string, number>();
  const q = new WorkQueue({
    concurrency: 2,
    retry: fast,
    reconcile: async (k) => {
      const n = (runs.get(k) ?? 0) + 1;
      runs.set(k, n);
      if (k === "bad") return Result.terminal("invalid");
      return n < 3 ? Result.requeueAfter(5) : Result.done;
    },
  });
  q.add("bad");
  q.add("poll");
  await q.drained(); // a pending requeue is not work: drained resolves before it fires
  await new Promise((r) => setTimeout(r, 60));
  assert.equal(runs.get("bad"), 1);
  assert.equal(runs.get("poll"), 3);
  assert.equal(q.size, 0);
});

test("addAfter keeps the earliest delay; an add makes it run now", async () => {
  const at: number[] = [];
  const t0 = Date.now();
  const q = new WorkQueue({
    concurrency: 1,
    retry: fast,
    reconcile: async () => {
      at.push(Date.now() - t0);
      return Result.done;
    },
  });
  q.addAfter("a", 200);
  q.addAfter("a", 20);
  q.addAfter("a", 500);
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(at.length, 1);
  assert.ok((at[0] ?? 0) >= 15 && (at[0] ?? 0) < 100, `ran at ${at[0]}`);
  q.addAfter("b", 10_000);
  q.add("b");
  await q.drained();
  assert.equal(at.length, 2);
  await q.stop();
});

test("addAndWait resolves after the run it caused, not an earlier one", async () => {
  const gates = [deferred(), deferred()];
  let version = 1;
  const finished: number[] = [];
  const q = new WorkQueue({
    concurrency: 1,
    retry: fast,
    reconcile: async () => {
      const v = version;
      await gates[v - 1]?.promise;
      finished.push(v);
      return Result.done;
    },
  });
  const first = q.addAndWait("a");
  await new Promise((r) => setImmediate(r));
  version = 2;
  const second = q.addAndWait("a");
  gates[0]?.resolve();
  await first;
  assert.deepEqual(finished, [1]);
  gates[1]?.resolve();
  await second;
  assert.deepEqual(finished, [1, 2]);
});

test("stop cancels pending retries and resolves waiters", async () => {
  const q = new WorkQueue({
    concurrency: 1,
    retry: { baseMs: 60_000, capMs: 60_000, minMs: 60_000 },
    reconcile: async () => {
      throw new Error("always");
    },
  });
  q.add("a");
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(q.retrying, 1);
  await q.stop();
  assert.equal(q.size, 0);
  await q.addAndWait("a"); // a stopped queue takes nothing and never hangs
});

test("property: every added key is reconciled at least once after its last add, and never concurrently; size and retrying count keys with work", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.tuple(fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: 3 })), {
        minLength: 1,
        maxLength: 60,
      }),
      fc.integer({ min: 1, max: 4 }),
      async (ops, concurrency) => {
        const lastAdd = new Map<string, number>();
        const lastStart = new Map<string, number>();
        const active = new Set<string>();
        let clock = 0;
        let overlap = false;
        let badCount = "";
        const q: WorkQueue = new WorkQueue({
          concurrency,
          retry: fast,
          reconcile: async (k) => {
            if (active.has(k)) overlap = true;
            active.add(k);
            // Every running key has work; no more keys have work than were ever added.
            if (q.size < active.size || q.size > 6 || q.retrying < 0 || q.retrying > q.size)
              badCount = `size ${q.size}, retrying ${q.retrying}, running ${active.size}`;
            lastStart.set(k, ++clock);
            await new Promise((r) => setTimeout(r, Math.random() * 2));
            active.delete(k);
            return Math.random() < 0.2 ? Result.retry(new Error("flaky")) : Result.done;
          },
        });
        for (const [key, pause] of ops) {
          lastAdd.set(`k${key}`, ++clock);
          q.add(`k${key}`);
          if (pause > 0) await new Promise((r) => setTimeout(r, pause));
        }
        await q.drained();
        assert.equal(q.size, 0);
        assert.equal(q.retrying, 0);
        await q.stop();
        assert.equal(q.size, 0);
        assert.ok(!overlap);
        assert.equal(badCount, "");
        for (const [k, added] of lastAdd) assert.ok((lastStart.get(k) ?? 0) > added, `${k} not run after its last add`);
      },
    ),
    { numRuns: 40 },
  );
});

// DueWork: sweeps queue what is due, never overlap, and a caller's sweep sees a sweep that began
// after it; keys added directly run too; stop ends the sweeps and waits for runs in flight.
import assert from "node:assert/strict";
import { AsyncLocalStorage } from "node:async_hooks";
import { describe, it } from "node:test";
import { DueWork } from "../../../src/retry/due.js";
import { Result } from "../../../src/retry/queue.js";

const RETRY = { baseMs: 1, capMs: 5, minMs: 1 };

describe("DueWork", () => {
  it("reconciles the keys a sweep finds due, and the keys added directly", async () => {
    const ran: string[] = [];
    let due = ["a", "b"];
    const w = new DueWork({
      name: "t",
      due: async () => {
        const d = due;
        due = [];
        return d;
      },
      reconcile: async (k) => {
        ran.push(k);
        return Result.done;
      },
      sweepIntervalMs: 0,
      sweepLimit: 10,
      concurrency: 2,
      retry: RETRY,
      onSweepError: (err) => assert.fail(String(err)),
    });
    w.start();
    await w.sweep();
    await w.idle();
    await w.addAndWait("c");
    assert.deepEqual(ran.sort(), ["a", "b", "c"]);
    await w.stop();
  });

  it("a sweep called while one runs waits for it, then sweeps again; sweeps never overlap", async () => {
    let running = 0;
    let overlapped = false;
    let sweeps = 0;
    let release = (): void => undefined;
    const w = new DueWork({
      name: "t",
      due: async () => {
        running++;
        if (running > 1) overlapped = true;
        sweeps++;
        if (sweeps === 1) await new Promise<void>((r) => (release = r));
        running--;
        return [];
      },
      reconcile: async () => Result.done,
      sweepIntervalMs: 0,
      sweepLimit: 10,
      concurrency: 1,
      retry: RETRY,
      onSweepError: (err) => assert.fail(String(err)),
    });
    const first = w.sweep();
    const second = w.sweep();
    const third = w.sweep();
    await new Promise((r) => setImmediate(r));
    assert.equal(sweeps, 1, "the later calls wait for the sweep in progress");
    release();
    await Promise.all([first, second, third]);
    assert.equal(sweeps, 2, "one more sweep for every caller that came while one ran");
    assert.equal(overlapped, false);
    await w.stop();
  });

  it("a failed sweep is told, and the next one runs", async () => {
    const failures: unknown[] = [];
    let n = 0;
    const w = new DueWork({
      name: "t",
      due: async () => {
        if (++n === 1) throw new Error("database away");
        return [];
      },
      reconcile: async () => Result.done,
      sweepIntervalMs: 0,
      sweepLimit: 10,
      concurrency: 1,
      retry: RETRY,
      onSweepError: (err) => failures.push(err),
    });
    await w.sweep();
    await w.sweep();
    assert.equal(failures.length, 1);
    assert.match(String(failures[0]), /database away/);
    assert.equal(n, 2);
    await w.stop();
  });

  it("sweeps on its interval once started, and not after stop", async () => {
    let sweeps = 0;
    const w = new DueWork({
      name: "t",
      due: async () => {
        sweeps++;
        return [];
      },
      reconcile: async () => Result.done,
      sweepIntervalMs: 5,
      sweepLimit: 10,
      sweepAtStart: true,
      concurrency: 1,
      retry: RETRY,
      onSweepError: (err) => assert.fail(String(err)),
    });
    assert.equal(sweeps, 0, "nothing before start");
    w.start();
    while (sweeps < 3) await new Promise((r) => setTimeout(r, 5));
    await w.stop();
    const at = sweeps;
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(sweeps, at);
    await w.sweep();
    assert.equal(sweeps, at, "a stopped DueWork does not sweep");
  });

  it("sweeps in its own async context, not the one of whoever asked for the sweep", async () => {
    const caller = new AsyncLocalStorage<string>();
    const seen: (string | undefined)[] = [];
    const w = new DueWork({
      name: "t",
      due: async () => {
        seen.push(caller.getStore());
        return [];
      },
      reconcile: async () => Result.done,
      sweepIntervalMs: 0,
      sweepLimit: 10,
      concurrency: 1,
      retry: RETRY,
      onSweepError: (err) => assert.fail(String(err)),
    });
    await caller.run("an API call's write hooks", () => w.sweep());
    assert.deepEqual(seen, [undefined]);
    await w.stop();
  });
});

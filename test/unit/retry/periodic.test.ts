// PeriodicWork: tasks as keys of a WorkQueue that requeue themselves after their interval, back
// off after a failure and return to their interval after a success, never overlap, and stop.
import assert from "node:assert/strict";
import { test } from "node:test";
import { PeriodicWork } from "../../../src/retry/periodic.js";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until(cond: () => boolean, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await sleep(2);
  }
}

test("a task first runs one interval after start, then again after each success", async () => {
  const runs: number[] = [];
  const started = Date.now();
  const work = new PeriodicWork({
    retry: { baseMs: 1, capMs: 5 },
    tasks: [{ name: "t", everyMs: 30, run: async () => void runs.push(Date.now() - started) }],
  });
  work.start();
  work.start(); // idempotent: still one schedule
  await until(() => runs.length >= 3);
  await work.stop();
  assert.ok((runs[0] ?? 0) >= 25, `first run after the interval (${runs[0]} ms)`);
  for (let i = 1; i < runs.length; i++)
    assert.ok((runs[i] ?? 0) - (runs[i - 1] ?? 0) >= 25, `runs ${i - 1} and ${i} one interval apart`);
});

test("a failing task retries with backoff, is reported, and is back on its interval after a success", async () => {
  let calls = 0;
  const errors: string[] = [];
  const times: number[] = [];
  const work = new PeriodicWork({
    retry: { baseMs: 1, capMs: 2 },
    onError: (task, err) => errors.push(`${task}: ${String(err)}`),
    tasks: [
      {
        name: "flaky",
        everyMs: 1_000,
        run: async () => {
          calls++;
          times.push(Date.now());
          if (calls <= 3) throw new Error(`down ${calls}`);
        },
      },
    ],
  });
  work.trigger("flaky"); // before start: runs now, failures retried well before the 1 s interval
  await until(() => calls >= 4);
  await sleep(100);
  await work.stop();
  assert.equal(calls, 4, "three failures retried, then the success waits for the interval");
  assert.deepEqual(errors, ["flaky: Error: down 1", "flaky: Error: down 2", "flaky: Error: down 3"]);
  assert.ok((times[3] ?? 0) - (times[0] ?? 0) < 500, "retries come sooner than the interval");
});

test("a run never overlaps itself; trigger during a run runs it once more afterwards", async () => {
  let running = 0;
  let most = 0;
  let calls = 0;
  let release: () => void = () => {};
  const work = new PeriodicWork({
    retry: { baseMs: 1, capMs: 5 },
    tasks: [
      {
        name: "slow",
        everyMs: 60_000,
        run: async () => {
          calls++;
          most = Math.max(most, ++running);
          if (calls === 1) await new Promise<void>((r) => (release = r));
          running--;
        },
      },
    ],
  });
  work.trigger("slow");
  await until(() => calls === 1);
  work.trigger("slow");
  work.trigger("slow");
  work.trigger("unknown"); // not a task: ignored
  release();
  await until(() => calls === 2);
  await sleep(20);
  await work.stop();
  assert.equal(most, 1);
  assert.equal(calls, 2);
});

test("stop waits for a run in flight, aborts its signal, and nothing runs afterwards", async () => {
  let aborted = false;
  let calls = 0;
  const work = new PeriodicWork({
    retry: { baseMs: 1, capMs: 5 },
    tasks: [
      {
        name: "t",
        everyMs: 5,
        run: async (signal) => {
          calls++;
          await new Promise<void>((r) => signal.addEventListener("abort", () => r(), { once: true }));
          aborted = signal.aborted;
        },
      },
    ],
  });
  work.start();
  await until(() => calls === 1);
  await work.stop();
  assert.ok(aborted);
  await sleep(30);
  assert.equal(calls, 1);
});

test("task names are distinct", () => {
  const run = async (): Promise<void> => undefined;
  assert.throws(
    () =>
      new PeriodicWork({
        retry: { baseMs: 1, capMs: 5 },
        tasks: [
          { name: "a", everyMs: 1, run },
          { name: "a", everyMs: 2, run },
        ],
      }),
    /distinct/,
  );
});

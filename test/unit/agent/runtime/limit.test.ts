// forEachLimit: the bounded fan-out of a release's writes and of the sentinel pods' reads.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { forEachLimit } from "../../../../src/agent/runtime/limit.js";
import { READ_PARALLEL } from "../../../../src/agent/sentinels/observer.js";

describe("forEachLimit", () => {
  it("runs every item, never more than the limit at once", async () => {
    let now = 0;
    let most = 0;
    const done: number[] = [];
    await forEachLimit(
      Array.from({ length: 50 }, (_, i) => i),
      READ_PARALLEL,
      async (i) => {
        most = Math.max(most, ++now);
        await new Promise((r) => setTimeout(r, i % 3));
        now--;
        done.push(i);
      },
    );
    assert.equal(most, READ_PARALLEL);
    assert.deepEqual(
      [...done].sort((a, b) => a - b),
      Array.from({ length: 50 }, (_, i) => i),
    );
    await forEachLimit([], 4, () => Promise.reject(new Error("never called")));
  });

  it("runs the rest when some fail, then rejects with the first error", async () => {
    const done: number[] = [];
    await assert.rejects(
      forEachLimit([0, 1, 2, 3, 4, 5], 2, async (i) => {
        await new Promise((r) => setTimeout(r, i));
        if (i === 1 || i === 4) throw new Error(`item ${i}`);
        done.push(i);
      }),
      /item 1/,
    );
    assert.deepEqual(
      done.sort((a, b) => a - b),
      [0, 2, 3, 5],
    );
  });
});

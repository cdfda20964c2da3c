import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { Backoff, fullJitterDelay } from "../../../src/retry/backoff.js";

test("full jitter stays within [min, min(cap, base*2^n)]", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 200 }),
      fc.integer({ min: 1, max: 10_000 }),
      fc.integer({ min: 1, max: 1_000_000 }),
      fc.integer({ min: 0, max: 1_000 }),
      fc.double({ min: 0, max: 1, noNaN: true }),
      (attempt, base, cap, min, r) => {
        const d = fullJitterDelay(attempt, { baseMs: base, capMs: cap, minMs: min }, () => r);
        const ceiling = Math.min(cap, base * 2 ** Math.min(attempt, 52));
        assert.ok(d >= Math.min(min, cap), `d=${d}`);
        assert.ok(d <= Math.max(ceiling, Math.min(min, cap)), `d=${d} ceiling=${ceiling}`);
        assert.ok(Number.isInteger(d));
      },
    ),
  );
});

test("the ceiling doubles per attempt until the cap, and reset starts over", () => {
  const b = new Backoff({ baseMs: 100, capMs: 1_000 }, () => 0.999999);
  const seen = [b.next(), b.next(), b.next(), b.next(), b.next(), b.next()];
  assert.deepEqual(seen, [99, 199, 399, 799, 999, 999]);
  assert.equal(b.attempt, 6);
  b.reset();
  assert.equal(b.next(), 99);
});

test("random 0 gives the floor", () => {
  assert.equal(
    fullJitterDelay(3, { baseMs: 100, capMs: 1000, minMs: 25 }, () => 0),
    25,
  );
});

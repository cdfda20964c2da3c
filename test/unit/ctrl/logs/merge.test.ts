// The time-ordered merge: held lines go out in time order (arrival order for equal times), a
// line waits at most holdMs, and past its room the merge drops and counts per source.
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { LogMerger } from "../../../../src/ctrl/logs/merge.js";

interface E {
  ns: bigint;
  source: string;
  n: number;
}

test("lines of several sources come out by time once held long enough", () => {
  const m = new LogMerger<E>({ holdMs: 100, capacity: 100 });
  m.add({ ns: 30n, source: "a", n: 1 }, 0);
  m.add({ ns: 10n, source: "b", n: 2 }, 0);
  m.add({ ns: 20n, source: "a", n: 3 }, 50);
  assert.deepEqual(m.take(99), []);
  // At 100 ms the first two have waited long enough; b's (10) goes, then the 20 of a is not due yet.
  assert.deepEqual(
    m.take(100).map((e) => e.n),
    [2],
  );
  assert.deepEqual(
    m.take(150).map((e) => e.n),
    [3, 1],
  );
  assert.equal(m.size, 0);
});

test("a live line already maxAgeMs old by its own time is not held; earlier live lines go with it, history waits", () => {
  const ms = (n: number): bigint => BigInt(n) * 1_000_000n;
  const m = new LogMerger<E>({ holdMs: 200, maxAgeMs: 400, liveFromMs: 1_000, capacity: 100 });
  // Live, written at 1,500, arriving at 1,600: held by arrival until 1,800 (its age bound is 1,900).
  m.add({ ns: ms(1_500), source: "a", n: 1 }, 1_600);
  // Live, written at 1,100, arriving 600 ms late at 1,700: due at once (1,500 < 1,900).
  m.add({ ns: ms(1_100), source: "b", n: 2 }, 1_700);
  // History (written before the call), arriving at 1,700: held until 1,900 however old.
  m.add({ ns: ms(500), source: "c", n: 3 }, 1_700);
  // History sorts first and is not due, so nothing may pass it.
  assert.deepEqual(m.take(1_700), []);
  assert.deepEqual(
    m.take(1_900).map((e) => e.n),
    [3, 2, 1],
  );

  const live = new LogMerger<E>({ holdMs: 200, maxAgeMs: 400, liveFromMs: 1_000, capacity: 100 });
  live.add({ ns: ms(1_500), source: "a", n: 1 }, 1_600);
  live.add({ ns: ms(1_100), source: "b", n: 2 }, 1_700);
  // The late line goes at once; the fresh one still waits for lines that could come before it.
  assert.deepEqual(
    live.take(1_700).map((e) => e.n),
    [2],
  );
  assert.equal(live.nextDue(), 1_800);
  assert.deepEqual(
    live.take(1_800).map((e) => e.n),
    [1],
  );
});

test("equal times keep their arrival order", () => {
  const m = new LogMerger<E>({ holdMs: 0, capacity: 100 });
  for (let i = 0; i < 5; i++) m.add({ ns: 7n, source: "a", n: i }, 0);
  assert.deepEqual(
    m.take(0).map((e) => e.n),
    [0, 1, 2, 3, 4],
  );
});

test("past its room the merge drops and counts per source; takeOldest makes room by time", () => {
  const m = new LogMerger<E>({ holdMs: 1_000, capacity: 2 });
  m.add({ ns: 1n, source: "a", n: 1 }, 0);
  m.add({ ns: 2n, source: "b", n: 2 }, 0);
  assert.equal(m.add({ ns: 3n, source: "a", n: 3 }, 0), false);
  assert.equal(m.add({ ns: 4n, source: "a", n: 4 }, 0), false);
  assert.deepEqual(
    m.drops().map((d) => [d.first.n, d.n]),
    [[3, 2]],
  );
  assert.deepEqual(m.drops(), []);
  assert.deepEqual(
    m.takeOldest(1).map((e) => e.n),
    [1],
  );
});

test("property: every line comes out once, per source in order, and in time order when all are taken at the end", () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.constantFrom("a", "b", "c"), fc.nat(20), fc.nat(50)), { maxLength: 200 }),
      (adds) => {
        const m = new LogMerger<E>({ holdMs: 10, capacity: 10_000 });
        const last = new Map<string, bigint>();
        const out: E[] = [];
        let now = 0;
        adds.forEach(([source, step, advance], n) => {
          // Each source's times only grow.
          const ns = (last.get(source) ?? 0n) + BigInt(step);
          last.set(source, ns);
          m.add({ ns, source, n }, now);
          now += advance;
          out.push(...m.take(now));
        });
        const rest = m.take(now, true);
        for (let i = 1; i < rest.length; i++) assert.ok((rest[i - 1] as E).ns <= (rest[i] as E).ns);
        out.push(...rest);
        assert.equal(out.length, adds.length);
        for (const s of ["a", "b", "c"]) {
          const mine = out.filter((e) => e.source === s).map((e) => e.n);
          assert.deepEqual(
            mine,
            [...mine].sort((x, y) => x - y),
          );
        }
      },
    ),
  );
});

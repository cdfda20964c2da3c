// The agent's bounded out-buffer: what does not fit is dropped and replaced by one marker per
// instance and gap, in order; nothing is ever lost silently.
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { OutBuffer, type OutEntry } from "../../../../src/agent/logs/buffer.js";
import { appContainer } from "../../../../src/agent/logs/pods.js";

const line = (instance: string, n: number, text = `l${n}`): OutEntry => ({
  instance,
  deploymentId: "dep_1",
  ns: BigInt(n),
  line: text,
});

test("a full buffer drops new lines and says how many, after the lines before the gap", () => {
  const b = new OutBuffer({ maxEntries: 3, maxBytes: 1_000 });
  for (let i = 1; i <= 5; i++) b.push(line("a", i));
  const first = b.take(100);
  assert.deepEqual(
    first.map((e) => e.line ?? `dropped ${e.marker?.dropped}`),
    ["l1", "l2", "l3", "dropped 2"],
  );
  // Room again: new lines go in, and a new gap gets a new marker.
  for (let i = 6; i <= 10; i++) b.push(line("a", i));
  assert.deepEqual(
    b.take(100).map((e) => e.line ?? `dropped ${e.marker?.dropped}`),
    ["l6", "l7", "l8", "dropped 2"],
  );
  assert.equal(b.dropped, 4);
});

test("the byte bound counts too", () => {
  const b = new OutBuffer({ maxEntries: 100, maxBytes: 10 });
  assert.equal(b.push(line("a", 1, "12345")), true);
  assert.equal(b.push(line("a", 2, "12345")), true);
  assert.equal(b.push(line("a", 3, "1")), false);
});

test("property: every line is delivered or counted in a marker, per instance in order, within bounds", () => {
  fc.assert(
    fc.property(
      fc.array(fc.oneof(fc.record({ push: fc.constantFrom("a", "b", "c") }), fc.record({ take: fc.nat(7) })), {
        maxLength: 300,
      }),
      fc.integer({ min: 1, max: 20 }),
      (ops, cap) => {
        const b = new OutBuffer({ maxEntries: cap, maxBytes: 1_000_000 });
        const sent = new Map<string, number>();
        const got: OutEntry[] = [];
        let n = 0;
        for (const op of ops) {
          if ("push" in op) {
            n++;
            sent.set(op.push, (sent.get(op.push) ?? 0) + 1);
            b.push(line(op.push, n));
          } else got.push(...b.take(op.take));
          // Markers aside (one per instance and gap), never more waiting than the bound.
          assert.ok(b.size <= cap + 3);
        }
        got.push(...b.take(Number.MAX_SAFE_INTEGER));
        for (const inst of ["a", "b", "c"]) {
          const mine = got.filter((e) => e.instance === inst);
          const delivered = mine.filter((e) => e.line !== undefined).length;
          const dropped = mine.reduce((s, e) => s + (e.marker?.dropped ?? 0), 0);
          assert.equal(delivered + dropped, sent.get(inst) ?? 0);
          const times = mine.map((e) => e.ns);
          assert.deepEqual(
            times,
            [...times].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0)),
          );
        }
      },
    ),
  );
});

test("the container to read: the running one, or with previous the one before the last restart", () => {
  const pod = (status: object) => ({
    metadata: { name: "p" },
    status: { containerStatuses: [{ name: "app", ...status }] },
  });
  assert.equal(appContainer(pod({ state: { waiting: {} }, containerID: "" }), "app", false), undefined);
  assert.deepEqual(appContainer(pod({ state: { running: {} }, containerID: "c://1" }), "app", false), { id: "c://1" });
  assert.equal(appContainer(pod({ state: { running: {} }, restartCount: 0 }), "app", true), undefined);
  assert.deepEqual(
    appContainer(
      pod({ state: { waiting: {} }, restartCount: 2, lastState: { terminated: { containerID: "c://0" } } }),
      "app",
      true,
    ),
    { id: "c://0" },
  );
  assert.deepEqual(appContainer(pod({ state: { waiting: {} }, restartCount: 1 }), "app", true), { id: "restart-1" });
});

// The agent's bounded out-buffer: chunks of lines as read, joined per instance when taken; what
// does not fit is dropped and replaced by one marker per instance and gap, in order, counting the
// lines it held; nothing is ever lost silently. And the splitter that cuts a pod's stream at its
// last newline (and cuts a line without end), whose output ctrl reads exactly as it would read the
// whole stream.
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { OutBuffer, type OutEntry } from "../../../../src/agent/logs/buffer.js";
import { countLines, lastLineNs, LineChunker, linesAfter } from "../../../../src/agent/logs/lines.js";
import { appContainer, isStandIn, runningContainer } from "../../../../src/agent/logs/pods.js";
import { lineEntries } from "../../../../src/agent/logs/session.js";
import { cutLine, forEachStampedLine, MAX_LINE_BYTES } from "../../../../src/contracts/logs.js";
import { LogMarkerKind } from "../../../../src/gen/krane/ctrl/v1/logs_pb.js";

/** A chunk of `n` lines of an instance, numbered from `from`. */
const chunk = (instance: string, from: number, n = 1): OutEntry => ({
  instance,
  deploymentId: "dep_1",
  ns: 0n,
  data: Buffer.from(
    Array.from(
      { length: n },
      (_, i) => `2025-01-02T03:04:05.${String(from + i).padStart(9, "0")}Z l${from + i}\n`,
    ).join(""),
  ),
});

/** What a taken entry holds: its lines' texts, or its marker. */
const show = (e: OutEntry): string[] => {
  if (e.marker) return [`${e.marker.kind} ${e.marker.dropped}`];
  const out: string[] = [];
  forEachStampedLine(e.data ?? Buffer.alloc(0), 0n, (_ns, text) => out.push(text));
  return out;
};

test("a full buffer drops new chunks and says how many lines, after the data before the gap", () => {
  const b = new OutBuffer({ maxEntries: 3, maxBytes: 1_000_000 });
  b.push(chunk("a", 1));
  b.push(chunk("a", 2, 2));
  b.push(chunk("a", 4));
  assert.equal(b.push(chunk("a", 5, 3)), false);
  b.push(chunk("a", 8));
  // One entry for the instance's three chunks, then its gap.
  assert.deepEqual(b.take().map(show), [["l1", "l2", "l3", "l4"], ["dropped 4"]]);
  // Room again: new chunks go in, and a new gap gets a new marker.
  for (let i = 9; i <= 13; i++) b.push(chunk("a", i));
  assert.deepEqual(b.take().map(show), [["l9", "l10", "l11"], ["dropped 2"]]);
  assert.equal(b.dropped, 6);
});

test("an instance's chunks of two streams are joined per stream, each keeping its stream", () => {
  const b = new OutBuffer();
  b.push({ ...chunk("a", 1), stream: "Stdout" });
  b.push({ ...chunk("a", 2), stream: "Stderr" });
  b.push({ ...chunk("a", 3), stream: "Stdout" });
  b.push({ ...chunk("a", 4), stream: "Stderr" });
  const taken = b.take();
  assert.deepEqual(taken.map(show), [
    ["l1", "l3"],
    ["l2", "l4"],
  ]);
  assert.deepEqual(
    taken.map((e) => e.stream),
    ["Stdout", "Stderr"],
  );
});

test("the byte bound counts too, and a take stops near its byte budget", () => {
  const one = chunk("a", 1).data?.length ?? 0;
  const b = new OutBuffer({ maxEntries: 100, maxBytes: 2 * one });
  assert.equal(b.push(chunk("a", 1)), true);
  assert.equal(b.push(chunk("b", 2)), true);
  assert.equal(b.push(chunk("a", 3)), false);
  assert.equal(b.bytes, 2 * one);
  assert.deepEqual(b.take(1).map(show), [["l1"]]);
  assert.equal(b.bytes, one);
});

test("a take keeps each instance's order across its markers, and joins only what no marker separates", () => {
  const b = new OutBuffer();
  b.push(chunk("a", 1));
  b.push(chunk("b", 1));
  b.push({ instance: "a", deploymentId: "dep_1", ns: 5n, marker: { kind: "left", dropped: 0, message: "" } });
  b.push(chunk("a", 2));
  b.push(chunk("b", 2));
  const got = b.take();
  assert.deepEqual(
    got.map((e) => [e.instance, ...show(e)]),
    [
      ["a", "l1"],
      ["b", "l1", "l2"],
      ["a", "left 0"],
      ["a", "l2"],
    ],
  );
});

test("property: every line is delivered or counted in a marker, per instance in order, within bounds", () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.oneof(
          fc.record({ push: fc.constantFrom("a", "b", "c"), lines: fc.integer({ min: 1, max: 4 }) }),
          fc.record({ take: fc.nat(400) }),
        ),
        { maxLength: 300 },
      ),
      fc.integer({ min: 1, max: 20 }),
      (ops, cap) => {
        const b = new OutBuffer({ maxEntries: cap, maxBytes: 1_000_000 });
        const sent = new Map<string, number>();
        const got: OutEntry[] = [];
        for (const op of ops) {
          if ("push" in op) {
            const from = (sent.get(op.push) ?? 0) + 1;
            sent.set(op.push, from + op.lines - 1);
            b.push(chunk(op.push, from, op.lines));
          } else got.push(...b.take(op.take));
          // Markers aside (one per instance and gap), never more waiting than the bound.
          assert.ok(b.size <= cap + 3);
        }
        got.push(...b.take());
        for (const inst of ["a", "b", "c"]) {
          const mine = got.filter((e) => e.instance === inst);
          const numbers = mine
            .flatMap(show)
            .filter((t) => t.startsWith("l"))
            .map((t) => Number(t.slice(1)));
          const dropped = mine.reduce((s, e) => s + (e.marker?.dropped ?? 0), 0);
          assert.equal(numbers.length + dropped, sent.get(inst) ?? 0);
          assert.deepEqual(
            numbers,
            [...numbers].sort((x, y) => x - y),
          );
        }
      },
    ),
  );
});

/** What ctrl reads from a stream: each line's text. */
const texts = (data: Buffer): string[] => {
  const out: string[] = [];
  forEachStampedLine(data, 0n, (_ns, t) => out.push(t));
  return out;
};

test("property: a stream cut anywhere into chunks gives ctrl the same lines as the whole stream", () => {
  const stamp = "2025-01-02T03:04:05.123456789Z ";
  fc.assert(
    fc.property(
      fc.array(fc.oneof(fc.string({ maxLength: 30 }), fc.string({ unit: "grapheme", maxLength: 30 })), {
        maxLength: 20,
      }),
      fc.array(fc.nat(200), { maxLength: 10 }),
      (lines, cuts) => {
        const clean = lines.map((l) => l.replace(/\n/g, " "));
        const whole = Buffer.from(clean.map((l) => `${stamp}${l}\n`).join(""));
        const splitter = new LineChunker();
        const out: Buffer[] = [];
        let at = 0;
        for (const c of [...cuts.map((x) => x % (whole.length + 1))].sort((x, y) => x - y)) {
          const piece = splitter.feed(whole.subarray(at, Math.max(at, c)));
          if (piece) out.push(piece);
          at = Math.max(at, c);
        }
        const piece = splitter.feed(whole.subarray(at));
        if (piece) out.push(piece);
        assert.equal(splitter.end(), undefined, "the stream ended with a newline: nothing is left");
        assert.deepEqual(texts(Buffer.concat(out)), texts(whole));
        assert.equal(countLines(Buffer.concat(out)), clean.length);
      },
    ),
  );
});

test("a line without end is held only up to the cut, and passed on cut as cutLine cuts it", () => {
  const stamp = "2025-01-02T03:04:05.1Z ";
  const text = `${"é".repeat(2_000)}${"x".repeat(50_000)}`;
  const splitter = new LineChunker();
  const out: Buffer[] = [];
  const all = Buffer.from(`${stamp}${text}\n${stamp}next\n`);
  for (let i = 0; i < all.length; i += 700) {
    const piece = splitter.feed(all.subarray(i, i + 700));
    if (piece) out.push(piece);
    assert.ok(splitter.pending <= MAX_LINE_BYTES + 40, `holds ${splitter.pending} bytes`);
  }
  assert.deepEqual(texts(Buffer.concat(out)), [cutLine(text), "next"]);
  // A multi-byte character at the cut is not split.
  const cutInChar = new LineChunker();
  const odd = `${stamp}${"a"}${"é".repeat(4_000)}`;
  cutInChar.feed(Buffer.from(odd));
  const last = cutInChar.end() ?? Buffer.alloc(0);
  assert.deepEqual(texts(last), [cutLine(odd.slice(stamp.length))]);
  assert.ok(!last.toString().includes("\uFFFD"));
});

test("a reopened log skips what was passed on: the lines after the last time seen, and that time read from a chunk's last line", () => {
  const at = (n: number): bigint => BigInt(Date.parse("2025-01-02T03:04:05Z")) * 1_000_000n + BigInt(n);
  const data = chunk("a", 1, 4).data ?? Buffer.alloc(0);
  assert.equal(lastLineNs(data), at(4));
  assert.deepEqual(texts(linesAfter(data, at(2)) ?? Buffer.alloc(0)), ["l3", "l4"]);
  assert.equal(linesAfter(data, at(0)), data, "all of it, not copied");
  assert.equal(linesAfter(data, at(4)), undefined, "nothing new");
  assert.equal(lastLineNs(Buffer.from("no stamp\n")), undefined);
});

test("for a ctrl that takes no chunks (an older one), a batch goes as one entry per line, from the asked time on", () => {
  const b = new OutBuffer();
  b.push(chunk("a", 1, 3));
  b.push({ instance: "a", deploymentId: "dep_1", ns: 7n, marker: { kind: "left", dropped: 0, message: "" } });
  const since = BigInt(Date.parse("2025-01-02T03:04:05Z")) * 1_000_000n + 2n;
  const entries = lineEntries(b.take(), since);
  assert.deepEqual(
    entries.map((e) => [e.timeUnixNano, e.instance, e.deploymentId, e.entry?.case, e.entry?.value]),
    [
      [since, "a", "dep_1", "line", "l2"],
      [since + 1n, "a", "dep_1", "line", "l3"],
      [7n, "a", "dep_1", "marker", { kind: LogMarkerKind.LEFT, dropped: 0n, message: "" }],
    ],
  );
});

test("the container to read: the running one, or with previous the one before the last restart; a stand-in has none", () => {
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
  // A followed log that ended is read again only while the same container runs.
  assert.equal(runningContainer(pod({ state: { running: {} }, containerID: "c://1" }), "app"), "c://1");
  assert.equal(runningContainer(pod({ state: { terminated: {} }, containerID: "c://1" }), "app"), "");
  // Running without a container id: a stand-in (KWOK) with no log; waiting or named by a kubelet: not one.
  assert.equal(isStandIn(pod({ state: { running: {} } }), "app"), true);
  assert.equal(isStandIn(pod({ state: { running: {} }, containerID: "" }), "app"), true);
  assert.equal(isStandIn(pod({ state: { running: {} }, containerID: "c://1" }), "app"), false);
  assert.equal(isStandIn(pod({ state: { waiting: {} } }), "app"), false);
  assert.equal(isStandIn(pod({ state: { running: {} } }), "other"), false);
});

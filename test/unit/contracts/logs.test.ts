// Kubelet timestamps, over-long lines, how the CLI prints entries, and the resume cursor that
// makes a broken and resumed stream print every line once.
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  cutLine,
  forEachStampedLine,
  formatNs,
  MAX_LINE_BYTES,
  parseStampedLine,
} from "../../../src/contracts/logs.js";
import { entryJson, formatEntry, ResumeCursor, type PrintedEntry } from "../../../src/cli/log-lines.js";

test("a kubelet line's timestamp is read to the nanosecond", () => {
  const p = parseStampedLine("2025-01-02T03:04:05.123456789Z hello world");
  assert.ok(p);
  assert.equal(p.text, "hello world");
  assert.equal(p.ns, BigInt(Date.parse("2025-01-02T03:04:05Z")) * 1_000_000n + 123_456_789n);
  assert.equal(formatNs(p.ns), "2025-01-02T03:04:05.123456789Z");
  assert.equal(parseStampedLine("2025-01-02T03:04:05Z x")?.text, "x");
  assert.equal(parseStampedLine("no stamp"), null);
});

test("property: format and parse agree", () => {
  fc.assert(
    fc.property(fc.bigInt({ min: 0n, max: 4_000_000_000_000_000_000n }), (ns) => {
      assert.equal(parseStampedLine(`${formatNs(ns)} x`)?.ns, ns);
    }),
  );
});

test("a chunk of lines: each line's time and text, from a time on; no stamp or no newline, no line", () => {
  const got: [bigint, string][] = [];
  const chunk = Buffer.from(
    "2025-01-02T03:04:05.5Z early\nno stamp here\n2025-01-02T03:04:06.000000001Z one\n" +
      "2025-01-02T03:04:06.25Z  two spaced\n2025-01-02T03:04:07Z unfinished",
  );
  forEachStampedLine(chunk, BigInt(Date.parse("2025-01-02T03:04:06Z")) * 1_000_000n, (ns, t) => got.push([ns, t]));
  const s6 = BigInt(Date.parse("2025-01-02T03:04:06Z")) * 1_000_000n;
  assert.deepEqual(got, [
    [s6 + 1n, "one"],
    [s6 + 250_000_000n, " two spaced"],
  ]);
});

test("property: a chunk's lines read as parseStampedLine reads each (times, texts, cuts)", () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.tuple(fc.bigInt({ min: 0n, max: 4_000_000_000_000_000_000n }), fc.nat(9), fc.string({ maxLength: 40 })),
        { maxLength: 20 },
      ),
      (lines) => {
        const text = lines
          .map(([ns, digits, t]) => {
            // Fewer fractional digits than nine, as some runtimes stamp.
            const full = formatNs(ns);
            const stamp = digits === 0 ? `${full.slice(0, 19)}Z` : `${full.slice(0, 20 + digits)}Z`;
            return `${stamp} ${t.replace(/\n/g, " ")}\n`;
          })
          .join("");
        const got: { ns: bigint; text: string }[] = [];
        forEachStampedLine(Buffer.from(text), 0n, (ns, t) => got.push({ ns, text: t }));
        const want = text
          .split("\n")
          .slice(0, -1)
          .map((l) => parseStampedLine(l))
          .map((p) => (p ? { ns: p.ns, text: cutLine(p.text) } : undefined));
        assert.deepEqual(got, want);
      },
    ),
  );
});

test("lines over the limit are cut on a character boundary and say so", () => {
  assert.equal(cutLine("short"), "short");
  const long = "é".repeat(MAX_LINE_BYTES);
  const cut = cutLine(long);
  assert.ok(Buffer.byteLength(cut) <= MAX_LINE_BYTES);
  assert.match(cut, /…\[\d+ bytes cut\]$/);
  assert.ok(!cut.includes("\uFFFD"));
});

const e = (instance: string, ns: number, line: string): PrintedEntry => ({
  ns: BigInt(ns),
  region: "eu",
  instance,
  revision: 3n,
  line,
});

test("entries print with region/instance and revision; markers on their own line; JSON", () => {
  assert.equal(formatEntry(e("web-1", 1, "hi"), { timestamps: false, color: false }), "[eu/web-1 r3] hi");
  const colored = formatEntry(e("web-1", 1_000_000, "hi"), { timestamps: true, color: true });
  const esc = String.fromCharCode(27);
  assert.ok(colored.startsWith(`1970-01-01T00:00:00.001000000Z [${esc}[`), colored);
  assert.ok(colored.endsWith(`meu/web-1 r3${esc}[0m] hi`), colored);
  const dropped: PrintedEntry = {
    ...e("web-1", 1, ""),
    line: undefined,
    marker: { kind: "dropped", dropped: 12n, message: "" },
  };
  assert.equal(formatEntry(dropped, { timestamps: false, color: false }), "--- eu/web-1 r3: 12 lines dropped ---");
  assert.deepEqual(entryJson(dropped), {
    time: "1970-01-01T00:00:00.000000001Z",
    region: "eu",
    instance: "web-1",
    revision: 3,
    marker: "dropped",
    dropped: 12,
  });
});

test("a stderr line is marked; -o json says each line's stream", () => {
  const o = { timestamps: false, color: false };
  assert.equal(formatEntry({ ...e("web-1", 1, "bad"), stream: "stderr" }, o), "[eu/web-1 r3 stderr] bad");
  assert.equal(formatEntry({ ...e("web-1", 1, "ok"), stream: "stdout" }, o), "[eu/web-1 r3] ok");
  assert.equal(entryJson({ ...e("web-1", 1, "bad"), stream: "stderr" }).stream, "stderr");
  assert.equal(entryJson(e("web-1", 1, "merged")).stream, "unknown");
});

test("a resumed stream repeats nothing of either stream; a stream behind the other is not dropped", () => {
  const c = new ResumeCursor();
  const at = (ns: number, stream: "stdout" | "stderr", line: string): PrintedEntry => ({ ...e("a", ns, line), stream });
  assert.ok(c.admit(at(10_000_000, "stdout", "o1")));
  assert.ok(c.admit(at(5_000_000, "stderr", "e1")), "an earlier line of the other stream is printed");
  assert.equal(c.sinceMs(), 5, "resumed from the stream furthest behind");
  c.restart();
  assert.equal(c.admit(at(5_000_000, "stderr", "e1")), false);
  assert.ok(c.admit(at(7_000_000, "stderr", "e2")));
  assert.equal(c.admit(at(10_000_000, "stdout", "o1")), false);
});

test("lines printed merged (--tail) are not printed again when the resumed read gives them with their streams", () => {
  const c = new ResumeCursor();
  assert.ok(c.admit(e("a", 5_000_000, "1")));
  assert.ok(c.admit(e("a", 6_000_000, "2")));
  c.restart();
  const at = (ns: number, stream: "stdout" | "stderr", line: string): PrintedEntry => ({ ...e("a", ns, line), stream });
  assert.equal(c.admit(at(5_000_000, "stdout", "1")), false);
  assert.equal(c.admit(at(6_000_000, "stderr", "2")), false);
  assert.ok(c.admit(at(6_000_000, "stdout", "2b")), "a second line at the same time is new");
  assert.ok(c.admit(at(7_000_000, "stdout", "3")));
  assert.ok(c.admit(at(6_500_000, "stderr", "e")), "stderr behind stdout, after the merged lines");
});

test("a resumed stream repeats nothing: older and equal-time lines already printed are dropped", () => {
  const c = new ResumeCursor();
  const joined = (i: string): PrintedEntry => ({
    ...e(i, 0, ""),
    line: undefined,
    marker: { kind: "joined", dropped: 0n, message: "" },
  });
  assert.ok(c.admit(joined("a")));
  assert.ok(c.admit(e("a", 5_000_000, "1")));
  assert.ok(c.admit(e("a", 5_000_000, "2")));
  assert.ok(c.admit(e("b", 9_000_000, "x")));
  assert.equal(c.sinceMs(), 5);
  c.restart();
  assert.equal(c.admit(joined("a")), false, "a live instance does not join twice");
  assert.equal(c.admit(e("a", 4_000_000, "0")), false);
  assert.equal(c.admit(e("a", 5_000_000, "1")), false);
  assert.equal(c.admit(e("a", 5_000_000, "2")), false);
  assert.ok(c.admit(e("a", 5_000_000, "3")), "a third line at the same time is new");
  assert.equal(c.admit(e("b", 9_000_000, "x")), false);
  assert.ok(c.admit(e("b", 9_000_001, "y")));
});

test("property: a merged stream replayed from the cursor after any break prints exactly the lines once", () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.constantFrom("a", "b"), fc.nat(3)), { minLength: 1, maxLength: 60 }),
      fc.nat(59),
      (steps, breakAt) => {
        const last = new Map<string, number>();
        // ctrl sends lines merged by time (stable for equal times).
        const lines = steps
          .map(([inst, step], i) => {
            const ns = (last.get(inst) ?? 1) + step;
            last.set(inst, ns);
            return e(inst, ns * 1_000_000, `${inst}${i}`);
          })
          .sort((x, y) => (x.ns < y.ns ? -1 : x.ns > y.ns ? 1 : 0));
        const cut = Math.min(breakAt, lines.length);
        const c = new ResumeCursor();
        const printed: string[] = [];
        for (const l of lines.slice(0, cut)) if (c.admit(l)) printed.push(l.line ?? "");
        const since = c.sinceMs();
        c.restart();
        // The resumed stream sends every line at or after `since` (ms), in order per instance.
        const replay = since === undefined ? lines : lines.filter((l) => l.ns >= BigInt(since) * 1_000_000n);
        for (const l of replay) if (c.admit(l)) printed.push(l.line ?? "");
        assert.deepEqual(printed.sort(), lines.map((l) => l.line ?? "").sort());
      },
    ),
  );
});

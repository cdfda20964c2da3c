// The watch stream's line splitting (takeLines): whatever the chunk boundaries, every complete
// non-blank line comes out once, in order, and the unfinished tail waits for the next chunk.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { takeLines } from "../../../src/kube/client.js";

test("property: chunked input yields the same lines as the whole", () => {
  const lineArb = fc.oneof(
    fc.string({ maxLength: 40 }).map((s) => s.replace(/\n/g, "")),
    fc.constant(""),
    fc.constant("  "),
  );
  fc.assert(
    fc.property(
      fc.array(lineArb, { maxLength: 30 }),
      fc.boolean(),
      fc.array(fc.integer({ min: 1, max: 50 }), { maxLength: 40 }),
      (lines, finalNewline, cuts) => {
        const text = lines.join("\n") + (finalNewline ? "\n" : "");
        const out: string[] = [];
        let buf = "";
        let at = 0;
        for (const n of [...cuts, text.length]) {
          const chunk = text.slice(at, at + n);
          at += n;
          if (chunk === "") continue;
          buf = takeLines(buf === "" ? chunk : buf + chunk, (l) => (out.push(l), true));
        }
        const complete = finalNewline ? lines : lines.slice(0, -1);
        assert.deepEqual(
          out,
          complete.filter((l) => l.trim() !== ""),
        );
        assert.equal(buf, finalNewline ? "" : (lines[lines.length - 1] ?? ""));
      },
    ),
    { numRuns: 500 },
  );
});

test("a handler that stops takes no further line", () => {
  const seen: string[] = [];
  assert.equal(
    takeLines("a\nb\nc\n", (l) => (seen.push(l), l !== "b")),
    "",
  );
  assert.deepEqual(seen, ["a", "b"]);
});

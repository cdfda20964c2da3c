// --grep's matchers (src/ctrl/logs/grep.ts): text and regexes match as expected, bounded input,
// and a catastrophic regex is stopped at its deadline with invalid_argument naming grep while
// ctrl's event loop and other searches keep going (the match runs on a worker thread).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { retentionDays } from "../../../../src/cli/log-retention.js";
import { DomainError } from "../../../../src/ctrl/errors.js";
import { grepOf, MAX_MATCHED_CHARS } from "../../../../src/ctrl/logs/grep.js";
import { grepPattern, validateLogRetentionDays } from "../../../../src/ctrl/validate/logs.js";

function grep(pattern: string, deadlineMs?: number): ReturnType<typeof grepOf> {
  const p = grepPattern(pattern);
  assert.ok(typeof p !== "string", String(p));
  return grepOf(p, deadlineMs);
}

describe("--grep matching", () => {
  it("matches text as is and regexes with their flags, in order, over batches", async () => {
    const text = grep("a.b");
    assert.deepEqual(await text.keep(["xa.by", "xaXby"]), [true, false]);
    const re = grep("/^err(or)? \\d+$/i");
    try {
      const lines = Array.from({ length: 20_000 }, (_, i) => (i % 3 === 0 ? `ERROR ${i}` : `x`.repeat(i % 50)));
      const keep = await re.keep(lines);
      assert.equal(keep.length, lines.length);
      assert.ok(keep.every((k, i) => k === (i % 3 === 0)));
      // A line is matched on its first MAX_MATCHED_CHARS characters.
      const long = "e".repeat(MAX_MATCHED_CHARS) + "rror 1";
      const tail = grep("/rror/");
      try {
        assert.deepEqual(await tail.keep([long, "rror"]), [false, true]);
      } finally {
        tail.close();
      }
    } finally {
      re.close();
    }
  });

  it("stops a catastrophic regex at its deadline with a clear error, while the rest keeps going", async () => {
    const bad = grep("/(a+)+$/", 1_000);
    const good = grep("/^ok \\d+$/");
    try {
      let ticks = 0;
      const timer = setInterval(() => ticks++, 10);
      const stuck = bad.keep(["a".repeat(5_000) + "b"]).then(
        () => assert.fail("the catastrophic match answered"),
        (err: unknown) => err,
      );
      // While the worker backtracks, another search is answered and the event loop runs.
      assert.deepEqual(await good.keep(["ok 1", "no"]), [true, false]);
      await new Promise((r) => setTimeout(r, 50));
      const err = await stuck;
      clearInterval(timer);
      assert.ok(ticks > 0, "the event loop ran during the match");
      assert.ok(err instanceof DomainError);
      assert.equal(err.code, "invalid_argument");
      assert.equal(err.field, "grep");
      assert.match(err.message, /took more than 1 s over 1 line\(s\) and was stopped.*nested quantifiers/);
      // The stopped search refuses further work; a new one starts afresh.
      await assert.rejects(bad.keep(["a"]));
      assert.deepEqual(await good.keep(["ok 2"]), [true]);
    } finally {
      bad.close();
      good.close();
    }
  });
});

describe("log retention days", () => {
  it('the CLI takes whole days or "default", and refuses anything else before any call', () => {
    assert.equal(retentionDays("30"), 30);
    assert.equal(retentionDays("default"), undefined);
    assert.throws(() => retentionDays("3d"), /<days>: expected whole days \(1 to 90\) or "default", got "3d"/);
  });

  it("takes whole days from 1 to 90, or none (the default), and names the field otherwise", () => {
    assert.equal(validateLogRetentionDays(1), 1);
    assert.equal(validateLogRetentionDays(90), 90);
    assert.equal(validateLogRetentionDays(undefined), undefined);
    for (const bad of [0, -1, 91, 365]) {
      const err = (() => {
        try {
          validateLogRetentionDays(bad);
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      assert.ok(err instanceof DomainError, `${bad} refused`);
      assert.equal(err.field, "days");
      assert.match(err.message, /whole days from 1 to 90/);
    }
  });
});

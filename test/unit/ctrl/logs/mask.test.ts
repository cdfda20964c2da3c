// Masking secret values in log lines before they are kept: every occurrence of every value (of
// MIN_MASKED characters or more; each line of a multi-line value) is replaced, a value containing
// another is masked whole, short values are left alone.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { MASK, MIN_MASKED, maskedPieces, secretMasker } from "../../../../src/ctrl/logs/mask.js";

describe("secret masking", () => {
  it("replaces each value wherever it appears, the longest first", () => {
    const mask = secretMasker(["hunter22", "hunter22-long", "abc"]);
    assert.equal(mask("pw=hunter22 and hunter22-long!"), `pw=${MASK} and ${MASK}!`);
    assert.equal(mask("abc is too short to mask"), "abc is too short to mask");
    assert.equal(mask("a.b*c? p.a*ss"), "a.b*c? p.a*ss", "no value: no change");
    assert.equal(secretMasker(["p.a*ss"])("x p.a*ss y pXa*ss"), `x ${MASK} y pXa*ss`, "values are text, not patterns");
  });

  it("masks each line of a multi-line value (a log line has no newline)", () => {
    assert.deepEqual(maskedPieces(["-----BEGIN KEY-----\nAAAABBBBCCCC\nx\n"]), ["-----BEGIN KEY-----", "AAAABBBBCCCC"]);
    assert.equal(secretMasker(["line-one\r\nline-two"])("got line-two"), `got ${MASK}`);
  });

  it("property: no value of MIN_MASKED characters or more survives in a masked line", () => {
    const value = fc
      .string({ minLength: MIN_MASKED, maxLength: 20 })
      .filter((v) => !v.includes("\n") && !v.includes("\r"));
    fc.assert(
      fc.property(
        fc.array(value, { minLength: 1, maxLength: 5 }),
        fc.array(fc.string(), { maxLength: 6 }),
        (values, parts) => {
          // A value that occurs inside the mask itself cannot be told apart from it.
          fc.pre(values.every((v) => !MASK.includes(v) && !v.includes(MASK)));
          const line = parts.reduce((acc, p, i) => acc + p + (values[i % values.length] as string), "");
          const masked = secretMasker(values)(line);
          // A value may be found again only where it overlaps a mask (its characters are the mask's).
          const masks: number[] = [];
          for (let m = masked.indexOf(MASK); m >= 0; m = masked.indexOf(MASK, m + 1)) masks.push(m);
          for (const v of values)
            for (let at = masked.indexOf(v); at >= 0; at = masked.indexOf(v, at + 1))
              assert.ok(
                masks.some((m) => m < at + v.length && at < m + MASK.length),
                `value ${JSON.stringify(v)} survives in ${JSON.stringify(masked)}`,
              );
        },
      ),
      { numRuns: 500 },
    );
  });
});

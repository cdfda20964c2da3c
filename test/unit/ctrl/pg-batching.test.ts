// The pure half of ctrl's PostgreSQL batching (src/ctrl/db/pg-batching.ts): parameters written
// into a statement as literals, only where they are placeholders.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import pg from "pg";
import { inlineParameters, literal } from "../../../src/ctrl/db/pg-batching.js";

describe("inlineParameters", () => {
  it("replaces $1…$n by literals, $10 as ten, and leaves a statement without parameters alone", () => {
    const ten = Array.from({ length: 10 }, (_, i) => `v${i + 1}`);
    assert.equal(inlineParameters("select $1, $10", ten), "select 'v1', 'v10'");
    assert.equal(inlineParameters("select $1::integer", [7]), "select '7'::integer");
    assert.equal(inlineParameters("select '$1' as \"$1\"", []), "select '$1' as \"$1\"");
    assert.equal(inlineParameters("select a$1, $1", ["v"]), "select a$1, 'v'", "a$1 is an identifier");
  });

  it("copies quoted strings, identifiers, comments and dollar-quoted bodies untouched", () => {
    const sql = [
      "select $1",
      "'it''s $1'",
      "E'\\' $1'",
      '"col $1"',
      "-- $1 in a comment\n",
      "/* $1 */",
      "$fn$ body $1 $fn$",
      "$$ $1 $$",
      "$2",
    ].join(" ");
    assert.equal(
      inlineParameters(sql, ["a", "b"]),
      [
        "select 'a'",
        "'it''s $1'",
        "E'\\' $1'",
        '"col $1"',
        "-- $1 in a comment\n",
        "/* $1 */",
        "$fn$ body $1 $fn$",
        "$$ $1 $$",
        "'b'",
      ].join(" "),
    );
  });

  it("copies plain text between them whole, lone '-' and '/' included", () => {
    const sql = "update t set a = b - 1, c = d / 2 where e = $1 - $2 -- trailing $1\n/ $2";
    assert.equal(
      inlineParameters(sql, ["x", 3]),
      "update t set a = b - 1, c = d / 2 where e = 'x' - '3' -- trailing $1\n/ '3'",
    );
    const long = `select ${"a, ".repeat(5000)}$1`;
    assert.equal(inlineParameters(long, ["z"]), `select ${"a, ".repeat(5000)}'z'`);
  });

  it("refuses a placeholder past the values", () => {
    assert.equal(inlineParameters("select $1, $3", ["a", "b"]), undefined);
    assert.equal(inlineParameters("select $0", ["a"]), undefined);
    assert.equal(inlineParameters("select $1", ["nul \u0000 inside"]), undefined, "a query's text cannot carry NUL");
  });
});

describe("literal", () => {
  it("writes what pg sends as a parameter's text, quoted", () => {
    assert.equal(literal(null), "NULL");
    assert.equal(literal(undefined), "NULL");
    assert.equal(literal(12), "'12'");
    assert.equal(literal(false), "'false'");
    assert.equal(literal("it's"), "'it''s'");
    assert.equal(literal("a\\b"), " E'a\\\\b'");
    assert.equal(literal(Uint8Array.from([0, 0xab])), " E'\\\\x00ab'");
    assert.equal(literal({ a: 1 }), `'{"a":1}'`);
  });

  it("is pg.escapeLiteral's quoting of what pg sends, for any string and any bytes", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary" }), (s) => {
        if (s.includes("\u0000")) return literal(s) === undefined;
        return literal(s) === pg.escapeLiteral(s);
      }),
    );
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 512 }), (b) => {
        return literal(b) === pg.escapeLiteral(`\\x${Buffer.from(b).toString("hex")}`);
      }),
    );
  });

  it("a string's literal reads back as the string (standard and E'' forms)", () => {
    const unquote = (lit: string): string => {
      const e = lit.startsWith(" E'");
      const body = lit.slice(e ? 3 : 1, -1).replace(/''/g, "'");
      return e ? body.replace(/\\\\/g, "\\") : body;
    };
    fc.assert(
      fc.property(fc.string({ unit: "binary" }), (s) => {
        const lit = literal(s);
        return s.includes("\u0000") ? lit === undefined : lit !== undefined && unquote(lit) === s;
      }),
    );
  });
});

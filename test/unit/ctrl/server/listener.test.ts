// Which server a plain connection's first bytes go to (src/ctrl/server/listener.ts).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { sniffProtocol } from "../../../../src/ctrl/server/listener.js";

const PREFACE = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

describe("sniffProtocol", () => {
  it("waits while the bytes could still be the HTTP/2 preface, then picks h2", () => {
    for (let n = 1; n < PREFACE.length; n++) assert.equal(sniffProtocol(Buffer.from(PREFACE.slice(0, n))), undefined);
    assert.equal(sniffProtocol(Buffer.from(PREFACE)), "h2");
    assert.equal(sniffProtocol(Buffer.from(`${PREFACE}\x00\x00\x12\x04`)), "h2");
  });

  it("picks HTTP/1.1 for every request line", () => {
    for (const line of ["GET / HTTP/1.1\r\n", "POST /x HTTP/1.1\r\n", "PRI / HTTP/1.1\r\n", "P"])
      assert.equal(sniffProtocol(Buffer.from(line)), line === "P" ? undefined : "http1");
  });

  it("decides as soon as the bytes leave the preface, whatever follows", () => {
    fc.assert(
      fc.property(fc.nat(PREFACE.length - 1), fc.uint8Array({ minLength: 1, maxLength: 64 }), (cut, rest) => {
        const wrong = (PREFACE.charCodeAt(cut) + 1) % 256;
        const bytes = Buffer.concat([Buffer.from(PREFACE.slice(0, cut), "latin1"), Buffer.from([wrong]), rest]);
        return sniffProtocol(bytes) === "http1";
      }),
    );
  });
});

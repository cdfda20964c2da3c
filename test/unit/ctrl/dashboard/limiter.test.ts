// The sign-in's rate limit: a burst per address, then one attempt per interval; addresses apart;
// the overall bucket caps every address together; the map of addresses stays bounded.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { SignInLimiter } from "../../../../src/ctrl/dashboard/limiter.js";

describe("SignInLimiter", () => {
  it("allows a burst per address, then one attempt per interval, and says how long to wait", () => {
    const l = new SignInLimiter({ burst: 3, everyMs: 1_000 }, { burst: 1_000, everyMs: 1 }, 0);
    for (let i = 0; i < 3; i++) assert.equal(l.take("a", 0), 0);
    assert.equal(l.take("a", 0), 1_000);
    assert.equal(l.take("a", 400), 600);
    // Another address is not held back by the first.
    assert.equal(l.take("b", 400), 0);
    assert.equal(l.take("a", 1_000), 0);
    assert.equal(l.take("a", 1_000), 1_000);
  });

  it("caps every address together", () => {
    const l = new SignInLimiter({ burst: 10, everyMs: 1_000 }, { burst: 2, everyMs: 500 }, 0);
    assert.equal(l.take("a", 0), 0);
    assert.equal(l.take("b", 0), 0);
    assert.equal(l.take("c", 0), 500);
  });

  it("never allows more than burst + elapsed/interval attempts per address (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 5_000 }), { maxLength: 200 }), (gaps) => {
        const l = new SignInLimiter({ burst: 5, everyMs: 1_000 }, { burst: 1e9, everyMs: 1 }, 0);
        let now = 0;
        let allowed = 0;
        for (const g of gaps) {
          now += g;
          if (l.take("x", now) === 0) allowed++;
        }
        return allowed <= 5 + Math.floor(now / 1_000);
      }),
    );
  });

  it("keeps a bounded number of addresses", () => {
    const l = new SignInLimiter({ burst: 2, everyMs: 1_000 }, { burst: 1e9, everyMs: 1 }, 0);
    for (let i = 0; i < 25_000; i++) l.take(`10.0.${i >> 8}.${i & 255}`, i);
    assert.ok(l.size <= 10_000, `${l.size} addresses kept`);
  });
});

// Rate limits across sentinel replicas (src/sentinel/rate-limit.ts): alone, a replica admits
// exactly min(offered, limit) per window; shares split what is left exactly; replicas that exchange
// their counts at every sync never admit more than the limit together, whatever the demand; late
// reports change nothing; the answers' headers; keys past the bound share one budget.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { RateLimiter, rateLimitHeaders, shareOf, OVERFLOW_KEY } from "../../../src/sentinel/rate-limit.js";

const W = 60_000;

describe("one replica", () => {
  it("admits exactly min(offered, limit) in each window, and tells what is left and when it ends", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        fc.array(fc.integer({ min: 0, max: 3 * W - 1 }), { maxLength: 300 }),
        (limit, times) => {
          const l = new RateLimiter(limit, W, "a");
          const sorted = [...times].sort((x, y) => x - y);
          const admitted = new Map<number, number>();
          const offered = new Map<number, number>();
          for (const t of sorted) {
            const w = Math.floor(t / W);
            offered.set(w, (offered.get(w) ?? 0) + 1);
            const d = l.take("k", t);
            assert.ok(d.resetSeconds >= 1 && d.resetSeconds <= W / 1000);
            assert.equal(d.resetSeconds, Math.max(1, Math.ceil(((w + 1) * W - t) / 1000)));
            if (d.admitted) {
              admitted.set(w, (admitted.get(w) ?? 0) + 1);
              assert.equal(d.remaining, limit - (admitted.get(w) ?? 0));
            } else assert.equal(d.remaining, 0);
          }
          for (const [w, n] of offered) assert.equal(admitted.get(w) ?? 0, Math.min(n, limit));
        },
      ),
    );
  });

  it("counts keys apart, and keys past the bound in one overflow budget", () => {
    const l = new RateLimiter(1, W, "a", 2);
    assert.ok(l.take("x", 0).admitted);
    assert.ok(l.take("y", 0).admitted);
    assert.equal(l.take("x", 1).admitted, false);
    assert.ok(l.take("z", 2).admitted, "the first key past the bound opens the overflow budget");
    assert.equal(l.take("w", 3).admitted, false, "and shares it with every later key");
    assert.equal(l.size, 3);
    assert.ok(l.report(4).keys.has(OVERFLOW_KEY));
    assert.ok(l.take("w", W).admitted, "a new window starts empty");
  });
});

describe("shares", () => {
  it("add up to what is left, none negative, more demand never less share", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10_000 }),
        fc.array(fc.integer({ min: 0, max: 1000 }), { minLength: 1, maxLength: 6 }),
        (left, demand) => {
          const demands = new Map(demand.map((d, i) => [`r${i}`, d]));
          const shares = demand.map((_, i) => shareOf(left, `r${i}`, demands));
          assert.equal(
            shares.reduce((a, b) => a + b, 0),
            left,
          );
          for (let i = 0; i < demand.length; i++) {
            assert.ok((shares[i] ?? -1) >= 0);
            for (let j = 0; j < demand.length; j++)
              if ((demand[i] ?? 0) > (demand[j] ?? 0)) assert.ok((shares[i] ?? 0) >= (shares[j] ?? 0));
          }
        },
      ),
    );
  });
});

describe("replicas exchanging counts", () => {
  it("never admit more than the limit together when every sync reaches every peer", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 200 }),
        fc.integer({ min: 2, max: 4 }),
        // Per sync period: how many requests each replica gets.
        fc.array(fc.array(fc.integer({ min: 0, max: 40 }), { minLength: 4, maxLength: 4 }), { maxLength: 30 }),
        (limit, n, periods) => {
          const ids = Array.from({ length: n }, (_, i) => `r${i}`);
          const rs = ids.map((id) => new RateLimiter(limit, W, id));
          const sync = (t: number): void => {
            const reports = rs.map((r) => r.report(t));
            rs.forEach((r, i) => reports.forEach((rep, j) => i !== j && r.receive(ids[j] ?? "", rep, t)));
            rs.forEach((r) => r.rebalance(t, ids));
          };
          sync(0);
          let admitted = 0;
          let offered = 0;
          periods.forEach((load, p) => {
            const t = 1 + p * 100;
            rs.forEach((r, i) => {
              for (let k = 0; k < (load[i] ?? 0); k++) {
                offered++;
                if (r.take("k", t).admitted) admitted++;
              }
            });
            sync(t + 50);
          });
          assert.ok(admitted <= limit, `${admitted} admitted of ${limit}`);
          // Nothing is refused while the budget is untouched by others: at least the first period's
          // requests up to each replica's even share pass.
          if (offered > 0 && periods.length > 0) assert.ok(admitted > 0 || limit < n);
        },
      ),
    );
  });

  it("keep a peer's counts after it is gone, and ignore a late report with fewer", () => {
    const a = new RateLimiter(10, W, "a");
    const b = new RateLimiter(10, W, "b");
    for (let i = 0; i < 6; i++) assert.ok(b.take("k", 10).admitted);
    a.receive("b", b.report(20), 20);
    a.receive("b", { window: 0, keys: new Map([["k", { count: 2, demand: 0 }]]) }, 21);
    a.rebalance(30, []); // b is gone: a alone again, but b's six stay counted
    let n = 0;
    while (a.take("k", 40).admitted) n++;
    assert.equal(n, 4);
    // A report of another window counts nothing.
    const c = new RateLimiter(10, W, "c");
    c.receive("b", b.report(20), W + 1);
    assert.equal(c.take("k", W + 2).remaining, 9);
  });

  it("splits by demand: the busy replica gets most of what is left", () => {
    const ids = ["a", "b"];
    const [a, b] = ids.map((id) => new RateLimiter(100, W, id));
    assert.ok(a && b);
    for (let i = 0; i < 9; i++) a.take("k", 1);
    b.take("k", 1);
    const ra = a.report(2);
    const rb = b.report(2);
    a.receive("b", rb, 2);
    b.receive("a", ra, 2);
    a.rebalance(2, ids);
    b.rebalance(2, ids);
    let na = 0;
    let nb = 0;
    while (a.take("k", 3).admitted) na++;
    while (b.take("k", 3).admitted) nb++;
    // 90 left, weights 10:2.
    assert.deepEqual([na, nb], [75, 15]);
  });
});

describe("headers", () => {
  it("follow draft-ietf-httpapi-ratelimit-headers-11, with Retry-After on a refusal", () => {
    assert.deepEqual(rateLimitHeaders("per-ip", 100, 60, { admitted: false, remaining: 0, resetSeconds: 12 }), {
      "ratelimit-policy": '"per-ip";q=100;w=60',
      ratelimit: '"per-ip";r=0;t=12',
      "retry-after": "12",
    });
    assert.equal(
      rateLimitHeaders("p", 5, 1, { admitted: true, remaining: 3, resetSeconds: 1 })["retry-after"],
      undefined,
    );
  });
});

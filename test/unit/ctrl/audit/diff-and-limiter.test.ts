// The audit log's pure parts in ctrl: field-level diffs of views (secrets only ever "changed",
// never a value or anything derived from one — property-tested), and the folding of refusals
// without a valid token past a rate, per address and in all.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { diffViews, Sensitive, type ViewTree } from "../../../../src/ctrl/audit/diff.js";
import { ALL, RefusalLimiter } from "../../../../src/ctrl/audit/limiter.js";

describe("diffViews", () => {
  it("lists what was added, removed and set, by dotted path in order", () => {
    const before: ViewTree = {
      environment: { regions: { "eu-west": 2 }, config: { A: "1", B: "2" }, rollout: { max_surge: "25%" } },
    };
    const after: ViewTree = {
      environment: { regions: { "eu-west": 3, us: 1 }, config: { A: "1" }, rollout: { max_surge: "50%" } },
    };
    assert.deepEqual(diffViews(before, after), [
      { field: "environment.config.B", op: "removed", before: "2" },
      { field: "environment.regions.eu-west", op: "set", before: 2, after: 3 },
      { field: "environment.regions.us", op: "added", after: 1 },
      { field: "environment.rollout.max_surge", op: "set", before: "25%", after: "50%" },
    ]);
    assert.deepEqual(diffViews(before, before), []);
  });

  it("quotes keys that hold dots, so a hostname is one level", () => {
    assert.deepEqual(diffViews({ d: {} }, { d: { "www.shop.com": "pending" } }), [
      { field: 'd."www.shop.com"', op: "added", after: "pending" },
    ]);
  });

  it("compares lists whole", () => {
    assert.deepEqual(diffViews({ c: ["a", "b"] }, { c: ["a", "c"] }), [
      { field: "c", op: "set", before: ["a", "b"], after: ["a", "c"] },
    ]);
  });

  it("says only added, removed or changed of a secret, never a value", () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), fc.string({ minLength: 6 })),
        fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), fc.string({ minLength: 6 })),
        (a, b) => {
          const view = (d: Record<string, string>): ViewTree => ({
            secrets: Object.fromEntries(Object.entries(d).map(([k, v]) => [k, new Sensitive(`sealed:${v}`)])),
            list: [new Sensitive(`in-a-list:${Object.values(d).join()}`)],
          });
          const changes = diffViews(view(a), view(b));
          const text = JSON.stringify(changes);
          for (const v of [...Object.values(a), ...Object.values(b)]) assert.ok(!text.includes(`sealed:${v}`));
          assert.ok(!text.includes("in-a-list:"));
          for (const c of changes) {
            assert.ok(["added", "removed", "changed"].includes(c.op), c.op);
            assert.equal(c.before, undefined);
            assert.equal(c.after, undefined);
          }
          const secrets = changes.filter((c) => c.field.startsWith("secrets."));
          const count = (op: string): number => secrets.filter((c) => c.op === op).length;
          const has = Object.hasOwn;
          assert.equal(count("changed"), Object.keys(b).filter((k) => has(a, k) && a[k] !== b[k]).length);
          assert.equal(count("added"), Object.keys(b).filter((k) => !has(a, k)).length);
          assert.equal(count("removed"), Object.keys(a).filter((k) => !has(b, k)).length);
        },
      ),
    );
  });

  it("a thing that did not exist, or no longer does", () => {
    assert.deepEqual(diffViews(null, { w: { slug: "acme" } }), [{ field: "w.slug", op: "added", after: "acme" }]);
    assert.deepEqual(diffViews({ w: { slug: "acme" } }, null), [{ field: "w.slug", op: "removed", before: "acme" }]);
  });
});

describe("RefusalLimiter", () => {
  it("records a burst per address, then folds, and names the folded count with the next record", () => {
    const l = new RefusalLimiter({ perSecond: 1, burst: 3, total: { perSecond: 100, burst: 100 } });
    const t = 1_000_000;
    const got = Array.from({ length: 5 }, () => l.admit("10.0.0.1", t).record);
    assert.deepEqual(got, [true, true, true, false, false]);
    assert.equal(l.admit("10.0.0.2", t).record, true, "another address has its own bucket");
    const next = l.admit("10.0.0.1", t + 1000);
    assert.equal(next.record, true);
    assert.equal(next.folded, 2);
    assert.deepEqual(l.drain(), []);
  });

  it("caps all addresses together, and the flush records what was folded", () => {
    const l = new RefusalLimiter({ perSecond: 100, burst: 100, total: { perSecond: 1, burst: 2 } });
    const t = 5_000;
    const got = ["a", "b", "c", "d"].map((ip) => l.admit(ip, t).record);
    assert.deepEqual(got, [true, true, false, false]);
    assert.deepEqual(
      l.drain().map((d) => [d.address, d.folded]),
      [[ALL, 2]],
    );
    assert.deepEqual(l.drain(), []);
  });

  it("never records more than the rate allows, and loses no refusal", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 50 })), { maxLength: 300 }),
        (calls) => {
          const l = new RefusalLimiter({ perSecond: 2, burst: 5, total: { perSecond: 5, burst: 10 } });
          let t = 0;
          let recorded = 0;
          let foldedReported = 0;
          for (const [ip, dt] of calls) {
            t += dt;
            const a = l.admit(`10.0.0.${ip}`, t);
            if (a.record) recorded++;
            foldedReported += a.folded;
          }
          const drained = l.drain().reduce((n, d) => n + d.folded, 0);
          assert.equal(recorded + foldedReported + drained, calls.length);
          assert.ok(recorded <= 10 + (t / 1000) * 5 + 1);
        },
      ),
    );
  });
});

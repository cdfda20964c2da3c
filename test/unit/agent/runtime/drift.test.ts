import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { findDrift } from "../../../../src/agent/runtime/drift.js";
import { parseQuantity } from "../../../../src/kube/quantity.js";

test("extra live fields (defaults, status) are not drift", () => {
  const rendered = { spec: { replicas: 2, template: { spec: { containers: [{ name: "a", image: "x" }] } } } };
  const live = {
    status: { replicas: 2 },
    spec: {
      replicas: 2,
      template: {
        spec: { dnsPolicy: "ClusterFirst", containers: [{ name: "a", image: "x", terminationMessagePath: "/dev/x" }] },
      },
    },
  };
  assert.equal(findDrift(rendered, live), undefined);
});

test("a changed owned field, a missing one or a different list length is drift", () => {
  assert.equal(findDrift({ spec: { replicas: 2 } }, { spec: { replicas: 5 } }), ".spec.replicas");
  assert.equal(findDrift({ metadata: { labels: { a: "1" } } }, { metadata: {} }), ".metadata.labels");
  assert.equal(findDrift({ l: [1, 2] }, { l: [1] }), ".l");
  assert.equal(findDrift({ l: [{ n: "a" }] }, { l: [{ n: "b" }] }), ".l[0].n");
});

test("quantities compare by value", () => {
  assert.equal(findDrift({ memory: "1024Mi", cpu: "1000m" }, { memory: "1Gi", cpu: "1" }), undefined);
  assert.equal(findDrift({ cpu: "500m" }, { cpu: "0.5" }), undefined);
  assert.notEqual(findDrift({ cpu: "500m" }, { cpu: "1" }), undefined);
  assert.equal(parseQuantity("128Mi"), 128 * 2 ** 20 * 1000);
  assert.equal(parseQuantity("abc"), undefined);
  // The metrics API's usage figures: nanocores and microcores, in thousandths of a core.
  assert.equal(parseQuantity("250000000n"), 250);
  assert.equal(parseQuantity("1500u"), 2);
  assert.equal(parseQuantity("1x"), undefined);
});

test("property: drift is found exactly when some rendered field differs, and its path leads to a difference", () => {
  // Small values so that equal and unequal leaves both happen often.
  const leaf = fc.oneof(
    fc.constantFrom("a", "b", "1", "1000m", "1Gi", "1024Mi", null),
    fc.integer({ min: 0, max: 2 }),
    fc.boolean(),
  );
  const { value } = fc.letrec((tie) => ({
    value: fc.oneof(
      { depthSize: "small" },
      leaf,
      fc.array(tie("value"), { maxLength: 3 }),
      fc.dictionary(fc.constantFrom("x", "y", "z"), tie("value"), { maxKeys: 3 }),
    ),
  }));
  // The definition, written plainly: every rendered field present and equal (quantities by value).
  const same = (r: unknown, l: unknown): boolean => {
    if (r === undefined) return true;
    if (r === null) return l === undefined || l === null;
    if (Array.isArray(r)) return Array.isArray(l) && l.length === r.length && r.every((x, i) => same(x, l[i]));
    if (typeof r === "object") {
      if (typeof l !== "object" || l === null || Array.isArray(l)) return false;
      return Object.entries(r).every(([k, v]) => same(v, (l as Record<string, unknown>)[k]));
    }
    if (r === l) return true;
    const a = typeof r === "string" ? parseQuantity(r) : undefined;
    return a !== undefined && typeof l === "string" && a === parseQuantity(l);
  };
  const at = (v: unknown, path: string): unknown => {
    let cur = v;
    for (const m of path.matchAll(/\.([^.[]+)|\[(\d+)\]/g)) {
      if (cur === null || typeof cur !== "object") return undefined;
      cur = (cur as Record<string, unknown>)[m[1] ?? m[2] ?? ""];
    }
    return cur;
  };
  fc.assert(
    fc.property(value, value, (r, l) => {
      const d = findDrift(r, l);
      assert.equal(d === undefined, same(r, l));
      assert.equal(findDrift(r, r), undefined);
      if (d !== undefined && d !== "/")
        assert.equal(same(at(r, d), at(l, d)), false, `path ${d} leads to a difference`);
    }),
    { numRuns: 2000 },
  );
});

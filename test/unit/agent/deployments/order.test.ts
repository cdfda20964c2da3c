// The order of an environment's ReplicaSet changes: a scale-up waits for pending scale-downs, so
// an agent that receives several rollout passes at once never exceeds the surge bound.
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { scaleDownsFirst, type Sibling } from "../../../../src/agent/deployments/order.js";

test("a scale-up waits for siblings whose desired replicas are below their live ones", () => {
  const siblings: Sibling[] = [
    { key: "old", liveReplicas: 3, desiredReplicas: 2 },
    { key: "older", liveReplicas: 0, desiredReplicas: 0 },
  ];
  assert.deepEqual(scaleDownsFirst("new", 3, 2, siblings), ["old"]);
  // A ReplicaSet that does not exist yet is a scale-up from 0.
  assert.deepEqual(scaleDownsFirst("new", 1, undefined, siblings), ["old"]);
  // A sibling ctrl no longer wants here (its delete is pending) counts as shrinking to 0.
  assert.deepEqual(scaleDownsFirst("new", 3, 2, [{ key: "gone", liveReplicas: 1, desiredReplicas: undefined }]), [
    "gone",
  ]);
});

test("scale-downs, unchanged sizes and scale-ups without shrinking siblings never wait", () => {
  const siblings: Sibling[] = [{ key: "old", liveReplicas: 3, desiredReplicas: 2 }];
  assert.deepEqual(scaleDownsFirst("new", 2, 2, siblings), []);
  assert.deepEqual(scaleDownsFirst("new", 1, 2, siblings), []);
  assert.deepEqual(scaleDownsFirst("new", 4, 2, [{ key: "old", liveReplicas: 3, desiredReplicas: 4 }]), []);
  // A key is never its own sibling.
  assert.deepEqual(scaleDownsFirst("new", 4, 2, [{ key: "new", liveReplicas: 5, desiredReplicas: 0 }]), []);
});

test("applied in the order it allows, the live total never exceeds the larger of the old and new totals", () => {
  // Any two snapshots of an environment's desired sizes (each within its own bound): applying
  // the second key by key, scale-ups only once no sibling still shrinks, keeps every
  // intermediate live total ≤ max(total before, total after).
  const sizes = fc.array(fc.tuple(fc.nat(6), fc.nat(6)), { minLength: 1, maxLength: 5 });
  fc.assert(
    fc.property(sizes, fc.array(fc.nat(1000)), (pairs, picks) => {
      const live = pairs.map(([from]) => from);
      const want = pairs.map(([, to]) => to);
      const bound = Math.max(
        live.reduce((a, b) => a + b, 0),
        want.reduce((a, b) => a + b, 0),
      );
      const pending = new Set(pairs.map((_, i) => i));
      let guard = 0;
      while (pending.size > 0 && guard++ < 100) {
        const ready = [...pending].filter((i) => {
          const siblings = pairs.map((_, j) => ({
            key: String(j),
            liveReplicas: live[j] ?? 0,
            desiredReplicas: want[j],
          }));
          return scaleDownsFirst(String(i), want[i] ?? 0, live[i], siblings).length === 0;
        });
        assert.ok(ready.length > 0, "some change can always proceed");
        const i = ready[(picks[guard] ?? 0) % ready.length] ?? 0;
        live[i] = want[i] ?? 0;
        pending.delete(i);
        assert.ok(live.reduce((a, b) => a + b, 0) <= bound, `live ${live.join(",")} within ${bound}`);
      }
      assert.equal(pending.size, 0);
    }),
  );
});

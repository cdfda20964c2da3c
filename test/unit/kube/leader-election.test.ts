import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { checkTiming, decide, microTime, sameRecord, type LeaseRecord } from "../../../src/kube/leader-election.js";
import { resourceLabel } from "../../../src/kube/client.js";

const T = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };
const WALL = "2026-11-23T10:00:00.123000Z";

function rec(holder: string, over: Partial<LeaseRecord> = {}): LeaseRecord {
  return {
    holderIdentity: holder,
    leaseDurationSeconds: 15,
    acquireTime: "a",
    renewTime: "r",
    leaseTransitions: 3,
    ...over,
  };
}

test("no lease yet: create it as holder, transitions 0", () => {
  const d = decide("me", { record: undefined, observedAt: 0 }, 5, WALL, T);
  assert.deepEqual(d, {
    type: "create",
    record: { holderIdentity: "me", leaseDurationSeconds: 15, acquireTime: WALL, renewTime: WALL, leaseTransitions: 0 },
  });
});

test("the holder renews: same acquireTime and transitions, new renewTime", () => {
  const d = decide("me", { record: rec("me"), observedAt: 0 }, 100_000, WALL, T);
  assert.deepEqual(d, { type: "update", record: rec("me", { renewTime: WALL }) });
});

test("property: another holder's lease is taken only after it stayed unchanged for its duration, by the local clock", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 60 }),
      fc.integer({ min: 0, max: 10_000_000 }),
      fc.integer({ min: 0, max: 120_000 }),
      (durationS, observedAt, elapsed) => {
        const d = decide(
          "me",
          { record: rec("other", { leaseDurationSeconds: durationS }), observedAt },
          observedAt + elapsed,
          WALL,
          T,
        );
        if (elapsed < durationS * 1000) {
          assert.equal(d.type, "wait");
        } else {
          assert.equal(d.type, "update");
          if (d.type === "update") {
            assert.equal(d.record.holderIdentity, "me");
            assert.equal(d.record.leaseTransitions, 4, "a takeover is a transition");
            assert.equal(d.record.acquireTime, WALL);
          }
        }
      },
    ),
  );
});

test("a released lease (empty holder) is taken at once", () => {
  const d = decide("me", { record: rec(""), observedAt: 1_000 }, 1_001, WALL, T);
  assert.equal(d.type, "update");
});

test("timing rules and MicroTime's six fractional digits", () => {
  checkTiming(T);
  assert.throws(() => checkTiming({ leaseDurationMs: 10_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 }));
  assert.throws(() => checkTiming({ leaseDurationMs: 15_000, renewDeadlineMs: 2_000, retryPeriodMs: 2_000 }));
  assert.equal(microTime(new Date("2026-01-02T03:04:05.678Z")), "2026-01-02T03:04:05.678000Z");
  assert.ok(sameRecord(rec("x"), rec("x")));
  assert.ok(!sameRecord(rec("x"), rec("x", { renewTime: "later" })));
});

test("raw requests are counted under their resource (leases, serviceaccounts/token, version)", () => {
  assert.equal(resourceLabel("/apis/coordination.k8s.io/v1/namespaces/krane-system/leases"), "leases");
  assert.equal(resourceLabel("/apis/coordination.k8s.io/v1/namespaces/krane-system/leases/krane-agent-eu"), "leases");
  assert.equal(
    resourceLabel("/api/v1/namespaces/krane-system/serviceaccounts/krane-agent/token"),
    "serviceaccounts/token",
  );
  assert.equal(resourceLabel("/version"), "version");
});

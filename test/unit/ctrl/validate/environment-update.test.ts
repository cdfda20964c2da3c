// UpdateEnvironment's pure checks: the request on its own (validateUpdateEnvironment) and the
// merge of a change into the stored settings (mergeRolloutPolicy, mergeSentinel).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import fc from "fast-check";
import { RolloutStrategy, UpdateEnvironmentRequestSchema } from "../../../../src/gen/krane/ctrl/v1/api_pb.js";
import { DomainError } from "../../../../src/ctrl/errors.js";
import type {
  RolloutPolicyInput,
  RolloutPolicyPatch,
  SentinelSettingsInput,
} from "../../../../src/ctrl/validate/types.js";
import {
  mergeRolloutPolicy,
  mergeSentinel,
  validateRollout,
  validateUpdateEnvironment,
} from "../../../../src/ctrl/validate/api.js";

const FIELD_OF: Record<keyof RolloutPolicyInput, string> = {
  strategy: "rollout.strategy",
  maxSurge: "rollout.max_surge",
  maxUnavailable: "rollout.max_unavailable",
  minReadySeconds: "rollout.min_ready_seconds",
  progressDeadlineSeconds: "rollout.progress_deadline_seconds",
  revisionHistoryLimit: "rollout.revision_history_limit",
  paused: "rollout.paused",
  progressive: "rollout.progressive",
  warmWindowSeconds: "rollout.warm_window_seconds",
};

const intOrPercent = fc.oneof(
  fc.constantFrom("0", "0%"),
  fc.integer({ min: 0, max: 5 }).map(String),
  fc.integer({ min: 0, max: 100 }).map((n) => `${n}%`),
);
const policy: fc.Arbitrary<RolloutPolicyInput> = fc
  .record({
    strategy: fc.constantFrom("RollingUpdate" as const, "Recreate" as const),
    maxSurge: intOrPercent,
    maxUnavailable: intOrPercent,
    minReadySeconds: fc.integer({ min: 0, max: 700 }),
    progressDeadlineSeconds: fc.integer({ min: 1, max: 800 }),
    revisionHistoryLimit: fc.integer({ min: 0, max: 100 }),
    paused: fc.boolean(),
    progressive: fc.constant(null),
    warmWindowSeconds: fc.integer({ min: 0, max: 86_400 }),
  })
  .filter((p) => {
    try {
      validateRollout({
        ...p,
        progressive: undefined,
        strategy: p.strategy === "Recreate" ? RolloutStrategy.RECREATE : RolloutStrategy.ROLLING_UPDATE,
        $typeName: "krane.ctrl.v1.RolloutPolicy",
      });
      return true;
    } catch {
      return false;
    }
  });
const patch: fc.Arbitrary<RolloutPolicyPatch> = fc.record(
  {
    strategy: fc.constantFrom("RollingUpdate" as const, "Recreate" as const),
    maxSurge: intOrPercent,
    maxUnavailable: intOrPercent,
    minReadySeconds: fc.integer({ min: 0, max: 700 }),
    progressDeadlineSeconds: fc.integer({ min: 1, max: 800 }),
    revisionHistoryLimit: fc.integer({ min: 0, max: 100 }),
    paused: fc.boolean(),
    warmWindowSeconds: fc.integer({ min: 0, max: 86_400 }),
  },
  { requiredKeys: [] },
);

const isZero = (v: string): boolean => v === "0" || v === "0%";

describe("mergeRolloutPolicy", () => {
  it("returns the stored policy with the given fields replaced, or refuses naming a field the change set", () => {
    fc.assert(
      fc.property(policy, patch, (current, change) => {
        const expected = { ...current, ...change };
        const valid =
          !(expected.strategy === "RollingUpdate" && isZero(expected.maxSurge) && isZero(expected.maxUnavailable)) &&
          expected.progressDeadlineSeconds > expected.minReadySeconds;
        let merged: RolloutPolicyInput;
        try {
          merged = mergeRolloutPolicy(current, change);
        } catch (err) {
          assert.ok(err instanceof DomainError && err.code === "invalid_argument", String(err));
          assert.equal(valid, false, `refused a valid result: ${err.message}`);
          // The current policy is valid, so some given field made it invalid: the error names one.
          const named = Object.keys(change).map((k) => FIELD_OF[k as keyof RolloutPolicyInput]);
          assert.ok(named.includes(err.field ?? ""), `${err.field} is not among ${named.join(", ")}`);
          return;
        }
        assert.ok(valid, "accepted an invalid result");
        assert.deepEqual(merged, expected);
      }),
      { numRuns: 2000 },
    );
  });
});

describe("mergeSentinel", () => {
  const current: SentinelSettingsInput = { image: "s:1", replicas: 2, cpuMillicores: 300, memoryMib: 128 };
  it("changes only the given fields, adds with defaults, removes", () => {
    assert.deepEqual(mergeSentinel(current, null, false), current);
    assert.deepEqual(mergeSentinel(current, { replicas: 0 }, false), { ...current, replicas: 0 });
    assert.deepEqual(mergeSentinel(null, { image: "s:2" }, false), {
      image: "s:2",
      replicas: 2,
      cpuMillicores: 250,
      memoryMib: 256,
    });
    assert.equal(mergeSentinel(current, null, true), null);
    assert.equal(mergeSentinel(null, null, false), null);
    // No image named: krane's own sentinel ("").
    assert.deepEqual(mergeSentinel(null, { replicas: 3 }, false), {
      image: "",
      replicas: 3,
      cpuMillicores: 250,
      memoryMib: 256,
    });
  });
});

describe("validateUpdateEnvironment", () => {
  it("keeps absent fields absent and numbers entries for later errors", () => {
    const u = validateUpdateEnvironment(
      create(UpdateEnvironmentRequestSchema, {
        workspace: "acme",
        project: "shop",
        environment: "prod",
        rollout: { paused: false },
        regions: [
          { region: "eu", replicas: 0 },
          { region: "us", replicas: 3 },
        ],
        removeRegions: ["ap"],
      }),
    );
    assert.deepEqual(u.rollout, { paused: false });
    assert.equal(u.sentinel, null);
    assert.equal(u.removeSentinel, false);
    assert.deepEqual(u.regions, [
      { index: 0, region: "eu", replicas: 0 },
      { index: 1, region: "us", replicas: 3 },
    ]);
    assert.deepEqual(u.removeRegions, [{ index: 0, region: "ap" }]);
  });

  it("either accepts a random request or throws InvalidArgument naming a field", () => {
    const text = fc.oneof(fc.string({ maxLength: 20 }), fc.constantFrom("acme", "eu", "us", "s:1", "25%", "0", ""));
    const opt = <T>(a: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> => fc.option(a, { nil: undefined });
    fc.assert(
      fc.property(
        fc.record({
          workspace: text,
          project: text,
          environment: text,
          sentinel: opt(fc.record({ image: opt(text), replicas: opt(fc.integer({ min: -5, max: 200 })) })),
          removeSentinel: fc.boolean(),
          rollout: opt(
            fc.record({
              strategy: opt(fc.integer({ min: -1, max: 4 })),
              maxSurge: opt(text),
              minReadySeconds: opt(fc.integer({ min: -5, max: 5000 })),
              warmWindowSeconds: opt(fc.integer({ min: -5, max: 90_000 })),
            }),
          ),
          regions: fc.array(fc.record({ region: text, replicas: fc.integer({ min: -2, max: 2000 }) }), {
            maxLength: 3,
          }),
          removeRegions: fc.array(text, { maxLength: 3 }),
        }),
        (req) => {
          try {
            const u = validateUpdateEnvironment(create(UpdateEnvironmentRequestSchema, req));
            const added = new Set(u.regions.map((r) => r.region));
            assert.ok(
              u.removeRegions.every((r) => !added.has(r.region)),
              "a region both added and removed",
            );
            assert.ok(!(u.sentinel !== null && u.removeSentinel));
          } catch (err) {
            assert.ok(err instanceof DomainError && err.code === "invalid_argument", String(err));
            assert.match(err.message, /^[a-z_]+(\[\d+\])?(\.[a-z_]+)*: /);
          }
        },
      ),
      { numRuns: 1000 },
    );
  });
});

// Input validation: every error names the field; absent optional fields get their defaults.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { RolloutInputError, parseRolloutInput, parseRolloutInputText } from "../../../src/rollout/index.js";
import { deployment, input, rev, rolling } from "./helpers.js";
import type { Json } from "./helpers.js";

const good = (): Json => input(deployment("v2"), [rev("v1", 1, 10), rev("v2", 2, 0)]);

function withChange(change: (j: Json) => void): Json {
  const j = structuredClone(good());
  change(j);
  return j;
}

const dep = (j: Json): Json => j["deployment"] as Json;
const revAt = (j: Json, i: number): Json => (j["revisions"] as Json[])[i] as Json;

function rejects(j: unknown, field: string, problem: RegExp): void {
  assert.throws(
    () => parseRolloutInput(j),
    (err: unknown) => {
      assert.ok(err instanceof RolloutInputError, `expected RolloutInputError, got ${String(err)}`);
      assert.equal(err.field, field);
      assert.match(err.problem, problem);
      assert.equal(err.message, `${err.field}: ${err.problem}`);
      return true;
    },
  );
}

describe("parseRolloutInput rejects", () => {
  const table: [string, (j: Json) => void, string, RegExp][] = [
    ["negative replicas", (j) => (dep(j)["replicas"] = -1), "deployment.replicas", /must not be negative/],
    ["fractional replicas", (j) => (dep(j)["replicas"] = 2.5), "deployment.replicas", /must be an integer/],
    [
      "an unknown strategy",
      (j) => (dep(j)["strategy"] = { type: "BlueGreen" }),
      "deployment.strategy.type",
      /unknown strategy/,
    ],
    [
      "maxSurge over 100%",
      (j) => (dep(j)["strategy"] = rolling("150%", 0)),
      "deployment.strategy.rollingUpdate.maxSurge",
      /^percentage out of range/,
    ],
    [
      "a negative percentage",
      (j) => (dep(j)["strategy"] = rolling(1, "-5%")),
      "deployment.strategy.rollingUpdate.maxUnavailable",
      /^percentage out of range/,
    ],
    [
      "a non-percentage string",
      (j) => (dep(j)["strategy"] = rolling("5", 0)),
      "deployment.strategy.rollingUpdate.maxSurge",
      /integer or a percentage/,
    ],
    [
      "a negative maxUnavailable",
      (j) => (dep(j)["strategy"] = rolling(0, -1)),
      "deployment.strategy.rollingUpdate.maxUnavailable",
      /must not be negative/,
    ],
    [
      "a target that is not a revision",
      (j) => (dep(j)["target"] = "v9"),
      "deployment.target",
      /"v9" is not a revision/,
    ],
    ["a negative rollbackTo", (j) => (dep(j)["rollbackTo"] = -1), "deployment.rollbackTo", /must not be negative/],
    [
      "a deadline not above minReadySeconds",
      (j) => Object.assign(dep(j), { minReadySeconds: 30, progressDeadlineSeconds: 30 }),
      "deployment.progressDeadlineSeconds",
      /greater than minReadySeconds/,
    ],
    ["a non-boolean paused", (j) => (dep(j)["paused"] = "yes"), "deployment.paused", /true or false/],
    [
      "a bad condition status",
      (j) =>
        (dep(j)["conditions"] = [
          {
            type: "Available",
            status: "Maybe",
            lastUpdateTime: "2026-01-01T00:00:00Z",
            lastTransitionTime: "2026-01-01T00:00:00Z",
          },
        ]),
      "deployment.conditions[0].status",
      /"True", "False" or "Unknown"/,
    ],
    [
      "a negative deployment status count",
      (j) => (dep(j)["status"] = { replicas: -2 }),
      "deployment.status.replicas",
      /must not be negative/,
    ],
    [
      "negative revision replicas",
      (j) => (revAt(j, 1)["replicas"] = -3),
      "revisions[1].replicas",
      /must not be negative/,
    ],
    [
      "a non-integer revision status",
      (j) => (revAt(j, 0)["status"] = { availableReplicas: "x" }),
      "revisions[0].status.availableReplicas",
      /must be an integer/,
    ],
    ["a bad createdAt", (j) => (revAt(j, 0)["createdAt"] = "yesterday"), "revisions[0].createdAt", /RFC 3339/],
    ["duplicate names", (j) => (revAt(j, 1)["name"] = "v1"), "revisions[1].name", /duplicate name "v1"/],
    [
      "duplicate revision numbers",
      (j) => (revAt(j, 1)["revision"] = 1),
      "revisions[1].revision",
      /duplicate revision 1/,
    ],
    ["revision 0", (j) => (revAt(j, 1)["revision"] = 0), "revisions[1].revision", /at least 1/],
    [
      "replicas on a revision without a replica set",
      (j) => Object.assign(revAt(j, 1), { revision: null, replicas: 2 }),
      "revisions[1].replicas",
      /must be 0/,
    ],
    [
      "terminating pods of a revision without a replica set",
      (j) => Object.assign(revAt(j, 1), { revision: null, status: { terminatingReplicas: 1 } }),
      "revisions[1].status.terminatingReplicas",
      /must be 0/,
    ],
    [
      "negative terminating pods",
      (j) => (revAt(j, 0)["status"] = { terminatingReplicas: -1 }),
      "revisions[0].status.terminatingReplicas",
      /must not be negative/,
    ],
    [
      "a negative max-replicas annotation",
      (j) => (revAt(j, 0)["maxReplicas"] = -1),
      "revisions[0].maxReplicas",
      /must not be negative/,
    ],
    ["a missing now", (j) => delete j["now"], "now", /must be a string/],
    ["revisions that are not a list", (j) => (j["revisions"] = {}), "revisions", /must be an array/],
    ["a missing strategy", (j) => delete dep(j)["strategy"], "deployment.strategy", /required/],
    [
      "replicas + maxSurge beyond int32",
      (j) => Object.assign(dep(j), { replicas: 2147483000, strategy: rolling("25%", 0) }),
      "deployment.strategy.rollingUpdate.maxSurge",
      /replicas \(2147483000\) \+ maxSurge must be at most 2147483647, got 2684353750/,
    ],
    [
      "an int maxSurge one past int32",
      (j) => Object.assign(dep(j), { replicas: 10, strategy: rolling(2147483638, 0) }),
      "deployment.strategy.rollingUpdate.maxSurge",
      /got 2147483648$/,
    ],
  ];
  for (const [what, change, field, problem] of table) {
    it(what, () => rejects(withChange(change), field, problem));
  }

  it("a root that is not an object", () => rejects([1, 2], "input", /must be an object/));

  it("malformed JSON", () => {
    assert.throws(
      () => parseRolloutInputText("{not json"),
      (err: unknown) => {
        assert.ok(err instanceof RolloutInputError);
        assert.equal(err.field, "input");
        assert.match(err.problem, /malformed JSON/);
        return true;
      },
    );
  });
});

describe("parseRolloutInput accepts", () => {
  it("a well-formed pass unchanged", () => {
    const parsed = parseRolloutInput(good());
    assert.equal(parsed.deployment.target, "v2");
    assert.deepEqual(parsed.deployment.strategy, {
      type: "RollingUpdate",
      rollingUpdate: { maxSurge: "25%", maxUnavailable: 0 },
    });
  });

  it("fills defaults: maxSurge/maxUnavailable 0, deadline 600, history 10, not paused, no rollback, empty status", () => {
    const parsed = parseRolloutInput({
      now: "2026-01-01T00:00:00Z",
      deployment: { replicas: 3, strategy: { type: "RollingUpdate" }, target: "v1" },
      revisions: [{ name: "v1", revision: 1, createdAt: "2025-12-31T00:00:00Z", replicas: 3 }],
    });
    assert.deepEqual(parsed.deployment, {
      name: "environment",
      replicas: 3,
      strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: 0, maxUnavailable: 0 } },
      minReadySeconds: 0,
      progressDeadlineSeconds: 600,
      revisionHistoryLimit: 10,
      paused: false,
      target: "v1",
      rollbackTo: null,
      status: { replicas: 0, updatedReplicas: 0, readyReplicas: 0, availableReplicas: 0, unavailableReplicas: 0 },
      conditions: [],
    });
    assert.deepEqual(parsed.revisions[0], {
      name: "v1",
      revision: 1,
      createdAt: "2025-12-31T00:00:00Z",
      replicas: 3,
      desiredReplicas: null,
      maxReplicas: null,
      status: { replicas: 0, readyReplicas: 0, availableReplicas: 0, terminatingReplicas: 0 },
    });
  });

  it("keeps explicit nulls: no deadline, no history limit", () => {
    const parsed = parseRolloutInput(
      withChange((j) => Object.assign(dep(j), { progressDeadlineSeconds: null, revisionHistoryLimit: null })),
    );
    assert.equal(parsed.deployment.progressDeadlineSeconds, null);
    assert.equal(parsed.deployment.revisionHistoryLimit, null);
  });

  it("Recreate, with 0% and 100% as the percentage bounds elsewhere", () => {
    assert.deepEqual(
      parseRolloutInput(withChange((j) => (dep(j)["strategy"] = { type: "Recreate" }))).deployment.strategy,
      { type: "Recreate" },
    );
    const bounds = parseRolloutInput(withChange((j) => (dep(j)["strategy"] = rolling("100%", "0%"))));
    assert.deepEqual(bounds.deployment.strategy, {
      type: "RollingUpdate",
      rollingUpdate: { maxSurge: "100%", maxUnavailable: "0%" },
    });
  });

  it("replicas + maxSurge exactly at the int32 limit, and any surge for Recreate", () => {
    const at = parseRolloutInput(
      withChange((j) => Object.assign(dep(j), { replicas: 2147483637, strategy: rolling(10, 0) })),
    );
    assert.equal(at.deployment.replicas, 2147483637);
    const recreate = parseRolloutInput(
      withChange((j) =>
        Object.assign(dep(j), {
          replicas: 2147483647,
          strategy: { type: "Recreate", rollingUpdate: { maxSurge: "100%" } },
        }),
      ),
    );
    assert.equal(recreate.deployment.replicas, 2147483647);
  });
});

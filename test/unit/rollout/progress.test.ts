// Conditions and the progress deadline: Available, Progressing (FoundNewReplicaSet,
// NewReplicaSetCreated, ReplicaSetUpdated, NewReplicaSetAvailable, ProgressDeadlineExceeded),
// completion, and when the next pass must run (requeueAfterSeconds).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { NOW, RECREATE, at, cond, condition, deployment, input, plan, rev, sizes } from "./helpers.js";

const A = { desired: 10, max: 13 };
const available = cond(
  "Available",
  "True",
  "MinimumReplicasAvailable",
  at(-3600),
  at(-3600),
  "Deployment has minimum availability.",
);
// v2 scaled to 3 but none of its pods is available: nothing can move.
const stuckRevs = [rev("v1", 1, 10, A), rev("v2", 2, 3, { ...A, status: [3, 0, 0] })];
const stuckStatus = {
  replicas: 13,
  updatedReplicas: 3,
  readyReplicas: 10,
  availableReplicas: 10,
  unavailableReplicas: 3,
};

function stuck(progressing: Record<string, unknown>, over: Record<string, unknown> = {}) {
  return plan(
    input(deployment("v2", { status: stuckStatus, conditions: [progressing, available], ...over }), stuckRevs),
  );
}

describe("progress deadline", () => {
  it("asks for a pass when the deadline would pass (+1 s), if nothing changed", () => {
    const out = stuck(cond("Progressing", "True", "ReplicaSetUpdated", at(-300)));
    assert.equal(out.requeueAfterSeconds, 301);
    assert.equal(condition(out, "Progressing")?.reason, "ReplicaSetUpdated");
  });

  it("is not exceeded exactly at the deadline, and asks for a pass right away", () => {
    const out = stuck(cond("Progressing", "True", "ReplicaSetUpdated", at(-600)));
    assert.equal(condition(out, "Progressing")?.reason, "ReplicaSetUpdated");
    assert.equal(out.requeueAfterSeconds, 0);
  });

  it("is exceeded after the deadline: Progressing=False/ProgressDeadlineExceeded", () => {
    const out = stuck(cond("Progressing", "True", "ReplicaSetUpdated", at(-601), at(-900)));
    assert.deepEqual(condition(out, "Progressing"), {
      type: "Progressing",
      status: "False",
      reason: "ProgressDeadlineExceeded",
      message: 'ReplicaSet "v2" has timed out progressing.',
      lastUpdateTime: NOW,
      lastTransitionTime: NOW,
    });
    // The old revision keeps serving.
    assert.equal(out.revisions[0]?.replicas, 10);
    assert.equal(out.requeueAfterSeconds, null);
  });

  it("stays exceeded, with no further timer, while nothing progresses", () => {
    const exceeded = cond("Progressing", "False", "ProgressDeadlineExceeded", at(-60));
    const out = stuck(exceeded);
    assert.equal(condition(out, "Progressing")?.lastUpdateTime, at(-60));
    assert.equal(out.requeueAfterSeconds, null);
  });

  it("is ignored without a deadline, which also drops the Progressing condition", () => {
    const out = stuck(cond("Progressing", "True", "ReplicaSetUpdated", at(-6000)), { progressDeadlineSeconds: null });
    assert.equal(condition(out, "Progressing"), undefined);
    assert.equal(out.requeueAfterSeconds, null);
  });

  it("names the deployment when no new replica set exists yet", () => {
    const dep = deployment("v2", {
      replicas: 1,
      strategy: RECREATE,
      status: { replicas: 1, updatedReplicas: 0, readyReplicas: 0, availableReplicas: 0 },
      conditions: [cond("Progressing", "True", "ReplicaSetUpdated", at(-601))],
    });
    const out = plan(input(dep, [rev("v1", 1, 0, { status: [1, 0, 0] }), rev("v2", null, 0)]));
    assert.equal(condition(out, "Progressing")?.message, 'Deployment "environment" has timed out progressing.');
  });
});

describe("Progressing", () => {
  it("progress refreshes lastUpdateTime and keeps lastTransitionTime", () => {
    const revs = [rev("v1", 1, 10, A), rev("v2", 2, 3, { ...A, status: [3, 2, 1] })];
    const conditions = [
      cond("Progressing", "True", "ReplicaSetUpdated", at(-300), at(-900), 'ReplicaSet "v2" is progressing.'),
      available,
    ];
    const out = plan(input(deployment("v2", { status: stuckStatus, conditions }), revs));
    assert.deepEqual(condition(out, "Progressing"), {
      type: "Progressing",
      status: "True",
      reason: "ReplicaSetUpdated",
      message: 'ReplicaSet "v2" is progressing.',
      lastUpdateTime: NOW,
      lastTransitionTime: at(-900),
    });
  });

  it("progress after a timeout turns Progressing back to True", () => {
    const revs = [rev("v1", 1, 10, A), rev("v2", 2, 3, { ...A, status: [3, 1, 1] })];
    const conditions = [cond("Progressing", "False", "ProgressDeadlineExceeded", at(-60)), available];
    const out = plan(input(deployment("v2", { status: stuckStatus, conditions }), revs));
    assert.equal(condition(out, "Progressing")?.status, "True");
    assert.equal(condition(out, "Progressing")?.lastTransitionTime, NOW);
  });

  it("records FoundNewReplicaSet when a rollout starts without any Progressing condition", () => {
    const status = { replicas: 10, updatedReplicas: 0, readyReplicas: 10, availableReplicas: 10 };
    const out = plan(input(deployment("v2", { status }), [rev("v1", 1, 10, A), rev("v2", 2, 0)]));
    assert.equal(condition(out, "Progressing")?.reason, "FoundNewReplicaSet");
    assert.equal(condition(out, "Progressing")?.message, 'Found new replica set "v2"');
  });

  it("records NewReplicaSetCreated when it creates the target's replica set, replacing a timeout", () => {
    const status = { replicas: 10, updatedReplicas: 0, readyReplicas: 10, availableReplicas: 10 };
    const conditions = [cond("Progressing", "False", "ProgressDeadlineExceeded", at(-60))];
    const revs = [rev("v1", 1, 10, A), rev("v2", 2, 0, { status: [0, 0, 0] }), rev("v3", null, 0)];
    const out = plan(input(deployment("v3", { status, conditions }), revs));
    assert.deepEqual(out.revisions[2], { name: "v3", revision: 3, replicas: 3, desiredReplicas: 10, maxReplicas: 13 });
    assert.deepEqual(out.events, [
      { type: "Normal", reason: "ScalingReplicaSet", message: "Scaled up replica set v3 from 0 to 3" },
    ]);
    assert.deepEqual(condition(out, "Progressing"), {
      type: "Progressing",
      status: "True",
      reason: "NewReplicaSetCreated",
      message: 'Created new replica set "v3"',
      lastUpdateTime: NOW,
      lastTransitionTime: NOW,
    });
  });
});

describe("completion", () => {
  const doneRevs = [rev("v1", 1, 0, A), rev("v2", 2, 10, A)];
  const doneStatus = {
    replicas: 10,
    updatedReplicas: 10,
    readyReplicas: 10,
    availableReplicas: 10,
    unavailableReplicas: 0,
  };

  it("sets NewReplicaSetAvailable once every replica is updated and available", () => {
    const conditions = [cond("Progressing", "True", "ReplicaSetUpdated", at(-30), at(-900)), available];
    const out = plan(input(deployment("v2", { status: doneStatus, conditions }), doneRevs));
    assert.deepEqual(condition(out, "Progressing"), {
      type: "Progressing",
      status: "True",
      reason: "NewReplicaSetAvailable",
      message: 'ReplicaSet "v2" has successfully progressed.',
      lastUpdateTime: NOW,
      lastTransitionTime: at(-900),
    });
    assert.equal(out.requeueAfterSeconds, null);
  });

  it("is a fixed point: a complete deployment's pass changes nothing and sets no timer", () => {
    const conditions = [
      cond(
        "Progressing",
        "True",
        "NewReplicaSetAvailable",
        at(-30),
        at(-900),
        'ReplicaSet "v2" has successfully progressed.',
      ),
      available,
    ];
    const out = plan(input(deployment("v2", { status: doneStatus, conditions }), doneRevs));
    assert.deepEqual(out.events, []);
    assert.deepEqual(out.status, doneStatus);
    assert.deepEqual(out.conditions, conditions);
    assert.equal(out.requeueAfterSeconds, null);
  });
});

describe("Available", () => {
  it("is False/MinimumReplicasUnavailable below replicas − maxUnavailable", () => {
    const out = plan(input(deployment("v1"), [rev("v1", 1, 10, { ...A, status: [10, 8, 8] })]));
    assert.deepEqual(condition(out, "Available"), {
      type: "Available",
      status: "False",
      reason: "MinimumReplicasUnavailable",
      message: "Deployment does not have minimum availability.",
      lastUpdateTime: NOW,
      lastTransitionTime: NOW,
    });
  });

  it("is True/MinimumReplicasAvailable at replicas − maxUnavailable (25% of 10 → 2 may be missing)", () => {
    const dep = deployment("v1", {
      strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: "25%", maxUnavailable: "25%" } },
    });
    const out = plan(input(dep, [rev("v1", 1, 10, { ...A, status: [10, 8, 8] })]));
    assert.equal(condition(out, "Available")?.reason, "MinimumReplicasAvailable");
  });

  it("reports unavailableReplicas against the sizes at the start of the pass, the new ones a pass later", () => {
    // v2 goes from 0 to 3: 13 wanted, 10 available. Kubernetes computes the status from the
    // ReplicaSets it listed before scaling, so this pass still says 0 and requeues nothing.
    const status = { replicas: 10, updatedReplicas: 0, readyReplicas: 10, availableReplicas: 10 };
    const out = plan(input(deployment("v2", { status }), [rev("v1", 1, 10, A), rev("v2", 2, 0)]));
    assert.deepEqual(sizes(out), { v1: 10, v2: 3 });
    assert.deepEqual(out.status, {
      replicas: 10,
      updatedReplicas: 0,
      readyReplicas: 10,
      availableReplicas: 10,
      unavailableReplicas: 0,
    });
    // The next pass (v2's pods not created yet) lists v2 at 3.
    const next = plan(
      input(deployment("v2", { status: out.status, conditions: out.conditions }), [
        rev("v1", 1, 10, A),
        rev("v2", 2, 3, { status: [0, 0, 0], ...A }),
      ]),
    );
    assert.deepEqual(next.status, {
      replicas: 10,
      updatedReplicas: 0,
      readyReplicas: 10,
      availableReplicas: 10,
      unavailableReplicas: 3,
    });
  });
});

// Pause/resume: no rollout step while paused (scaling and cleanup still happen); the Progressing
// condition goes Unknown (DeploymentPaused, then DeploymentResumed) so paused time never counts.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { at, cond, condition, deployment, input, messages, plan, rev, sizes, NOW } from "./helpers.js";

const A = { desired: 10, max: 13 };
const midRollout = [rev("v1", 1, 10, A), rev("v2", 2, 3, A)];
const stored = { replicas: 13, updatedReplicas: 3, readyReplicas: 13, availableReplicas: 13, unavailableReplicas: 0 };

describe("pause", () => {
  it("holds the sizes mid-rollout and sets Progressing=Unknown/DeploymentPaused", () => {
    const conditions = [cond("Progressing", "True", "ReplicaSetUpdated", at(-60), at(-120))];
    const out = plan(input(deployment("v2", { paused: true, status: stored, conditions }), midRollout));
    assert.deepEqual(sizes(out), { v1: 10, v2: 3 });
    assert.deepEqual(out.events, []);
    assert.deepEqual(condition(out, "Progressing"), {
      type: "Progressing",
      status: "Unknown",
      reason: "DeploymentPaused",
      message: "Deployment is paused",
      lastUpdateTime: NOW,
      lastTransitionTime: NOW,
    });
    assert.equal(out.requeueAfterSeconds, null);
  });

  it("keeps an existing paused condition untouched", () => {
    const conditions = [cond("Progressing", "Unknown", "DeploymentPaused", at(-60), at(-60), "Deployment is paused")];
    const out = plan(input(deployment("v2", { paused: true, status: stored, conditions }), midRollout));
    assert.equal(condition(out, "Progressing")?.lastUpdateTime, at(-60));
  });

  it("never overwrites ProgressDeadlineExceeded", () => {
    const conditions = [cond("Progressing", "False", "ProgressDeadlineExceeded", at(-60))];
    const out = plan(input(deployment("v2", { paused: true, status: stored, conditions }), midRollout));
    assert.equal(condition(out, "Progressing")?.reason, "ProgressDeadlineExceeded");
  });

  it("adds no Progressing condition without a progress deadline", () => {
    const out = plan(
      input(deployment("v2", { paused: true, progressDeadlineSeconds: null, status: stored }), midRollout),
    );
    assert.equal(condition(out, "Progressing"), undefined);
  });

  it("still scales proportionally when replicas change while paused", () => {
    const dep = deployment("v2", { paused: true, replicas: 20, status: stored });
    const out = plan(input(dep, midRollout));
    // allowed 20 + 5 = 25, toAdd 12; v1 round(10·25/13) = 19 → +9; v2 round(3·25/13) = 6 → +3.
    assert.deepEqual(sizes(out), { v1: 19, v2: 6 });
    assert.deepEqual(messages(out), ["Scaled up replica set v1 from 10 to 19", "Scaled up replica set v2 from 3 to 6"]);
  });

  it("does not create the target's replica set while paused", () => {
    const out = plan(input(deployment("v2", { paused: true }), [rev("v1", 1, 10, A), rev("v2", null, 0)]));
    assert.deepEqual(out.revisions[1], { name: "v2", revision: null, replicas: 0 });
  });

  it("keeps a revision it has just scaled to 0 until the next pass (Kubernetes judges the sizes it listed)", () => {
    // replicas 0: v1 (2 wanted, no pod yet) goes to 0 in this pass; cleanup sees its listed 2.
    const revs = [rev("v1", 1, 2, { desired: 2, max: 3, status: [0, 0, 0] }), rev("v2", 2, 0, { desired: 2, max: 3 })];
    const dep = deployment("v2", { paused: true, replicas: 0, revisionHistoryLimit: 0 });
    const out = plan(input(dep, revs));
    assert.deepEqual(sizes(out), { v1: 0, v2: 0 });
    assert.deepEqual(out.delete, []);
    const next = plan(input(dep, [rev("v1", 1, 0, { desired: 0, max: 0 }), rev("v2", 2, 0, { desired: 2, max: 3 })]));
    assert.deepEqual(next.delete, ["v1"]);
  });

  it("never deletes a revision it has just scaled up from 0 (Kubernetes would: an intended difference)", () => {
    // Nothing active and the target not created: the newest old revision (v2) gets every replica.
    // Its listed size is 0, so Kubernetes' cleanup deletes it in the same pass, pods and all.
    const revs = [rev("v1", 1, 0, { desired: 3, max: 4 }), rev("v2", 2, 0, { desired: 3, max: 4 }), rev("v3", null, 0)];
    const out = plan(input(deployment("v3", { paused: true, replicas: 3, revisionHistoryLimit: 0 }), revs));
    assert.deepEqual(sizes(out), { v1: 0, v2: 3, v3: 0 });
    assert.deepEqual(out.delete, ["v1"]);
  });

  it("cleans up history while paused, unless a rollback is pending", () => {
    const revs = [rev("v1", 1, 0), rev("v2", 2, 0), rev("v3", 3, 10, A)];
    const dep = (over = {}) => deployment("v3", { paused: true, revisionHistoryLimit: 1, ...over });
    assert.deepEqual(plan(input(dep(), revs)).delete, ["v1"]);
    const pending = plan(input(dep({ rollbackTo: 0 }), revs));
    assert.deepEqual(pending.delete, []);
    // The rollback waits for resume.
    assert.equal(pending.target, "v3");
  });
});

describe("resume", () => {
  it("sets Progressing=Unknown/DeploymentResumed and continues the rollout in the same pass", () => {
    const conditions = [
      cond("Progressing", "Unknown", "DeploymentPaused", at(-3600), at(-3600), "Deployment is paused"),
    ];
    const out = plan(input(deployment("v2", { status: stored, conditions }), midRollout));
    assert.deepEqual(sizes(out), { v1: 7, v2: 3 });
    assert.deepEqual(condition(out, "Progressing"), {
      type: "Progressing",
      status: "Unknown",
      reason: "DeploymentResumed",
      message: "Deployment is resumed",
      lastUpdateTime: NOW,
      // Same status (Unknown): the transition time stays.
      lastTransitionTime: at(-3600),
    });
  });

  it("does not time out right after a long pause", () => {
    // Paused for two hours with a 600 s deadline: resuming restarts the clock.
    const conditions = [cond("Progressing", "Unknown", "DeploymentPaused", at(-7200))];
    const revs = [rev("v1", 1, 10, A), rev("v2", 2, 3, { ...A, status: [3, 0, 0] })];
    const out = plan(
      input(deployment("v2", { status: { ...stored, readyReplicas: 10, availableReplicas: 10 }, conditions }), revs),
    );
    assert.equal(condition(out, "Progressing")?.reason, "DeploymentResumed");
  });
});

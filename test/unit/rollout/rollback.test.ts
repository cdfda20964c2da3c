// Rollback: rollbackTo 0 = the previous revision, N = revision N; the pass only switches the
// target, and the next pass gives that revision the newest number and rolls out to it.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { condition, deployment, input, plan, rev, sizes } from "./helpers.js";

const A = { desired: 10, max: 13 };
const three = [rev("v1", 1, 0), rev("v2", 2, 0), rev("v3", 3, 10, A)];
const stored = { replicas: 10, updatedReplicas: 10, readyReplicas: 10, availableReplicas: 10 };

describe("rollback", () => {
  it("rollbackTo 0 goes to the previous (second-highest) revision", () => {
    const out = plan(input(deployment("v3", { rollbackTo: 0, status: stored }), three));
    assert.equal(out.target, "v2");
    assert.deepEqual(out.events, [
      { type: "Normal", reason: "DeploymentRollback", message: 'Rolled back deployment "environment" to revision 2' },
    ]);
    // Only the target changes in this pass.
    assert.deepEqual(sizes(out), { v1: 0, v2: 0, v3: 10 });
    assert.deepEqual(
      out.revisions.map((r) => r.revision),
      [1, 2, 3],
    );
    assert.deepEqual(out.status, { ...stored, unavailableReplicas: 0 });
  });

  it("rollbackTo N goes to revision N and names the deployment in the event", () => {
    const out = plan(input(deployment("v3", { name: "shop/production", rollbackTo: 1 }), three));
    assert.equal(out.target, "v1");
    assert.equal(out.events[0]?.message, 'Rolled back deployment "shop/production" to revision 1');
  });

  it("the next pass renumbers the rolled-back revision as the newest and starts rolling to it", () => {
    const out = plan(input(deployment("v2", { status: stored }), three));
    assert.deepEqual(
      out.revisions.map((r) => r.revision),
      [1, 4, 3],
    );
    assert.deepEqual(sizes(out), { v1: 0, v2: 3, v3: 10 });
  });

  it("a pass that raises the revision writes no FoundNewReplicaSet yet; the next pass does", () => {
    // Kubernetes reads the ReplicaSet as listed at the start of the sync in both of its revision
    // checks, so the pass that raises v2 from 2 to 4 returns before the condition (checked
    // against the real controller in test/integration/rollout-conformance.test.ts).
    const bump = plan(input(deployment("v2", { status: stored }), three));
    assert.deepEqual(
      bump.revisions.map((r) => r.revision),
      [1, 4, 3],
    );
    assert.equal(condition(bump, "Progressing"), undefined);
    const next = plan(
      input(deployment("v2", { status: bump.status, conditions: bump.conditions }), [
        rev("v1", 1, 0),
        rev("v2", 4, 3, { ...A, status: [0, 0, 0] }),
        rev("v3", 3, 10, A),
      ]),
    );
    assert.equal(condition(next, "Progressing")?.reason, "FoundNewReplicaSet");
    assert.equal(condition(next, "Progressing")?.message, 'Found new replica set "v2"');
  });

  it("warns when the revision is the current target", () => {
    const out = plan(input(deployment("v3", { rollbackTo: 3 }), three));
    assert.equal(out.target, "v3");
    assert.deepEqual(out.events, [
      {
        type: "Warning",
        reason: "DeploymentRollbackTemplateUnchanged",
        message: 'The rollback revision contains the same template as current deployment "environment"',
      },
    ]);
  });

  it("warns when the revision does not exist", () => {
    const out = plan(input(deployment("v3", { rollbackTo: 9 }), three));
    assert.equal(out.target, "v3");
    assert.deepEqual(out.events, [
      {
        type: "Warning",
        reason: "DeploymentRollbackRevisionNotFound",
        message: "Unable to find the revision to rollback to.",
      },
    ]);
  });

  it("warns when there is no previous revision", () => {
    const out = plan(input(deployment("v1", { rollbackTo: 0 }), [rev("v1", 1, 10, A)]));
    assert.equal(out.target, "v1");
    assert.deepEqual(out.events, [
      { type: "Warning", reason: "DeploymentRollbackRevisionNotFound", message: "Unable to find last revision." },
    ]);
  });

  it("creates a target that has no replica set yet before looking for the previous revision", () => {
    const out = plan(
      input(deployment("v3", { rollbackTo: 0 }), [rev("v1", 1, 0), rev("v2", 2, 10, A), rev("v3", null, 0)]),
    );
    // v3 becomes revision 3 (created with its first surge step), so "previous" is revision 2.
    assert.equal(out.revisions[2]?.revision, 3);
    assert.equal(out.target, "v2");
  });
});

// Unit tests of the rollout driver's pure parts: instance reports → engine input, engine output →
// ctrl's writes, target choice and progress reading (the driver's queue is driver.test.ts); plus a
// simulated driver loop (engine + writes + pods becoming available) that must converge within
// the surge bound.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { planRollout } from "../../../../src/rollout/index.js";
import {
  buildRolloutInput,
  EMPTY_STATUS,
  holdScaleUp,
  intOrPercent,
  nextAvailabilityAt,
  planWrites,
  revisionStatus,
  rolloutProgress,
  specKey,
  type EnvironmentFacts,
  type InstanceFact,
  type RevisionFacts,
} from "../../../../src/ctrl/rollout/plan.js";
import { chooseTarget } from "../../../../src/ctrl/rollout/pass.js";

const NOW = Date.parse("2026-01-01T00:00:00Z");

function env(over: Partial<EnvironmentFacts> = {}): EnvironmentFacts {
  return {
    name: "production",
    replicas: 10,
    strategy: "RollingUpdate",
    maxSurge: "25%",
    maxUnavailable: "0",
    minReadySeconds: 0,
    progressDeadlineSeconds: 600,
    revisionHistoryLimit: 10,
    paused: false,
    targetDeploymentId: "dep_2",
    rollbackTo: null,
    status: EMPTY_STATUS,
    conditions: [],
    ...over,
  };
}

function running(n: number, readySince = NOW - 60_000): InstanceFact[] {
  return Array.from({ length: n }, () => ({ status: "running", readySince }));
}

describe("instance reports → revision status", () => {
  it("counts non-failed as replicas, running as ready, and applies minReadySeconds to available", () => {
    const instances: InstanceFact[] = [
      { status: "running", readySince: NOW - 10_000 },
      { status: "running", readySince: NOW - 2_000 },
      { status: "running", readySince: 0 },
      { status: "pending", readySince: 0 },
      { status: "unknown", readySince: 0 },
      { status: "failed", readySince: 0 },
      { status: "terminating", readySince: 0 },
      { status: "terminating", readySince: 0 },
    ];
    // Without minReadySeconds every running pod is available, even one reported without a ready time.
    // Terminating pods are not replicas; they are counted apart (Recreate waits for them).
    assert.deepEqual(revisionStatus(instances, 0, NOW), {
      replicas: 5,
      readyReplicas: 3,
      availableReplicas: 3,
      terminatingReplicas: 2,
    });
    assert.deepEqual(revisionStatus(instances, 5, NOW), {
      replicas: 5,
      readyReplicas: 3,
      availableReplicas: 1,
      terminatingReplicas: 2,
    });
    // Exactly minReadySeconds ago counts (Kubernetes: readyTime + minReady <= now).
    assert.equal(revisionStatus([{ status: "running", readySince: NOW - 5_000 }], 5, NOW).availableReplicas, 1);
  });

  it("wakes up when the next ready instance reaches minReadySeconds", () => {
    const instances: InstanceFact[] = [
      { status: "running", readySince: NOW - 2_000 },
      { status: "running", readySince: NOW - 4_000 },
      { status: "running", readySince: NOW - 9_000 },
      { status: "pending", readySince: 0 },
    ];
    assert.equal(nextAvailabilityAt(instances, 5, NOW), NOW + 1_000);
    assert.equal(nextAvailabilityAt(instances, 0, NOW), null);
    assert.equal(nextAvailabilityAt(instances, 1, NOW), null);
  });

  it("reads stored surge values as integers or percentages", () => {
    assert.equal(intOrPercent("3"), 3);
    assert.equal(intOrPercent("25%"), "25%");
  });
});

describe("engine input", () => {
  it("maps environment policy, revisions and reports", () => {
    const revisions: RevisionFacts[] = [
      {
        deploymentId: "dep_1",
        name: "shop-1",
        createdAtMs: NOW - 1000,
        state: { revision: 1, replicas: 10, desiredReplicas: 10, maxReplicas: 13 },
        instances: [...running(10), { status: "terminating", readySince: 0 }],
      },
      // A late report of a pod shutting down for a revision with no ReplicaSet here is not passed on.
      {
        deploymentId: "dep_2",
        name: "shop-2",
        createdAtMs: NOW,
        state: null,
        instances: [{ status: "terminating", readySince: 0 }],
      },
    ];
    const input = buildRolloutInput(env(), revisions, NOW);
    assert.equal(input.now, "2026-01-01T00:00:00.000Z");
    assert.deepEqual(input.deployment.strategy, {
      type: "RollingUpdate",
      rollingUpdate: { maxSurge: "25%", maxUnavailable: 0 },
    });
    assert.equal(input.deployment.target, "shop-2");
    assert.deepEqual(input.revisions[0], {
      name: "shop-1",
      revision: 1,
      createdAt: new Date(NOW - 1000).toISOString(),
      replicas: 10,
      desiredReplicas: 10,
      maxReplicas: 13,
      status: { replicas: 10, readyReplicas: 10, availableReplicas: 10, terminatingReplicas: 1 },
    });
    assert.equal(input.revisions[1]?.revision, null);
    assert.equal(input.revisions[1]?.desiredReplicas, null);
    assert.equal(input.revisions[1]?.status.terminatingReplicas, 0);
    assert.deepEqual(buildRolloutInput(env({ strategy: "Recreate" }), revisions, NOW).deployment.strategy, {
      type: "Recreate",
    });
    assert.throws(() => buildRolloutInput(env({ targetDeploymentId: "dep_9" }), revisions, NOW), /dep_9/);
  });
});

describe("engine output → writes", () => {
  it("creates the new revision with the surge and records annotations", () => {
    const revisions: RevisionFacts[] = [
      {
        deploymentId: "dep_1",
        name: "shop-1",
        createdAtMs: NOW - 1000,
        state: { revision: 1, replicas: 10, desiredReplicas: 10, maxReplicas: 13 },
        instances: [...running(10), { status: "terminating", readySince: 0 }],
      },
      // A late report of a pod shutting down for a revision with no ReplicaSet here is not passed on.
      {
        deploymentId: "dep_2",
        name: "shop-2",
        createdAtMs: NOW,
        state: null,
        instances: [{ status: "terminating", readySince: 0 }],
      },
    ];
    const e = env();
    const out = planRollout(buildRolloutInput(e, revisions, NOW));
    const w = planWrites(e, revisions, out);
    assert.equal(w.changed, true);
    const v2 = w.revisions.find((r) => r.deploymentId === "dep_2");
    assert.deepEqual(v2, {
      deploymentId: "dep_2",
      revision: 2,
      replicas: 3,
      desiredReplicas: 10,
      maxReplicas: 13,
      putDesired: true,
      recordChanged: true,
    });
    const v1 = w.revisions.find((r) => r.deploymentId === "dep_1");
    assert.equal(v1?.putDesired, false);
    assert.ok(w.events.some((ev) => ev.reason === "ScalingReplicaSet"));
  });

  it("reports no change for a completed rollout and keeps a paused target out of the region", () => {
    const revisions: RevisionFacts[] = [
      { deploymentId: "dep_1", name: "shop-1", createdAtMs: NOW, state: null, instances: [] },
    ];
    let e = env({ targetDeploymentId: "dep_1", paused: true, replicas: 3 });
    let w = planWrites(e, revisions, planRollout(buildRolloutInput(e, revisions, NOW)));
    assert.deepEqual(w.revisions, []);

    e = env({ targetDeploymentId: "dep_1", replicas: 3 });
    const done: RevisionFacts[] = [
      {
        deploymentId: "dep_1",
        name: "shop-1",
        createdAtMs: NOW,
        state: { revision: 1, replicas: 3, desiredReplicas: 3, maxReplicas: 4 },
        instances: running(3),
      },
    ];
    // Drive it to a fixed point, then one more pass changes nothing.
    for (let i = 0; i < 10; i++) {
      w = planWrites(e, done, planRollout(buildRolloutInput(e, done, NOW)));
      if (!w.changed) break;
      e = { ...e, status: w.status, conditions: w.conditions };
    }
    assert.equal(w.changed, false);
    assert.equal(w.requeueAfterSeconds, null);
    assert.equal(rolloutProgress(3, w.status, w.conditions, true).complete, true);
  });

  it("maps revision-history cleanup to removals and consumes a rollback", () => {
    const revisions: RevisionFacts[] = [1, 2, 3].map((n) => ({
      deploymentId: `dep_${n}`,
      name: `shop-${n}`,
      createdAtMs: NOW - (4 - n) * 1000,
      state: { revision: n, replicas: n === 3 ? 2 : 0, desiredReplicas: 2, maxReplicas: 3 },
      instances: n === 3 ? running(2) : [],
    }));
    let e = env({ targetDeploymentId: "dep_3", replicas: 2, revisionHistoryLimit: 1 });
    // Cleanup runs once the rollout is complete: pass until the status says so.
    let removed: string[] = [];
    for (let p = 0; p < 5 && removed.length === 0; p++) {
      const w = planWrites(e, revisions, planRollout(buildRolloutInput(e, revisions, NOW)));
      removed = w.remove;
      if (removed.length > 0) assert.ok(!w.revisions.some((r) => r.deploymentId === "dep_1"));
      e = { ...e, status: w.status, conditions: w.conditions };
    }
    assert.deepEqual(removed, ["dep_1"]);

    const back = env({ targetDeploymentId: "dep_3", replicas: 2, rollbackTo: 0 });
    const wb = planWrites(back, revisions, planRollout(buildRolloutInput(back, revisions, NOW)));
    assert.equal(wb.targetDeploymentId, "dep_2");
    assert.equal(wb.clearRollback, true);
    assert.ok(wb.events.some((ev) => ev.reason === "DeploymentRollback"));
    // Paused: the rollback waits.
    const paused = env({ targetDeploymentId: "dep_3", replicas: 2, rollbackTo: 0, paused: true });
    assert.equal(
      planWrites(paused, revisions, planRollout(buildRolloutInput(paused, revisions, NOW))).clearRollback,
      false,
    );
  });
});

describe("simulated driver loop", () => {
  it("rolls 10 replicas from v1 to v2 within maxSurge 25% / maxUnavailable 0 and converges", () => {
    let e = env();
    const revs: RevisionFacts[] = [
      {
        deploymentId: "dep_1",
        name: "shop-1",
        createdAtMs: NOW - 1000,
        state: { revision: 1, replicas: 10, desiredReplicas: 10, maxReplicas: 13 },
        instances: [...running(10), { status: "terminating", readySince: 0 }],
      },
      // A late report of a pod shutting down for a revision with no ReplicaSet here is not passed on.
      {
        deploymentId: "dep_2",
        name: "shop-2",
        createdAtMs: NOW,
        state: null,
        instances: [{ status: "terminating", readySince: 0 }],
      },
    ];
    for (let step = 0; step < 200; step++) {
      // One driver trigger: passes until nothing changes.
      for (let p = 0; p < 50; p++) {
        const w = planWrites(e, revs, planRollout(buildRolloutInput(e, revs, NOW)));
        for (const r of w.revisions) {
          const f = revs.find((x) => x.deploymentId === r.deploymentId);
          if (f)
            f.state = {
              revision: r.revision,
              replicas: r.replicas,
              desiredReplicas: r.desiredReplicas,
              maxReplicas: r.maxReplicas,
            };
        }
        e = { ...e, targetDeploymentId: w.targetDeploymentId, status: w.status, conditions: w.conditions };
        const total = revs.reduce((s, r) => s + (r.state?.replicas ?? 0), 0);
        assert.ok(total <= 13, `total ${total} exceeds replicas + maxSurge`);
        if (!w.changed) break;
      }
      // The agent converges pods to the sizes; all new pods become available (the next report).
      let moved = false;
      for (const r of revs) {
        const want = r.state?.replicas ?? 0;
        if (r.instances.length !== want) moved = true;
        r.instances = running(want);
      }
      const available = revs.reduce((s, r) => s + r.instances.length, 0);
      assert.ok(available >= 10, `available ${available} below replicas - maxUnavailable`);
      if (!moved) break;
    }
    assert.equal(revs[1]?.state?.replicas, 10);
    assert.equal(revs[0]?.state?.replicas, 0);
    assert.equal(rolloutProgress(10, e.status, e.conditions, true).complete, true);
  });
});

describe("scale-ups wait for scale-downs the agent has not applied", () => {
  type Action = { kind: "pass" } | { kind: "apply"; pick: number } | { kind: "report" };
  const action: fc.Arbitrary<Action> = fc.oneof(
    fc.constant<Action>({ kind: "pass" }),
    fc.record({ kind: fc.constant("apply" as const), pick: fc.nat() }),
    fc.constant<Action>({ kind: "report" }),
  );

  /**
   * ctrl's passes (with the hold) against an agent that applies pending ReplicaSet sizes one at
   * a time in any order and reports pods equal to what it applied: the cluster never runs more
   * than replicas + maxSurge, and the rollout still completes.
   */
  function run(actions: readonly Action[], hold: boolean): { maxApplied: number; done: boolean } {
    let e = env();
    const revs: RevisionFacts[] = [
      {
        deploymentId: "dep_1",
        name: "shop-1",
        createdAtMs: NOW - 1000,
        state: { revision: 1, replicas: 10, desiredReplicas: 10, maxReplicas: 13 },
        instances: [...running(10), { status: "terminating", readySince: 0 }],
      },
      // A late report of a pod shutting down for a revision with no ReplicaSet here is not passed on.
      {
        deploymentId: "dep_2",
        name: "shop-2",
        createdAtMs: NOW,
        state: null,
        instances: [{ status: "terminating", readySince: 0 }],
      },
    ];
    const applied = new Map([
      ["dep_1", 10],
      ["dep_2", 0],
    ]);
    let maxApplied = 10;
    const pass = (): void => {
      for (let p = 0; p < 50; p++) {
        const w = planWrites(e, revs, planRollout(buildRolloutInput(e, revs, NOW)));
        if (hold && holdScaleUp(revs, w.revisions)) return;
        for (const r of w.revisions) {
          const f = revs.find((x) => x.deploymentId === r.deploymentId);
          if (f)
            f.state = {
              revision: r.revision,
              replicas: r.replicas,
              desiredReplicas: r.desiredReplicas,
              maxReplicas: r.maxReplicas,
            };
        }
        e = { ...e, targetDeploymentId: w.targetDeploymentId, status: w.status, conditions: w.conditions };
        if (!w.changed) return;
      }
    };
    const pending = (): RevisionFacts[] => revs.filter((r) => (r.state?.replicas ?? 0) !== applied.get(r.deploymentId));
    const apply = (r: RevisionFacts): void => {
      applied.set(r.deploymentId, r.state?.replicas ?? 0);
      maxApplied = Math.max(
        maxApplied,
        [...applied.values()].reduce((a, b) => a + b, 0),
      );
    };
    const report = (): void => {
      for (const r of revs) r.instances = running(applied.get(r.deploymentId) ?? 0);
    };
    for (const a of actions) {
      if (a.kind === "pass") pass();
      else if (a.kind === "report") report();
      else {
        const p = pending();
        const r = p[a.pick % Math.max(1, p.length)];
        if (r) apply(r);
      }
    }
    // Then a fair agent: everything pending applied (largest growth first, the worst order), reported.
    for (let round = 0; round < 100; round++) {
      pass();
      const p = pending().sort(
        (a, b) =>
          (b.state?.replicas ?? 0) -
          (applied.get(b.deploymentId) ?? 0) -
          ((a.state?.replicas ?? 0) - (applied.get(a.deploymentId) ?? 0)),
      );
      if (p.length === 0 && revs.every((r) => r.instances.length === applied.get(r.deploymentId))) break;
      for (const r of p) apply(r);
      report();
    }
    return {
      maxApplied,
      done:
        revs[1]?.state?.replicas === 10 &&
        revs[0]?.state?.replicas === 0 &&
        applied.get("dep_2") === 10 &&
        applied.get("dep_1") === 0,
    };
  }

  it("keeps the cluster within replicas + maxSurge whatever order the agent applies sizes in", () => {
    fc.assert(
      fc.property(fc.array(action, { maxLength: 60 }), (actions) => {
        const r = run(actions, true);
        assert.ok(r.maxApplied <= 13, `the cluster ran ${r.maxApplied} > replicas + maxSurge (13)`);
        assert.ok(r.done, "the rollout completed");
      }),
      { numRuns: 300 },
    );
  });

  it("without the hold, an agent that applies a scale-up first exceeds the bound", () => {
    assert.ok(run([], false).maxApplied > 13);
    assert.equal(run([], true).maxApplied, 13);
  });

  it("holds only growth, and only while some revision runs more than it is desired at", () => {
    const revs: RevisionFacts[] = [
      {
        deploymentId: "a",
        name: "a",
        createdAtMs: 0,
        state: { revision: 1, replicas: 7, desiredReplicas: 7, maxReplicas: 13 },
        instances: running(10),
      },
      {
        deploymentId: "b",
        name: "b",
        createdAtMs: 1,
        state: { revision: 2, replicas: 3, desiredReplicas: 10, maxReplicas: 13 },
        instances: running(3),
      },
    ];
    const grow = [
      {
        deploymentId: "b",
        revision: 2,
        replicas: 6,
        desiredReplicas: 10,
        maxReplicas: 13,
        putDesired: true,
        recordChanged: true,
      },
    ];
    const shrink = [
      {
        deploymentId: "a",
        revision: 1,
        replicas: 5,
        desiredReplicas: 5,
        maxReplicas: 13,
        putDesired: true,
        recordChanged: true,
      },
    ];
    assert.equal(holdScaleUp(revs, grow), true);
    assert.equal(holdScaleUp(revs, shrink), false);
    const applied = revs.map((r) => (r.deploymentId === "a" ? { ...r, instances: running(7) } : r));
    assert.equal(holdScaleUp(applied, grow), false);
    // Pods the scale-down marked for deletion are done with as far as the size goes: a rolling
    // update does not wait for them to finish shutting down.
    const terminating: InstanceFact[] = [
      ...running(7),
      ...Array.from({ length: 3 }, () => ({ status: "terminating", readySince: 0 })),
    ];
    const marked = revs.map((r) => (r.deploymentId === "a" ? { ...r, instances: terminating } : r));
    assert.equal(holdScaleUp(marked, grow), false);
  });
});

describe("target and progress", () => {
  it("retargets only to a newer deployment, or when the target is gone", () => {
    const deps = [
      { id: "dep_1", revision: 1 },
      { id: "dep_2", revision: 2 },
    ];
    assert.deepEqual(chooseTarget(deps, { targetId: null, seenRevision: 0 }), { targetId: "dep_2", seenRevision: 2 });
    assert.deepEqual(chooseTarget(deps, { targetId: "dep_1", seenRevision: 2 }), {
      targetId: "dep_1",
      seenRevision: 2,
    });
    assert.deepEqual(chooseTarget([...deps, { id: "dep_3", revision: 3 }], { targetId: "dep_1", seenRevision: 2 }), {
      targetId: "dep_3",
      seenRevision: 3,
    });
    assert.deepEqual(chooseTarget([deps[0]!], { targetId: "dep_2", seenRevision: 2 }), {
      targetId: "dep_1",
      seenRevision: 1,
    });
    assert.equal(chooseTarget([], { targetId: null, seenRevision: 0 }), null);
  });

  it("reads progress like kubectl rollout status", () => {
    const s = { replicas: 12, updatedReplicas: 5, readyReplicas: 10, availableReplicas: 10, unavailableReplicas: 2 };
    assert.equal(rolloutProgress(10, s, [], false).observed, false);
    assert.match(rolloutProgress(10, s, [], true).message, /5 of 10 new replicas/);
    assert.match(
      rolloutProgress(10, { ...s, updatedReplicas: 10 }, [], true).message,
      /2 old replicas are pending termination/,
    );
    assert.match(
      rolloutProgress(10, { ...s, updatedReplicas: 10, replicas: 10, availableReplicas: 8 }, [], true).message,
      /8 of 10 updated replicas are available/,
    );
    const failed = rolloutProgress(
      10,
      s,
      [
        {
          type: "Progressing",
          status: "False",
          reason: "ProgressDeadlineExceeded",
          message: "",
          lastUpdateTime: "",
          lastTransitionTime: "",
        },
      ],
      true,
    );
    assert.deepEqual([failed.failed, failed.complete], [true, false]);
  });

  it("the spec key changes with every user-visible spec change", () => {
    const base = env();
    const k = specKey(base, 3);
    assert.notEqual(specKey(base, 4), k);
    assert.notEqual(specKey({ ...base, replicas: 5 }, 3), k);
    assert.notEqual(specKey({ ...base, paused: true }, 3), k);
    assert.notEqual(specKey({ ...base, rollbackTo: 0 }, 3), k);
    assert.equal(specKey(env({ status: { ...EMPTY_STATUS, replicas: 4 }, targetDeploymentId: "dep_9" }), 3), k);
  });
});

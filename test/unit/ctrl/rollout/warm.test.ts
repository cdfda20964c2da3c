// Unit tests of the warm previous revision and the rollback pin (src/ctrl/rollout/warm.ts,
// chooseTarget in pass.ts): what a pass holds, lets go and switches to; the engine's view of the
// held revision; the region's weights; which revision `krane rollback` goes back to and when it
// refuses.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  afterEngine,
  asEngineSees,
  countedInstances,
  regionWeights,
  rollbackPlan,
  stepWarm,
  type WarmInput,
} from "../../../../src/ctrl/rollout/warm.js";
import { chooseTarget } from "../../../../src/ctrl/rollout/pass.js";
import { DomainError } from "../../../../src/ctrl/errors.js";
import type { InstanceFact } from "../../../../src/ctrl/rollout/plan.js";

const NOW = Date.parse("2026-01-01T00:00:00Z");
const WINDOW = 30 * 60_000;
const REVISION: Record<string, number> = { A: 1, B: 2, C: 3 };

function input(over: Partial<WarmInput> & { desired?: Record<string, number> }): WarmInput {
  const desired = over.desired ?? { A: 3, B: 3 };
  return {
    eligible: true,
    windowMs: WINDOW,
    now: NOW,
    stored: null,
    previousTarget: "A",
    target: "B",
    revisionOf: (id) => REVISION[id],
    desiredOf: (id) => desired[id],
    nameOf: (id) => `shop-${id}`,
    ...over,
  };
}

const running = (n: number, readySince = NOW - 60_000): InstanceFact[] =>
  Array.from({ length: n }, () => ({ status: "running", readySince }));

describe("stepWarm", () => {
  it("a rollout to a newer revision holds the one it leaves, with every pod it runs, until the rollout ends", () => {
    const s = stepWarm(input({}));
    assert.deepEqual(s.warm, { deploymentId: "A", replicas: 3, until: null });
    assert.deepEqual(s.release, []);
    assert.equal(s.switchedTo, null);
    assert.deepEqual(
      s.events.map((e) => e.reason),
      ["KeepingRevisionWarm"],
    );
    assert.match(s.events[0]?.message ?? "", /shop-A keeps its 3 pods .* within 30m/);
  });

  it("holds nothing on a rollback (an older target), when not eligible, or when the region runs nothing", () => {
    assert.equal(stepWarm(input({ previousTarget: "B", target: "A" })).warm, null);
    assert.equal(stepWarm(input({ eligible: false })).warm, null);
    assert.equal(stepWarm(input({ desired: { A: 0, B: 0 } })).warm, null);
    // The first deployment: nothing to leave.
    assert.equal(stepWarm(input({ previousTarget: null })).warm, null);
  });

  it("keeps the held revision until its window ends, then lets it go at the engine's size", () => {
    const stored = { deploymentId: "A", replicas: 0, until: NOW + 1 };
    const before = stepWarm(input({ stored, previousTarget: "B", target: "B" }));
    assert.deepEqual(before.warm, stored);
    assert.deepEqual(before.release, []);
    const after = stepWarm(input({ stored, previousTarget: "B", target: "B", now: NOW + 1 }));
    assert.equal(after.warm, null);
    assert.deepEqual(after.release, [{ deploymentId: "A", replicas: 0 }]);
    assert.equal(after.events[0]?.reason, "WarmRevisionReleased");
    assert.match(
      after.events[0]?.message ?? "",
      /warm window of 30m passed: scaled down replica set shop-A from 3 to 0/,
    );
  });

  it("lets the held revision go when the environment stops keeping one (window 0, Recreate, no sentinel)", () => {
    const stored = { deploymentId: "A", replicas: 0, until: NOW + WINDOW };
    const s = stepWarm(input({ stored, previousTarget: "B", target: "B", eligible: false }));
    assert.equal(s.warm, null);
    assert.deepEqual(s.release, [{ deploymentId: "A", replicas: 0 }]);
  });

  it("a target that is the held revision switches to it and releases nothing (its pods serve)", () => {
    const stored = { deploymentId: "A", replicas: 0, until: NOW + WINDOW };
    const s = stepWarm(input({ stored, previousTarget: "B", target: "A" }));
    assert.equal(s.switchedTo, "A");
    assert.equal(s.warm, null);
    assert.deepEqual(s.release, []);
    assert.equal(s.events[0]?.reason, "SwitchedToWarmRevision");
    // Also once the window has passed, while its pods are still there: switching beats new pods.
    assert.equal(stepWarm(input({ stored, previousTarget: "B", target: "A", now: NOW + 2 * WINDOW })).switchedTo, "A");
  });

  it("one warm revision per region: a new rollout lets the warm one go and holds the one it leaves", () => {
    const stored = { deploymentId: "A", replicas: 0, until: NOW + WINDOW };
    const s = stepWarm(input({ stored, previousTarget: "B", target: "C", desired: { A: 3, B: 3 } }));
    assert.deepEqual(s.release, [{ deploymentId: "A", replicas: 0 }]);
    assert.deepEqual(s.warm, { deploymentId: "B", replicas: 3, until: null });
  });

  it("a rollout replaced mid-way keeps holding the revision that served before it", () => {
    const stored = { deploymentId: "A", replicas: 2, until: null };
    const s = stepWarm(input({ stored, previousTarget: "B", target: "C", desired: { A: 3, B: 2 } }));
    assert.deepEqual(s.warm, stored);
    assert.deepEqual(s.release, []);
  });

  it("a held revision that was deleted or left the region is forgotten, nothing released", () => {
    const stored = { deploymentId: "A", replicas: 0, until: NOW + WINDOW };
    const gone = stepWarm(
      input({ stored, previousTarget: "B", target: "B", revisionOf: (id) => (id === "A" ? undefined : REVISION[id]) }),
    );
    assert.equal(gone.warm, null);
    assert.deepEqual(gone.release, []);
    const left = stepWarm(input({ stored, previousTarget: "B", target: "B", desired: { B: 3 } }));
    assert.equal(left.warm, null);
    assert.deepEqual(left.release, []);
  });
});

describe("the engine's view of the held revision", () => {
  it("shows it at its own size with that many of its pods, available ones first", () => {
    const pods: InstanceFact[] = [
      { status: "pending", readySince: 0 },
      ...running(2),
      { status: "terminating", readySince: 0 },
    ];
    assert.deepEqual(
      countedInstances(pods, 2).map((i) => i.status),
      ["running", "running", "terminating"],
    );
    const r = asEngineSees(
      {
        deploymentId: "A",
        name: "shop-A",
        createdAtMs: 0,
        state: { revision: 1, replicas: 3, desiredReplicas: 3, maxReplicas: 4 },
        instances: running(3),
      },
      { deploymentId: "A", replicas: 1, until: null },
    );
    assert.equal(r.state?.replicas, 1);
    assert.equal(r.instances.length, 1);
  });

  it("the window starts once the engine has the held revision at 0; its pods are never scaled down by the engine", () => {
    const held = { deploymentId: "A", replicas: 3, until: null };
    assert.deepEqual(afterEngine(held, 2, 3, NOW, WINDOW), {
      warm: { deploymentId: "A", replicas: 2, until: null },
      desire: null,
    });
    const zero = afterEngine({ ...held, replicas: 1 }, 0, 3, NOW, WINDOW);
    assert.deepEqual(zero, { warm: { deploymentId: "A", replicas: 0, until: NOW + WINDOW }, desire: null });
    // Once started, later passes keep the end.
    assert.equal(afterEngine(zero.warm, 0, 3, NOW + 5000, WINDOW).warm.until, NOW + WINDOW);
    // The engine wanting more of it than it runs (a scale-up) is desired.
    assert.equal(afterEngine(held, 5, 3, NOW, WINDOW).desire, 5);
  });
});

describe("regionWeights", () => {
  const rev = (id: string, size: number, counted: InstanceFact[], instances = counted) => ({
    deploymentId: id,
    size,
    counted,
    instances,
  });

  it("routes by instances when nothing is held and nothing was weighted", () => {
    assert.equal(
      regionWeights({
        target: "B",
        replicas: 3,
        held: null,
        weightedNow: false,
        revisions: [rev("A", 1, running(1)), rev("B", 3, running(3))],
        minReadySeconds: 0,
        now: NOW,
      }),
      null,
    );
  });

  it("while held: the warm pods beyond the engine's count get nothing; a fully available target takes all", () => {
    const mid = regionWeights({
      target: "B",
      replicas: 4,
      held: "A",
      weightedNow: false,
      revisions: [rev("A", 2, running(2), running(4)), rev("B", 2, running(2))],
      minReadySeconds: 0,
      now: NOW,
    });
    assert.deepEqual(mid, [
      { deploymentId: "B", weight: 50 },
      { deploymentId: "A", weight: 50 },
    ]);
    const done = regionWeights({
      target: "B",
      replicas: 4,
      held: "A",
      weightedNow: true,
      revisions: [rev("A", 0, [], running(4)), rev("B", 4, running(4))],
      minReadySeconds: 0,
      now: NOW,
    });
    assert.deepEqual(done, [{ deploymentId: "B", weight: 100 }]);
  });

  it("after a switch: the target with all its pods available takes everything while the other drains; then by instances", () => {
    const draining = regionWeights({
      target: "A",
      replicas: 4,
      held: null,
      weightedNow: true,
      revisions: [rev("A", 4, running(4)), rev("B", 0, running(4))],
      minReadySeconds: 0,
      now: NOW,
    });
    assert.deepEqual(draining, [{ deploymentId: "A", weight: 100 }]);
    const drained = regionWeights({
      target: "A",
      replicas: 4,
      held: null,
      weightedNow: true,
      revisions: [rev("A", 4, running(4)), rev("B", 0, [{ status: "terminating", readySince: 0 }])],
      minReadySeconds: 0,
      now: NOW,
    });
    assert.equal(drained, null);
  });
});

describe("rollbackPlan", () => {
  const deployments = [
    { id: "A", revision: 1 },
    { id: "B", revision: 2 },
    { id: "C", revision: 3 },
  ];
  const base = {
    environment: "production",
    current: { id: "C", revision: 3 },
    deployments,
    instant: false,
    windowSeconds: 1800,
    keepsWarm: true,
  };

  it("goes back to the warm revision, instant when every region with replicas keeps it", () => {
    const p = rollbackPlan({
      ...base,
      regions: [
        { region: "eu", replicas: 3, warm: "A" },
        { region: "us", replicas: 0, warm: null },
      ],
      instant: true,
    });
    assert.deepEqual(p, { deploymentId: "A", revision: 1, instant: true, rollingRegions: [] });
  });

  it("without a warm revision: the newest older than the current one, rolled out", () => {
    const p = rollbackPlan({ ...base, regions: [{ region: "eu", replicas: 3, warm: null }] });
    assert.deepEqual(p, { deploymentId: "B", revision: 2, instant: false, rollingRegions: ["eu"] });
    // Pinned to B already: one further back.
    const q = rollbackPlan({
      ...base,
      current: { id: "B", revision: 2 },
      regions: [{ region: "eu", replicas: 3, warm: null }],
    });
    assert.equal(q.deploymentId, "A");
  });

  it("a region that keeps nothing warm: partly rolling, or with instant a failed precondition naming it", () => {
    const regions = [
      { region: "eu", replicas: 3, warm: "B" },
      { region: "us", replicas: 2, warm: null },
    ];
    assert.deepEqual(rollbackPlan({ ...base, regions }).rollingRegions, ["us"]);
    assert.throws(
      () => rollbackPlan({ ...base, regions, instant: true }),
      (e: unknown) =>
        e instanceof DomainError &&
        e.code === "failed_precondition" &&
        /environment "production" keeps nothing warm to roll back to in region "us" \(a revision stays warm for 30m/.test(
          e.message,
        ),
    );
    assert.throws(
      () =>
        rollbackPlan({
          ...base,
          regions: [{ region: "eu", replicas: 1, warm: null }],
          instant: true,
          windowSeconds: 0,
          keepsWarm: false,
        }),
      /its warm window is 0/,
    );
    assert.throws(
      () =>
        rollbackPlan({
          ...base,
          regions: [{ region: "eu", replicas: 1, warm: null }],
          instant: true,
          keepsWarm: false,
        }),
      /keeps nothing warm to roll back to in region "eu" \(only a RollingUpdate environment with a sentinel keeps/,
    );
  });

  it("nothing to go back to: a failed precondition", () => {
    assert.throws(
      () =>
        rollbackPlan({
          ...base,
          current: { id: "A", revision: 1 },
          regions: [{ region: "eu", replicas: 1, warm: null }],
        }),
      /environment "production" has no revision before revision 1 to roll back to/,
    );
    assert.throws(() => rollbackPlan({ ...base, current: null, regions: [] }), /has no deployment to roll back/);
  });
});

describe("chooseTarget with a pin", () => {
  const deps = [
    { id: "dep_1", revision: 1 },
    { id: "dep_2", revision: 2 },
    { id: "dep_3", revision: 3 },
  ];

  it("targets the pinned revision whatever is newer, and remembers the newest as seen", () => {
    assert.deepEqual(chooseTarget(deps, { targetId: "dep_2", seenRevision: 2 }, "dep_1"), {
      targetId: "dep_1",
      seenRevision: 3,
    });
  });

  it("a pinned revision that was deleted pins nothing", () => {
    assert.deepEqual(chooseTarget(deps, { targetId: "dep_2", seenRevision: 2 }, "dep_9"), {
      targetId: "dep_3",
      seenRevision: 3,
    });
  });
});

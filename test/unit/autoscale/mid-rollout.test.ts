// An autoscale event in the middle of a rolling update, against the rollout engine itself: the
// autoscaler only changes the region's count, and the engine (the only writer of each revision's
// size) resolves it as the Deployment controller resolves an HPA's scale — proportionally — so the
// surge bound (total ≤ count + maxSurge) holds in the pass of the event and every pass after it,
// old revisions are never scaled down below count − maxUnavailable available pods by a rolling
// step, and the rollout still ends on the new revision at the new count.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { resolveFenceposts } from "../../../src/rollout/fenceposts.js";
import { planRollout, type RevisionInput, type RolloutInput, type Strategy } from "../../../src/rollout/index.js";

const NOW = "2026-11-28T03:00:00Z";

interface Case {
  readonly strategy: Extract<Strategy, { type: "RollingUpdate" }>;
  readonly from: number;
  readonly to: number;
  readonly passesBefore: number;
  /** Per pass, how many more of each revision's pods become available (the rest stay unready). */
  readonly readiness: readonly number[];
}

const caseArb: fc.Arbitrary<Case> = fc.record({
  strategy: fc
    .tuple(
      fc.oneof(fc.integer({ min: 0, max: 3 }), fc.constantFrom("25%", "50%")),
      fc.oneof(fc.integer({ min: 0, max: 3 }), fc.constantFrom("25%", "50%")),
    )
    .filter(([s, u]) => !(s === 0 && u === 0))
    .map(([maxSurge, maxUnavailable]) => ({
      type: "RollingUpdate" as const,
      rollingUpdate: { maxSurge, maxUnavailable },
    })),
  from: fc.integer({ min: 1, max: 12 }),
  to: fc.integer({ min: 1, max: 12 }),
  passesBefore: fc.integer({ min: 1, max: 4 }),
  readiness: fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 40, maxLength: 40 }),
});

type Revisions = RevisionInput[];

function pass(
  replicas: number,
  strategy: Strategy,
  revisions: Revisions,
  ready: number,
): { revisions: Revisions; before: number; after: number; availableAfter: number } {
  const input: RolloutInput = {
    now: NOW,
    deployment: {
      name: "shop",
      replicas,
      strategy,
      minReadySeconds: 0,
      progressDeadlineSeconds: null,
      revisionHistoryLimit: null,
      paused: false,
      target: "new",
      rollbackTo: null,
      status: { replicas: 0, updatedReplicas: 0, readyReplicas: 0, availableReplicas: 0, unavailableReplicas: 0 },
      conditions: [],
    },
    revisions,
  };
  const out = planRollout(input);
  const next = out.revisions.map((r): RevisionInput => {
    const was = revisions.find((x) => x.name === r.name);
    // Pods follow the size: new ones start unready and `ready` of them become available per pass.
    const available = Math.min(r.replicas, (was?.status.availableReplicas ?? 0) + ready);
    return {
      name: r.name,
      revision: r.revision,
      createdAt: was?.createdAt ?? NOW,
      replicas: r.replicas,
      desiredReplicas: r.desiredReplicas ?? was?.desiredReplicas ?? null,
      maxReplicas: r.maxReplicas ?? was?.maxReplicas ?? null,
      status: { replicas: r.replicas, readyReplicas: available, availableReplicas: available },
    };
  });
  const total = (rs: Revisions): number => rs.reduce((n, r) => n + r.replicas, 0);
  return {
    revisions: next,
    before: total(revisions),
    after: total(next),
    availableAfter: out.revisions.reduce(
      (n, r) => n + Math.min(r.replicas, revisions.find((x) => x.name === r.name)?.status.availableReplicas ?? 0),
      0,
    ),
  };
}

test("an autoscale event mid-rollout keeps the surge bound; the rollout ends on the new revision at the new count", () => {
  fc.assert(
    fc.property(caseArb, (c) => {
      let revs: Revisions = [
        {
          name: "old",
          revision: 1,
          createdAt: "2026-11-28T01:00:00Z",
          replicas: c.from,
          desiredReplicas: c.from,
          maxReplicas: c.from,
          status: { replicas: c.from, readyReplicas: c.from, availableReplicas: c.from },
        },
        {
          name: "new",
          revision: null,
          createdAt: "2026-11-28T02:00:00Z",
          replicas: 0,
          desiredReplicas: null,
          maxReplicas: null,
          status: { replicas: 0, readyReplicas: 0, availableReplicas: 0 },
        },
      ];
      let i = 0;
      for (; i < c.passesBefore; i++) revs = pass(c.from, c.strategy, revs, c.readiness[i] ?? 1).revisions;
      // The autoscaler moves the region's count; the engine does the rest.
      const { surge, unavailable } = resolveFenceposts(
        c.strategy.rollingUpdate.maxSurge,
        c.strategy.rollingUpdate.maxUnavailable,
        c.to,
      );
      for (let k = 0; k < 60; k++, i++) {
        const p = pass(c.to, c.strategy, revs, c.readiness[i % c.readiness.length] ?? 1);
        assert.ok(
          p.after <= Math.max(p.before, c.to + surge),
          `pass ${k}: total ${p.before} → ${p.after}, above ${c.to} + ${surge}`,
        );
        const oldShrunk = p.revisions.some(
          (r) => r.name === "old" && r.replicas < (revs.find((x) => x.name === "old")?.replicas ?? 0),
        );
        const availableBefore = revs.reduce((n, r) => n + r.status.availableReplicas, 0);
        // A rolling step (not the proportional pass of the event) keeps the available floor.
        if (k > 0 && oldShrunk && availableBefore >= c.to - Math.min(unavailable, c.to))
          assert.ok(
            p.availableAfter >= c.to - Math.min(unavailable, c.to),
            `pass ${k}: ${p.availableAfter} available after shrinking old, floor ${c.to - unavailable}`,
          );
        revs = p.revisions;
        if (
          revs.find((r) => r.name === "new")?.status.availableReplicas === c.to &&
          revs.every((r) => r.name === "new" || r.replicas === 0)
        )
          break;
      }
      assert.equal(revs.find((r) => r.name === "new")?.replicas, c.to, "ends at the new count");
      assert.ok(
        revs.every((r) => r.name === "new" || r.replicas === 0),
        "the old revision at 0",
      );
    }),
    { numRuns: 1000 },
  );
});

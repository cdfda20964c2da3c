// The agent's own resize (src/autoscale/local.ts) against the rollout engine itself: for any
// settled region (the target at the count, every other revision at 0; rolling update or Recreate,
// any surge and unavailability, paused or not, rolled back or not, with or without history
// cleanup) and any new count, planRollout — run pass after pass, pods following the sizes — never
// writes a size other than the local rule's and settles exactly on it. And the rule refuses
// every region that is not settled.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { localSizes, settledTarget, type StreamedRevision } from "../../../src/autoscale/local.js";
import { planRollout, type RolloutInput, type RevisionInput, type Strategy } from "../../../src/rollout/index.js";

const NOW = "2026-11-28T02:00:00Z";

const strategyArb: fc.Arbitrary<Strategy> = fc.oneof(
  fc.constant<Strategy>({ type: "Recreate" }),
  fc
    .tuple(
      fc.oneof(fc.integer({ min: 0, max: 3 }), fc.constantFrom("0%", "25%", "50%", "100%")),
      fc.oneof(fc.integer({ min: 0, max: 3 }), fc.constantFrom("0%", "25%", "50%")),
    )
    .filter(([s, u]) => !((s === 0 || s === "0%") && (u === 0 || u === "0%")))
    .map(([maxSurge, maxUnavailable]): Strategy => ({
      type: "RollingUpdate",
      rollingUpdate: { maxSurge, maxUnavailable },
    })),
);

interface Settled {
  readonly input: RolloutInput;
  readonly next: number;
}

const settledArb: fc.Arbitrary<Settled> = fc
  .record({
    strategy: strategyArb,
    paused: fc.boolean(),
    count: fc.integer({ min: 0, max: 30 }),
    next: fc.integer({ min: 0, max: 30 }),
    olds: fc.integer({ min: 0, max: 4 }),
    // Where the target sits among the revisions by creation and number (a rollback targets an older one).
    targetAt: fc.nat(),
    history: fc.constantFrom<number | null>(null, 0, 1, 10),
    minReadySeconds: fc.constantFrom(0, 5),
    annotated: fc.boolean(),
    conditions: fc.boolean(),
  })
  .map((g): Settled => {
    const n = g.olds + 1;
    const t = g.targetAt % n;
    const revisions: RevisionInput[] = Array.from({ length: n }, (_, i) => {
      const isTarget = i === t;
      const size = isTarget ? g.count : 0;
      return {
        name: isTarget ? "target" : `old-${i}`,
        revision: i + 1,
        createdAt: new Date(Date.parse("2026-11-01T00:00:00Z") + i * 60_000).toISOString(),
        replicas: size,
        desiredReplicas: g.annotated || !isTarget ? g.count : null,
        maxReplicas: g.annotated || !isTarget ? g.count : null,
        status: { replicas: size, readyReplicas: size, availableReplicas: size },
      };
    });
    const available = {
      type: "Available",
      status: "True" as const,
      reason: "MinimumReplicasAvailable",
      message: "Deployment has minimum availability.",
      lastUpdateTime: "2026-11-01T01:00:00Z",
      lastTransitionTime: "2026-11-01T01:00:00Z",
    };
    const progressing = {
      type: "Progressing",
      status: "True" as const,
      reason: "NewReplicaSetAvailable",
      message: 'ReplicaSet "target" has successfully progressed.',
      lastUpdateTime: "2026-11-01T01:00:00Z",
      lastTransitionTime: "2026-11-01T00:00:00Z",
    };
    return {
      next: g.next,
      input: {
        now: NOW,
        deployment: {
          name: "shop",
          replicas: g.count,
          strategy: g.strategy,
          minReadySeconds: g.minReadySeconds,
          progressDeadlineSeconds: 600,
          revisionHistoryLimit: g.history,
          paused: g.paused,
          target: "target",
          rollbackTo: null,
          status: {
            replicas: g.count,
            updatedReplicas: g.count,
            readyReplicas: g.count,
            availableReplicas: g.count,
            unavailableReplicas: 0,
          },
          conditions: g.conditions ? [available, progressing] : [],
        },
        revisions,
      },
    };
  });

/** The engine's passes after the count changes, pods following each size at once. */
function passes(s: Settled): Map<string, number>[] {
  let input: RolloutInput = { ...s.input, deployment: { ...s.input.deployment, replicas: s.next } };
  const seen: Map<string, number>[] = [];
  for (let i = 0; i < 12; i++) {
    const out = planRollout(input);
    const sizes = new Map(out.revisions.map((r) => [r.name, r.replicas]));
    seen.push(sizes);
    const same =
      out.revisions.every((r) => input.revisions.find((x) => x.name === r.name)?.replicas === r.replicas) &&
      out.revisions.every((r) => input.revisions.find((x) => x.name === r.name)?.revision === r.revision) &&
      out.delete.length === 0;
    if (same && i > 0) break;
    input = {
      now: NOW,
      deployment: { ...input.deployment, status: out.status, conditions: out.conditions },
      revisions: out.revisions
        .filter((r) => !out.delete.includes(r.name))
        .map((r) => {
          const before = input.revisions.find((x) => x.name === r.name);
          return {
            name: r.name,
            revision: r.revision,
            createdAt: before?.createdAt ?? NOW,
            replicas: r.replicas,
            desiredReplicas: r.desiredReplicas ?? before?.desiredReplicas ?? null,
            maxReplicas: r.maxReplicas ?? before?.maxReplicas ?? null,
            // Pods follow at once and are long available (the region was settled).
            status: { replicas: r.replicas, readyReplicas: r.replicas, availableReplicas: r.replicas },
          };
        }),
    };
  }
  return seen;
}

const streamed = (s: Settled): StreamedRevision[] =>
  s.input.revisions.map((r) => ({ deploymentId: r.name, replicas: r.replicas }));

test("a settled region: the engine writes no size but the local rule's, and settles on it", () => {
  fc.assert(
    fc.property(settledArb, (s) => {
      const local = localSizes(
        streamed(s),
        { replicas: s.input.deployment.replicas, targetDeploymentId: "target" },
        s.next,
      );
      assert.ok(local, "a settled region is resized locally");
      const seen = passes(s);
      const lo = Math.min(s.input.deployment.replicas, s.next);
      const hi = Math.max(s.input.deployment.replicas, s.next);
      for (const sizes of seen) {
        for (const [name, size] of sizes) {
          if (name === "target") assert.ok(size >= lo && size <= hi, `target at ${size}, outside ${lo}…${hi}`);
          else assert.equal(size, 0, `${name} was given ${size}`);
        }
      }
      const last = seen.at(-1) ?? new Map<string, number>();
      for (const [name, size] of last)
        assert.equal(size, local.get(name), `${name}: engine ${size}, local ${local.get(name)}`);
      // And the engine got there in its first pass: the agent's write is not ahead of it.
      assert.equal(seen[0]?.get("target"), s.next);
    }),
    { numRuns: 2000 },
  );
});

test("not settled: a rollout under way, a canary's two revisions, no target, a target off the count", () => {
  const region = { replicas: 3, targetDeploymentId: "b" };
  assert.equal(
    settledTarget(
      [
        { deploymentId: "a", replicas: 1 },
        { deploymentId: "b", replicas: 3 },
      ],
      region,
    ),
    null,
  );
  assert.equal(
    settledTarget(
      [
        { deploymentId: "a", replicas: 0 },
        { deploymentId: "b", replicas: 2 },
      ],
      region,
    ),
    null,
  );
  assert.equal(
    settledTarget(
      [
        { deploymentId: "a", replicas: 0 },
        { deploymentId: "b", replicas: 3 },
      ],
      { ...region, targetDeploymentId: "" },
    ),
    null,
  );
  assert.equal(settledTarget([{ deploymentId: "a", replicas: 3 }], region), null, "the target is not desired here");
  assert.equal(
    settledTarget(
      [
        { deploymentId: "a", replicas: 0 },
        { deploymentId: "b", replicas: 3 },
      ],
      region,
    ),
    "b",
  );
  assert.equal(
    settledTarget([{ deploymentId: "b", replicas: 0 }], { replicas: 0, targetDeploymentId: "b" }),
    "b",
    "asleep at 0",
  );
  assert.deepEqual(
    localSizes(
      [
        { deploymentId: "a", replicas: 0 },
        { deploymentId: "b", replicas: 0 },
      ],
      { replicas: 0, targetDeploymentId: "b" },
      2,
    ),
    new Map([
      ["a", 0],
      ["b", 2],
    ]),
  );
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 1, maxLength: 5 }),
      fc.nat(),
      fc.integer({ min: 0, max: 5 }),
      (sizes, t, count) => {
        const revs = sizes.map((replicas, i) => ({ deploymentId: `d${i}`, replicas }));
        const target = `d${t % sizes.length}`;
        const settled = revs.every((r) => (r.deploymentId === target ? r.replicas === count : r.replicas === 0));
        assert.equal(settledTarget(revs, { replicas: count, targetDeploymentId: target }) !== null, settled);
      },
    ),
  );
});

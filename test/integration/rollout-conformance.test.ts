// Differential test of the rollout engine against the real Kubernetes Deployment controller
//: a fixed sample of generated single passes goes through krane's engine and through
// syncDeployment of the pinned k8s.io/kubernetes (tools/rollout-conformance, one process for all
// of them); every pass agrees on replica counts, deletions, conditions, status, requeue and
// events, or differs only in a way src/rollout/README.md lists as intended. The harness is built
// into the cache on first use (minutes; .ci/run builds it beforehand). A larger run, with timings:
// `npm run bench -- rollout-conformance`.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { RolloutInput } from "../../src/rollout/index.js";
import { CLASSES, generateCases } from "../support/rollout-conformance/generator.js";
import { RolloutHarness } from "../support/rollout-conformance/harness.js";
import { INTENDED } from "../support/rollout-conformance/compare.js";
import { describeFailure, formatReport, runConformance } from "../support/rollout-conformance/run.js";

const SEED = 13;
const COUNT = 500;

let harness: RolloutHarness | undefined;

before(
  async () => {
    harness = await RolloutHarness.start((line) => console.log(line));
  },
  { timeout: 20 * 60_000 },
);

after(async () => {
  await harness?.close();
});

function started(): RolloutHarness {
  if (harness === undefined) throw new Error("the harness did not start");
  return harness;
}

describe("rollout engine vs the real Deployment controller (v1.36.3)", () => {
  it("the harness runs the real controller: the first step of a rolling update", async () => {
    // 10 replicas at v1, maxSurge 25% (rounds up to 3): the controller creates v2 with 3 replicas.
    const input: RolloutInput = {
      now: "2026-01-01T00:00:00Z",
      deployment: {
        name: "web",
        replicas: 10,
        strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: "25%", maxUnavailable: 0 } },
        minReadySeconds: 0,
        progressDeadlineSeconds: 600,
        revisionHistoryLimit: 10,
        paused: false,
        target: "v2",
        rollbackTo: null,
        status: { replicas: 10, updatedReplicas: 0, readyReplicas: 10, availableReplicas: 10, unavailableReplicas: 0 },
        conditions: [],
      },
      revisions: [
        {
          name: "v1",
          revision: 1,
          createdAt: "2025-12-31T00:00:00Z",
          replicas: 10,
          desiredReplicas: 10,
          maxReplicas: 13,
          status: { replicas: 10, readyReplicas: 10, availableReplicas: 10 },
        },
        {
          name: "v2",
          revision: null,
          createdAt: "2025-12-31T23:00:00Z",
          replicas: 0,
          desiredReplicas: null,
          maxReplicas: null,
          status: { replicas: 0, readyReplicas: 0, availableReplicas: 0 },
        },
      ],
    };
    const result = await started().run(input);
    assert.ok("output" in result, JSON.stringify(result));
    const out = result.output;
    assert.equal(out.syncError, undefined);
    assert.deepEqual(out.revisions, [
      { name: "v1", revision: 1, replicas: 10, desiredReplicas: 10, maxReplicas: 13 },
      { name: "v2", revision: 2, replicas: 3, desiredReplicas: 10, maxReplicas: 13 },
    ]);
    assert.deepEqual(out.events, [
      { type: "Normal", reason: "ScalingReplicaSet", message: "Scaled up replica set v2 from 0 to 3" },
    ]);
    assert.deepEqual(
      out.conditions.map((c) => [c.type, c.status, c.reason, c.message, c.lastUpdateTime]),
      [
        ["Progressing", "True", "NewReplicaSetCreated", 'Created new replica set "v2"', "2026-01-01T00:00:00Z"],
        [
          "Available",
          "True",
          "MinimumReplicasAvailable",
          "Deployment has minimum availability.",
          "2026-01-01T00:00:00Z",
        ],
      ],
    );
    // Computed from the sizes listed before the pass plus v2 as created: 13 wanted, 10 available.
    assert.equal(out.status.unavailableReplicas, 3);
    assert.equal(out.requeueAfterSeconds, null);
  });

  it("answers a stuck rollout with the requeue the deadline asks for", async () => {
    // Nothing can move and the Progressing condition is 300 s old: look again at 600 − 300 + 1 s.
    const input: RolloutInput = {
      now: "2026-01-01T00:00:00Z",
      deployment: {
        name: "web",
        replicas: 3,
        strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
        minReadySeconds: 0,
        progressDeadlineSeconds: 600,
        revisionHistoryLimit: 10,
        paused: false,
        target: "v2",
        rollbackTo: null,
        status: { replicas: 4, updatedReplicas: 1, readyReplicas: 3, availableReplicas: 3, unavailableReplicas: 1 },
        conditions: [
          {
            type: "Progressing",
            status: "True",
            reason: "ReplicaSetUpdated",
            message: 'ReplicaSet "v2" is progressing.',
            lastUpdateTime: "2025-12-31T23:55:00Z",
            lastTransitionTime: "2025-12-31T23:50:00Z",
          },
          {
            type: "Available",
            status: "True",
            reason: "MinimumReplicasAvailable",
            message: "Deployment has minimum availability.",
            lastUpdateTime: "2025-12-31T23:50:00Z",
            lastTransitionTime: "2025-12-31T23:50:00Z",
          },
        ],
      },
      revisions: [
        {
          name: "v1",
          revision: 1,
          createdAt: "2025-12-31T00:00:00Z",
          replicas: 3,
          desiredReplicas: 3,
          maxReplicas: 4,
          status: { replicas: 3, readyReplicas: 3, availableReplicas: 3 },
        },
        {
          name: "v2",
          revision: 2,
          createdAt: "2025-12-31T23:00:00Z",
          replicas: 1,
          desiredReplicas: 3,
          maxReplicas: 4,
          status: { replicas: 1, readyReplicas: 0, availableReplicas: 0 },
        },
      ],
    };
    const result = await started().run(input);
    assert.ok("output" in result, JSON.stringify(result));
    assert.deepEqual(result.output.events, []);
    assert.equal(result.output.requeueAfterSeconds, 301);
  });

  it(`agrees on ${COUNT} generated passes (seed ${SEED}), or differs only as src/rollout/README.md lists`, async () => {
    const report = await runConformance(generateCases(SEED, COUNT), started());
    console.log(formatReport(report));
    assert.equal(report.failures.length, 0, report.failures.slice(0, 3).map(describeFailure).join("\n\n"));
    for (const cls of CLASSES) assert.equal(report.byClass.get(cls)?.inputs, COUNT / CLASSES.length, cls);
    // The sample meets every intended difference, so one that stops happening is noticed too.
    assert.deepEqual([...report.byIntended.keys()].sort(), INTENDED.map((d) => d.id).sort());
    let agreed = 0;
    for (const t of report.byClass.values()) agreed += t.agreed;
    assert.ok(agreed >= COUNT * 0.9, `only ${agreed} of ${COUNT} agree outright`);
  });
});

// Fault scenarios around a rollout on the real local cluster (test/support/faults/scenarios.ts):
// the API server failing 20 % of the agent's requests (5xx, 429 with Retry-After, resets, slow
// answers, cut and silent watches, 410 on watch resume) during rollouts, and the agent process
// killed with SIGKILL mid-rollout. Each ends converged with nothing lost, no duplicate
// ReplicaSet, no replica count applied out of order, the surge bound never exceeded (sampled
// from an admin watch) and ctrl's outbox gap-free and replaying to its desired state.
import { test } from "node:test";
import assert from "node:assert/strict";
import { useCluster } from "../../support/cluster.js";
import { agentKilledDuringRollouts, rolloutUnderApiErrors } from "../../support/faults/scenarios.js";
import { ms, percentile } from "../../support/faults/processes.js";

// The agent runs in this process: an uncaught error here would have ended a `krane agent`.
const uncaught: Error[] = [];
process.on("uncaughtExceptionMonitor", (err) => void uncaught.push(err));
const handle = useCluster({ pods: { readyDelayMs: 300, readyJitterMs: 700 } });

test(
  "rollouts while the API server fails 20 % of the agent's requests converge, in order, within the surge bound",
  { timeout: 15 * 60_000 },
  async () => {
    const r = await rolloutUnderApiErrors(await handle.ready(), {
      rate: 0.2,
      rollouts: 2,
      faultMs: 8000,
      seed: 1914,
      replicas: 6,
    });
    console.log(
      `${r.name}: ${r.passed ? "passed" : "FAILED"}; convergence after the faults ended p50 ${ms(percentile(r.convergenceMs, 50))}, max ${ms(percentile(r.convergenceMs, 100))}; ${JSON.stringify(r.notes)}`,
    );
    assert.deepEqual(r.problems, []);
    assert.ok(Number(r.notes.faulted) > 10, `faults were injected (${r.notes.faulted})`);
    assert.ok(Number(r.notes.watchesFaulted) > 0, `watches were faulted too (${r.notes.watchesFaulted})`);
    assert.deepEqual(
      uncaught.map((e) => e.stack),
      [],
      "no uncaught error in the agent",
    );
  },
);

test(
  "kill -9 of the agent during rollouts: every rollout completes and the surge bound holds throughout",
  { timeout: 15 * 60_000 },
  async () => {
    const r = await agentKilledDuringRollouts(await handle.ready(), { rollouts: 2, replicas: 6, everyMs: 1500 });
    console.log(
      `${r.name}: ${r.passed ? "passed" : "FAILED"}; ${r.kills} kills; convergence after the last kill p50 ${ms(percentile(r.convergenceMs, 50))}`,
    );
    assert.deepEqual(r.problems, []);
    assert.ok(r.kills >= 2, `the agent was killed mid-rollout (${r.kills} times)`);
  },
);

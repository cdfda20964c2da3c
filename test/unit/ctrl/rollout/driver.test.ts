// Unit tests of the rollout driver's queue behaviour (src/ctrl/rollout/driver.ts) with a fake
// RolloutSource instead of the database: passes of one (environment, region) never overlap and
// requests during a run coalesce into one more run; other keys run meanwhile; a failing pass
// neither rejects a caller nor blocks the next request, and is retried with backoff on its own;
// a pass's wake time runs the key again without an event; passes that keep changing continue
// after maxPasses; the sweep runs due keys; deployment reports find their environment.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { RolloutDriver, type RolloutSource } from "../../../../src/ctrl/rollout/driver.js";
import type { PassResult } from "../../../../src/ctrl/rollout/pass.js";

const QUIET: PassResult = { ran: true, changed: false, wakeAt: null };

function source(
  runPass: (environmentId: string, region: string) => Promise<PassResult>,
  extra: Partial<RolloutSource> = {},
): RolloutSource {
  return {
    runPass,
    regionsOf: async () => [],
    deploymentOf: async () => undefined,
    due: async () => [],
    ...extra,
  };
}

async function until(check: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

describe("rollout driver queue", () => {
  it("never overlaps passes of one key, coalesces requests during a run into one more, runs other keys meanwhile", async () => {
    let active = 0;
    const runs: string[] = [];
    let release: () => void = () => undefined;
    const blocked = new Promise<void>((r) => (release = r));
    const driver = new RolloutDriver(
      source(async (env, region) => {
        runs.push(region);
        if (region === "a") {
          active++;
          assert.equal(active, 1, "two passes of one key overlapped");
          if (runs.filter((r) => r === "a").length === 1) await blocked;
          active--;
        }
        return QUIET;
      }),
      { sweepIntervalMs: 0 },
    );
    try {
      const first = driver.kick("env", "a");
      await until(() => runs.length === 1, "the first pass to start");
      let secondDone = false;
      const second = driver.kick("env", "a").then(() => (secondDone = true));
      const third = driver.kick("env", "a");
      await driver.kick("env", "b");
      assert.deepEqual(runs, ["a", "b"], "another key runs while one is blocked");
      assert.equal(secondDone, false);
      release();
      await Promise.all([first, second, third]);
      // The two requests made during the first run were served by one more run.
      assert.deepEqual(runs, ["a", "b", "a"]);
    } finally {
      await driver.stop();
    }
  });

  it("a failing pass rejects nobody, does not block the next request, and is retried with backoff", async () => {
    let calls = 0;
    const times: number[] = [];
    const driver = new RolloutDriver(
      source(async () => {
        calls++;
        times.push(Date.now());
        if (calls <= 2) throw new Error("boom");
        return QUIET;
      }),
      // A backoff long enough that "at once" and "after the backoff" stay apart on a loaded machine.
      { sweepIntervalMs: 0, retry: { baseMs: 1_000, capMs: 1_000, minMs: 1_000 } },
    );
    try {
      await driver.kick("env", "r"); // fails; resolves anyway
      assert.equal(calls, 1);
      await driver.kick("env", "r"); // a new request runs at once, before the backoff is over
      assert.equal(calls, 2);
      assert.ok((times[1] ?? 0) - (times[0] ?? 0) < 1_000, "the second request waited for the backoff");
      // No more requests: the failed key runs again on its own after the backoff.
      await until(() => calls === 3, "the retry");
      assert.ok((times[2] ?? 0) - (times[1] ?? 0) >= 950, `retried after ${(times[2] ?? 0) - (times[1] ?? 0)} ms`);
      await driver.idle();
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(calls, 3, "a successful pass is not retried");
    } finally {
      await driver.stop();
    }
  });

  it("runs a key again at the wake time its pass asked for, and continues passes that keep changing", async () => {
    const passes = new Map<string, number>();
    const started = Date.now();
    let wokenAt = 0;
    const driver = new RolloutDriver(
      source(async (_env, region) => {
        const n = (passes.get(region) ?? 0) + 1;
        passes.set(region, n);
        if (region === "wake") {
          if (n === 1) return { ran: true, changed: false, wakeAt: Date.now() + 60 };
          wokenAt = Date.now();
          return QUIET;
        }
        // "busy": changes 7 times, then settles.
        return n <= 7 ? { ran: true, changed: true, wakeAt: null } : QUIET;
      }),
      { sweepIntervalMs: 0, maxPasses: 3 },
    );
    try {
      await driver.kick("env", "wake");
      await until(() => passes.get("wake") === 2, "the wake-up");
      assert.ok(wokenAt - started >= 55, `woke after ${wokenAt - started} ms`);
      await driver.kick("env", "busy");
      assert.equal(passes.get("busy"), 3, "one run does at most maxPasses passes");
      await until(() => passes.get("busy") === 8, "the busy key to settle");
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(passes.get("busy"), 8);
      assert.equal(passes.get("wake"), 2);
    } finally {
      await driver.stop();
    }
  });

  it("the sweep runs due keys; a deployment report runs its environment's key in its region; passes are reported", async () => {
    const ran: string[] = [];
    const seen: [string, string, boolean][] = [];
    let lookups = 0;
    const driver = new RolloutDriver(
      source(
        async (env, region) => {
          ran.push(`${env}/${region}`);
          return QUIET;
        },
        {
          due: async () => [{ environmentId: "env1", region: "eu" }],
          deploymentOf: async (id, k8sName) => {
            lookups++;
            return id === "dep_1" || k8sName === "shop-1" ? { id: "dep_1", environmentId: "env2" } : undefined;
          },
          regionsOf: async (env) => (env === "env3" ? ["us", "ap"] : []),
        },
      ),
      { sweepIntervalMs: 0, onPass: (env, region, changed) => seen.push([env, region, changed]) },
    );
    try {
      await driver.sweep();
      assert.deepEqual(ran, ["env1/eu"]);
      await driver.deploymentReported("us", "", "shop-1");
      await driver.deploymentReported("us", "dep_1", "");
      assert.equal(lookups, 1, "the environment of a known deployment id is cached");
      driver.reported("sentinel", "us", { id: "snt_1", k8sName: "x" });
      await driver.deploymentReported("us", "dep_unknown", "");
      await driver.environmentChanged("env3");
      assert.deepEqual(ran, ["env1/eu", "env2/us", "env2/us", "env3/us", "env3/ap"]);
      assert.deepEqual(seen[0], ["env1", "eu", false]);
    } finally {
      await driver.stop();
    }
    // Closed: requests are no-ops.
    await driver.kick("env1", "eu");
    assert.equal(ran.length, 5);
  });
});

// Scale to zero on real containers (heavy: run it on its own; one cluster for the file): krane's
// own sentinel holds the requests that reach an environment asleep at 0, the agent's wake
// long-poll starts the scale-up at once, and the hello app under gVisor answers them once the
// kubelet finds it Ready.
//  - Idle → 0; 1,000 concurrent requests at zero are all answered by the app, none dropped; the
//    woken pod starts with the agent's startup CPU boost and is back at its own limit once Ready.
//  - Over the held-request bound: 503 with Retry-After (never a drop), and the sentinel stays
//    healthy and serves the next request.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Agent as HttpAgent, request } from "undici";
import { SENTINEL_NAMESPACE } from "../../../src/contracts/cluster.js";
import { kubectlJson, realNodesSkip, useRealCluster } from "../../support/real-nodes.js";
import { tempDir } from "../ctrl/support.js";
import { dbIn, step, World } from "./support.js";

const skip = await realNodesSkip();

/** The agent's startup CPU boost resizes so far (src/agent/deployments/boost.ts), by step. */
async function boosts(w: World, step: "up" | "down" | "refused"): Promise<number> {
  const m = w.agent.registry.getSingleMetric("krane_agent_startup_cpu_boosts_total");
  const values = m ? (await m.get()).values : [];
  return values.find((v) => v.labels.step === step)?.value ?? 0;
}

describe("scale to zero on real containers", { skip }, () => {
  const h = useRealCluster(["untrusted", "sentinel"]);
  const dir = tempDir("krane-scale-to-zero-");
  const w = new World(h, dbIn(dir.path));

  before(
    () =>
      w.start({
        minReplicas: 0,
        maxReplicas: 3,
        concurrencyTarget: 500,
        scaleDownWindowSeconds: 0,
        scaleToZero: { idleSeconds: 30, heldTimeoutSeconds: 180 },
      }),
    { timeout: 30 * 60_000 },
  );
  after(async () => {
    await w.stop();
    dir.remove();
  });

  it("idle → 0; 1,000 concurrent requests at zero are held, wake it and are all answered", async () => {
    await w.until("0 instances", async () => (await w.replicaSet()).size === 0 && (await w.running()) === 0, 300_000);
    assert.equal(await w.regionCount(), 0);
    assert.match((await w.status()).autoscale[0]?.reason ?? "", /scaled to zero/);

    const boostsBefore = { up: await boosts(w, "up"), down: await boosts(w, "down") };
    const client = new HttpAgent({ connections: 1000, keepAliveTimeout: 10_000 });
    const started = performance.now();
    const answers = await Promise.all(
      Array.from({ length: 1000 }, async () => {
        try {
          const res = await request(`${w.sentinelUrl}/`, { dispatcher: client, headersTimeout: 240_000 });
          await res.body.dump();
          return res.statusCode;
        } catch (err) {
          return err instanceof Error ? err.message : String(err);
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    await client.close();
    const counts = new Map<string | number, number>();
    for (const a of answers) counts.set(a, (counts.get(a) ?? 0) + 1);
    step(`1,000 at zero: ${JSON.stringify([...counts])} in ${seconds.toFixed(1)} s`);
    assert.deepEqual([...counts], [[200, 1000]], "every request answered by the app");
    assert.ok((await w.sentinelMetric("krane_sentinel_cold_start_seconds_count")) >= 1, "a cold start measured");
    assert.ok(
      (await w.sentinelMetric('krane_sentinel_held_requests_total{outcome="released"}')) >= 1,
      "held requests released",
    );
    // The startup CPU boost (src/agent/deployments/boost.ts): the woken pod started with the
    // boosted limit and, once Ready, runs at its revision's own again (spec and kubelet's status).
    assert.ok((await boosts(w, "up")) > boostsBefore.up, "the woken pod was boosted");
    assert.equal(await boosts(w, "refused"), 0);
    await w.until(
      "the woken pod back at its own CPU limit",
      async () => {
        const pods = await kubectlJson<{
          items: {
            spec: { containers: { resources: { limits: { cpu: string } } }[] };
            status: { containerStatuses?: { resources?: { limits?: { cpu?: string } } }[] };
          }[];
        }>(h.cluster, ["pods", "-n", "ws-acme"]);
        return (
          pods.items.length > 0 &&
          pods.items.every(
            (p) =>
              p.spec.containers[0]?.resources.limits.cpu === "500m" &&
              p.status.containerStatuses?.[0]?.resources?.limits?.cpu === "500m",
          )
        );
      },
      60_000,
    );
    assert.ok((await boosts(w, "down")) > boostsBefore.down, "and resized back by the agent");
  });

  it("over the held-request bound: 503 with Retry-After, none dropped, and the sentinel stays healthy", async () => {
    await w.setPolicy({ scaleToZero: { maxHeldRequests: 5 } });
    await w.until("0 instances again", async () => (await w.replicaSet()).size === 0, 300_000);
    const client = new HttpAgent({ connections: 50 });
    const answers = await Promise.all(
      Array.from({ length: 40 }, async () => {
        const res = await request(`${w.sentinelUrl}/`, { dispatcher: client, headersTimeout: 240_000 });
        await res.body.dump();
        return {
          status: res.statusCode,
          retryAfter: res.headers["retry-after"],
          error: res.headers["x-krane-sentinel-error"],
        };
      }),
    );
    await client.close();
    const refused = answers.filter((a) => a.status === 503);
    const served = answers.filter((a) => a.status === 200);
    step(`over the bound: ${served.length} served, ${refused.length} refused`);
    assert.equal(served.length + refused.length, 40, "every request answered");
    assert.ok(refused.length >= 1, "the bound refused some");
    assert.ok(served.length >= 5, "the held ones were served");
    for (const r of refused) {
      assert.equal(r.retryAfter, "1");
      assert.equal(r.error, "held-full");
    }
    // Healthy: Ready, and serving the next request at once.
    const pods = await kubectlJson<{ items: { status: { conditions?: { type: string; status: string }[] } }[] }>(
      h.cluster,
      ["pods", "-n", SENTINEL_NAMESPACE],
    );
    assert.ok(pods.items.every((p) => p.status.conditions?.some((c) => c.type === "Ready" && c.status === "True")));
    const res = await request(`${w.sentinelUrl}/`);
    await res.body.dump();
    assert.equal(res.statusCode, 200);
  });
});

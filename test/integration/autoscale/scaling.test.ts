// Autoscaling on real containers (heavy: run it on its own; one cluster for the file). The load
// is real requests through the environment's sentinel (krane's own image) to the hello app under
// gVisor, whose `?latency=` keeps them in flight; the kubelet's probes decide readiness.
//  - A load step up: the region follows within the scale-up window (0 s); the load stops: it comes
//    down after the scale-down window, never below min.
//  - ctrl down: the region still scales up from its sentinels' load (the agent resizes the settled
//    ReplicaSet itself), and when ctrl is back it takes the count without the ReplicaSet moving.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { realNodesSkip, useRealCluster } from "../../support/real-nodes.js";
import { tempDir } from "../ctrl/support.js";
import { dbIn, sampleWhile, step, World } from "./support.js";

const skip = await realNodesSkip();

describe("autoscaling on real containers", { skip }, () => {
  const h = useRealCluster(["untrusted", "sentinel"]);
  const dir = tempDir("krane-autoscale-");
  const w = new World(h, dbIn(dir.path));

  before(
    () =>
      w.start({
        minReplicas: 1,
        maxReplicas: 3,
        concurrencyTarget: 2,
        scaleUpWindowSeconds: 0,
        scaleDownWindowSeconds: 15,
      }),
    { timeout: 30 * 60_000 },
  );
  after(async () => {
    await w.stop();
    dir.remove();
  });

  it("a load step up is followed; the load gone, the count comes down after the window, never below min", async () => {
    const started = performance.now();
    const load = w.load(6, 1_000);
    await w.until("3 running instances", async () => (await w.running()) === 3, 240_000);
    step(`load step: 3 instances serving after ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const s = await w.status();
    assert.match(s.autoscale[0]?.reason ?? "", /in flight at 2 per instance/, "the reason names the load");
    assert.equal(await w.regionCount(), 3, "ctrl holds the count the agent decided");
    const { ok } = await load.stop();
    assert.ok(ok > 0);
    const stopped = performance.now();
    const down = w.until("back to 1 instance", async () => (await w.replicaSet()).size === 1, 240_000);
    const sizes = await sampleWhile(async () => (await w.replicaSet()).size, down);
    await down;
    const seconds = (performance.now() - stopped) / 1000;
    step(`load gone: down to 1 after ${seconds.toFixed(1)} s (window 15 s); sizes ${[...new Set(sizes)].join(" ")}`);
    assert.ok(seconds >= 13, `came down after ${seconds.toFixed(1)} s, inside the 15 s window`);
    assert.ok(Math.min(...sizes) >= 1, "never below min");
    await w.until("ctrl holds 1", async () => (await w.regionCount()) === 1, 60_000);
  });

  it("ctrl down: the region still scales up from its sentinels' load; ctrl back takes the count without a flap", async () => {
    await w.ctrl.close();
    const load = w.load(6, 1_000);
    try {
      await w.until(
        "3 ready pods with ctrl down",
        async () => {
          const rs = await w.replicaSet();
          return rs.size === 3 && rs.ready === 3;
        },
        240_000,
      );
    } finally {
      await w.restartCtrl();
    }
    const taken = w.until("ctrl takes the region's count", async () => (await w.regionCount()) === 3, 120_000);
    const sizes = await sampleWhile(async () => (await w.replicaSet()).size, taken);
    await taken;
    // A few seconds more: the engine's pass and the stream back must not move it either.
    sizes.push(
      ...(await sampleWhile(async () => (await w.replicaSet()).size, new Promise((r) => setTimeout(r, 5_000)))),
    );
    step(`ctrl back: ReplicaSet sizes seen ${sizes.join(" ")}`);
    assert.ok(
      sizes.every((n) => n === 3),
      `the ReplicaSet moved while ctrl caught up: ${sizes.join(" ")}`,
    );
    await load.stop();
  });
});

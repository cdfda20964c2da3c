// Autoscaling on CPU on real containers (heavy: run it on its own; one cluster for the file): the
// local cluster runs metrics-server against its real node, the fenced agent reads the resource
// metrics API for its instances, and the hello app under gVisor burns CPU per request (`?cpu=`),
// so the use the kubelet measures follows the load through the sentinel.
//  - A CPU-only policy (no concurrency target): the load raises each instance's use over the
//    target and the region follows up to max, the reason naming the CPU; the load gone, it comes
//    down after the scale-down window, never below min.
//  - The metrics history then holds each instance's CPU and memory (the agent's usage reader).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { realNodesSkip, useRealCluster } from "../../support/real-nodes.js";
import { tempDir } from "../ctrl/support.js";
import { MetricsService } from "../../../src/gen/krane/ctrl/v1/live_pb.js";
import { dbIn, REF, REGION, sampleWhile, step, World } from "./support.js";

const skip = await realNodesSkip();

describe("autoscaling on CPU on real containers", { skip }, () => {
  const h = useRealCluster(["untrusted", "sentinel"], { metrics: true });
  const dir = tempDir("krane-autoscale-cpu-");
  const w = new World(h, dbIn(dir.path));

  before(
    () =>
      w.start(
        { minReplicas: 1, maxReplicas: 3, cpuTargetPercent: 50, scaleUpWindowSeconds: 0, scaleDownWindowSeconds: 20 },
        { cpuMillicores: 200 },
      ),
    { timeout: 30 * 60_000 },
  );
  after(async () => {
    await w.stop();
    dir.remove();
  });

  it("CPU over the target: the region follows up to max; the load gone, it comes down after the window, never below min", async () => {
    const idle = await w.status();
    assert.doesNotMatch(idle.autoscale[0]?.reason ?? "", /in flight/, "no concurrency target in play");
    const started = performance.now();
    // Four clients back to back, each request 60 ms of CPU: far more than one instance's 200m.
    const load = w.load(4, 0, 60);
    let reason = "";
    await w.until(
      "3 running instances from CPU",
      async () => {
        reason = (await w.status()).autoscale[0]?.reason ?? reason;
        return (await w.running()) === 3;
      },
      300_000,
    );
    step(`CPU load: 3 instances after ${((performance.now() - started) / 1000).toFixed(1)} s; reason: ${reason}`);
    assert.match(reason, /cpu \d+(\.\d+)?% on \d+ at a target of 50%/, "the reason names the CPU");
    assert.equal(await w.regionCount(), 3, "ctrl holds the count the agent decided");
    const { ok } = await load.stop();
    assert.ok(ok > 0);
    const stopped = performance.now();
    const down = w.until("back to 1 instance", async () => (await w.replicaSet()).size === 1, 300_000);
    const sizes = await sampleWhile(async () => (await w.replicaSet()).size, down);
    await down;
    const seconds = (performance.now() - stopped) / 1000;
    step(`load gone: down to 1 after ${seconds.toFixed(1)} s (window 20 s); sizes ${[...new Set(sizes)].join(" ")}`);
    assert.ok(seconds >= 18, `came down after ${seconds.toFixed(1)} s, inside the 20 s window`);
    assert.ok(Math.min(...sizes) >= 1, "never below min");
    assert.match((await w.status()).autoscale[0]?.reason ?? "", /cpu|floor/);
  });

  it("the metrics history has each instance's CPU and memory, as metrics-server read them", async () => {
    const { series } = await w.ctrl.client(MetricsService, w.ctrl.adminToken).getMetricsHistory({ ...REF });
    const instances = series.filter((s) => s.instance !== "" && s.deploymentId === w.v1);
    step(
      `instances in the history: ${instances
        .map((s) => `${s.instance} cpu ${s.total?.cpuMillicores?.toFixed(0)}m mem ${s.total?.memoryBytes}`)
        .join("; ")}`,
    );
    // The load ran up to 3 instances, each measured while it burned CPU.
    assert.ok(instances.length >= 2, `${instances.length} instance series`);
    const busiest = Math.max(...instances.map((s) => s.total?.cpuMillicores ?? 0));
    assert.ok(busiest > 20, `the busiest instance's mean CPU: ${busiest}m`);
    for (const s of instances) {
      assert.equal(s.region, REGION);
      assert.ok((s.total?.memoryBytes ?? 0) > 1e6, `${s.instance}: memory ${s.total?.memoryBytes}`);
      assert.ok(
        s.points.every((p) => p.requests === 0n),
        "the sentinels count per revision, not per instance",
      );
    }
  });
});

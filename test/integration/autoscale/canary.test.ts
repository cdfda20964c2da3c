// A canary at 65 % under load on real containers (heavy: run it on its own; one cluster for the
// file). The canary revision answers 1 s late (HELLO_LATENCY_MS), the stable one at once, so
// nearly all requests in flight are the canary's: judged per revision, the canary needs 3
// instances at 2 in flight each, so the region goes to 4 (the canary's 65 % share of 4 is 3),
// not to the 3 an average over all instances would give, and not to max; the stable revision
// keeps the region's count (its share of the traffic needs less), never pushed to max.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { RolloutService, type RolloutStatus } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { realNodesSkip, useRealCluster } from "../../support/real-nodes.js";
import { tempDir } from "../ctrl/support.js";
import { dbIn, REF, REGION, sampleWhile, step, World } from "./support.js";

const skip = await realNodesSkip();

describe("a canary at 65 % under load on real containers", { skip }, () => {
  const h = useRealCluster(["untrusted", "sentinel"]);
  const dir = tempDir("krane-autoscale-canary-");
  const w = new World(h, dbIn(dir.path));

  before(
    () =>
      w.start(
        { minReplicas: 1, maxReplicas: 8, concurrencyTarget: 2, scaleUpWindowSeconds: 0, scaleDownWindowSeconds: 600 },
        {
          cpuMillicores: 200,
          rollout: {
            progressive: {
              canary: {
                steps: [{ step: { case: "setWeight", value: 65 } }, { step: { case: "pause", value: { seconds: 0 } } }],
              },
            },
          },
        },
      ),
    { timeout: 30 * 60_000 },
  );
  after(async () => {
    await w.stop();
    dir.remove();
  });

  it("the canary's own load drives its share; stable is not pushed to max", async () => {
    const rollout = async (): Promise<RolloutStatus | undefined> =>
      (await w.ctrl.client(RolloutService, w.ctrl.adminToken).getRolloutStatus(REF)).status;
    const weightOf = (s: RolloutStatus | undefined, id: string): number =>
      s?.progressive?.weights.find((x) => x.region === REGION)?.weights.find((x) => x.deploymentId === id)?.weight ?? 0;
    const canary = await w.deploy("krane.local/hello:v2", { HELLO_LATENCY_MS: "1000" });
    await w.until(
      "the canary paused at 65 % with an instance",
      async () => {
        const s = await rollout();
        return s?.progressive?.phase === "Paused" && weightOf(s, canary) === 65 && (await w.running(canary)) >= 1;
      },
      300_000,
    );
    const load = w.load(6);
    try {
      await w.until(
        "the region at 4: the canary at 3, stable at 4",
        async () =>
          (await w.regionCount()) === 4 &&
          (await w.replicaSet(canary)).ready === 3 &&
          (await w.replicaSet()).size === 4,
        300_000,
      );
      const reason = (await w.status()).autoscale[0]?.reason ?? "";
      assert.match(
        reason,
        new RegExp(
          `revision ${canary} needs 3: .* in flight at 2 per instance \\(its share of the region is 3 of 4\\)`,
        ),
      );
      // Under the same load for a while: never more (not to max, not for stable).
      const counts = await sampleWhile(() => w.regionCount(), new Promise((r) => setTimeout(r, 10_000)));
      step(`canary at 65 %: region counts ${[...new Set(counts)].join(" ")}; ${reason}`);
      assert.ok(
        counts.every((n) => n === 4),
        `the region moved: ${counts.join(" ")}`,
      );
      assert.equal((await w.replicaSet()).size, 4, "stable keeps the region's count, far from max 8");
    } finally {
      await load.stop();
    }
  });
});

// Child process of bench/ctrl.ts: runs ctrl and a paced writer in a process of their own, so
// the streams' readers (in the parent) do not share ctrl's event loop. Talks over IPC:
//   parent → {write, rate, seconds} → child writes, then replies {done, commits}
//   parent → {stop} → child drains ctrl and exits
// Commit times are wall-clock milliseconds (timeOrigin + now) so the parent can compare them
// with its own receive times.
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { issueClusterToken } from "../src/ctrl/domain/clusters.js";
import { setDesiredReplicas } from "../src/ctrl/domain/deployments.js";
import { startCtrl } from "../src/ctrl/server/server.js";
import { BENCH_MARK, BENCH_REGION, seedBench } from "./ctrl-seed.js";

type Command = { type: "write"; rate: number; seconds: number; warmupSeconds: number } | { type: "stop" };

const databaseUrl = process.argv[2] ?? "";
// The seed writes desired replicas directly (this bench measures the outbox and its streams), so
// the rollout driver's sweep must not take those revisions over and rewrite their replicas.
const ctrl = await startCtrl({ databaseUrl, listen: { host: "127.0.0.1", port: 0 }, opsListen: null, shutdownGraceMs: 1000, rolloutSweepIntervalMs: 0 });
const deployments = await seedBench(ctrl.store, 100);
const { token } = await issueClusterToken(ctrl.store, BENCH_REGION, "bench");
const now = (): number => performance.timeOrigin + performance.now();

/**
 * Writes `rate` changes/s for `seconds`; change `seq` sets replicas to `mark + seq`. Returns the
 * wall-clock commit time of each sequence number.
 */
async function paced(rate: number, seconds: number, mark: number): Promise<number[]> {
  const total = rate * seconds;
  const commits: number[] = new Array<number>(total + 1).fill(0);
  const start = performance.now();
  let issued = 0;
  const inflight = new Set<Promise<void>>();
  while (issued < total) {
    const due = Math.min(total, Math.floor(((performance.now() - start) / 1000) * rate) + 1);
    while (issued < due) {
      const seq = ++issued;
      const ctx = deployments[seq % deployments.length];
      if (!ctx) continue;
      const p = ctrl.store
        .write((tx) => setDesiredReplicas(tx, ctx, BENCH_REGION, mark + seq))
        .then(() => {
          commits[seq] = now();
        })
        .finally(() => inflight.delete(p));
      inflight.add(p);
    }
    await sleep(5);
  }
  await Promise.all(inflight);
  return commits;
}

process.on("message", (msg: Command) => {
  void (async () => {
    if (msg.type === "write") {
      // The warm-up's changes are streamed like any other but fall below BENCH_MARK, so the
      // readers do not count them.
      if (msg.warmupSeconds > 0) await paced(msg.rate, msg.warmupSeconds, 0);
      process.send?.({ type: "done", commits: await paced(msg.rate, msg.seconds, BENCH_MARK) });
    } else {
      await ctrl.close();
      process.disconnect?.();
      process.exit(0);
    }
  })();
});
process.send?.({ type: "ready", url: ctrl.url, token });

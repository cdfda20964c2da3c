// Child process of bench/ctrl/ctrl.ts: runs ctrl and a paced writer in a process of their own, so
// the streams' readers (in the parent) do not share ctrl's event loop. Talks over IPC:
//   parent → {write, rate, seconds, warmupSeconds, mark} → child writes (each change its own
//            transaction through the domain's setDesiredReplicas), then replies {done, commits}
//   parent → {stop} → child drains ctrl and exits
// Commit times are wall-clock milliseconds (timeOrigin + now) so the parent can compare them
// with its own receive times.
import { startTestCtrl } from "../../test/integration/ctrl/support.js";
import { paced, type WriteCommand } from "./ctrl-delivery.js";
import { BENCH_REGION, seedBench, setReplicas } from "./ctrl-store.js";

type Command = WriteCommand | { type: "stop" };

const databaseUrl = process.argv[2] ?? "";
// The seed writes desired replicas directly (this bench measures the outbox and its streams), so
// the rollout driver's sweep must not take those revisions over and rewrite their replicas.
const ctrl = await startTestCtrl(databaseUrl, {
  opsListen: null,
  shutdownGraceMs: 1000,
  rolloutSweepIntervalMs: 0,
});
const deployments = await seedBench(ctrl.store, 100);
const token = await ctrl.agentToken(BENCH_REGION, "bench");

/** Change `value` sets one of the seeded deployments to `value` replicas. */
function write(value: number): Promise<void> {
  const ctx = deployments[value % deployments.length];
  if (!ctx) throw new Error("no seeded deployment");
  return setReplicas(ctrl.store, ctx, value);
}

process.on("message", (msg: Command) => {
  void (async () => {
    if (msg.type === "write") {
      // The warm-up's changes are streamed like any other but fall below the step's mark, so
      // the readers do not count them.
      if (msg.warmupSeconds > 0) await paced(write, msg.rate, msg.warmupSeconds, 0);
      const cpu = process.cpuUsage();
      const run = await paced(write, msg.rate, msg.seconds, msg.mark);
      const used = process.cpuUsage(cpu);
      // ctrl's CPU per change over the step (its writes and its 10 streams): less sensitive to
      // a shared machine than latency.
      const cpuMsPerChange = (used.user + used.system) / 1000 / (msg.rate * msg.seconds);
      process.send?.({ type: "done", commits: run.commits, lastCommitMs: run.lastCommitMs, cpuMsPerChange });
    } else {
      await ctrl.close();
      process.disconnect?.();
      process.exit(0);
    }
  })();
});
process.send?.({ type: "ready", url: ctrl.url, token });

// `npm run bench -- rollout`: the rollout engine's throughput, then rollbacks on real nodes
// (./rollback.ts: instant against rolling against `kubectl rollout undo`).
// Engine throughput: passes per second for one environment with 100 revisions, in three
// situations (a rolling step mid-rollout, a proportional scaling event, a completed rollout
// resync with history cleanup), engine alone and with JSON parsing/validation.
//   npx tsx bench/rollout/rollout.ts   (KRANE_BENCH_ROLLOUT_ONLY=engine|rollback)
import { pathToFileURL } from "node:url";
import { benchRollback } from "./rollback.js";
import { parseRolloutInput, planRollout } from "../../src/rollout/index.js";
import type { RevisionInput, RolloutInput } from "../../src/rollout/index.js";

const REVISIONS = 100;
const T0 = Date.parse("2026-01-01T00:00:00Z");
const iso = (ms: number): string => new Date(ms).toISOString();

function environment(kind: "rolling" | "scaling" | "complete"): RolloutInput {
  const revisions: RevisionInput[] = [];
  for (let i = 1; i <= REVISIONS; i++) {
    // Revisions 1..98 are fully scaled down; 99 is the old one being replaced; 100 the target.
    const spec = kind === "complete" ? (i === REVISIONS ? 10 : 0) : i === REVISIONS - 1 ? 7 : i === REVISIONS ? 6 : 0;
    revisions.push({
      name: `v${i}`,
      revision: i,
      createdAt: iso(T0 - (REVISIONS - i) * 3_600_000),
      replicas: spec,
      desiredReplicas: 10,
      maxReplicas: 13,
      status: { replicas: spec, readyReplicas: spec, availableReplicas: spec },
    });
  }
  const done = kind === "complete";
  return {
    now: iso(T0),
    deployment: {
      name: "bench",
      replicas: kind === "scaling" ? 20 : 10,
      strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: "25%", maxUnavailable: 0 } },
      minReadySeconds: 0,
      progressDeadlineSeconds: 600,
      revisionHistoryLimit: 10,
      paused: false,
      target: `v${REVISIONS}`,
      rollbackTo: null,
      status: {
        replicas: done ? 10 : 13,
        updatedReplicas: done ? 10 : 6,
        readyReplicas: done ? 10 : 13,
        availableReplicas: done ? 10 : 13,
        unavailableReplicas: 0,
      },
      conditions: [
        {
          type: "Progressing",
          status: "True",
          reason: "ReplicaSetUpdated",
          message: `ReplicaSet "v${REVISIONS}" is progressing.`,
          lastUpdateTime: iso(T0 - 60_000),
          lastTransitionTime: iso(T0 - 600_000),
        },
      ],
    },
    revisions,
  };
}

function measure(run: () => void, ms = 1000): number {
  for (let i = 0; i < 200; i++) run(); // warm-up
  let passes = 0;
  const start = performance.now();
  let elapsed = 0;
  while (elapsed < ms) {
    for (let i = 0; i < 100; i++) run();
    passes += 100;
    elapsed = performance.now() - start;
  }
  return (passes * 1000) / elapsed;
}

export async function benchRollout(): Promise<void> {
  const only = process.env.KRANE_BENCH_ROLLOUT_ONLY;
  if (only !== "rollback") benchEngine();
  if (only !== "engine") await benchRollback();
}

function benchEngine(): void {
  console.log(`rollout engine, ${REVISIONS} revisions per environment (passes per second):`);
  for (const kind of ["rolling", "scaling", "complete"] as const) {
    const input = environment(kind);
    const json = JSON.stringify(input);
    const engine = measure(() => planRollout(input));
    const withParse = measure(() => planRollout(parseRolloutInput(JSON.parse(json))));
    console.log(
      `  ${kind.padEnd(9)} engine ${Math.round(engine).toLocaleString("en-US").padStart(9)}/s` +
        `   parse+validate+engine ${Math.round(withParse).toLocaleString("en-US").padStart(9)}/s`,
    );
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await benchRollout();
}

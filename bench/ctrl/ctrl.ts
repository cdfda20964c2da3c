// ctrl benchmarks, on SQLite and PostgreSQL (a throwaway server from the Debian binaries):
//
//   npm run bench -- ctrl          (or npx tsx bench/ctrl/ctrl.ts)
//
// - Delivery against the database's own limit: in the same run and on the same server, a bare
//   loop (bench/ctrl/ctrl-bare.ts: one INSERT and one NOTIFY per transaction through `pg`, received by
//   10 LISTEN connections; for SQLite one insert per transaction with an in-process wake-up and
//   10 in-process readers) and ctrl (bench/ctrl/ctrl-server.ts: each change its own transaction
//   through the domain, received by 10 agent streams over HTTP/2 in this process). Both are
//   driven by the same open-loop paced writer (bench/ctrl/ctrl-delivery.ts); the rate steps up
//   (100, 250, 500, 1,000, 1,250, 1,500, 2,000, 2,500/s …, steps of at most a third) until a rate
//   (tried twice) misses a change, cannot commit at the rate, or has p99 > 50 ms; the answer is
//   the highest rate that passed. Latency = wall-clock receive time − wall-clock commit time.
//   First, the same search on the floor (bench/ctrl/ctrl-floor.ts): no database, the server only
//   encodes each change once and writes it to the same 10 streams, so the bench can tell the
//   wire's and the receivers' share of the limit on this machine from ctrl's.
//   KRANE_BENCH_STREAMS=N changes the number of streams (default 10).
// - Write throughput: single-change transactions as fast as the store takes them.
// - Scale (bench/ctrl/ctrl-scale.ts): 10,000 and 100,000 deployments over 10 regions
//   (KRANE_BENCH_CTRL_N=10000,100000): ctrl start-up, RSS, one region's snapshot, the CLI list,
//   the rollout driver's idle cost. `KRANE_BENCH_CTRL_ONLY=scale npx tsx bench/ctrl/ctrl.ts` runs only it;
//   `KRANE_BENCH_CTRL_ONLY=delivery npx tsx bench/ctrl/ctrl.ts` only the delivery comparison.
//
// Every line carries the machine's 1-minute load average: the machine may be shared.
import { benchCtrlInline } from "./ctrl-inline.js";
import { fork, type ChildProcess } from "node:child_process";
import { EventEmitter, once } from "node:events";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { createClient } from "@connectrpc/connect";
import pg from "pg";
import { ClusterService } from "../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { startPostgres } from "../../test/support/postgres.js";
import { tempDir, transportFor } from "../../test/integration/ctrl/support.js";
import {
  BARE_CHANNEL,
  deliveryStats,
  judge,
  P99_LIMIT_MS,
  StreamRecorder,
  STEP_SPAN,
  STREAMS,
  stepUp,
  type DeliveryStats,
  type StepResult,
  type WriteCommand,
} from "./ctrl-delivery.js";
import { benchCtrlScale } from "./ctrl-scale.js";
import { BENCH_REGION, seedBench, setReplicas, withStore } from "./ctrl-store.js";
import { ensureBuild, load } from "../support.js";

function fmt(ms: number): string {
  return `${ms.toFixed(2)} ms`;
}

type ChildMessage =
  | { type: "ready"; url?: string; token?: string }
  | { type: "done"; commits: number[]; lastCommitMs: number; stats?: DeliveryStats; cpuMsPerChange?: number };

/** A child process (ctrl's or the bare loop's) that writes paced changes on command. */
class Writer {
  readonly messages = new EventEmitter();
  readonly child: ChildProcess;
  readonly exited: Promise<unknown>;

  constructor(script: string, target: string) {
    const prof = process.env.KRANE_BENCH_CPU_PROF;
    this.child = fork(new URL(script, import.meta.url).pathname, [target], {
      execArgv: [
        "--import",
        "tsx",
        ...(prof ? ["--cpu-prof", `--cpu-prof-dir=${prof}`] : []),
        // V8 flags for the writer (ctrl, or the bare loop) alone, e.g. "--max-semi-space-size=32".
        ...(process.env.KRANE_BENCH_WRITER_FLAGS ?? "").split(" ").filter(Boolean),
      ],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    this.child.on("message", (m: ChildMessage) => this.messages.emit(m.type, m));
    this.exited = once(this.child, "exit");
  }

  async ready(): Promise<Extract<ChildMessage, { type: "ready" }>> {
    const [m] = (await once(this.messages, "ready")) as [Extract<ChildMessage, { type: "ready" }>];
    return m;
  }

  async write(cmd: WriteCommand): Promise<Extract<ChildMessage, { type: "done" }>> {
    this.child.send(cmd);
    const [m] = (await once(this.messages, "done")) as [Extract<ChildMessage, { type: "done" }>];
    return m;
  }

  async stop(): Promise<void> {
    if (this.child.connected) this.child.send({ type: "stop" });
    await this.exited;
  }
}

/** The 10 streams a step is judged by, open for the whole step-up. */
interface Streams {
  recorder: StreamRecorder;
  close(): Promise<void>;
}

/** 10 agent streams on ctrl's WatchDeployments, each on its own HTTP/2 connection; resolves once every snapshot ended. */
async function ctrlStreams(url: string, token: string): Promise<Streams> {
  const recorder = new StreamRecorder(STREAMS);
  const ac = new AbortController();
  const started: Promise<void>[] = [];
  const readers = Array.from({ length: STREAMS }, (_, s) => {
    let snapshotDone: () => void = () => undefined;
    started.push(new Promise((r) => (snapshotDone = r)));
    const client = createClient(ClusterService, transportFor(url, token));
    return (async () => {
      try {
        for await (const m of client.watchDeployments(
          { region: BENCH_REGION, versionLastSeen: 0n },
          { signal: ac.signal },
        )) {
          if (m.state.case === "snapshotEnd") snapshotDone();
          if (m.version !== 0n && m.state.case === "apply") recorder.saw(s, m.state.value.replicas);
        }
      } catch {
        // aborted
      }
    })();
  });
  await Promise.all(started);
  return {
    recorder,
    async close() {
      ac.abort();
      await Promise.all(readers);
    },
  };
}

/** 10 LISTEN connections on the bare loop's channel, with the same client library (pg). */
async function listenStreams(url: string): Promise<Streams> {
  const recorder = new StreamRecorder(STREAMS);
  const clients = await Promise.all(
    Array.from({ length: STREAMS }, async (_, s) => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      c.on("notification", (n) => {
        const value = Number((n.payload ?? "").split(":")[1]);
        recorder.saw(s, value);
      });
      await c.query(`LISTEN ${BARE_CHANNEL}`);
      return c;
    }),
  );
  return {
    recorder,
    async close() {
      await Promise.all(clients.map((c) => c.end()));
    },
  };
}

/** Seconds measured per step, after a warm-up at the same rate (3 s before the first step, 1 s before the others). */
const STEP_SECONDS = 3;

/**
 * What delivers the changes: ctrl; the bare database loop; or the floor (bench/ctrl/ctrl-floor.ts: no
 * database, the server only encodes each change once and writes it to the same 10 streams).
 */
type DeliverySystem = "ctrl" | "bare" | "floor";
const SCRIPTS: Record<DeliverySystem, string> = {
  ctrl: "./ctrl-server.ts",
  bare: "./ctrl-bare.ts",
  floor: "./ctrl-floor.ts",
};

/**
 * Steps the change rate up on one system ("ctrl" or the bare loop) until 10 streams miss a
 * change or their p99 passes 50 ms; answers the highest rate that passed and every step.
 */
async function deliveryLimit(
  system: DeliverySystem,
  databaseUrl: string,
  rates?: number[],
): Promise<{ best: number; steps: MeasuredStep[] }> {
  const writer = new Writer(SCRIPTS[system], databaseUrl);
  let streams: Streams | null = null;
  try {
    const ready = await writer.ready();
    if (system !== "bare") streams = await ctrlStreams(ready.url ?? "", ready.token ?? "");
    else if (databaseUrl.startsWith("postgres")) streams = await listenStreams(databaseUrl);
    const s = streams;
    return await stepUp(async (rate, mark) => {
      const total = rate * STEP_SECONDS;
      s?.recorder.begin(mark, total);
      // The first step warms a fresh process up longer (JIT, caches): a single start-up stall
      // would otherwise decide the p99 of a slow step.
      const cpu = process.cpuUsage();
      const done = await writer.write({
        type: "write",
        rate,
        seconds: STEP_SECONDS,
        warmupSeconds: mark === STEP_SPAN ? 3 : 1,
        mark,
      });
      const stats = done.stats ?? deliveryStats(done.commits, s ? await s.recorder.settle(5_000) : []);
      // The receiving side's CPU per message (this process: ctrl's 10 agent streams; warm-up
      // messages included, as they are received too).
      const used = process.cpuUsage(cpu);
      const received = ((mark === STEP_SPAN ? 3 : 1) + STEP_SECONDS) * rate * STREAMS;
      const readerUsPerMessage = system !== "bare" ? (used.user + used.system) / received : undefined;
      return { ...judge(rate, STEP_SECONDS, done, stats), cpuMsPerChange: done.cpuMsPerChange, readerUsPerMessage };
    }, rates);
  } finally {
    await streams?.close();
    await writer.stop();
  }
}

type MeasuredStep = StepResult & { cpuMsPerChange?: number; readerUsPerMessage?: number };

function stepLine(r: MeasuredStep): string {
  const cpu = r.cpuMsPerChange === undefined ? "" : `, ${r.cpuMsPerChange.toFixed(3)} ms CPU/change`;
  return `${r.rate}/s ${r.ok ? "ok" : "FAIL"} (p99 ${fmt(r.p99)}${cpu}${r.ok ? "" : `; ${r.why}`})`;
}

/** Single-change transactions as fast as possible with `concurrency` writers. */
async function throughput(databaseUrl: string, total: number, concurrency: number): Promise<number> {
  return withStore(databaseUrl, async (store) => {
    const targets = await seedBench(store, 100);
    let next = 0;
    const start = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < total) {
          const replicas = ++next;
          const ctx = targets[replicas % targets.length];
          if (ctx) await setReplicas(store, ctx, replicas);
        }
      }),
    );
    return total / ((performance.now() - start) / 1000);
  });
}

export async function benchCtrl(only?: "delivery"): Promise<void> {
  ensureBuild();
  benchCtrlInline();
  const dir = tempDir("krane-bench-ctrl-");
  const postgres = await startPostgres();
  try {
    const dbs: [string, () => Promise<string>][] = [
      ["SQLite", async () => join(dir.path, `${Math.random().toString(36).slice(2)}.db`)],
      ["PostgreSQL", () => postgres.newDatabase()],
    ];
    // The floor first: what the wire and the 10 receivers take on this machine when the server
    // only encodes each change once and writes it to every stream (no database). No ctrl can
    // deliver faster than this here, whatever the database.
    const floor = await deliveryLimit("floor", "");
    console.log(`ctrl floor: no database ${floor.steps.map(stepLine).join(", ")}   (${load()})`);
    // Delivery against the database's own limit: the bare loop and ctrl on the same server, in
    // the same run, each on a fresh database.
    for (const [name, url] of dbs) {
      const bare = await deliveryLimit("bare", await url());
      console.log(`ctrl ${name}: bare loop  ${bare.steps.map(stepLine).join(", ")}   (${load()})`);
      const krane = await deliveryLimit("ctrl", await url());
      console.log(`ctrl ${name}: ctrl       ${krane.steps.map(stepLine).join(", ")}   (${load()})`);
      const ratio = (a: number, b: number): string => (b > 0 ? (a / b).toFixed(2) : "n/a");
      console.log(
        `ctrl ${name}: highest rate at which ${STREAMS} streams receive every change with p99 ≤ ${P99_LIMIT_MS} ms: bare loop ${bare.best}/s, ctrl ${krane.best}/s (${ratio(krane.best, bare.best)}× the bare loop); ` +
          `the floor (no database, same streams) ${floor.best}/s = ${ratio(floor.best, bare.best)}× the bare loop, ctrl ${ratio(krane.best, floor.best)}× the floor (target ≥ 0.8)   (${load()})`,
      );
      // ctrl's own CPU per change (its write transaction and its 10 streams) at its best rate:
      // what a ctrl on its own machine pays per change under load (at low rates the fixed
      // costs of timers and idle streams dominate the figure).
      const cpuAt = (rate: number): string => {
        const v = krane.steps.filter((st) => st.rate === rate).at(-1)?.cpuMsPerChange;
        return v === undefined ? "n/a" : `${(v * 1000).toFixed(0)} µs`;
      };
      console.log(
        `ctrl ${name}: ctrl's CPU per change (its write and its 10 streams): ${cpuAt(krane.best)} at its best rate ${krane.best}/s   (${load()})`,
      );
      // What half the bare loop's rate would ask of the receiving agents alone, at the CPU per
      // message they used at ctrl's best rate: more than the machine's cores says that no ctrl
      // could reach it here, whatever its own cost.
      const atBest = krane.steps.filter((st) => st.ok && st.rate === krane.best).at(-1)?.readerUsPerMessage;
      if (atBest !== undefined && bare.best > 0) {
        const need = ((bare.best / 2) * STREAMS * atBest) / 1e6;
        console.log(
          `ctrl ${name}: the ${STREAMS} agent streams received each message for ${atBest.toFixed(1)} µs CPU; half the bare loop's rate (${bare.best / 2}/s × ${STREAMS} streams) would take ${need.toFixed(2)} CPU-seconds a second for receiving alone, on a ${availableParallelism()}-core machine   (${load()})`,
        );
      }
    }
    if (only === "delivery") return;
    for (const [name, url] of dbs) {
      const sequential = await throughput(await url(), 3000, 1);
      const parallel = await throughput(await url(), 5000, 8);
      console.log(
        `ctrl ${name}: write throughput (one change per transaction): ${sequential.toFixed(0)} changes/s with 1 writer, ${parallel.toFixed(0)} changes/s with 8 writers   (${load()})`,
      );
    }
    const sizes = (process.env.KRANE_BENCH_CTRL_N ?? "10000,100000")
      .split(",")
      .map(Number)
      .filter((n) => n > 0);
    for (const [name, url] of dbs) {
      for (const n of sizes) await benchCtrlScale(name, await url(), n, await url());
    }
  } finally {
    await postgres.stop();
    dir.remove();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  if (process.env.KRANE_BENCH_PROBE) {
    // One system on one database at chosen rates, for looking into delivery:
    //   KRANE_BENCH_PROBE=sqlite|postgres  KRANE_BENCH_SYSTEM=ctrl|bare|floor  KRANE_BENCH_RATES=1000,2000
    //   (any run: KRANE_BENCH_CPU_PROF=<dir> profiles the writer, KRANE_BENCH_WRITER_FLAGS="--trace-gc" passes it V8 flags)
    const dir = tempDir("krane-bench-ctrl-");
    const postgres = process.env.KRANE_BENCH_PROBE === "postgres" ? await startPostgres() : null;
    try {
      const url = postgres ? await postgres.newDatabase() : join(dir.path, "probe.db");
      const asked = process.env.KRANE_BENCH_SYSTEM;
      const system: DeliverySystem = asked === "bare" || asked === "floor" ? asked : "ctrl";
      const rates = (process.env.KRANE_BENCH_RATES ?? "1000").split(",").map(Number);
      const r = await deliveryLimit(system, url, rates);
      for (const st of r.steps)
        console.log(
          `${system} ${process.env.KRANE_BENCH_PROBE}: ${stepLine(st)}, p50 ${fmt(st.p50)}, committed ${st.committedRate.toFixed(0)}/s${st.readerUsPerMessage === undefined ? "" : `, readers ${st.readerUsPerMessage.toFixed(1)} µs/message`}   (${load()})`,
        );
    } finally {
      await postgres?.stop();
      dir.remove();
    }
  } else if (process.env.KRANE_BENCH_CTRL_ONLY === "scale") {
    const dir = tempDir("krane-bench-ctrl-");
    const postgres = await startPostgres();
    try {
      const sizes = (process.env.KRANE_BENCH_CTRL_N ?? "10000,100000")
        .split(",")
        .map(Number)
        .filter((n) => n > 0);
      const dbs = process.env.KRANE_BENCH_CTRL_DBS ?? "sqlite,postgres";
      if (dbs.includes("sqlite"))
        for (const n of sizes)
          await benchCtrlScale("SQLite", join(dir.path, `scale-${n}.db`), n, join(dir.path, `empty-${n}.db`));
      if (dbs.includes("postgres"))
        for (const n of sizes)
          await benchCtrlScale("PostgreSQL", await postgres.newDatabase(), n, await postgres.newDatabase());
    } finally {
      await postgres.stop();
      dir.remove();
    }
  } else {
    await benchCtrl(process.env.KRANE_BENCH_CTRL_ONLY === "delivery" ? "delivery" : undefined);
  }
}

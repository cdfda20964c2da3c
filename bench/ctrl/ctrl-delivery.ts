// Delivery against the database's own limit (bench/ctrl/ctrl.ts): the paced writer both child
// processes run (ctrl's in bench/ctrl/ctrl-server.ts, the bare loop's in bench/ctrl/ctrl-bare.ts), the
// streams' delivery statistics, and the step-up search for the highest change rate at which 10
// streams receive every change with p99 ≤ 50 ms.
//
// Each change carries a value: step k writes mark_k + 1 … mark_k + total (its warm-up writes
// values below the first mark), so the streams, which stay open from step to step, can tell the
// changes of the step being measured from the others.
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { pct } from "../support.js";

/** The NOTIFY channel of the bare PostgreSQL loop. */
export const BARE_CHANNEL = "krane_bare";
/** Values of one step: mark + 1 … mark + total, with total < STEP_SPAN. */
export const STEP_SPAN = 1_000_000;
/** The latency every delivery must stay under, at the 99th percentile. */
export const P99_LIMIT_MS = 50;
export const STREAMS = Number(process.env.KRANE_BENCH_STREAMS ?? 10);

export interface WriteCommand {
  type: "write";
  rate: number;
  seconds: number;
  warmupSeconds: number;
  mark: number;
}

export interface PacedRun {
  /** Wall-clock commit time (ms) of each value mark + i, index i (1-based). */
  commits: number[];
  /** When the last write committed, relative to the start of the run (ms). */
  lastCommitMs: number;
}

const wallNow = (): number => performance.timeOrigin + performance.now();

/**
 * Writes `rate` changes a second for `seconds`, change i with value mark + i, each its own
 * transaction, issued on schedule whether or not earlier ones have committed (an open-loop
 * load, as from many clients); `write` resolves when its change committed, with the commit's
 * wall-clock time when it knows it better than its resolution does (a synchronous driver).
 */
export async function paced(
  write: (value: number) => Promise<number | void>,
  rate: number,
  seconds: number,
  mark: number,
): Promise<PacedRun> {
  const total = rate * seconds;
  const commits: number[] = new Array<number>(total + 1).fill(0);
  const start = performance.now();
  let issued = 0;
  let last = 0;
  const inflight = new Set<Promise<void>>();
  while (issued < total) {
    const due = Math.min(total, Math.floor(((performance.now() - start) / 1000) * rate) + 1);
    while (issued < due) {
      const seq = ++issued;
      const p = write(mark + seq)
        .then((at) => {
          commits[seq] = typeof at === "number" ? at : wallNow();
          last = performance.now();
        })
        .finally(() => inflight.delete(p));
      inflight.add(p);
    }
    await sleep(2);
  }
  await Promise.all(inflight);
  return { commits, lastCommitMs: last - start };
}

export interface DeliveryStats {
  p50: number;
  p99: number;
  max: number;
  delivered: number;
  expected: number;
}

/** Latency (receive − commit) over every stream and change; `received[s][i]` is 0 when never received. */
export function deliveryStats(commits: readonly number[], received: readonly (readonly number[])[]): DeliveryStats {
  const latencies: number[] = [];
  let delivered = 0;
  const total = commits.length - 1;
  for (const times of received) {
    for (let i = 1; i <= total; i++) {
      const at = times[i] ?? 0;
      const c = commits[i] ?? 0;
      if (at > 0) delivered++;
      if (at > 0 && c > 0) latencies.push(Math.max(0, at - c));
    }
  }
  latencies.sort((a, b) => a - b);
  return {
    p50: pct(latencies, 50),
    p99: pct(latencies, 99),
    max: latencies[latencies.length - 1] ?? NaN,
    delivered,
    expected: total * received.length,
  };
}

/** Receive times of the step being measured, per stream; streams call `saw` for every value they get. */
export class StreamRecorder {
  #mark = -1;
  #total = 0;
  #times: number[][] = [];
  #complete = 0;
  #waiter: (() => void) | undefined;

  constructor(readonly streams: number) {}

  begin(mark: number, total: number): void {
    this.#mark = mark;
    this.#total = total;
    this.#complete = 0;
    this.#times = Array.from({ length: this.streams }, () => new Array<number>(total + 1).fill(0));
  }

  saw(stream: number, value: number): void {
    const i = value - this.#mark;
    if (this.#mark < 0 || i < 1 || i > this.#total) return;
    const times = this.#times[stream];
    if (!times || (times[i] ?? 0) > 0) return;
    times[i] = wallNow();
    if (++this.#complete === this.#total * this.streams) this.#waiter?.();
  }

  /** Resolves when every stream has every change of the step, or after `ms`. */
  async settle(ms: number): Promise<number[][]> {
    if (this.#complete < this.#total * this.streams) {
      await Promise.race([new Promise<void>((r) => (this.#waiter = r)), sleep(ms)]);
    }
    this.#waiter = undefined;
    const out = this.#times;
    this.#mark = -1;
    return out;
  }
}

export interface StepResult extends DeliveryStats {
  rate: number;
  /** Changes committed per second over the step (below the rate when the writer saturates). */
  committedRate: number;
  ok: boolean;
  why: string;
}

/** Judges one step: every change to every stream, p99 within the limit, the writer keeping up. */
export function judge(rate: number, seconds: number, run: PacedRun, stats: DeliveryStats): StepResult {
  const committedRate = (rate * seconds) / Math.max(seconds, run.lastCommitMs / 1000);
  let why = "";
  if (committedRate < rate * 0.95) why = `the writer committed only ${committedRate.toFixed(0)}/s`;
  else if (stats.delivered < stats.expected)
    why = `${stats.expected - stats.delivered} of ${stats.expected} deliveries missing`;
  else if (!(stats.p99 <= P99_LIMIT_MS)) why = `p99 ${stats.p99.toFixed(1)} ms`;
  return { ...stats, rate, committedRate, ok: why === "", why };
}

/** Rates tried, in order, until one fails. */
// Steps of at most a third above the one before from 1,000/s up, so a ratio of two limits is
// not an artefact of where the steps fall.
export const RATES = [
  100, 250, 500, 1000, 1250, 1500, 2000, 2500, 3000, 4000, 5000, 6000, 8000, 10000, 12000, 16000, 20000, 24000, 32000,
  40000, 48000, 64000,
];

/**
 * Steps the rate up until a rate fails twice in a row (or the list ends); the answer is the
 * highest rate that passed (0 when none did) and every step's figures.
 */
export async function stepUp(
  runStep: (rate: number, mark: number) => Promise<StepResult>,
  rates = RATES,
): Promise<{ best: number; steps: StepResult[] }> {
  const steps: StepResult[] = [];
  let best = 0;
  let k = 0;
  for (const rate of rates) {
    // A failed step is tried once more: one stall (a GC, the shared machine) should not end the
    // search; two failures at a rate do.
    let r = await runStep(rate, ++k * STEP_SPAN);
    steps.push(r);
    if (!r.ok) {
      r = await runStep(rate, ++k * STEP_SPAN);
      steps.push(r);
    }
    if (!r.ok) break;
    best = rate;
  }
  return { best, steps };
}

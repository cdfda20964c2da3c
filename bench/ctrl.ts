// ctrl benchmarks: commit-to-stream delivery latency under load, write throughput, and a large
// snapshot, on SQLite and PostgreSQL (a throwaway server from the Debian binaries).
//
//   npx tsx bench/ctrl.ts          (or through the bench harness: benchCtrl())
//
// For looking into latency, one run of the latency part alone:
//   KRANE_BENCH_PROBE=sqlite|postgres  which database        KRANE_BENCH_RATE     changes/s (1000)
//   KRANE_BENCH_WARMUP=<s>             warm-up first (0)     KRANE_BENCH_BUCKETS=1  worst latency per 250 ms
//   KRANE_BENCH_CPU_PROF=<dir>         write a V8 CPU profile of ctrl's process there
//
// Latency: 10 agent streams (each on its own HTTP/2 connection, in this process) watch one
// region while ctrl and a writer paced at 1,000 changes/s run in a child process (each change
// its own transaction, spread over 100 deployments); latency = wall-clock time a stream
// receives a change - wall-clock time its transaction committed. Measured twice: after 3 s of
// the same load (steady state) and from a cold start. Throughput: single-change transactions
// as fast as the store takes them. Snapshot: 10,000 deployments desired in one region, streamed
// from a `krane ctrl serve` child process whose resident memory is sampled meanwhile.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { createClient } from "@connectrpc/connect";
import { ClusterService } from "../src/gen/krane/ctrl/v1/cluster_pb.js";
import { fork } from "node:child_process";
import { EventEmitter, once } from "node:events";
import { issueClusterToken } from "../src/ctrl/domain/clusters.js";
import { setDesiredReplicas } from "../src/ctrl/domain/deployments.js";
import { Store } from "../src/ctrl/db/store.js";
import { BENCH_MARK, BENCH_REGION, seedBench } from "./ctrl-seed.js";
import { startPostgres } from "../test/support/postgres.js";
import { spawnCtrl } from "../test/integration/ctrl/process.js";
import { tempDir, transportFor } from "../test/integration/ctrl/support.js";

function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

function fmt(ms: number): string {
  return `${ms.toFixed(2)} ms`;
}

/** 10 streams in this process, ctrl and a writer paced at `rate`/s in a child process. */
async function latency(databaseUrl: string, rate: number, seconds: number, warmupSeconds: number, streams = 10): Promise<{ p50: number; p99: number; max: number; delivered: number; expected: number }> {
  const child = fork(new URL("./ctrl-server.ts", import.meta.url).pathname, [databaseUrl], { execArgv: ["--import", "tsx", ...(process.env.KRANE_BENCH_CPU_PROF ? ["--cpu-prof", `--cpu-prof-dir=${process.env.KRANE_BENCH_CPU_PROF}`] : [])], stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const messages = new EventEmitter();
  child.on("message", (m: ChildMessage) => messages.emit(m.type, m));
  const exited = once(child, "exit");
  try {
    const [ready] = (await once(messages, "ready")) as [Extract<ChildMessage, { type: "ready" }>];
    const total = rate * seconds;
    const received: number[][] = [];
    const ac = new AbortController();
    const started: Promise<void>[] = [];
    const readers = Array.from({ length: streams }, () => {
      let snapshotDone: () => void = () => undefined;
      started.push(new Promise((r) => (snapshotDone = r)));
      const times: number[] = new Array<number>(total + 1).fill(0);
      received.push(times);
      const client = createClient(ClusterService, transportFor(ready.url, ready.token));
      return (async () => {
        let seen = 0;
        try {
          for await (const m of client.watchDeployments({ region: BENCH_REGION, versionLastSeen: 0n }, { signal: ac.signal })) {
            if (m.state.case === "snapshotEnd") snapshotDone();
            if (m.version === 0n || m.state.case !== "apply") continue;
            const seq = m.state.value.replicas - BENCH_MARK;
            if (seq < 1 || seq > total || (times[seq] ?? 0) > 0) continue;
            times[seq] = performance.timeOrigin + performance.now();
            if (++seen === total) return;
          }
        } catch {
          // aborted
        }
      })();
    });
    await Promise.all(started);
    child.send({ type: "write", rate, seconds, warmupSeconds });
    const [done] = (await once(messages, "done")) as [Extract<ChildMessage, { type: "done" }>];
    await Promise.race([Promise.all(readers), sleep(30_000)]);
    ac.abort();
    const latencies: number[] = [];
    let delivered = 0;
    for (const times of received) {
      for (let i = 1; i <= total; i++) {
        const at = times[i] ?? 0;
        const committed = done.commits[i] ?? 0;
        if (at > 0) delivered++;
        if (at > 0 && committed > 0) latencies.push(Math.max(0, at - committed));
      }
    }
    if (process.env.KRANE_BENCH_BUCKETS) {
      // Probe aid: the worst latency per 250 ms of commit time, to tell steady load from spikes.
      const t0 = Math.min(...done.commits.filter((c) => c > 0));
      const worst = new Map<number, number>();
      for (const times of received) {
        for (let i = 1; i <= total; i++) {
          const at = times[i] ?? 0;
          const c = done.commits[i] ?? 0;
          if (at > 0 && c > 0) worst.set(Math.floor((c - t0) / 250), Math.max(worst.get(Math.floor((c - t0) / 250)) ?? 0, at - c));
        }
      }
      console.log([...worst].sort((a, b) => a[0] - b[0]).map(([b, w]) => `${b * 250}ms:${w.toFixed(0)}`).join(" "));
    }
    latencies.sort((x, y) => x - y);
    return { p50: pct(latencies, 50), p99: pct(latencies, 99), max: latencies[latencies.length - 1] ?? NaN, delivered, expected: total * streams };
  } finally {
    if (child.connected) child.send({ type: "stop" });
    await exited;
  }
}

type ChildMessage = { type: "ready"; url: string; token: string } | { type: "done"; commits: number[] };

/** Single-change transactions as fast as possible with `concurrency` writers. */
async function throughput(databaseUrl: string, total: number, concurrency: number): Promise<number> {
  const store = await Store.open({ url: databaseUrl });
  try {
    const targets = await seedBench(store, 100);
    let next = 0;
    const start = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < total) {
          const replicas = ++next;
          const ctx = targets[replicas % targets.length];
          if (ctx) await store.write((tx) => setDesiredReplicas(tx, ctx, BENCH_REGION, replicas));
        }
      }),
    );
    return total / ((performance.now() - start) / 1000);
  } finally {
    await store.close();
  }
}

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** 10,000 deployments in one region, streamed as a snapshot from a ctrl child process. */
async function snapshot(databaseUrl: string, count: number): Promise<{ ms: number; messages: number; baseRss: number; peakRss: number }> {
  const store = await Store.open({ url: databaseUrl });
  let token: string;
  try {
    await seedBench(store, count);
    token = (await issueClusterToken(store, BENCH_REGION, "snap")).token;
  } finally {
    await store.close();
  }
  const proc = await spawnCtrl(["--database", databaseUrl, "--log-level", "info"]);
  try {
    const pid = proc.child.pid ?? 0;
    await sleep(500);
    const baseRss = rssMiB(pid);
    let peakRss = baseRss;
    const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssMiB(pid))), 5);
    const client = createClient(ClusterService, transportFor(proc.url, token));
    const start = performance.now();
    let messages = 0;
    for await (const m of client.watchDeployments({ region: BENCH_REGION, versionLastSeen: 0n })) {
      messages++;
      if (m.state.case === "snapshotEnd") break;
    }
    const ms = performance.now() - start;
    clearInterval(sampler);
    peakRss = Math.max(peakRss, rssMiB(pid));
    return { ms, messages, baseRss, peakRss };
  } finally {
    await proc.stop();
  }
}

export async function benchCtrl(): Promise<void> {
  const dir = tempDir("krane-bench-ctrl-");
  const pg = await startPostgres();
  try {
    const dbs: [string, () => Promise<string>][] = [
      ["SQLite", async () => join(dir.path, `${Math.random().toString(36).slice(2)}.db`)],
      ["PostgreSQL", () => pg.newDatabase()],
    ];
    for (const [name, url] of dbs) {
      // Steady state (a ctrl that has run the same load for 3 s: JIT-compiled, database caches
      // warm) and a cold start (measuring from the first write after start).
      for (const warmup of [3, 0]) {
        const l = await latency(await url(), 1000, 5, warmup);
        console.log(
          `ctrl ${name}: delivery latency, 10 streams, 1,000 changes/s for 5 s, ${warmup > 0 ? "steady" : "cold start"}: p50 ${fmt(l.p50)}, p99 ${fmt(l.p99)}, max ${fmt(l.max)} (${l.delivered}/${l.expected} delivered)`,
        );
      }
    }
    for (const [name, url] of dbs) {
      const sequential = await throughput(await url(), 3000, 1);
      const parallel = await throughput(await url(), 5000, 8);
      console.log(`ctrl ${name}: write throughput (one change per transaction): ${sequential.toFixed(0)} changes/s with 1 writer, ${parallel.toFixed(0)} changes/s with 8 writers`);
    }
    for (const [name, url] of dbs) {
      const s = await snapshot(await url(), 10_000);
      console.log(
        `ctrl ${name}: snapshot of 10,000 deployments: ${fmt(s.ms)} to stream ${s.messages} messages; ctrl RSS ${s.baseRss.toFixed(0)} MiB before, peak ${s.peakRss.toFixed(0)} MiB`,
      );
    }
  } finally {
    await pg.stop();
    dir.remove();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  if (process.env.KRANE_BENCH_PROBE) {
    const rate = Number(process.env.KRANE_BENCH_RATE ?? 1000);
    const dir = tempDir("krane-bench-ctrl-");
    const pg = process.env.KRANE_BENCH_PROBE === "postgres" ? await startPostgres() : null;
    try {
      const url = pg ? await pg.newDatabase() : join(dir.path, "probe.db");
      console.log(process.env.KRANE_BENCH_PROBE, rate, await latency(url, rate, 5, Number(process.env.KRANE_BENCH_WARMUP ?? 0)));
    } finally {
      await pg?.stop();
      dir.remove();
    }
  } else {
    await benchCtrl();
  }
}

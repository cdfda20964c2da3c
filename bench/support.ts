// Small helpers shared by the scale benchmarks (agent, ctrl): waiting, percentiles, a process's
// memory and CPU time from /proc, Prometheus text sums, the machine's load beside each figure,
// and making sure `dist/` is the build the benchmarks run (processes run as shipped, not through
// tsx).
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { podAddressMap, type PodNetwork } from "../src/cluster/pod-network.js";

export const ROOT = fileURLToPath(new URL("../", import.meta.url));
export const KRANE_BIN = fileURLToPath(new URL("../bin/krane.js", import.meta.url));

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const a = s.address();
      s.close(() => (typeof a === "object" && a ? resolve(a.port) : reject(new Error("no port"))));
    });
  });
}

/**
 * Polls `check` every `stepMs` until it gives a value — anything but undefined or false — and
 * answers it. A check that throws ends the wait, unless `retryErrors` (a server still starting:
 * the throw counts as "not yet").
 */
export async function until<T>(
  what: string,
  check: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs: number,
  stepMs = 20,
  retryErrors = false,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let v: T | undefined | false;
    try {
      v = await check();
    } catch (err) {
      if (!retryErrors) throw err;
      v = undefined;
    }
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`bench: timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

/** The p-th percentile (nearest rank) of ascending values. */
export function pct(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
}

/** The p-th percentile (nearest rank) of values in any order. */
export function percentileOf(values: readonly number[], p: number): number {
  return pct(
    [...values].sort((a, b) => a - b),
    p,
  );
}

/** Resident memory of a process, MiB (NaN when it is gone). */
export function rssMiB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** CPU time (user + system) a process has used so far, in seconds (0 when it is gone). */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name, which is in parentheses and may contain spaces.
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const ticks = Number(rest[11]) + Number(rest[12]);
    return ticks / 100;
  } catch {
    return 0;
  }
}

/** The sum of a metric's samples in Prometheus text, over the label sets `filter` accepts. */
export function metricSumOf(text: string, name: string, filter: (labels: string) => boolean = () => true): number {
  let sum = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$/.exec(line);
    if (m && m[1] === name && filter(m[2] ?? "")) sum += Number(m[3]);
  }
  return sum;
}

export async function metricSum(opsUrl: string, name: string, filter?: (labels: string) => boolean): Promise<number> {
  return metricSumOf(await (await fetch(`${opsUrl}/metrics`)).text(), name, filter);
}

/** "load 1.23" — the 1-minute load average, printed beside every figure (the machine is shared). */
export function load(): string {
  return `load ${(loadavg()[0] ?? 0).toFixed(2)}`;
}

/**
 * Builds `dist/` when the sources are newer (the same check `npm start` makes) and says which
 * build `bin/krane.js` runs.
 */
export function ensureBuild(): string {
  const b = spawnSync(process.execPath, ["scripts/build.mjs", "--if-stale"], { cwd: ROOT, encoding: "utf8" });
  if (b.status !== 0) throw new Error(`npm run build failed: ${b.stderr.slice(0, 500)}`);
  const v = spawnSync(process.execPath, [KRANE_BIN, "version"], { cwd: ROOT, encoding: "utf8" });
  return v.stdout.trim().split("\n")[0] ?? "";
}

export function fmtS(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

/** What a benchmark's `krane sentinel` serves and where (on this machine, beside a local cluster). */
export interface BenchSentinel {
  readonly environmentId: string;
  readonly region: string;
  readonly port: number;
  readonly opsPort: number;
  readonly kubeconfig: string;
  /** The cluster's pod network, served on this machine (`--pod-address-map`). */
  readonly podNetwork: PodNetwork;
  /** The runtime's executable (default: this Node.js). */
  readonly runtime?: string;
}

/** Starts `krane sentinel` as a process of its own, quiet but for warnings. */
export function spawnBenchSentinel(o: BenchSentinel): ChildProcess {
  // KRANE_BENCH_PROF_DIR: a CPU profile of the sentinel on Node.js, written when it exits.
  const profDir = process.env.KRANE_BENCH_PROF_DIR;
  const prof = profDir && !o.runtime ? ["--cpu-prof", "--cpu-prof-dir", profDir] : [];
  return spawn(
    o.runtime ?? process.execPath,
    [
      ...prof,
      KRANE_BIN,
      "sentinel",
      "--environment-id",
      o.environmentId,
      "--region",
      o.region,
      "--listen",
      "127.0.0.1",
      "--port",
      String(o.port),
      "--ops-port",
      String(o.opsPort),
      "--kubeconfig",
      o.kubeconfig,
      "--pod-address-map",
      podAddressMap(o.podNetwork),
    ],
    { stdio: ["ignore", "ignore", "inherit"], env: { PATH: process.env.PATH, KRANE_LOG_LEVEL: "warn" } },
  );
}

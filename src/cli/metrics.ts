// `krane metrics <project/env>`: the environment's metrics history (MetricsService.
// GetMetricsHistory), one row per revision, region and instance: requests per second over the
// range with a sparkline of its steps, error rate, latency percentiles, CPU, memory and restarts.
// `-o json` prints the answer as it is.
import type { Command } from "commander";
import type { MetricsHistoryPoint, MetricsSeries } from "../gen/krane/ctrl/v1/live_pb.js";
import { parseTime } from "./audit.js";
import { splitTarget, userAction, withConnection, type ConnectionFlags } from "./command.js";

interface MetricsFlags extends ConnectionFlags {
  since: string;
  region?: string;
  instance?: string;
  revision?: string;
  step?: string;
}

const BARS = "▁▂▃▄▅▆▇█";

/** One character per value, scaled to the largest (all-zero: the lowest bar). */
export function sparkline(values: readonly number[]): string {
  const max = Math.max(0, ...values);
  return values
    .map((v) =>
      max <= 0 || v <= 0 ? BARS[0] : BARS[Math.min(BARS.length - 1, Math.round((v / max) * (BARS.length - 1)))],
    )
    .join("");
}

/**
 * Each step's value from `sinceMs` until `untilMs`, zero where nothing was stored; the last
 * `width` steps when there are more (a terminal line holds only so much).
 */
export function stepValues(
  points: readonly { atMs: number; value: number }[],
  sinceMs: number,
  untilMs: number,
  stepMs: number,
  width = 60,
): number[] {
  const n = Math.max(1, Math.ceil((untilMs - sinceMs) / stepMs));
  const out = new Array<number>(n).fill(0);
  for (const p of points) {
    const i = Math.floor((p.atMs - sinceMs) / stepMs);
    if (i >= 0 && i < n) out[i] = p.value;
  }
  return out.slice(-width);
}

function ms(v: number | undefined): string {
  if (v === undefined) return "-";
  if (v < 0) return ">30s";
  return v >= 1000 ? `≤${v / 1000}s` : `≤${v}ms`;
}

function bytes(v: number | undefined): string {
  if (v === undefined) return "-";
  return v >= 1024 ** 3 ? `${(v / 1024 ** 3).toFixed(1)}Gi` : `${Math.round(v / 1024 ** 2)}Mi`;
}

/** The table's rows (pure: tested with made-up answers). */
export function metricsRows(
  series: readonly MetricsSeries[],
  sinceMs: number,
  untilMs: number,
  stepMs: number,
): string[][] {
  return series.map((s) => {
    const t: MetricsHistoryPoint | undefined = s.total;
    const spark = sparkline(
      stepValues(
        s.points.map((p) => ({ atMs: Number(p.atUnixMs), value: p.requestsPerSecond })),
        sinceMs,
        untilMs,
        stepMs,
      ),
    );
    return [
      `r${s.revision}`,
      s.region,
      s.instance === "" ? "(all)" : s.instance,
      String(t?.requests ?? 0n),
      (t?.requestsPerSecond ?? 0).toFixed(2),
      spark,
      `${(t?.errorRatePercent ?? 0).toFixed(2)}%`,
      ms(t?.p50Ms),
      ms(t?.p95Ms),
      ms(t?.p99Ms),
      t?.cpuMillicores === undefined ? "-" : `${Math.round(t.cpuMillicores)}m`,
      bytes(t?.memoryBytes),
      String(t?.restarts ?? 0n),
    ];
  });
}

export const METRICS_HEAD = [
  "REVISION",
  "REGION",
  "INSTANCE",
  "REQUESTS",
  "RPS",
  "RPS OVER TIME",
  "ERRORS",
  "P50",
  "P95",
  "P99",
  "CPU",
  "MEMORY",
  "RESTARTS",
];

export function registerMetricsCommand(program: Command): void {
  withConnection(
    program
      .command("metrics <project/env>")
      .description("requests, errors, latency, CPU, memory and restarts of an environment, from ctrl's history")
      .option("--since <time>", "from this time (ISO 8601) or age (30m, 24h, 7d); at most 30 days back", "1h")
      .option("--revision <n>", "only this revision")
      .option("--region <region>", "only this region")
      .option("--instance <pod>", "only this instance")
      .option("--step <step>", "1m or 1h (default: minutes up to 6 hours back, hours beyond)"),
    { workspace: true },
  ).action(
    userAction(async (x, target: string, f: MetricsFlags) => {
      const { MetricsService, GetMetricsHistoryResponseSchema } = await import("../gen/krane/ctrl/v1/live_pb.js");
      const since = parseTime("--since", f.since);
      if (since > BigInt(Date.now() + 60_000)) throw new Error(`--since: "${f.since}" is in the future`);
      if (f.revision !== undefined && !/^[1-9]\d{0,15}$/.test(f.revision))
        throw new Error(`--revision: expected a revision number, got "${f.revision}"`);
      const step =
        f.step === undefined
          ? 0
          : f.step === "1m"
            ? 60
            : f.step === "1h"
              ? 3600
              : (() => {
                  throw new Error(`--step: expected 1m or 1h, got "${f.step}"`);
                })();
      const res = await x.ctrl.client(MetricsService).getMetricsHistory({
        workspace: await x.ctrl.workspace(),
        ...splitTarget(target),
        sinceUnixMs: since,
        revision: f.revision === undefined ? 0n : BigInt(f.revision),
        region: f.region ?? "",
        instance: f.instance ?? "",
        stepSeconds: step,
      });
      if (x.json) {
        x.printJson(GetMetricsHistoryResponseSchema, res);
        return;
      }
      if (res.series.length === 0) {
        process.stdout.write("no metrics in this range\n");
        return;
      }
      x.printTable(
        METRICS_HEAD,
        metricsRows(res.series, Number(res.sinceUnixMs), Number(res.untilUnixMs), res.stepSeconds * 1000),
      );
    }),
  );
}

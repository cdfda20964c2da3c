// How the pages write times, states and figures (pure: the tests pin them).
import { InstanceStatus } from "../gen/krane/ctrl/v1/cluster_pb.js";

/** How long ago `ms` (Unix ms) was, in its largest whole unit; 0 is "never". */
export function ago(ms: bigint | number, now = Date.now()): string {
  const t = Number(ms);
  if (t === 0) return "never";
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  if (s < 86400) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86400)}d ago`;
}

/** A moment (Unix ms) in the browser's locale and time zone. */
export function clock(ms: bigint | number): string {
  return new Date(Number(ms)).toLocaleString();
}

/** An instance's state as the tables write it: "running", "failed"… */
export function statusName(s: InstanceStatus): string {
  return (InstanceStatus[s] ?? "UNKNOWN").replace(/^INSTANCE_STATUS_/, "").toLowerCase();
}

/** A latency bound of the sentinels' histogram (ms); -1 is past its last bucket (30 s). */
export function latency(v: number | undefined): string {
  if (v === undefined) return "";
  return v < 0 ? "> 30 s" : `≤ ${v} ms`;
}

/** A chart's figure: three significant digits at most, none wasted on large values or counts. */
export function figure(v: number): string {
  return Number.isInteger(v) ? String(v) : v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
}

// How `krane requests` prints a request (pure): one line per request, a marker for requests not
// shown, NDJSON for -o json. Nothing here reads protobuf: the command hands plain fields.
import { closedAfter } from "../contracts/request-view.js";

export interface PrintedRequest {
  readonly timeMs: number;
  readonly region: string;
  readonly instance: string;
  readonly revision: bigint;
  readonly method: string;
  readonly path: string;
  /** 0: the client left before the answer ended. */
  readonly status: number;
  readonly latencyMs: number;
  readonly policy: string;
  readonly client: string;
  readonly key: string;
  /** An upgraded connection that closed: how long it was open (0 or absent: any other record). */
  readonly openMs?: number;
}

/** One request as the terminal shows it: time, region, method, status, latency, path, then who answered or refused it. */
export function formatRequest(r: PrintedRequest): string {
  const time = new Date(r.timeMs).toISOString().slice(11, 23);
  const status = r.status === 0 ? "---" : String(r.status);
  const latency = `${r.latencyMs < 10 ? r.latencyMs.toFixed(1) : Math.round(r.latencyMs)}ms`;
  const by =
    r.policy !== ""
      ? `refused by ${r.policy}`
      : r.revision > 0n
        ? `r${r.revision} ${r.instance}`
        : r.instance !== ""
          ? r.instance
          : "sentinel";
  const closed = closedAfter(r.openMs);
  const extra = [`client ${r.client}`, ...(r.key === "" ? [] : [`key ${r.key}`])].join(" ");
  return `${time} ${r.region} ${r.method.padEnd(6)} ${status} ${latency.padStart(7)} ${r.path}  (${by}${closed}; ${extra})`;
}

/** One request as an NDJSON object. */
export function requestJson(r: PrintedRequest): Record<string, unknown> {
  return {
    time: new Date(r.timeMs).toISOString(),
    region: r.region,
    method: r.method,
    path: r.path,
    status: r.status,
    latencyMs: r.latencyMs,
    revision: Number(r.revision),
    instance: r.instance,
    policy: r.policy,
    client: r.client,
    key: r.key,
    ...(r.openMs !== undefined && r.openMs > 0 ? { openMs: r.openMs } : {}),
  };
}

// The live request view (`krane requests -f`) between a sentinel and the agent:
// `GET SENTINEL_REQUESTS_PATH?after=N` on the ops port answers the records after N, for the agent
// while someone watches. A sentinel records nothing until it is asked, and stops REQUESTS_IDLE_MS
// after the last ask.

/** One request as the view shows it: no header, no query value, no body. */
export interface SentinelRequestRecord {
  readonly seq: number;
  readonly timeMs: number;
  readonly method: string;
  /** The path, query parameter names kept and their values replaced by "…" (requestViewPath). */
  readonly path: string;
  /** 0: the client left before the answer ended. */
  readonly status: number;
  readonly latencyMs: number;
  /** The revision that answered ("" when none did). */
  readonly deploymentId: string;
  /** The instance (pod) that answered ("" when none did). */
  readonly instance: string;
  /** The policy that refused it ("" when none did). */
  readonly policy: string;
  /** The socket peer's address. */
  readonly client: string;
  /** The API key's name, when an "apikey" policy verified one. */
  readonly key: string;
  /**
   * An upgraded connection (WebSocket) that closed: how long it was open. Its handshake's answer
   * was an earlier record (this one repeats it, status 101); absent on every other record.
   */
  readonly openMs?: number;
}

/** How an upgraded connection's close shows beside who answered it ("" when the record is no close). */
export function closedAfter(openMs: number | undefined): string {
  if (openMs === undefined || !(openMs > 0)) return "";
  return `, closed after ${openMs < 10_000 ? (openMs / 1000).toFixed(1) : Math.round(openMs / 1000)} s`;
}

/** The answer of SENTINEL_REQUESTS_PATH. */
export interface SentinelRequests {
  /** The last record's number (the next ask's `after`). */
  readonly seq: number;
  /** Requests not recorded since the sentinel started (past REQUESTS_PER_SECOND, or not asked for soon enough). */
  readonly skipped: number;
  readonly records: readonly SentinelRequestRecord[];
}

export const SENTINEL_REQUESTS_PATH = "/requests";
/** A sentinel stops recording this long after the last ask. */
export const REQUESTS_IDLE_MS = 5_000;
/** Records a sentinel pod keeps per second at most; the rest are counted as skipped. */
export const REQUESTS_PER_SECOND = 50;
const MAX_VIEW_PATH = 256;

/**
 * A path as the request view shows it: query values replaced by "…" (they carry API keys,
 * tokens and personal data as often as not), names kept, at most 256 characters.
 */
export function requestViewPath(target: string): string {
  const q = target.indexOf("?");
  let out = q < 0 ? target : target.slice(0, q);
  if (q >= 0) {
    const names = target
      .slice(q + 1)
      .split("&")
      .filter((p) => p !== "")
      .map((p) => {
        const eq = p.indexOf("=");
        // A bare part ("?<token>") may be the secret itself.
        return eq < 0 ? "…" : `${p.slice(0, eq)}=…`;
      });
    out += `?${names.join("&")}`;
  }
  return out.length > MAX_VIEW_PATH ? `${out.slice(0, MAX_VIEW_PATH - 1)}…` : out;
}

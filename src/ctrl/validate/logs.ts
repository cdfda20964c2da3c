// Validation of StreamLogs requests (pure): fields are checked on their own here; whether the
// revision and region belong to the environment, and whether the instance still exists, is
// decided against the database by the handler (src/ctrl/logs/service.ts).
import type { EnvironmentRef } from "./types.js";
import { invalidArgument } from "../errors.js";
import { regionName, validateEnvironmentRef } from "./api.js";

export interface LogQuery {
  ref: EnvironmentRef;
  follow: boolean;
  /** Unix ms; undefined: no bound. */
  since?: number;
  tail?: number;
  /** 0: every revision. */
  revision: number;
  region?: string;
  instance?: string;
  previous: boolean;
  /** Kept lines first (the log history), then live ones. */
  history: boolean;
  /** The --grep pattern (matched by src/ctrl/logs/grep.ts). */
  grep?: GrepPattern;
  /** Only lines known to be of this stream (undefined: all). */
  stream?: "stdout" | "stderr";
}

/** Clocks of callers run a little ahead: a `since` this far in the future is taken as "now". */
export const SINCE_SKEW_MS = 5_000;
/** A pod name (a DNS subdomain). */
const POD_NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

export function validateLogQuery(
  req: {
    workspace: string;
    project: string;
    environment: string;
    follow: boolean;
    sinceUnixMs: bigint;
    tailLines?: number;
    revision: bigint;
    region: string;
    instance: string;
    previous: boolean;
    history?: boolean;
    grep?: string;
    /** LogStream: 0 all, 1 stdout, 2 stderr. */
    stream?: number;
  },
  now: number,
): LogQuery {
  const ref = validateEnvironmentRef(req);
  let since: number | undefined;
  if (req.sinceUnixMs !== 0n) {
    if (req.sinceUnixMs < 0n || req.sinceUnixMs > BigInt(Number.MAX_SAFE_INTEGER))
      throw invalidArgument("since_unix_ms", "must be unix milliseconds");
    since = Number(req.sinceUnixMs);
    if (since > now + SINCE_SKEW_MS) throw invalidArgument("since_unix_ms", "is in the future");
  }
  if (req.tailLines !== undefined && req.tailLines < 0) throw invalidArgument("tail_lines", "must be 0 or more");
  if (req.revision < 0n || req.revision > BigInt(Number.MAX_SAFE_INTEGER))
    throw invalidArgument("revision", "must be a revision number (1 or more), or 0 for every revision");
  const region = req.region === "" ? undefined : regionName("region", req.region);
  if (req.instance !== "" && (req.instance.length > 253 || !POD_NAME.test(req.instance)))
    throw invalidArgument("instance", "must be an instance name as `krane status` shows it");
  if (req.previous && req.follow) throw invalidArgument("previous", "cannot be combined with follow");
  const history = req.history === true;
  if (history && req.tailLines !== undefined) throw invalidArgument("history", "cannot be combined with tail_lines");
  if (history && req.previous) throw invalidArgument("history", "cannot be combined with previous");
  const stream = req.stream === 1 ? "stdout" : req.stream === 2 ? "stderr" : undefined;
  if (req.stream !== undefined && req.stream !== 0 && stream === undefined)
    throw invalidArgument("stream", "must be stdout or stderr (or unset for both)");
  // The API server reads a tail of both streams merged: no line of it knows its stream.
  if (stream !== undefined && req.tailLines !== undefined)
    throw invalidArgument("stream", "cannot be combined with tail_lines");
  let grep: GrepPattern | undefined;
  if (req.grep !== undefined && req.grep !== "") {
    const m = grepPattern(req.grep);
    if (typeof m === "string") throw invalidArgument("grep", m);
    grep = m;
  }
  return {
    ref,
    follow: req.follow,
    since,
    tail: req.tailLines,
    revision: Number(req.revision),
    region,
    instance: req.instance === "" ? undefined : req.instance,
    previous: req.previous,
    history,
    grep,
    stream,
  };
}

/** A `--grep` pattern: /regex/flags (JavaScript syntax), or else text matched as is. */
export type GrepPattern = { readonly text: string } | { readonly source: string; readonly flags: string };

/** The longest pattern taken: a search runs on ctrl, over many lines. */
export const MAX_GREP = 256;

/**
 * The pattern, or an error message saying what is wrong with it. A regex is compiled here to
 * check it (compiling is linear in the pattern); it is run on a worker (src/ctrl/logs/grep.ts).
 */
export function grepPattern(pattern: string): GrepPattern | string {
  if (pattern.length > MAX_GREP) return `at most ${MAX_GREP} characters`;
  const m = /^\/(.*)\/([imsu]*)$/s.exec(pattern);
  if (!m) return { text: pattern };
  const source = m[1] ?? "";
  const flags = m[2] ?? "";
  try {
    new RegExp(source, flags);
  } catch (err) {
    return `not a valid regular expression: ${err instanceof Error ? err.message : String(err)}`;
  }
  return { source, flags };
}

/** A workspace's log retention: whole days within these bounds (90: what the embedded store is sized for). */
export const MIN_LOG_RETENTION_DAYS = 1;
export const MAX_LOG_RETENTION_DAYS = 90;

/** SetLogRetention's days: whole days within the bounds, or undefined (back to the default). */
export function validateLogRetentionDays(days: number | undefined): number | undefined {
  if (days === undefined) return undefined;
  if (!Number.isInteger(days) || days < MIN_LOG_RETENTION_DAYS || days > MAX_LOG_RETENTION_DAYS)
    throw invalidArgument(
      "days",
      `must be whole days from ${MIN_LOG_RETENTION_DAYS} to ${MAX_LOG_RETENTION_DAYS} (absent: the default), got ${days}`,
    );
  return days;
}

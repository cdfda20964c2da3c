// What the CLI's two clients of ctrl do alike, apart from any RPC library: the Connect client
// every command uses (user-client.ts) and the light JSON client of `krane status`
// (json-call.ts). Outages: an outage is ctrl not reached, or ctrl
// answering unavailable, or resource_exhausted for its database; a retry-safe call is repeated
// with backoff for the --retry-for window, with a line on stderr per retry; then the error says
// what is down and for how long it was retried.
import { Backoff, sleep, type BackoffPolicy } from "../retry/backoff.js";

/** Backoff between attempts while ctrl is unavailable. */
export const OUTAGE_BACKOFF: BackoffPolicy = { baseMs: 250, capMs: 2000, minMs: 100 };

/** `code` is the wire name of a Connect code ("unavailable"); `message` is ctrl's, unprefixed. */
export function isOutageCode(code: string, message: string): boolean {
  if (code === "unavailable") return true;
  // ctrl's database out of capacity is an outage; a limit of the caller's (a workspace's preview
  // limit) is an answer.
  return code === "resource_exhausted" && /^ctrl's database/.test(message);
}

/** What is down, in one line: ctrl's own answer names its database; anything else means ctrl was not reached. */
export function outageText(message: string, ctrlUrl: string): string {
  return /^ctrl's database/.test(message)
    ? message
    : `ctrl is not reachable at ${ctrlUrl} (${message}): is it running?`;
}

export interface OutageRetryOptions {
  readonly windowMs: number;
  readonly ctrlUrl: string;
  readonly progress: (line: string) => void;
  readonly policy?: BackoffPolicy;
  readonly now?: () => number;
}

/** One call as the outage loop sees it. */
export interface OutageCall<E> {
  /** The method's name, for the progress lines ("ListWorkspaces"). */
  readonly method: string;
  /** Whether it may be repeated (a read, or a write under an idempotency key). */
  readonly safe: boolean;
  readonly signal?: AbortSignal;
  /** The error's code and message when it is an outage; undefined for any other error. */
  outage(err: unknown): { code: string; message: string } | undefined;
  /** The error to end with, saying what is down. */
  fail(message: string, err: E): Error;
}

/** Runs `attempt`, repeating it while ctrl is down (see the file's comment). */
export async function repeatWhileDown<T, E>(
  opts: OutageRetryOptions,
  call: OutageCall<E>,
  attempt: () => Promise<T>,
): Promise<T> {
  const now = opts.now ?? Date.now;
  const started = now();
  const backoff = new Backoff(opts.policy ?? OUTAGE_BACKOFF);
  for (;;) {
    try {
      return await attempt();
    } catch (err) {
      const down = call.outage(err);
      if (!down) throw err;
      const what = outageText(down.message, opts.ctrlUrl);
      if (!call.safe)
        throw call.fail(
          `${what}; ${call.method} is not repeated automatically (it is not idempotent without an Idempotency-Key)`,
          err as E,
        );
      const left = opts.windowMs - (now() - started);
      if (left <= 0 || call.signal?.aborted) {
        const tried =
          opts.windowMs > 0
            ? ` (retried for ${(opts.windowMs / 1000).toFixed(opts.windowMs % 1000 === 0 ? 0 : 1)} s)`
            : "";
        throw call.fail(`${what}${tried}`, err as E);
      }
      const delay = Math.min(backoff.next(), left);
      opts.progress(
        `krane: ${what}; retrying ${call.method} in ${(delay / 1000).toFixed(1)} s (${(left / 1000).toFixed(1)} s left)`,
      );
      await sleep(delay, call.signal);
    }
  }
}

/** Parses "10s", "500ms", "2m" or plain seconds. */
export function parseDuration(v: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(v.trim());
  if (!m) throw new Error(`expected a duration such as 10s, 500ms or 2m, got "${v}"`);
  const n = Number(m[1]);
  return Math.round(m[2] === "ms" ? n : m[2] === "m" ? n * 60_000 : n * 1000);
}

/**
 * The workspace a command works in when none is given: the only one the token sees (a workspace
 * token sees its own alone). `workspaces` is the first page of at least two.
 */
export function only(workspaces: readonly { slug?: string }[]): string {
  const slug = workspaces[0]?.slug;
  if (workspaces.length === 1 && slug) return slug;
  throw new Error(
    workspaces.length === 0
      ? "no workspace yet: krane workspace create <slug>"
      : "several workspaces: pass --workspace or set KRANE_WORKSPACE",
  );
}

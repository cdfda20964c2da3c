// The desired-state stream loop of one controller (the thin I/O shell around cursor.ts).
//
// It opens Watch<K>(cursor), decodes each message, lets the cursor state machine decide, and
// hands the resulting actions to the controller runtime synchronously (so a message counts as
// accepted before the next one is read). On any stream end it reconnects with full-jitter
// exponential backoff, reset once ctrl has accepted a stream.
//
// "Connected" means ctrl accepted the stream: its first message arrived. ctrl starts every stream
// with one (a bookmark, or a snapshot's start), so a resumed stream with nothing to say is
// connected at once; it is never inferred from a change happening to arrive. Response headers
// alone do not count: Connect sends them with the first message anyway, and an error answer
// has them too.
//
// Every wait has a bound, so a frozen ctrl or a half-open connection is noticed:
//  - opening: ctrl must accept within `openTimeoutMs`, else the attempt is abandoned;
//  - a quiet stream: ctrl sends a bookmark whenever it has sent nothing for its keepalive
//    interval (which every bookmark states); nothing at all for two intervals ends the attempt;
//  - the wait for the next message is raced against the attempt's abort, so a transport that
//    ignored its signal could not hold the loop either.
// The HTTP/2 session below has PINGs of its own (see ../ctrl-client.ts).
//
// Supervision: the loop only ends when its signal aborts (logged); an unexpected error inside it
// is logged and the loop goes on. It cannot block: every wait in it is a timer or is raced
// against the attempt's abort, which a timer triggers (connecting: the open bound; streaming:
// the silence bound once ctrl announced its keepalive; backoff: the delay). A long outage is
// logged when it starts, every `outageLogEveryMs` while it lasts, and when it ends.
//
// Unauthenticated / PermissionDenied are configuration errors, not outages: they are logged at
// error level on every attempt and retried no faster than `authRetryFloorMs` (default 60 s).
// The agent keeps running (and keeps serving /readyz = not ready) instead of exiting, so a
// rotated token or a fixed ctrl recovers without a restart and the process stays observable.
import { Code, ConnectError } from "@connectrpc/connect";
import { Backoff, sleep, type BackoffPolicy, type RandomSource } from "../../retry/backoff.js";
import {
  cursorReconnect,
  cursorStep,
  initialCursor,
  type CursorAction,
  type CursorState,
  type StreamEvent,
} from "./cursor.js";
import type { Logger } from "../../base/log.js";

/** What the loop passes to a kind's Watch call: use as the call's options, unchanged. */
export interface WatchCall {
  readonly signal: AbortSignal;
  /** A stream has no deadline of its own (0: none, whatever the transport's default). */
  readonly timeoutMs: 0;
}

/** Why an attempt ended (the `reason` label of krane_agent_stream_reconnects_total). */
export type EndReason = "ended" | "error" | "auth" | "open-timeout" | "silent";

export type StreamPhase = "connecting" | "streaming" | "backoff" | "stopped";

export interface StreamLoopOptions<Msg, D, Del> {
  readonly name: string;
  readonly open: (cursor: bigint, call: WatchCall) => AsyncIterable<Msg>;
  readonly decode: (msg: Msg) => StreamEvent<D, Del>;
  readonly onAction: (action: CursorAction<D, Del>) => void;
  readonly reconnect: BackoffPolicy;
  /** How long ctrl has to accept a stream (headers or a first message); default 5 s. */
  readonly openTimeoutMs?: number;
  /** Told when an attempt was abandoned because ctrl did not answer in time. */
  readonly onOpenTimeout?: () => void;
  readonly authRetryFloorMs?: number;
  /** How often a continuing outage is logged again (default 30 s). */
  readonly outageLogEveryMs?: number;
  readonly random?: RandomSource;
  readonly log: Logger;
  readonly onConnectedChange?: (connected: boolean) => void;
  readonly onCursor?: (cursor: bigint) => void;
  readonly onReconnect?: (reason: EndReason) => void;
}

export const DEFAULT_OPEN_TIMEOUT_MS = 5_000;

/**
 * How long a stream may be silent, given the keepalive interval ctrl announced: two intervals
 * (a bookmark may be late by up to one), or no bound when ctrl announced none.
 */
export function silenceBoundMs(keepaliveMs: number): number | undefined {
  if (!Number.isFinite(keepaliveMs) || keepaliveMs <= 0) return undefined;
  return 2 * keepaliveMs;
}

export function isAuthError(err: unknown): boolean {
  const code = err instanceof ConnectError ? err.code : undefined;
  return code === Code.Unauthenticated || code === Code.PermissionDenied;
}

interface Ending {
  readonly reason: EndReason;
  readonly detail: string;
}

const ABORTED = Symbol("aborted");

function describe(err: unknown): string {
  return err instanceof ConnectError ? `${Code[err.code]}: ${err.rawMessage}` : String(err);
}

export class DesiredStateStream<Msg, D, Del> {
  readonly #o: StreamLoopOptions<Msg, D, Del>;
  #state: CursorState = initialCursor();
  #connected = false;
  #messages = 0;
  #connects = 0;
  #phase: StreamPhase = "stopped";
  /** Since when the stream has been down (unix ms), undefined while connected. */
  #downSince: number | undefined = Date.now();
  #outage: { attempts: number; loggedAt: number } | undefined;

  constructor(opts: StreamLoopOptions<Msg, D, Del>) {
    this.#o = opts;
  }

  get cursor(): bigint {
    return this.#state.cursor;
  }

  get connected(): boolean {
    return this.#connected;
  }

  /** Since when the stream has been down (unix ms); undefined while connected. */
  get downSince(): number | undefined {
    return this.#downSince;
  }

  /** How many times ctrl accepted a stream of this loop. */
  get connects(): number {
    return this.#connects;
  }

  /** Messages received over the life of the loop. */
  get messages(): number {
    return this.#messages;
  }

  get phase(): StreamPhase {
    return this.#phase;
  }

  /** Runs until `signal` aborts; never throws. */
  async run(signal: AbortSignal): Promise<void> {
    const o = this.#o;
    const backoff = new Backoff(o.reconnect, o.random);
    try {
      while (!signal.aborted) {
        let end: Ending | undefined;
        try {
          end = await this.#attempt(signal, backoff);
        } catch (err) {
          // A bug of this loop or of a message's handling outside the stream: logged, not fatal.
          o.log.error({ controller: o.name, err: describe(err) }, "desired-state stream loop failed; reconnecting");
          end = { reason: "error", detail: describe(err) };
        }
        if (signal.aborted || end === undefined) break;
        this.#setConnected(false);
        this.#state = cursorReconnect(this.#state);
        o.onReconnect?.(end.reason);
        this.#noteFailure(end);
        let delay = backoff.next();
        if (end.reason === "auth") delay = Math.max(delay, o.authRetryFloorMs ?? 60_000);
        this.#phase = "backoff";
        await sleep(delay, signal);
      }
    } finally {
      this.#setConnected(false);
      this.#phase = "stopped";
      o.log.info({ controller: o.name }, "desired-state stream stopped");
    }
  }

  /** One stream, from open to its end; undefined when `signal` aborted (the loop stops). */
  async #attempt(signal: AbortSignal, backoff: Backoff): Promise<Ending | undefined> {
    const o = this.#o;
    const attempt = new AbortController();
    // Why the loop itself ended the attempt (a bound overrun), if it did.
    let cut: Ending | undefined;
    const stop = (e: Ending): void => {
      cut ??= e;
      attempt.abort(new ConnectError(e.detail, Code.DeadlineExceeded));
    };
    const onAbort = (): void => attempt.abort(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    // The next message, or ABORTED as soon as the attempt is, whether the transport honours its
    // signal or not (one listener per wait, removed when it ends: a stream lives for weeks).
    const next = (it: AsyncIterator<Msg>): Promise<IteratorResult<Msg> | typeof ABORTED> =>
      new Promise((resolve, reject) => {
        if (attempt.signal.aborted) return resolve(ABORTED);
        const cancel = (): void => resolve(ABORTED);
        attempt.signal.addEventListener("abort", cancel, { once: true });
        it.next().then(
          (r) => {
            attempt.signal.removeEventListener("abort", cancel);
            resolve(r);
          },
          (err: unknown) => {
            attempt.signal.removeEventListener("abort", cancel);
            reject(err);
          },
        );
      });
    // One deadline at a time (opening, then silence), moved by every message. When its timer
    // fires, the verdict waits for setImmediate: after a long pause of this process (GC, CPU),
    // timers run before pending socket reads, and a message already waiting must count.
    let deadline: { at: number; end: Ending } | undefined;
    let timer: NodeJS.Timeout | undefined;
    let timerAt = Number.POSITIVE_INFINITY;
    const check = (): void => {
      timer = undefined;
      timerAt = Number.POSITIVE_INFINITY;
      if (deadline === undefined) return;
      if (deadline.at > Date.now()) return schedule();
      setImmediate(() => {
        if (deadline !== undefined && deadline.at <= Date.now()) stop(deadline.end);
        else schedule();
      });
    };
    // A timer already due no later than the deadline stays (it looks again when it fires).
    const schedule = (): void => {
      if (deadline === undefined || timerAt <= deadline.at) return;
      clearTimeout(timer);
      timerAt = deadline.at;
      timer = setTimeout(check, Math.max(0, deadline.at - Date.now()));
    };
    const arm = (ms: number | undefined, end: Ending): void => {
      deadline = ms === undefined ? undefined : { at: Date.now() + ms, end };
      schedule();
    };
    const openTimeoutMs = o.openTimeoutMs ?? DEFAULT_OPEN_TIMEOUT_MS;
    this.#phase = "connecting";
    arm(openTimeoutMs, { reason: "open-timeout", detail: `ctrl did not accept the stream within ${openTimeoutMs} ms` });
    // Until a bookmark says how often ctrl speaks, the HTTP/2 session's PINGs are the only bound.
    let silenceMs: number | undefined;
    let silent: Ending = { reason: "silent", detail: "" };
    let end: Ending | undefined;
    let it: AsyncIterator<Msg> | undefined;
    try {
      it = o.open(this.#state.cursor, { signal: attempt.signal, timeoutMs: 0 })[Symbol.asyncIterator]();
      for (;;) {
        const r = await next(it);
        if (r === ABORTED) break;
        if (r.done === true) {
          end = { reason: "ended", detail: "ctrl ended the stream" };
          break;
        }
        this.#messages++;
        const ev = o.decode(r.value);
        if (ev.type === "bookmark" && silenceBoundMs(ev.keepaliveMs) !== silenceMs) {
          silenceMs = silenceBoundMs(ev.keepaliveMs);
          silent = { reason: "silent", detail: `ctrl sent nothing for ${silenceMs} ms` };
        }
        if (!this.#connected) {
          // ctrl's first message: it accepted the stream.
          backoff.reset();
          this.#setConnected(true);
        }
        this.#phase = "streaming";
        arm(silenceMs, silent);
        this.#handle(ev);
      }
    } catch (err) {
      if (!signal.aborted && cut === undefined) {
        if (isAuthError(err)) {
          o.log.error(
            { controller: o.name, err: describe(err) },
            "ctrl refused the agent's credentials; check the token and region (retrying slowly)",
          );
          end = { reason: "auth", detail: describe(err) };
        } else {
          end = { reason: "error", detail: describe(err) };
        }
      }
    } finally {
      deadline = undefined;
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
      attempt.abort();
      // Cleanup of an iterator that may not answer: never awaited.
      if (it?.return) void it.return().catch(() => undefined);
    }
    if (signal.aborted) return undefined;
    if (cut?.reason === "open-timeout") o.onOpenTimeout?.();
    return cut ?? end ?? { reason: "error", detail: "the attempt was abandoned" };
  }

  #handle(ev: StreamEvent<D, Del>): void {
    const { state, actions } = cursorStep(this.#state, ev);
    for (const a of actions) this.#o.onAction(a);
    const moved = state.cursor !== this.#state.cursor;
    this.#state = state;
    if (moved) this.#o.onCursor?.(state.cursor);
  }

  #noteFailure(end: Ending): void {
    const o = this.#o;
    if (end.reason === "auth") return; // logged loudly on every attempt already
    const now = Date.now();
    const every = o.outageLogEveryMs ?? 30_000;
    const detail = { controller: o.name, reason: end.reason, err: end.detail };
    if (this.#outage === undefined) {
      this.#outage = { attempts: 1, loggedAt: now };
      o.log.warn(detail, "desired-state stream lost; reconnecting");
      return;
    }
    this.#outage.attempts++;
    if (now - this.#outage.loggedAt >= every) {
      this.#outage.loggedAt = now;
      o.log.warn(
        { ...detail, attempts: this.#outage.attempts, downMs: now - (this.#downSince ?? now) },
        "desired-state stream still down; reconnecting",
      );
    } else {
      o.log.debug(detail, "desired-state stream attempt failed");
    }
  }

  #setConnected(c: boolean): void {
    if (this.#connected === c) return;
    this.#connected = c;
    const now = Date.now();
    if (c) {
      this.#connects++;
      const downMs = this.#downSince === undefined ? 0 : now - this.#downSince;
      if (this.#outage !== undefined)
        this.#o.log.info(
          { controller: this.#o.name, downMs, attempts: this.#outage.attempts },
          "desired-state stream connected again",
        );
      this.#outage = undefined;
      this.#downSince = undefined;
    } else {
      this.#downSince = now;
    }
    this.#o.onConnectedChange?.(c);
  }
}

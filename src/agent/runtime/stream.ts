// The desired-state stream loop of one controller (the thin I/O shell around cursor.ts).
//
// It opens Watch<K>(cursor), decodes each message, lets the cursor state machine decide, and
// hands the resulting actions to the controller runtime synchronously (so a message counts as
// accepted before the next one is read). On any stream end it reconnects with full-jitter
// exponential backoff, reset as soon as a message (or the response headers) arrives.
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
import type { Logger } from "./log.js";

export interface StreamLoopOptions<Msg, D, Del> {
  readonly name: string;
  readonly open: (cursor: bigint, signal: AbortSignal, onOpen: () => void) => AsyncIterable<Msg>;
  readonly decode: (msg: Msg) => StreamEvent<D, Del>;
  readonly onAction: (action: CursorAction<D, Del>) => void;
  readonly reconnect: BackoffPolicy;
  readonly authRetryFloorMs?: number;
  readonly random?: RandomSource;
  readonly log: Logger;
  readonly onConnectedChange?: (connected: boolean) => void;
  readonly onCursor?: (cursor: bigint) => void;
  readonly onReconnect?: (reason: string) => void;
}

export function isAuthError(err: unknown): boolean {
  const code = err instanceof ConnectError ? err.code : undefined;
  return code === Code.Unauthenticated || code === Code.PermissionDenied;
}

export class DesiredStateStream<Msg, D, Del> {
  readonly #o: StreamLoopOptions<Msg, D, Del>;
  #state: CursorState = initialCursor();
  #connected = false;
  #messages = 0;

  constructor(opts: StreamLoopOptions<Msg, D, Del>) {
    this.#o = opts;
  }

  get cursor(): bigint {
    return this.#state.cursor;
  }

  get connected(): boolean {
    return this.#connected;
  }

  /** Messages received over the life of the loop. */
  get messages(): number {
    return this.#messages;
  }

  /** Runs until `signal` aborts; never throws. */
  async run(signal: AbortSignal): Promise<void> {
    const backoff = new Backoff(this.#o.reconnect, this.#o.random);
    while (!signal.aborted) {
      const attempt = new AbortController();
      const onAbort = (): void => attempt.abort();
      signal.addEventListener("abort", onAbort, { once: true });
      let reason = "stream ended";
      let auth = false;
      try {
        const stream = this.#o.open(this.#state.cursor, attempt.signal, () => {
          backoff.reset();
          this.#setConnected(true);
        });
        for await (const msg of stream) {
          if (!this.#connected) this.#setConnected(true);
          backoff.reset();
          this.#messages++;
          this.#handle(msg);
        }
      } catch (err) {
        if (signal.aborted) break;
        auth = isAuthError(err);
        reason = err instanceof ConnectError ? `${Code[err.code]}: ${err.rawMessage}` : String(err);
        if (auth) {
          this.#o.log.error(
            { controller: this.#o.name, err: reason },
            "ctrl refused the agent's credentials; check the token and region (retrying slowly)",
          );
        } else {
          this.#o.log.warn({ controller: this.#o.name, err: reason }, "desired-state stream failed; reconnecting");
        }
      } finally {
        signal.removeEventListener("abort", onAbort);
        attempt.abort();
      }
      if (signal.aborted) break;
      this.#setConnected(false);
      this.#state = cursorReconnect(this.#state);
      this.#o.onReconnect?.(auth ? "auth" : reason === "stream ended" ? "ended" : "error");
      let delay = backoff.next();
      if (auth) delay = Math.max(delay, this.#o.authRetryFloorMs ?? 60_000);
      await sleep(delay, signal);
    }
    this.#setConnected(false);
  }

  #handle(msg: Msg): void {
    const ev = this.#o.decode(msg);
    const { state, actions } = cursorStep(this.#state, ev);
    for (const a of actions) this.#o.onAction(a);
    const moved = state.cursor !== this.#state.cursor;
    this.#state = state;
    if (moved) this.#o.onCursor?.(state.cursor);
  }

  #setConnected(c: boolean): void {
    if (this.#connected === c) return;
    this.#connected = c;
    this.#o.onConnectedChange?.(c);
  }
}

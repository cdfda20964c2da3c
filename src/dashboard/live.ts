// Following a server stream of ctrl's LiveService from the page: open it, hand each message to the
// page, and when it ends or breaks (ctrl restarted, the network dropped, 45 s without even a
// keepalive) open it again after a short backoff. Every stream starts with the whole view, so a
// reconnect catches up with whatever happened meanwhile. A refusal no retry mends (not found,
// not allowed) stops it ("stopped", with ctrl's message); an ended session reloads the page (to
// the sign-in). Its state belongs to the stream it describes: other deps, a fresh "connecting".
// components/badge.tsx shows it.
import { useEffect, useRef, useState } from "preact/hooks";
import { errorText, isFinal, isSignedOut } from "./api.js";

export type LiveState = "connecting" | "live" | "reconnecting" | "stopped";

interface Keyed {
  /** The deps this state is of. */
  key: string;
  state: LiveState;
  error: string;
}

/** ctrl sends a keepalive after 15 s of quiet: three missed mean the stream is dead. */
const SILENT_MS = 45_000;

/** The wait before another try after `attempt` failed ones: 0.25 s, 0.5 s … up to 5 s. */
export function backoffMs(attempt: number): number {
  return Math.min(5_000, 250 * 2 ** attempt);
}

export function useLiveStream<T>(
  open: (signal: AbortSignal) => AsyncIterable<T>,
  onMessage: (m: T) => void,
  deps: unknown[],
): { state: LiveState; error: string } {
  const key = JSON.stringify(deps);
  const [now, setNow] = useState<Keyed>({ key, state: "connecting", error: "" });
  const handler = useRef(onMessage);
  handler.current = onMessage;
  useEffect(() => {
    const stop = new AbortController();
    const set = (state: LiveState, error = "") => {
      if (!stop.signal.aborted) setNow({ key, state, error });
    };
    void (async () => {
      let attempt = 0;
      while (!stop.signal.aborted) {
        const one = new AbortController();
        const signal = AbortSignal.any([stop.signal, one.signal]);
        let timer = setTimeout(() => one.abort(), SILENT_MS);
        try {
          for await (const m of open(signal)) {
            // A message of a stream already left (other deps) is not this page's.
            if (stop.signal.aborted) return;
            clearTimeout(timer);
            timer = setTimeout(() => one.abort(), SILENT_MS);
            attempt = 0;
            set("live");
            handler.current(m);
          }
        } catch (err) {
          if (stop.signal.aborted) return;
          if (isSignedOut(err)) {
            location.reload();
            return;
          }
          if (isFinal(err)) {
            set("stopped", errorText(err));
            return;
          }
        } finally {
          clearTimeout(timer);
        }
        if (stop.signal.aborted) return;
        set("reconnecting");
        // With jitter: a restarted ctrl is not met by every page at once.
        const delay = backoffMs(attempt) * (0.5 + Math.random() / 2);
        attempt = Math.min(attempt + 1, 10);
        await new Promise((r) => setTimeout(r, delay));
      }
    })();
    return () => stop.abort();
  }, deps);
  // Until the effect for new deps has run, the last state is another stream's.
  return now.key === key ? { state: now.state, error: now.error } : { state: "connecting", error: "" };
}

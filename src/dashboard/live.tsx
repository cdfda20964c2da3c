// Following a server stream of ctrl's LiveService from the page: open it, hand each message to the
// page, and when it ends or breaks (ctrl restarted, the network dropped, 45 s without even a
// keepalive) open it again after a short backoff. Every stream starts with the whole view, so a
// reconnect catches up with whatever happened meanwhile. A refusal no retry mends (not found,
// not allowed) stops it; an ended session reloads the page (to the sign-in).
import { useEffect, useRef, useState } from "preact/hooks";
import { errorText, isFinal, isSignedOut } from "./api.js";

export type LiveState = "connecting" | "live" | "reconnecting";

/** ctrl sends a keepalive after 15 s of quiet: three missed mean the stream is dead. */
const SILENT_MS = 45_000;

export function useLiveStream<T>(
  open: (signal: AbortSignal) => AsyncIterable<T>,
  onMessage: (m: T) => void,
  deps: unknown[],
): { state: LiveState; error: string } {
  const [state, setState] = useState<LiveState>("connecting");
  const [error, setError] = useState("");
  const handler = useRef(onMessage);
  handler.current = onMessage;
  useEffect(() => {
    const stop = new AbortController();
    void (async () => {
      let attempt = 0;
      while (!stop.signal.aborted) {
        const one = new AbortController();
        const signal = AbortSignal.any([stop.signal, one.signal]);
        let timer = setTimeout(() => one.abort(), SILENT_MS);
        try {
          for await (const m of open(signal)) {
            clearTimeout(timer);
            timer = setTimeout(() => one.abort(), SILENT_MS);
            attempt = 0;
            setState("live");
            setError("");
            handler.current(m);
          }
        } catch (err) {
          if (stop.signal.aborted) return;
          if (isSignedOut(err)) {
            location.reload();
            return;
          }
          if (isFinal(err)) {
            setError(errorText(err));
            return;
          }
        } finally {
          clearTimeout(timer);
        }
        if (stop.signal.aborted) return;
        setState("reconnecting");
        // 0.25 s, 0.5 s … up to 5 s, with jitter: a restarted ctrl is not met by every page at once.
        const delay = Math.min(5_000, 250 * 2 ** attempt) * (0.5 + Math.random() / 2);
        attempt = Math.min(attempt + 1, 10);
        await new Promise((r) => setTimeout(r, delay));
      }
    })();
    return () => stop.abort();
  }, deps);
  return { state, error };
}

export function LiveBadge(props: { state: LiveState }) {
  const text = props.state === "live" ? "live" : props.state === "connecting" ? "connecting…" : "reconnecting…";
  return (
    <span class={props.state === "live" ? "badge ok" : "badge warn"} role="status" aria-live="polite">
      {text}
    </span>
  );
}

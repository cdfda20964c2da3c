// The push path from a held request to the autoscaler: one long-poll (GET /wake?after=N on the
// ops port, src/contracts/routing.ts) kept open to every sentinel pod of each environment that
// scales to zero. A sentinel answers it the moment it holds a request while none was held, so the
// scale-up starts at once rather than at the next measurement round — and the sentinel needs no
// write rights anywhere (it is asked; it never calls). A pod that stops answering is polled again
// after a short pause; pods that leave, and environments that stop scaling to zero, are dropped.
import { SENTINEL_OPS_PORT, SENTINEL_WAKE_PATH, WAKE_POLL_MS, type SentinelWake } from "../../contracts/routing.js";
import { sleep } from "../../retry/backoff.js";

export interface WakerOptions {
  /** A sentinel's serving pods and the host the agent dials for each. */
  readonly podsOf: (key: string) => { name: string; host: string }[];
  /** A pod of sentinel `key` holds `held` requests at zero instances. */
  readonly onWake: (key: string, held: number) => void;
}

interface Poll {
  readonly abort: AbortController;
  readonly host: string;
}

function isWake(v: unknown): v is SentinelWake {
  return (
    typeof v === "object" &&
    v !== null &&
    typeof (v as { wakes?: unknown }).wakes === "number" &&
    typeof (v as { held?: unknown }).held === "number"
  );
}

export class SentinelWaker {
  readonly #o: WakerOptions;
  /** "key/pod" → its poll. */
  readonly #polls = new Map<string, Poll>();

  constructor(o: WakerOptions) {
    this.#o = o;
  }

  /** Keeps a poll open to every serving pod of these sentinels, and none to any other. */
  track(keys: readonly string[], signal: AbortSignal): void {
    const wanted = new Map<string, { key: string; host: string }>();
    for (const key of keys)
      for (const pod of this.#o.podsOf(key)) wanted.set(`${key}/${pod.name}`, { key, host: pod.host });
    for (const [id, p] of this.#polls) {
      if (wanted.get(id)?.host === p.host) continue;
      p.abort.abort();
      this.#polls.delete(id);
    }
    if (signal.aborted) return;
    for (const [id, w] of wanted) {
      if (this.#polls.has(id)) continue;
      // Ended by track() (the pod left) or stop(), which the autoscaler calls when it stops.
      const abort = new AbortController();
      this.#polls.set(id, { abort, host: w.host });
      void this.#poll(w.key, w.host, abort.signal);
    }
  }

  stop(): void {
    for (const p of this.#polls.values()) p.abort.abort();
    this.#polls.clear();
  }

  async #poll(key: string, host: string, signal: AbortSignal): Promise<void> {
    let after = -1;
    while (!signal.aborted) {
      // One listener on the poll's signal at a time, removed after each answer.
      const request = new AbortController();
      const cancel = (): void => request.abort();
      signal.addEventListener("abort", cancel, { once: true });
      const timer = setTimeout(cancel, WAKE_POLL_MS + 10_000);
      try {
        const res = await fetch(`http://${host}:${SENTINEL_OPS_PORT}${SENTINEL_WAKE_PATH}?after=${after}`, {
          signal: request.signal,
        });
        const body: unknown = res.ok ? await res.json() : undefined;
        if (!isWake(body)) throw new Error(`unexpected answer ${res.status}`);
        // Requests held (a new cold start, or one still under way at the poll's end): decide now.
        if (body.held > 0) this.#o.onWake(key, body.held);
        after = body.wakes;
      } catch {
        // Starting, stopping, or a sentinel without the wake path: ask again shortly.
        await sleep(1_000, signal);
      } finally {
        clearTimeout(timer);
        signal.removeEventListener("abort", cancel);
      }
    }
  }
}

// Whether pods/log can be read one stream at a time (`stream=Stdout|Stderr`): Kubernetes's
// PodLogsQuerySplitStreams feature gate (alpha since 1.32, off by default), which both the API
// server and each node's kubelet must have. Found out by asking, not configured: a refusal names
// the `stream` parameter (the API server: 422, "stream: Forbidden: may not be specified"; a
// kubelet through it: 400, "unable to return the given log stream … feature gate in kubelet").
// A refusal is remembered for a while (per node, the API server's under ""), so reads go merged
// without asking each time, and asked again later (a gate turned on since).
import { KubeApiError } from "../../kube/client.js";

/** How long a refusal is believed (ms). */
export const REFUSAL_MS = 10 * 60_000;

/** Whether an error is pods/log refusing the `stream` parameter. */
export function refusesStreams(err: unknown): boolean {
  return err instanceof KubeApiError && (err.status === 400 || err.status === 422) && /stream/i.test(err.message);
}

export class StreamSupport {
  /** Until when each scope ("" the API server, else a node) is taken to refuse. */
  readonly #refusedUntil = new Map<string, number>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** Whether a read of a container on `node` should be split (nothing refused lately). */
  split(node: string): boolean {
    const now = this.#now();
    return [node, ""].every((k) => (this.#refusedUntil.get(k) ?? 0) <= now);
  }

  /** A split read on `node` was refused (`apiServer`: by the API server, so on every node). */
  refused(node: string, apiServer: boolean): void {
    this.#refusedUntil.set(apiServer ? "" : node, this.#now() + REFUSAL_MS);
  }
}

/** Whether a refusal came from the API server itself (422) rather than a kubelet (400). */
export function refusedByApiServer(err: unknown): boolean {
  return err instanceof KubeApiError && err.status === 422;
}

// Cold starts without the kubelet's probe period (scale to zero), as Knative's activator does:
// while requests are held and no instance is routable, the sentinel probes the starting instances
// of the revisions it would route to (EndpointSlice endpoints not ready yet, of a revision whose
// slices name its readiness path) on that path itself, every PROBE_INTERVAL_MS, and routes to the
// first that answers 2xx or 3xx, as the kubelet's HTTP probe counts success. Otherwise a held
// request waits for the kubelet's next readiness probe (at most once a second), its status update
// and the EndpointSlice after it.
//
// A promoted instance stays routable until its slice lists it as ready, or as gone, or for
// PROMOTION_TTL_MS at most: if the kubelet never finds it ready, it leaves the routing again.
// Only held requests start probing; an instance starting beside routable ones (a rollout, a scale
// up) waits for the kubelet as before.
import * as http from "node:http";
import { sleep } from "../retry/backoff.js";
import type { Endpoint, RoutingTable } from "./table.js";

export const PROBE_INTERVAL_MS = 50;
export const PROBE_TIMEOUT_MS = 1_000;
export const PROMOTION_TTL_MS = 30_000;
/** Starting instances probed at once (a revision scaled from zero to many needs only one). */
export const MAX_PROBED = 16;

export interface WarmCandidate {
  readonly endpoint: Endpoint;
  readonly path: string;
}

/** Pure: the starting instances worth probing (their revision may get traffic and names a path). */
export function warmCandidates(t: RoutingTable): WarmCandidate[] {
  const out: WarmCandidate[] = [];
  for (const r of t.revisions) {
    const path = r.readinessPath;
    if (path === undefined) continue;
    // A weighted policy that gives the revision nothing routes nothing to it.
    if (t.mode === "weighted" && (r.weight ?? 0) <= 0) continue;
    for (const endpoint of r.starting ?? []) out.push({ endpoint, path });
  }
  return out;
}

/** One HTTP/1.1 GET of the readiness path, as the kubelet's probe: true on 2xx or 3xx. */
export function probeReadiness(c: WarmCandidate, timeoutMs = PROBE_TIMEOUT_MS): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get(
      {
        host: c.endpoint.dialHost,
        port: c.endpoint.port,
        path: c.path,
        agent: false,
        timeout: timeoutMs,
        headers: { "user-agent": "krane-sentinel-warmup", connection: "close" },
      },
      (res) => {
        const status = res.statusCode ?? 0;
        res.resume();
        resolve(status >= 200 && status < 400);
      },
    );
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(false));
  });
}

/** The key of the first candidate whose probe succeeds, or undefined once every probe failed. */
function firstReady(
  candidates: readonly WarmCandidate[],
  probe: (c: WarmCandidate) => Promise<boolean>,
): Promise<string | undefined> {
  return new Promise((resolve) => {
    let left = candidates.length;
    const failed = (): void => {
      if (--left === 0) resolve(undefined);
    };
    for (const c of candidates) probe(c).then((ok) => (ok ? resolve(c.endpoint.key) : failed()), failed);
  });
}

export interface WarmUpOptions {
  /** The table in force (promotions included). */
  readonly table: () => RoutingTable | undefined;
  /** Whether requests are still held (and the sentinel is not draining). */
  readonly holding: () => boolean;
  /** The instances that answered: make them routable now. */
  readonly promote: (keys: readonly string[]) => void;
  readonly probe?: (c: WarmCandidate) => Promise<boolean>;
  readonly intervalMs?: number;
}

/** The probing loop; start() again whenever requests are held or the table changes. */
export class WarmUp {
  readonly #o: WarmUpOptions;
  #running = false;

  constructor(o: WarmUpOptions) {
    this.#o = o;
  }

  get running(): boolean {
    return this.#running;
  }

  /** Probes until an instance answers, nothing is held any more, or nothing is left to probe. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    void this.#loop().finally(() => (this.#running = false));
  }

  async #loop(): Promise<void> {
    const probe = this.#o.probe ?? ((c: WarmCandidate) => probeReadiness(c));
    for (;;) {
      const t = this.#o.table();
      if (!t || !this.#o.holding() || t.revisions.some((r) => r.endpoints.length > 0)) return;
      const candidates = warmCandidates(t).slice(0, MAX_PROBED);
      if (candidates.length === 0) return;
      // The first to answer is enough: an instance that keeps the probe waiting holds no one up.
      const up = await firstReady(candidates, probe);
      if (up !== undefined && this.#o.holding()) {
        this.#o.promote([up]);
        return;
      }
      await sleep(this.#o.intervalMs ?? PROBE_INTERVAL_MS);
    }
  }
}

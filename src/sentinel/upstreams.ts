// One undici Pool (keep-alive connections to one instance) per endpoint in the table, made on
// first use and closed gracefully when the endpoint leaves the table: requests already on it
// finish, new ones go elsewhere. undici does the pooling, HTTP/1.1 parsing and backpressure.
// Instances that speak HTTP/2 get one multiplexed h2c session instead (./h2-upstream.ts).
//
// Leaving the table is not dying: the agent takes a pod out of its slice as soon as it starts
// terminating, while it still finishes what it has, so requests in flight are not cut then. But a
// pod can also vanish without a reset (its sandbox killed: gVisor sends none), and its requests
// would wait for the upstream timeout. So while a released instance still has requests in
// flight, the sentinel dials its address (a TCP connect, nothing sent) at once and every second:
// a SYN-ACK or a refusal means its network stack is there (a draining pod may have closed its
// listener), no answer within the probe timeout (or host/network unreachable) means it is gone,
// and its requests are cut at once with INSTANCE_GONE_CODE (./errors.ts: 502 instance-gone, or
// another instance for what may be sent again). Nothing of this runs per request.
import * as net from "node:net";
import { Pool } from "undici";
import { INSTANCE_GONE_CODE } from "./errors.js";
import { H2Upstream, UpstreamError } from "./h2-upstream.js";
import type { Endpoint } from "./table.js";

/** How long a released instance with requests in flight has to answer a connect, at most. */
export const GONE_PROBE_TIMEOUT_MS = 2_000;
/** Time between two probes of a released instance that answered. */
export const GONE_PROBE_INTERVAL_MS = 1_000;

export interface UpstreamOptions {
  readonly connectTimeoutMs: number;
  /** Connections per instance; more requests queue in undici. */
  readonly connections?: number;
  /** A released instance was found gone with `inFlight` requests on it (they are being cut). */
  readonly onGone?: (ep: Endpoint, inFlight: number) => void;
}

/**
 * Whether anything answers a TCP connect to host:port within `timeoutMs`: a SYN-ACK or a
 * refusal (RST) both mean a live network stack. False when nothing answered in time or the
 * host or network is unreachable. Nothing is sent on the connection.
 */
export function answersConnect(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port, noDelay: true });
    socket.unref();
    let settled = false;
    const done = (alive: boolean): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(alive);
    };
    // On the timeout, an answer that already arrived is read first (I/O is polled before
    // setImmediate runs): an event loop that was busy for a while does not make a live host gone.
    const timer = setTimeout(() => setImmediate(() => done(false)), timeoutMs);
    timer.unref();
    socket.once("connect", () => done(true));
    socket.on("error", (err: NodeJS.ErrnoException) => done(!GONE_ERRNOS.has(err.code ?? "")));
  });
}

/** Connect errors that say nothing is there; any other (a refusal above all) says something is. */
const GONE_ERRNOS = new Set(["ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "EHOSTDOWN"]);

export function originOf(ep: Endpoint): string {
  const host = ep.dialHost.includes(":") ? `[${ep.dialHost}]` : ep.dialHost;
  return `http://${host}:${ep.port}`;
}

export class Upstreams {
  readonly #o: UpstreamOptions;
  readonly #pools = new Map<string, Pool>();
  readonly #h2 = new Map<string, H2Upstream>();
  #closed = false;

  constructor(o: UpstreamOptions) {
    this.#o = o;
  }

  get size(): number {
    return this.#pools.size + this.#h2.size;
  }

  /** The HTTP/2 session holder of an instance that speaks h2c. */
  h2(ep: Endpoint): H2Upstream {
    const key = `${ep.key}>${ep.dialHost}`;
    let u = this.#h2.get(key);
    if (!u) {
      u = new H2Upstream(originOf(ep), { connectTimeoutMs: this.#o.connectTimeoutMs });
      this.#h2.set(key, u);
    }
    return u;
  }

  pool(ep: Endpoint): Pool {
    const key = `${ep.key}>${ep.dialHost}`;
    let p = this.#pools.get(key);
    if (!p) {
      p = new Pool(originOf(ep), {
        connections: this.#o.connections ?? 256,
        pipelining: 1,
        connect: { timeout: this.#o.connectTimeoutMs, noDelay: true },
        // Node's servers close idle keep-alive connections after 5 s; reuse ends well before.
        keepAliveTimeout: 4_000,
        keepAliveTimeoutThreshold: 1_000,
        // The request-level timeouts (set per request) are what count.
        headersTimeout: 0,
        bodyTimeout: 0,
        // A response may be any size; it streams through.
        maxResponseSize: -1,
      });
      this.#pools.set(key, p);
    }
    return p;
  }

  /**
   * Closes the pools of endpoints that left the table: in-flight requests finish first, unless
   * the instance is found gone meanwhile (then they are cut at once).
   */
  release(eps: readonly Endpoint[]): void {
    for (const ep of eps) {
      const key = `${ep.key}>${ep.dialHost}`;
      const u = this.#h2.get(key);
      if (u) {
        this.#h2.delete(key);
        u.close().catch(() => undefined);
        void this.#watch(
          ep,
          () => u.inFlight,
          (err) => u.destroy(err),
        );
      }
      const p = this.#pools.get(key);
      if (!p) continue;
      this.#pools.delete(key);
      p.close().catch(() => undefined);
      void this.#watch(
        ep,
        () => (p.destroyed ? 0 : p.stats.size),
        (err) => p.destroy(err),
      );
    }
  }

  /** Probes a released instance while it has requests in flight; cuts them if it is gone. */
  async #watch(ep: Endpoint, inFlight: () => number, cut: (err: Error) => Promise<void>): Promise<void> {
    const timeoutMs = Math.min(GONE_PROBE_TIMEOUT_MS, this.#o.connectTimeoutMs);
    while (!this.#closed && inFlight() > 0) {
      const alive = await answersConnect(ep.dialHost, ep.port, timeoutMs);
      const n = inFlight();
      if (this.#closed || n === 0) return;
      if (!alive) {
        this.#o.onGone?.(ep, n);
        const err = new UpstreamError(
          INSTANCE_GONE_CODE,
          `the instance ${ep.key} left the routing table and did not answer a connect within ${timeoutMs} ms`,
        );
        await cut(err).catch(() => undefined);
        return;
      }
      await new Promise((r) => setTimeout(r, GONE_PROBE_INTERVAL_MS).unref());
    }
  }

  async closeAll(force: boolean): Promise<void> {
    this.#closed = true;
    const pools = [...this.#pools.values()];
    const h2 = [...this.#h2.values()];
    this.#pools.clear();
    this.#h2.clear();
    await Promise.all([
      ...pools.map((p) => (force ? p.destroy() : p.close()).catch(() => undefined)),
      ...h2.map((u) => (force ? u.destroy() : u.close()).catch(() => undefined)),
    ]);
  }
}

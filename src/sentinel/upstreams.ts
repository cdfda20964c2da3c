// One undici Pool (keep-alive connections to one instance) per endpoint in the table, made on
// first use and closed gracefully when the endpoint leaves the table: requests already on it
// finish, new ones go elsewhere. undici does the pooling, HTTP/1.1 parsing and backpressure.
// Instances that speak HTTP/2 get one multiplexed h2c session instead (./h2-upstream.ts).
import { Pool } from "undici";
import { H2Upstream } from "./h2-upstream.js";
import type { Endpoint } from "./table.js";

export interface UpstreamOptions {
  readonly connectTimeoutMs: number;
  /** Connections per instance; more requests queue in undici. */
  readonly connections?: number;
}

export function originOf(ep: Endpoint): string {
  const host = ep.dialHost.includes(":") ? `[${ep.dialHost}]` : ep.dialHost;
  return `http://${host}:${ep.port}`;
}

export class Upstreams {
  readonly #o: UpstreamOptions;
  readonly #pools = new Map<string, Pool>();
  readonly #h2 = new Map<string, H2Upstream>();

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

  /** Closes the pools of endpoints that left the table (in-flight requests finish first). */
  release(eps: readonly Endpoint[]): void {
    for (const ep of eps) {
      const key = `${ep.key}>${ep.dialHost}`;
      const u = this.#h2.get(key);
      if (u) {
        this.#h2.delete(key);
        u.close().catch(() => undefined);
      }
      const p = this.#pools.get(key);
      if (!p) continue;
      this.#pools.delete(key);
      p.close().catch(() => undefined);
    }
  }

  async closeAll(force: boolean): Promise<void> {
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

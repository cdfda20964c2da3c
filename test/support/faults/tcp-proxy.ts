// A TCP proxy that breaks the connection between two real processes on demand (plain node:net:
// the faults here live below any protocol, so any client and server can sit on either side —
// ctrl and PostgreSQL, the agent and ctrl):
//  - partition: no byte moves in either direction and new connections hang unanswered, as when
//    packets are dropped; heal() lets everything held through, as TCP would deliver it late;
//  - reset: every open connection is reset (RST) at once, mid-request or mid-stream;
//  - refuse: new connections are reset as they arrive (a server that is down);
//  - latency: every chunk waits this long in each direction.
import * as net from "node:net";

export interface TcpProxyOptions {
  readonly target: { readonly host: string; readonly port: number };
  /** Default 127.0.0.1, port 0 (a free one). */
  readonly listen?: { readonly host?: string; readonly port?: number };
}

interface Pair {
  readonly client: net.Socket;
  upstream: net.Socket | undefined;
}

export class TcpProxy {
  readonly #o: TcpProxyOptions;
  readonly #server: net.Server;
  readonly #pairs = new Set<Pair>();
  #partitioned = false;
  #refusing = false;
  #latencyMs = 0;
  #heal: (() => void)[] = [];
  /** Connections accepted so far. */
  connections = 0;

  private constructor(opts: TcpProxyOptions) {
    this.#o = opts;
    this.#server = net.createServer((client) => this.#accept(client));
  }

  static async start(opts: TcpProxyOptions): Promise<TcpProxy> {
    const p = new TcpProxy(opts);
    await new Promise<void>((resolve, reject) => {
      p.#server.once("error", reject);
      p.#server.listen(opts.listen?.port ?? 0, opts.listen?.host ?? "127.0.0.1", () => resolve());
    });
    return p;
  }

  get port(): number {
    return (this.#server.address() as net.AddressInfo).port;
  }

  get host(): string {
    return (this.#server.address() as net.AddressInfo).address;
  }

  /** Open connections. */
  get open(): number {
    return this.#pairs.size;
  }

  /** Stops every byte and every new connection until heal(). */
  partition(): void {
    this.#partitioned = true;
  }

  /** Ends a partition: what was held is delivered, held connections proceed. */
  heal(): void {
    this.#partitioned = false;
    for (const f of this.#heal.splice(0)) f();
  }

  /** Resets every open connection. */
  resetAll(): void {
    for (const p of [...this.#pairs]) this.#reset(p);
  }

  /** While on, new connections are reset at once. */
  refuse(on: boolean): void {
    this.#refusing = on;
  }

  latency(ms: number): void {
    this.#latencyMs = ms;
  }

  /**
   * Stops: open connections are ended gracefully (FIN both ways) and reset only if still open
   * after `graceMs`. A reset at the end would test something no scenario asked for: a client
   * whose idle HTTP/2 session is closing when its connection is reset (connect-node has no error
   * listener on such a session any more, so that ends the process).
   */
  async close(graceMs = 2000): Promise<void> {
    this.heal();
    for (const p of this.#pairs) {
      p.client.end();
      p.upstream?.end();
    }
    const closed = new Promise<void>((r) => this.#server.close(() => r()));
    const timer = setTimeout(() => this.resetAll(), graceMs);
    await closed;
    clearTimeout(timer);
  }

  #accept(client: net.Socket): void {
    this.connections++;
    if (this.#refusing) {
      rst(client);
      return;
    }
    const pair: Pair = { client, upstream: undefined };
    this.#pairs.add(pair);
    client.on("error", () => this.#reset(pair));
    client.on("close", () => this.#reset(pair));
    client.pause();
    const connect = (): void => {
      if (client.destroyed) return;
      const upstream = net.connect(this.#o.target.port, this.#o.target.host);
      pair.upstream = upstream;
      upstream.on("error", () => this.#reset(pair));
      upstream.on("close", () => this.#reset(pair));
      upstream.once("connect", () => {
        this.#pipe(client, upstream);
        this.#pipe(upstream, client);
        client.resume();
      });
    };
    if (this.#partitioned) this.#heal.push(connect);
    else connect();
  }

  /** Forwards `from` to `to`, holding chunks during a partition and delaying them by the latency. */
  #pipe(from: net.Socket, to: net.Socket): void {
    let queue: Promise<void> = Promise.resolve();
    from.on("data", (chunk: Buffer) => {
      queue = queue.then(async () => {
        if (this.#latencyMs > 0) await new Promise((r) => setTimeout(r, this.#latencyMs));
        if (this.#partitioned) await new Promise<void>((r) => this.#heal.push(r));
        if (!to.destroyed) to.write(chunk);
      });
    });
    from.on("end", () => {
      queue = queue.then(() => {
        if (!to.destroyed) to.end();
      });
    });
  }

  #reset(p: Pair): void {
    if (!this.#pairs.delete(p)) return;
    rst(p.client);
    if (p.upstream) rst(p.upstream);
  }
}

/** Resets a socket (RST), or just destroys it when it is not connected yet. */
function rst(s: net.Socket): void {
  if (s.destroyed) return;
  try {
    s.resetAndDestroy();
  } catch {
    s.destroy();
  }
}

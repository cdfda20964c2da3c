// A TCP proxy that breaks the connection between two real processes on demand (plain node:net:
// the faults here live below any protocol, so any client and server can sit on either side —
// ctrl and PostgreSQL, the agent and ctrl):
//  - partition: no byte moves in either direction and new connections hang unanswered, as when
//    packets are dropped; heal() lets everything held through, as TCP would deliver it late;
//  - reset: every open connection is reset (RST) at once, mid-request or mid-stream;
//  - refuse: new connections are reset as they arrive (a server that is down);
//  - latency: every chunk waits this long in each direction;
//  - reset mid-frame: the next large chunk from the server is cut in half, the first half
//    delivered and the connection reset (a peer that died while writing).
// With several targets it stands for a Service in front of replicas: each new connection goes
// to the first target that accepts it.
import * as net from "node:net";

export interface TcpTarget {
  readonly host: string;
  readonly port: number;
}

export interface TcpProxyOptions {
  /** Where connections go: the first of them that accepts. */
  readonly target: TcpTarget | readonly TcpTarget[];
  /** Default 127.0.0.1, port 0 (a free one). */
  readonly listen?: { readonly host?: string; readonly port?: number };
}

interface Pair {
  readonly client: net.Socket;
  upstream: net.Socket | undefined;
  /** The target this connection reached. */
  target: TcpTarget | undefined;
}

export class TcpProxy {
  readonly #o: TcpProxyOptions;
  readonly #server: net.Server;
  readonly #pairs = new Set<Pair>();
  #partitioned = false;
  #refusing = false;
  #latencyMs = 0;
  #heal: (() => void)[] = [];
  #cutAtLeast: number | undefined;
  #cut: (() => void) | undefined;
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
   * Cuts the next chunk of at least `minBytes` that a server sends: its first half reaches the
   * client, then that connection is reset. Resolves once it happened.
   */
  resetMidFrame(minBytes: number): Promise<void> {
    this.#cutAtLeast = minBytes;
    return new Promise((resolve) => (this.#cut = resolve));
  }

  /** The targets open connections reached (one entry per connection). */
  targetsInUse(): TcpTarget[] {
    return [...this.#pairs].flatMap((p) => (p.target ? [p.target] : []));
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
    const pair: Pair = { client, upstream: undefined, target: undefined };
    this.#pairs.add(pair);
    client.on("error", () => this.#reset(pair));
    client.on("close", () => this.#reset(pair));
    client.pause();
    const targets = Array.isArray(this.#o.target) ? this.#o.target : [this.#o.target as TcpTarget];
    const connect = (i = 0): void => {
      const target = targets[i];
      if (client.destroyed) return;
      if (!target) return this.#reset(pair);
      const upstream = net.connect(target.port, target.host);
      pair.upstream = upstream;
      let connected = false;
      upstream.on("error", () => {
        // Refused (or unreachable): the next target, as a Service's next endpoint.
        if (!connected && pair.upstream === upstream) connect(i + 1);
        else this.#reset(pair);
      });
      upstream.on("close", () => {
        if (connected) this.#reset(pair);
      });
      upstream.once("connect", () => {
        connected = true;
        pair.target = target;
        this.#pipe(client, upstream, false);
        this.#pipe(upstream, client, true, pair);
        client.resume();
      });
    };
    if (this.#partitioned) this.#heal.push(() => connect());
    else connect();
  }

  /** Forwards `from` to `to`, holding chunks during a partition and delaying them by the latency. */
  #pipe(from: net.Socket, to: net.Socket, fromServer: boolean, pair?: Pair): void {
    let queue: Promise<void> = Promise.resolve();
    from.on("data", (chunk: Buffer) => {
      queue = queue.then(async () => {
        if (this.#latencyMs > 0) await new Promise((r) => setTimeout(r, this.#latencyMs));
        if (this.#partitioned) await new Promise<void>((r) => this.#heal.push(r));
        if (to.destroyed) return;
        if (fromServer && pair && this.#cutAtLeast !== undefined && chunk.length >= this.#cutAtLeast) {
          this.#cutAtLeast = undefined;
          // The reset follows once the half is on its way (a write then an RST, as a dying peer's kernel).
          to.write(chunk.subarray(0, Math.floor(chunk.length / 2)), () => {
            this.#reset(pair);
            this.#cut?.();
          });
          return;
        }
        to.write(chunk);
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

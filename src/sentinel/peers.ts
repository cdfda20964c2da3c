// The rate-limit exchange between an environment's sentinel replicas in one region (the scheme is
// ./rate-limit.ts, the messages ./peer-messages.ts). Peers are found on the EndpointSlices of the
// sentinel's own Service (namespace `sentinel`, which its Role already lets it watch): the
// endpoint slice controller keeps them current as pods start, become ready and go, with no DNS
// TTL to wait out, and starting pods are listed too. Every SYNC_MS the replica POSTs its counts,
// signed, to every address there (its own included: a message from itself is ignored), then
// rebalances each limiter among the peers heard within PEER_TIMEOUT_MS. Peers answer on their
// own port (`--peer-port`, 8043), never the public one.
import * as http from "node:http";
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { AddressInfo } from "node:net";
import { Agent, request } from "undici";
import { Counter, type Registry } from "prom-client";
import type { AddressMapping } from "../contracts/address-map.js";
import { SENTINEL_NAMESPACE } from "../contracts/cluster.js";
import { SENTINEL_PEER_PORT_NAME } from "../contracts/routing.js";
import type { Logger } from "../base/log.js";
import { Informer, type ListWatchClient } from "../kube/informer.js";
import { resources } from "../kube/resources.js";
import {
  encodeMessage,
  MAX_MESSAGE_BYTES,
  parseMessage,
  PEER_PATH,
  PEER_TIMEOUT_MS,
  PeerSet,
  peerTargets,
  sign,
  SIGNATURE_HEADER,
  SYNC_MS,
} from "./peer-messages.js";
import type { RateLimiter } from "./rate-limit.js";

/** This process's id among its peers: the pod's name and a nonce (a restarted process is a new peer). */
export function peerId(): string {
  return `${hostname()}-${randomBytes(4).toString("hex")}`;
}

export interface PeerExchangeOptions {
  readonly self: string;
  readonly environmentId: string;
  readonly secret: string;
  /** The sentinel's Service: its EndpointSlices (label kubernetes.io/service-name) list the peers. */
  readonly service: string;
  readonly listen: string | undefined;
  readonly port: number;
  readonly client: ListWatchClient;
  readonly log: Logger;
  readonly registry: Registry;
  readonly addressMap?: AddressMapping;
  /** The limiters to exchange, by an id every replica derives alike. */
  readonly limiters: () => Iterable<readonly [string, RateLimiter]>;
  readonly now?: () => number;
}

export interface PeerStatus {
  /** Addresses on the Service's EndpointSlices (this replica's own among them). */
  readonly targets: number;
  /** Peers heard within the timeout: they share the budget with this replica. */
  readonly live: readonly string[];
}

export class PeerExchange {
  readonly #o: PeerExchangeOptions;
  readonly #now: () => number;
  readonly #slices: Informer;
  readonly #peers = new PeerSet();
  readonly #agent = new Agent({ connections: 1, keepAliveTimeout: 10_000, connectTimeout: SYNC_MS * 2 });
  readonly #messages: Counter<"direction" | "result">;
  /** Targets with a message on its way: the next one waits for it (no pile-up towards a slow peer). */
  readonly #sending = new Set<string>();
  #server: http.Server | undefined;
  #timer: NodeJS.Timeout | undefined;
  #ac = new AbortController();
  #run: Promise<void> | undefined;
  #seq = 0;
  #syncedAt: number | undefined;
  #heardAny = false;
  #address: AddressInfo | undefined;

  constructor(o: PeerExchangeOptions) {
    this.#o = o;
    this.#now = o.now ?? Date.now;
    this.#slices = new Informer({
      resource: resources.endpointSlices,
      namespace: SENTINEL_NAMESPACE,
      labelSelector: `kubernetes.io/service-name=${o.service}`,
      client: o.client,
      log: o.log,
      timeoutSeconds: 120,
      backoff: { baseMs: 200, capMs: 10_000, minMs: 100 },
    });
    this.#messages = new Counter({
      name: "krane_sentinel_peer_messages_total",
      help: 'Rate-limit exchange messages between sentinel replicas, by direction and result ("refused": bad signature or invalid).',
      labelNames: ["direction", "result"],
      registers: [o.registry],
    });
  }

  get address(): AddressInfo | undefined {
    return this.#address;
  }

  /**
   * Whether this replica knows its peers well enough to admit: it heard one, or the peers listed
   * have had a full timeout to speak since the list was read (then it is alone, or they are).
   */
  get settled(): boolean {
    if (this.#heardAny) return true;
    return this.#syncedAt !== undefined && this.#now() - this.#syncedAt > PEER_TIMEOUT_MS + SYNC_MS;
  }

  status(): PeerStatus {
    return { targets: this.#targets().length, live: this.#peers.live(this.#now()) };
  }

  async start(): Promise<void> {
    const server = http.createServer({ requestTimeout: 5_000, headersTimeout: 2_000 }, (req, res) =>
      this.#serve(req, res),
    );
    this.#server = server;
    this.#address = await new Promise<AddressInfo>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.#o.port, this.#o.listen, () => resolve(server.address() as AddressInfo));
    });
    this.#run = this.#slices.run(this.#ac.signal);
    void this.#slices.waitSynced().then(() => (this.#syncedAt = this.#now()));
    // Each replica on its own phase, as the scheme's bench assumes.
    const phase = Math.floor(Math.random() * SYNC_MS);
    this.#timer = setTimeout(() => {
      this.#timer = setInterval(() => this.#tick(), SYNC_MS);
      this.#tick();
    }, phase);
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#ac.abort();
    await this.#run;
    const server = this.#server;
    if (server) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    await this.#agent.close();
  }

  #targets(): string[] {
    return peerTargets(this.#slices.list(), SENTINEL_PEER_PORT_NAME, this.#o.addressMap);
  }

  #tick(): void {
    const now = this.#now();
    const limiters = [...this.#o.limiters()];
    const body = encodeMessage({
      environmentId: this.#o.environmentId,
      from: this.#o.self,
      seq: ++this.#seq,
      at: now,
      limiters: limiters.map(([id, l]) => ({ id, report: l.report(now) })),
    });
    const signature = sign(this.#o.secret, body);
    for (const target of this.#targets()) void this.#send(target, body, signature);
    const live = this.#peers.live(now);
    for (const [, l] of limiters) l.rebalance(now, live);
  }

  async #send(target: string, body: string, signature: string): Promise<void> {
    if (this.#sending.has(target)) return;
    this.#sending.add(target);
    try {
      const res = await request(`http://${target}${PEER_PATH}`, {
        method: "POST",
        dispatcher: this.#agent,
        headers: { "content-type": "application/json", [SIGNATURE_HEADER]: signature },
        body,
        headersTimeout: SYNC_MS * 2,
        bodyTimeout: SYNC_MS * 2,
      });
      await res.body.dump();
      this.#messages.inc({ direction: "sent", result: res.statusCode < 300 ? "ok" : "refused" });
      if (res.statusCode >= 300 && res.statusCode !== 409)
        this.#o.log.warn({ target, status: res.statusCode }, "a peer refused this sentinel's rate-limit counts");
    } catch {
      // A peer starting or gone: its share returns once it is silent for the timeout.
      this.#messages.inc({ direction: "sent", result: "failed" });
    } finally {
      this.#sending.delete(target);
    }
  }

  #serve(req: http.IncomingMessage, res: http.ServerResponse): void {
    const answer = (status: number, text: string): void => {
      if (res.headersSent) return;
      res.writeHead(status, { "content-type": "text/plain", "content-length": Buffer.byteLength(text) });
      res.end(text);
    };
    if (req.method !== "POST" || (req.url ?? "").split("?")[0] !== PEER_PATH) {
      answer(404, "not found\n");
      return;
    }
    const declared = Number(req.headers["content-length"] ?? "0");
    if (declared > MAX_MESSAGE_BYTES) {
      this.#messages.inc({ direction: "received", result: "refused" });
      res.setHeader("connection", "close");
      answer(413, `over ${MAX_MESSAGE_BYTES} bytes\n`);
      req.destroy();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > MAX_MESSAGE_BYTES) {
        this.#messages.inc({ direction: "received", result: "refused" });
        res.setHeader("connection", "close");
        answer(413, `over ${MAX_MESSAGE_BYTES} bytes\n`);
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on("end", () => {
      const sig = req.headers[SIGNATURE_HEADER];
      const now = this.#now();
      const parsed = parseMessage(Buffer.concat(chunks).toString("utf8"), typeof sig === "string" ? sig : undefined, {
        secret: this.#o.secret,
        environmentId: this.#o.environmentId,
        now,
      });
      if ("error" in parsed) {
        this.#messages.inc({ direction: "received", result: "refused" });
        this.#o.log.warn({ from: req.socket.remoteAddress, error: parsed.error }, "rate-limit counts refused");
        answer(parsed.error.startsWith(SIGNATURE_HEADER) ? 401 : 400, `${parsed.error}\n`);
        return;
      }
      const m = parsed.message;
      if (m.from === this.#o.self) {
        answer(204, "");
        return;
      }
      if (!this.#peers.heard(m.from, m.seq, now)) {
        this.#messages.inc({ direction: "received", result: "stale" });
        answer(409, "not newer than the last message of this sender\n");
        return;
      }
      this.#heardAny = true;
      const mine = new Map(this.#o.limiters());
      for (const l of m.limiters) mine.get(l.id)?.receive(m.from, l.report, now);
      this.#messages.inc({ direction: "received", result: "ok" });
      answer(204, "");
    });
  }
}

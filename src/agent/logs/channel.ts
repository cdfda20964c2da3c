// The agent's log channel: a stream it keeps open to ctrl (ctrl never calls an agent), on which
// ctrl asks for logs; each request runs as a LogSession that answers with PushLogs calls. Only the
// replica that leads the cluster's agents keeps the channel open, so a request is answered once.
// The stream is reopened with backoff when it ends, and dropped when ctrl's keepalives stop.
import { createClient, type Client, type Transport } from "@connectrpc/connect";
import { LogChannelService, type AgentLogRequest } from "../../gen/krane/ctrl/v1/logs_pb.js";
import type { KubeClient } from "../../kube/client.js";
import { fullJitterDelay, sleep, type BackoffPolicy } from "../../retry/backoff.js";
import type { Logger } from "../../base/log.js";
import type { BufferLimits } from "./buffer.js";
import { LogSession, type PushRequest } from "./session.js";
import { StreamSupport } from "./streams.js";
import { RequestSession } from "./requests.js";
import type { AddressMapping } from "../../contracts/address-map.js";

export interface LogChannelOptions {
  readonly transport: Transport;
  readonly kube: KubeClient;
  readonly region: string;
  readonly log: Logger;
  /** Whether this replica speaks for the cluster (the leader). */
  readonly leading: () => boolean;
  readonly reconnect?: BackoffPolicy;
  readonly buffer?: BufferLimits;
  readonly heartbeatMs?: number;
  readonly callTimeoutMs?: number;
  /** Local cluster only: where pod IPs are served on this machine (the request view dials sentinel pods). */
  readonly addressMap?: AddressMapping;
}

const RECONNECT: BackoffPolicy = { baseMs: 100, capMs: 2_000 };

export class LogChannel {
  readonly #o: LogChannelOptions;
  readonly #client: Client<typeof LogChannelService>;
  readonly #sessions = new Map<string, LogSession | RequestSession>();
  /** Whether the cluster reads log streams apart, as its sessions found out. */
  readonly #streams = new StreamSupport();
  readonly #stop = new AbortController();
  #loop: Promise<void> | undefined;
  #connected = false;

  constructor(o: LogChannelOptions) {
    this.#o = o;
    this.#client = createClient(LogChannelService, o.transport);
  }

  /** Whether the channel is open (ctrl accepted it). */
  get connected(): boolean {
    return this.#connected;
  }

  /** Requests being answered. */
  get sessions(): number {
    return this.#sessions.size;
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  async stop(): Promise<void> {
    this.#stop.abort();
    for (const s of this.#sessions.values()) s.stop();
    await this.#loop;
    await Promise.all([...this.#sessions.values()].map((s) => s.done));
  }

  async #run(): Promise<void> {
    let attempt = 0;
    while (!this.#stop.signal.aborted) {
      if (!this.#o.leading()) {
        await sleep(1_000, this.#stop.signal);
        continue;
      }
      try {
        await this.#open();
        attempt = 0;
      } catch (err) {
        if (this.#stop.signal.aborted) return;
        this.#o.log.debug({ err: err instanceof Error ? err.message : String(err) }, "log channel to ctrl ended");
      }
      this.#connected = false;
      await sleep(fullJitterDelay(attempt++, this.#o.reconnect ?? RECONNECT), this.#stop.signal);
    }
  }

  async #open(): Promise<void> {
    const abort = new AbortController();
    const onStop = (): void => abort.abort();
    this.#stop.signal.addEventListener("abort", onStop, { once: true });
    // ctrl states its keepalive; a stream silent for two of them is dead (a frozen ctrl).
    let silentLimit = 30_000;
    let lastHeard = Date.now();
    const watchdog = setInterval(() => {
      if (Date.now() - lastHeard > silentLimit || !this.#o.leading()) abort.abort();
    }, 1_000);
    try {
      const stream = this.#client.openLogChannel({ region: this.#o.region }, { signal: abort.signal, timeoutMs: 0 });
      for await (const m of stream) {
        lastHeard = Date.now();
        this.#connected = true;
        switch (m.message.case) {
          case "keepaliveIntervalMs":
            silentLimit = Math.max(2 * m.message.value, 1_000);
            break;
          case "request":
            this.#startSession(m.message.value);
            break;
          case "cancelRequestId":
            this.#sessions.get(m.message.value)?.stop();
            break;
        }
      }
    } finally {
      clearInterval(watchdog);
      this.#stop.signal.removeEventListener("abort", onStop);
    }
  }

  /** Runs a request (once per id: a request heard twice, over two channels, is answered once). */
  #startSession(req: AgentLogRequest): void {
    if (this.#sessions.has(req.requestId) || this.#stop.signal.aborted) return;
    const push = (r: PushRequest): Promise<{ cancelled: boolean }> =>
      this.#client.pushLogs(r, { timeoutMs: this.#o.callTimeoutMs ?? 10_000 });
    const session = req.requests
      ? new RequestSession(
          { kube: this.#o.kube, region: this.#o.region, log: this.#o.log, addressMap: this.#o.addressMap, push },
          req,
        )
      : new LogSession(
          {
            kube: this.#o.kube,
            region: this.#o.region,
            log: this.#o.log,
            buffer: this.#o.buffer,
            heartbeatMs: this.#o.heartbeatMs,
            streams: this.#streams,
            push,
          },
          req,
        );
    this.#sessions.set(req.requestId, session);
    void session.done.finally(() => this.#sessions.delete(req.requestId));
  }
}

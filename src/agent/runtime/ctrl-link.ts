// The ctrl side of one controller: its desired-state stream with the
// version cursor, the point reads a resync makes, and the status reports — each through the
// controller's own circuit breaker, so one failing kind never stalls another. It knows nothing
// about Kubernetes: decoded stream actions go to a sink (the controller), which decides.
//
// A kind binds it to its ClusterService methods with a CtrlProtocol (watch, decode, point read,
// report, and how to phrase "rejected" and "deleted").
import type { Registry } from "prom-client";
import type { BackoffPolicy } from "../../retry/backoff.js";
import { CircuitBreaker, type BreakerConfig } from "./breaker.js";
import { isCtrlDownstreamFailure } from "./ctrl-errors.js";
import type { CursorAction, StreamEvent } from "./cursor.js";
import type { Logger } from "../../base/log.js";
import { agentMetrics, breakerPhaseValue } from "./metrics.js";
import { Reporter } from "./reporter.js";
import { DesiredStateStream, type WatchCall } from "./stream.js";

export type { WatchCall } from "./stream.js";

export interface CallOptions {
  readonly signal: AbortSignal;
  readonly timeoutMs: number;
}

export type PointRead<D, Del> =
  | { readonly key: string; readonly type: "apply"; readonly desired: D }
  | { readonly key: string; readonly type: "delete"; readonly ref: Del };

export interface DesiredBatch<D, Del> {
  readonly states: PointRead<D, Del>[];
  /** Keys that should not exist in the region: their objects are deleted. */
  readonly notFound: string[];
}

/** How a kind talks to ctrl: its ClusterService methods and messages. */
export interface CtrlProtocol<Msg, D, Del, R> {
  /** Opens the kind's Watch stream from `cursor`; `call` is the call's options, as they are. */
  watch(cursor: bigint, call: WatchCall): AsyncIterable<Msg>;
  decode(msg: Msg): StreamEvent<D, Del>;
  getDesired(keys: string[], opts: CallOptions): Promise<DesiredBatch<D, Del>>;
  sendReport(request: R, opts: CallOptions): Promise<void>;
  /** The report that says a desired state was refused (validation or a terminal apply error). */
  rejectedReport(key: string, subject: { desired: D } | { ref: Del }, reason: string): R;
  /** The report that says a key's objects are gone. */
  deletedReport(key: string, ref: Del): R;
  /** Whether two desired states are the same (a resync then keeps what it rendered). */
  equal(a: D, b: D): boolean;
}

export interface CtrlLinkOptions {
  readonly log: Logger;
  readonly registry: Registry;
  readonly callTimeoutMs?: number;
  readonly reconnect?: BackoffPolicy;
  /** A failed report's backoff (default the reporter's). */
  readonly reportRetry?: BackoffPolicy;
  readonly breaker?: Partial<BreakerConfig>;
  /** How long ctrl has to accept a stream (default DEFAULT_OPEN_TIMEOUT_MS in stream.ts). */
  readonly openTimeoutMs?: number;
  /** Told when ctrl did not accept a stream in time (the connection may never have completed). */
  readonly onOpenTimeout?: () => void;
}

/**
 * Reconnects after a lost stream: full jitter capped at 500 ms. ctrl being down costs each agent
 * about two to four refused connections a second per kind, which is cheap for ctrl and its load
 * balancer (a refused connect is one TCP reset), and an agent whose every kind must reconnect
 * finds a restarted ctrl about 0.35 s (median) after it is ready: a cap of 1 s measured p50
 * 0.99 s with two kinds (`npm run bench -- outages`), a cap of 30 s left agents away for up to
 * half a minute. Auth failures wait longer (stream.ts); an overloaded ctrl is held off by the
 * kind's circuit breaker, not by this.
 */
export const DEFAULT_RECONNECT: BackoffPolicy = { baseMs: 100, capMs: 500, minMs: 50 };

export class CtrlLink<Msg, D, Del, R> {
  readonly name: string;
  readonly breaker: CircuitBreaker;
  readonly protocol: CtrlProtocol<Msg, D, Del, R>;
  readonly #o: CtrlLinkOptions;
  readonly #stream: DesiredStateStream<Msg, D, Del>;
  readonly #reporter: Reporter<R>;
  readonly #m: ReturnType<typeof agentMetrics>;
  #sink: ((a: CursorAction<D, Del>) => void) | undefined;

  constructor(name: string, protocol: CtrlProtocol<Msg, D, Del, R>, opts: CtrlLinkOptions) {
    this.name = name;
    this.protocol = protocol;
    this.#o = opts;
    const m = (this.#m = agentMetrics(opts.registry));
    const labels = { controller: name };
    this.breaker = new CircuitBreaker({
      name,
      config: opts.breaker,
      isFailure: isCtrlDownstreamFailure,
      onPhaseChange: (p) => {
        m.breakerState.set(labels, breakerPhaseValue(p));
        opts.log.warn({ controller: name, phase: p }, "ctrl circuit breaker changed state");
      },
    });
    m.breakerState.set(labels, 0);
    m.streamConnected.set(labels, 0);
    this.#reporter = new Reporter<R>({
      name,
      breaker: this.breaker,
      send: (req, o) => this.#count("report", () => protocol.sendReport(req, o)),
      timeoutMs: opts.callTimeoutMs,
      retry: opts.reportRetry,
      log: opts.log,
      onSent: (result) => m.reportsSent.inc({ ...labels, result }),
      onDeduplicated: () => m.reportsDeduplicated.inc(labels),
    });
    this.#stream = new DesiredStateStream<Msg, D, Del>({
      name,
      open: (cursor, call) => protocol.watch(cursor, call),
      decode: (msg) => {
        m.streamMessages.inc(labels);
        return protocol.decode(msg);
      },
      onAction: (a) => this.#sink?.(a),
      reconnect: opts.reconnect ?? DEFAULT_RECONNECT,
      openTimeoutMs: opts.openTimeoutMs,
      onOpenTimeout: opts.onOpenTimeout,
      log: opts.log,
      onConnectedChange: (c) => {
        m.streamConnected.set(labels, c ? 1 : 0);
        // ctrl answers again: reports that failed while it was away go now, not after the
        // backoff they built up (up to 30 s), which ctrl's rollouts would wait out (a scale-up
        // waits for the reported scale-down: ../../ctrl/rollout/plan.ts holdScaleUp).
        if (c) this.#reporter.retryPending();
      },
      onCursor: (c) => m.cursor.set(labels, Number(c)),
      onReconnect: (reason) => m.streamReconnects.inc({ ...labels, reason }),
    });
  }

  get cursor(): bigint {
    return this.#stream.cursor;
  }

  get connected(): boolean {
    return this.#stream.connected;
  }

  /** How many times ctrl accepted this link's stream. */
  get connects(): number {
    return this.#stream.connects;
  }

  /**
   * Since when the stream has been down (unix ms; since the link was made, before its first
   * stream), or undefined while connected.
   */
  get disconnectedSince(): number | undefined {
    return this.#stream.downSince;
  }

  /** Whether the stream loop runs (false before start and after stop). */
  get running(): boolean {
    return this.#stream.phase !== "stopped";
  }

  /** Runs the stream until `signal` aborts, handing every cursor action to `sink`. */
  run(signal: AbortSignal, sink: (a: CursorAction<D, Del>) => void): Promise<void> {
    this.#sink = sink;
    this.#m.streamDownSince.set(this.name, () => ({ running: this.running, downSince: this.disconnectedSince }));
    return this.#stream.run(signal);
  }

  /** A resync's batched point read, through the breaker. */
  readDesired(keys: string[], signal: AbortSignal): Promise<DesiredBatch<D, Del>> {
    const timeoutMs = this.#o.callTimeoutMs ?? 10_000;
    return this.breaker.execute(() =>
      this.#count("get-desired", () => this.protocol.getDesired(keys, { signal, timeoutMs })),
    );
  }

  /** Queues a status report (deduplicated against what ctrl acknowledged). */
  report(key: string, fingerprint: string, request: R): void {
    this.#reporter.submit(key, fingerprint, request);
  }

  reject(key: string, subject: { desired: D } | { ref: Del }, reason: string): void {
    this.#reporter.submit(key, `rejected:${reason}`, this.protocol.rejectedReport(key, subject, reason));
  }

  deleted(key: string, ref: Del): void {
    this.#reporter.submit(key, "deleted", this.protocol.deletedReport(key, ref));
  }

  /** After a snapshot starts: ctrl may have lost state, so every status is sent again. */
  forgetReports(): void {
    this.#reporter.forgetAll();
  }

  get reportsPending(): number {
    return this.#reporter.pending;
  }

  reportsDrained(): Promise<void> {
    return this.#reporter.drained();
  }

  stop(): Promise<void> {
    return this.#reporter.stop();
  }

  async #count<T>(method: string, fn: () => Promise<T>): Promise<T> {
    try {
      const r = await fn();
      this.#m.ctrlRequests.inc({ controller: this.name, method, result: "ok" });
      return r;
    } catch (err) {
      this.#m.ctrlRequests.inc({ controller: this.name, method, result: "error" });
      throw err;
    }
  }
}

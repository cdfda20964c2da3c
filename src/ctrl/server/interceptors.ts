// Cross-cutting RPC behaviour: error mapping, metrics, and the server-side deadline of unary
// calls. Tracks unary calls in flight so shutdown can wait for them. A server-streaming call's
// request is decoded lazily, inside this interceptor's reach: an undecodable one becomes
// invalid_argument here (unary calls are decoded before any interceptor: rpc-handler.ts).
import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { toConnectError, undecodableRequest, type ErrorSinks } from "./errors.js";
import type { CtrlMetrics } from "./metrics.js";

export class InflightTracker {
  private count = 0;
  private waiters: (() => void)[] = [];
  enter(): void {
    this.count++;
  }
  leave(): void {
    this.count--;
    if (this.count === 0) for (const w of this.waiters.splice(0)) w();
  }
  get size(): number {
    return this.count;
  }
  idle(): Promise<void> {
    if (this.count === 0) return Promise.resolve();
    return new Promise((r) => this.waiters.push(r));
  }
}

function withDeadline<T>(p: Promise<T>, ms: number): Promise<T> {
  if (ms <= 0) return p;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new ConnectError(`the call did not finish within ${ms} ms`, Code.DeadlineExceeded)),
      ms,
    );
  });
  return Promise.race([p, deadline]).finally(() => clearTimeout(timer));
}

async function* mapStreamErrors<T>(
  source: AsyncIterable<T>,
  onEnd: (code: Code | "ok") => void,
  sinks: ErrorSinks,
): AsyncGenerator<T> {
  try {
    for await (const m of source) yield m;
    onEnd("ok");
  } catch (err) {
    const ce = toConnectError(err, sinks);
    onEnd(ce.code);
    throw ce;
  }
}

/** The one request message of a server-streaming call; a body that does not hold exactly one valid message is invalid_argument. */
async function* singleRequestMessage<T>(source: AsyncIterable<T>, method: DescMethod): AsyncGenerator<T> {
  let count = 0;
  try {
    for await (const m of source) {
      if (++count > 1) break;
      yield m;
    }
  } catch (err) {
    const ce = err instanceof ConnectError ? err : undefined;
    throw (ce && undecodableRequest(ce.code, ce.rawMessage, method)) ?? err;
  }
  if (count !== 1)
    throw new ConnectError(
      `invalid request: the body ${count === 0 ? "holds no" : "holds more than one"} ${method.input.typeName} message`,
      Code.InvalidArgument,
    );
}

export function observeInterceptor(opts: {
  metrics: CtrlMetrics;
  inflight: InflightTracker;
  unaryTimeoutMs: number;
  /** "PostgreSQL" or "SQLite", named in outage answers. */
  databaseKind: string;
  onUnexpected: (err: unknown, method: string) => void;
  onDependencyFailure: ErrorSinks["dependency"];
}): Interceptor {
  const { metrics, inflight } = opts;
  return (next) => async (req) => {
    const labels = { service: req.service.name, method: req.method.name };
    const sinks: ErrorSinks = {
      databaseKind: opts.databaseKind,
      dependency: opts.onDependencyFailure,
      unexpected: (err) => opts.onUnexpected(err, `${req.service.name}/${req.method.name}`),
    };
    const count = (code: Code | "ok"): void => {
      metrics.rpcTotal.inc({ ...labels, code: code === "ok" ? "ok" : Code[code] });
    };
    if (!req.stream) {
      inflight.enter();
      const stop = metrics.rpcSeconds.startTimer(labels);
      try {
        const res = await withDeadline(next(req), opts.unaryTimeoutMs);
        count("ok");
        return res;
      } catch (err) {
        const ce = toConnectError(err, sinks);
        count(ce.code);
        throw ce;
      } finally {
        stop();
        inflight.leave();
      }
    }
    try {
      const res = await next(
        req.method.methodKind === "server_streaming"
          ? { ...req, message: singleRequestMessage(req.message, req.method) }
          : req,
      );
      if (!res.stream) return res;
      return { ...res, message: mapStreamErrors(res.message, count, sinks) };
    } catch (err) {
      const ce = toConnectError(err, sinks);
      count(ce.code);
      throw ce;
    }
  };
}

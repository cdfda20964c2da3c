// Cross-cutting RPC behaviour: error mapping, metrics, and the server-side deadline of unary
// calls. Tracks unary calls in flight so shutdown can wait for them.
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { toConnectError } from "./errors.js";
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
    timer = setTimeout(() => reject(new ConnectError(`the call did not finish within ${ms} ms`, Code.DeadlineExceeded)), ms);
  });
  return Promise.race([p, deadline]).finally(() => clearTimeout(timer));
}

async function* mapStreamErrors<T>(source: AsyncIterable<T>, onEnd: (code: Code | "ok") => void, onUnexpected: (err: unknown) => void): AsyncGenerator<T> {
  try {
    for await (const m of source) yield m;
    onEnd("ok");
  } catch (err) {
    const ce = toConnectError(err, onUnexpected);
    onEnd(ce.code);
    throw ce;
  }
}

export function observeInterceptor(opts: {
  metrics: CtrlMetrics;
  inflight: InflightTracker;
  unaryTimeoutMs: number;
  onUnexpected: (err: unknown, method: string) => void;
}): Interceptor {
  const { metrics, inflight } = opts;
  return (next) => async (req) => {
    const labels = { service: req.service.name, method: req.method.name };
    const unexpected = (err: unknown): void => opts.onUnexpected(err, `${req.service.name}/${req.method.name}`);
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
        const ce = toConnectError(err, unexpected);
        count(ce.code);
        throw ce;
      } finally {
        stop();
        inflight.leave();
      }
    }
    try {
      const res = await next(req);
      if (!res.stream) return res;
      return { ...res, message: mapStreamErrors(res.message, count, unexpected) };
    } catch (err) {
      const ce = toConnectError(err, unexpected);
      count(ce.code);
      throw ce;
    }
  };
}

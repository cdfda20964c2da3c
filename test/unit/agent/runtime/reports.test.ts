// Status reports of one kind (src/agent/runtime/ctrl-link.ts, reporter.ts) across a ctrl outage,
// on an in-memory protocol: a report that failed while ctrl was away goes as soon as the kind's
// stream is accepted again, not after the backoff it built up. ctrl's rollouts wait for reported
// scale-downs (src/ctrl/rollout/plan.ts holdScaleUp), so a report held back for its backoff held
// a new revision back as long (the link fault test lost a deploy to it under load).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import { Registry } from "prom-client";
import { CtrlLink, type CtrlProtocol } from "../../../../src/agent/runtime/ctrl-link.js";
import type { StreamEvent } from "../../../../src/agent/runtime/cursor.js";
import type { Logger } from "../../../../src/base/log.js";

type Ev = StreamEvent<string, string>;

const quiet: Logger = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };

function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((r) => (signal.aborted ? r() : signal.addEventListener("abort", () => r(), { once: true })));
}

test(
  "a report that failed while ctrl was down is sent once the stream is accepted again, not after its backoff",
  { timeout: 20_000 },
  async () => {
    let up = false;
    const sent: string[] = [];
    let refused = 0;
    let refusedOnce!: () => void;
    const firstRefusal = new Promise<void>((r) => (refusedOnce = r));
    const protocol: CtrlProtocol<Ev, string, string, string> = {
      async *watch(_cursor, call) {
        // Down: the attempt fails as a refused connection does. Up: ctrl accepts with a bookmark
        // and then has nothing to say.
        if (!up) throw new ConnectError("connect ECONNREFUSED", Code.Unavailable);
        yield { type: "bookmark", version: 0n, keepaliveMs: 60_000 };
        await aborted(call.signal);
      },
      decode: (m) => m,
      getDesired: () => Promise.resolve({ states: [], notFound: [] }),
      sendReport: async (r) => {
        if (!up) {
          refused++;
          refusedOnce();
          throw new ConnectError("connect ECONNREFUSED", Code.Unavailable);
        }
        sent.push(r);
      },
      rejectedReport: (key) => `rejected ${key}`,
      deletedReport: (key) => `deleted ${key}`,
      equal: (a, b) => a === b,
    };
    const link = new CtrlLink("things", protocol, {
      log: quiet,
      registry: new Registry(),
      // The stream comes back within half a second of ctrl; a breaker that never opens here, so
      // only the report's own backoff could hold it.
      reconnect: { baseMs: 20, capMs: 50, minMs: 10 },
      breaker: { failureThreshold: 1_000 },
      // A report's backoff of an hour: were the report left to it, it would not go within the
      // test's limit.
      reportRetry: { baseMs: 3_600_000, capMs: 3_600_000, minMs: 3_600_000 },
    });
    const ac = new AbortController();
    const running = link.run(ac.signal, () => {});
    try {
      link.report("thing-1", "v1", "thing-1 has 2 instances");
      await firstRefusal;
      assert.equal(link.reportsPending, 1, "the refused report waits");
      up = true;
      // Bounded so that, were the report held for its backoff, the test fails instead of waiting.
      const held = new Promise<never>((_r, reject) => {
        const t = setTimeout(() => reject(new Error("the report was still held 10 s after ctrl came back")), 10_000);
        void link.reportsDrained().then(() => clearTimeout(t));
      });
      await Promise.race([link.reportsDrained(), held]);
      assert.deepEqual(sent, ["thing-1 has 2 instances"]);
      assert.equal(link.reportsPending, 0);
      assert.ok(refused >= 1);
    } finally {
      ac.abort();
      await running;
      await link.stop();
    }
  },
);

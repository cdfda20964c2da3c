import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  BreakerOpenError,
  CircuitBreaker,
  breakerAdmit,
  breakerRecord,
  initialBreakerState,
  type BreakerConfig,
} from "../../../../src/agent/runtime/breaker.js";
import { isCtrlDownstreamFailure } from "../../../../src/agent/runtime/ctrl-errors.js";

function clock(start = 1_000_000): { now: () => number; advance: (ms: number) => void } {
  let t = start;
  return { now: () => t, advance: (ms) => (t += ms) };
}

const fail = (): Promise<never> => Promise.reject(new ConnectError("down", Code.Unavailable));
const ok = (): Promise<string> => Promise.resolve("ok");

async function outcome(p: Promise<unknown>): Promise<"ok" | "open" | "error"> {
  try {
    await p;
    return "ok";
  } catch (e) {
    return e instanceof BreakerOpenError ? "open" : "error";
  }
}

test("trips after the threshold of consecutive failures and refuses calls while open", async () => {
  const c = clock();
  const b = new CircuitBreaker({
    name: "t",
    config: { failureThreshold: 3, openMs: 10_000 },
    now: c.now,
    isFailure: isCtrlDownstreamFailure,
  });
  for (let i = 0; i < 3; i++) assert.equal(await outcome(b.execute(fail)), "error");
  assert.equal(b.phase, "open");
  let called = false;
  assert.equal(await outcome(b.execute(async () => (called = true))), "open");
  assert.equal(called, false);
});

test("the open period counts from the trip, not from construction", async () => {
  const c = clock();
  const b = new CircuitBreaker({ name: "t", config: { failureThreshold: 1, openMs: 10_000 }, now: c.now });
  c.advance(5 * 60_000); // long after construction
  await outcome(b.execute(fail));
  assert.equal(b.phase, "open");
  c.advance(9_999);
  assert.equal(await outcome(b.execute(ok)), "open");
  c.advance(1);
  assert.equal(await outcome(b.execute(ok)), "ok");
  assert.equal(b.phase, "closed");
});

test("a failure while half-open re-opens, and the new open period starts then", async () => {
  const c = clock();
  const b = new CircuitBreaker({ name: "t", config: { failureThreshold: 1, openMs: 1_000 }, now: c.now });
  await outcome(b.execute(fail));
  c.advance(1_000);
  assert.equal(await outcome(b.execute(fail)), "error");
  assert.equal(b.phase, "open");
  c.advance(999);
  assert.equal(await outcome(b.execute(ok)), "open");
  c.advance(1);
  assert.equal(await outcome(b.execute(ok)), "ok");
});

test("answers such as NotFound or InvalidArgument are not downstream failures", async () => {
  const b = new CircuitBreaker({ name: "t", config: { failureThreshold: 2 }, isFailure: isCtrlDownstreamFailure });
  for (const code of [Code.NotFound, Code.InvalidArgument, Code.AlreadyExists, Code.FailedPrecondition]) {
    for (let i = 0; i < 5; i++) await outcome(b.execute(() => Promise.reject(new ConnectError("no", code))));
  }
  assert.equal(b.phase, "closed");
  assert.equal(isCtrlDownstreamFailure(new ConnectError("x", Code.Unavailable)), true);
  assert.equal(isCtrlDownstreamFailure(new ConnectError("x", Code.DeadlineExceeded)), true);
  assert.equal(isCtrlDownstreamFailure(new Error("socket hang up")), true);
});

test("half-open admits a bounded number of concurrent trials", async () => {
  const c = clock();
  const b = new CircuitBreaker({
    name: "t",
    config: { failureThreshold: 1, openMs: 100, halfOpenMaxCalls: 1 },
    now: c.now,
  });
  await outcome(b.execute(fail));
  c.advance(100);
  let release: () => void = () => {};
  const trial = b.execute(() => new Promise<void>((r) => (release = r)));
  assert.equal(b.phase, "half-open");
  assert.equal(await outcome(b.execute(ok)), "open");
  release();
  await trial;
  assert.equal(b.phase, "closed");
});

test("late results of calls admitted under an earlier state do not move the state", () => {
  const cfg: BreakerConfig = { failureThreshold: 1, openMs: 100, halfOpenMaxCalls: 1, closeAfterSuccesses: 1 };
  let s = initialBreakerState();
  const a = breakerAdmit(s, 0, cfg);
  assert.ok(a.admitted);
  s = a.state;
  const b = breakerAdmit(s, 0, cfg);
  assert.ok(b.admitted);
  s = breakerRecord(b.state, b.ticket, "failure", 0, cfg); // trips
  assert.equal(s.phase, "open");
  const after = breakerRecord(s, a.ticket, "success", 1, cfg); // the older call succeeds late
  assert.equal(after.phase, "open");
});

// Model test: sequential calls against a simple reference model of the documented rules.
type Cmd = { t: "advance"; ms: number } | { t: "call"; result: "ok" | "fail" | "answer" };

test("model: the breaker follows the documented rules for any sequence of calls", async () => {
  const cmd = fc.oneof(
    fc.record({ t: fc.constant("advance" as const), ms: fc.integer({ min: 0, max: 3_000 }) }),
    fc.record({
      t: fc.constant("call" as const),
      result: fc.constantFrom("ok" as const, "fail" as const, "answer" as const),
    }),
  );
  await fc.assert(
    fc.asyncProperty(
      fc.array(cmd, { maxLength: 60 }),
      fc.integer({ min: 1, max: 4 }),
      async (cmds: Cmd[], threshold) => {
        const c = clock(0);
        const openMs = 1_000;
        const b = new CircuitBreaker({
          name: "m",
          config: { failureThreshold: threshold, openMs },
          now: c.now,
          isFailure: isCtrlDownstreamFailure,
        });
        // Reference model.
        let phase: "closed" | "open" = "closed";
        let failures = 0;
        let openedAt = 0;
        for (const k of cmds) {
          if (k.t === "advance") {
            c.advance(k.ms);
            continue;
          }
          const now = c.now();
          let expected: "ok" | "open" | "error";
          if (phase === "open" && now < openedAt + openMs) expected = "open";
          else {
            const halfOpen = phase === "open";
            expected = k.result === "ok" ? "ok" : "error";
            if (k.result === "fail") {
              if (halfOpen) {
                openedAt = now;
              } else if (++failures >= threshold) {
                phase = "open";
                openedAt = now;
                failures = 0;
              }
            } else {
              phase = "closed";
              failures = 0;
            }
          }
          const fn =
            k.result === "ok"
              ? ok
              : k.result === "fail"
                ? fail
                : () => Promise.reject(new ConnectError("nf", Code.NotFound));
          const got = await outcome(b.execute(fn));
          assert.equal(got, expected);
          assert.equal(b.phase === "open" ? "open" : "closed", phase === "open" ? "open" : "closed");
        }
      },
    ),
    { numRuns: 300 },
  );
});

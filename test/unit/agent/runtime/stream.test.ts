// The desired-state stream loop (src/agent/runtime/stream.ts) on in-memory streams: what
// "connected" means, the bound on every wait (opening, a quiet stream, a transport that ignores
// its abort signal), and that the loop neither ends nor fails quietly. The same loop over real
// HTTP/2 and a real ctrl is tested in test/integration/faults/link.test.ts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { Code, ConnectError } from "@connectrpc/connect";
import { DesiredStateStream, silenceBoundMs, type EndReason } from "../../../../src/agent/runtime/stream.js";
import type { CursorAction, StreamEvent } from "../../../../src/agent/runtime/cursor.js";
import type { Logger } from "../../../../src/base/log.js";

type Ev = StreamEvent<string, string>;

interface Line {
  level: "debug" | "info" | "warn" | "error";
  msg: string;
  obj: object;
}

function recordingLogger(): Logger & { lines: Line[]; errors: string[] } {
  const lines: Line[] = [];
  const at =
    (level: Line["level"]) =>
    (obj: object, msg?: string): void =>
      void lines.push({ level, msg: msg ?? "", obj });
  return {
    lines,
    get errors() {
      return lines.filter((l) => l.level === "error").map((l) => l.msg);
    },
    debug: at("debug"),
    info: at("info"),
    warn: at("warn"),
    error: at("error"),
  };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A stream that never answers and ignores its abort signal (the worst transport). */
function deaf(): AsyncIterable<Ev> {
  return { [Symbol.asyncIterator]: () => ({ next: () => new Promise<IteratorResult<Ev>>(() => undefined) }) };
}

/** Resolves when `signal` aborts. */
function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((r) => (signal.aborted ? r() : signal.addEventListener("abort", () => r(), { once: true })));
}

const bookmark = (version: bigint, keepaliveMs: number): Ev => ({ type: "bookmark", version, keepaliveMs });

test("silence bound: two keepalive intervals, none without a keepalive", () => {
  assert.equal(silenceBoundMs(10_000), 20_000);
  assert.equal(silenceBoundMs(0), undefined);
  assert.equal(silenceBoundMs(Number.NaN), undefined);
});

test("reconnects after failures and resumes from the cursor; snapshot then live changes", async () => {
  const ac = new AbortController();
  const cursors: bigint[] = [];
  const actions: string[] = [];
  let attempt = 0;
  const stream = new DesiredStateStream<Ev, string, string>({
    name: "t",
    reconnect: { baseMs: 1, capMs: 5 },
    log: recordingLogger(),
    decode: (e) => e,
    onAction: (a: CursorAction<string, string>) =>
      actions.push(
        a.type === "collect-garbage"
          ? `gc:${[...a.keep].join(",")}`
          : a.type === "snapshot-started"
            ? "snap"
            : `${a.type}:${a.key}`,
      ),
    open: (cursor) => {
      cursors.push(cursor);
      attempt++;
      const n = attempt;
      return (async function* (): AsyncGenerator<Ev> {
        if (n === 1) throw new ConnectError("down", Code.Unavailable);
        if (n === 2) {
          yield { type: "snapshot-start", version: 0n };
          yield { type: "apply", version: 0n, key: "a", desired: "A" };
          // Broken mid-snapshot: must not advance the cursor.
          throw new ConnectError("reset", Code.Unavailable);
        }
        if (n === 3) {
          yield bookmark(0n, 1000);
          yield { type: "snapshot-start", version: 0n };
          yield { type: "apply", version: 0n, key: "a", desired: "A" };
          yield { type: "snapshot-end", version: 0n, head: 10n };
          yield { type: "apply", version: 11n, key: "b", desired: "B" };
          return; // server ends the stream cleanly
        }
        ac.abort();
      })();
    },
  });
  await stream.run(ac.signal);
  assert.deepEqual(cursors, [0n, 0n, 0n, 11n]);
  assert.deepEqual(actions, ["snap", "apply:a", "snap", "apply:a", "gc:a", "apply:b"]);
  assert.equal(stream.cursor, 11n);
});

test("a resumed stream whose only message is a bookmark is connected at once, and the bookmark moves the cursor", async () => {
  const ac = new AbortController();
  const changes: boolean[] = [];
  let opened = 0;
  const stream = new DesiredStateStream<Ev, string, string>({
    name: "sentinels",
    reconnect: { baseMs: 1, capMs: 5 },
    log: recordingLogger(),
    decode: (e) => e,
    onAction: () => assert.fail("a bookmark changes nothing desired"),
    onConnectedChange: (c) => changes.push(c),
    open: (_cursor, call) => {
      opened++;
      return (async function* (): AsyncGenerator<Ev> {
        yield bookmark(7n, 60_000);
        await aborted(call.signal);
      })();
    },
  });
  const running = stream.run(ac.signal);
  await sleep(30);
  assert.equal(stream.connected, true, "connected with nothing but ctrl's first message");
  assert.equal(stream.downSince, undefined);
  assert.equal(stream.cursor, 7n);
  ac.abort();
  await running;
  assert.equal(opened, 1);
  assert.deepEqual(changes, [true, false]);
  assert.equal(stream.phase, "stopped");
});

test("ctrl that never accepts: each attempt is abandoned at the open bound, even by a transport that ignores its signal", async () => {
  const ac = new AbortController();
  const reasons: EndReason[] = [];
  let timeouts = 0;
  const opens: number[] = [];
  const stream = new DesiredStateStream<Ev, string, string>({
    name: "t",
    reconnect: { baseMs: 1, capMs: 2 },
    openTimeoutMs: 40,
    onOpenTimeout: () => timeouts++,
    log: recordingLogger(),
    decode: (e) => e,
    onAction: () => undefined,
    onReconnect: (r) => reasons.push(r),
    open: () => {
      opens.push(performance.now());
      return deaf();
    },
  });
  const running = stream.run(ac.signal);
  await sleep(300);
  ac.abort();
  await running;
  assert.ok(opens.length >= 3, `${opens.length} attempts in 300 ms`);
  assert.ok(reasons.length >= 2 && reasons.every((r) => r === "open-timeout"), reasons.join(","));
  assert.equal(timeouts, reasons.length);
  for (let i = 1; i < opens.length; i++)
    assert.ok((opens[i] ?? 0) - (opens[i - 1] ?? 0) >= 39, "no attempt abandoned before its bound");
  assert.equal(stream.connected, false);
});

test("a stream quiet for two keepalive intervals is abandoned; bookmarks in time keep it", async () => {
  const ac = new AbortController();
  const reasons: EndReason[] = [];
  let lastMessageAt = 0;
  let endedAt = 0;
  let n = 0;
  const stream = new DesiredStateStream<Ev, string, string>({
    name: "t",
    reconnect: { baseMs: 1, capMs: 2 },
    openTimeoutMs: 1000,
    log: recordingLogger(),
    decode: (e) => e,
    onAction: () => undefined,
    onReconnect: (r) => {
      reasons.push(r);
      endedAt = performance.now();
    },
    open: () => {
      n++;
      if (n > 1) {
        ac.abort();
        return deaf();
      }
      return (async function* (): AsyncGenerator<Ev> {
        // keepalive 25 ms: the bound is 50 ms; bookmarks every 15 ms for a while keep it alive.
        for (let i = 0; i < 10; i++) {
          lastMessageAt = performance.now();
          yield bookmark(3n, 25);
          await sleep(15);
        }
        // Then silence, and deaf to the abort (a half-open connection).
        await new Promise(() => undefined);
      })();
    },
  });
  await stream.run(ac.signal);
  assert.deepEqual(reasons, ["silent"]);
  const silentFor = endedAt - lastMessageAt;
  assert.ok(silentFor >= 49, `abandoned after ${silentFor.toFixed(0)} ms of silence`);
  assert.ok(silentFor < 1000, `abandoned after ${silentFor.toFixed(0)} ms of silence`);
});

test("each wait for a message leaves no listener behind on the attempt's signal, however many messages a stream carries", async () => {
  const ac = new AbortController();
  const listeners: number[] = [];
  const stream = new DesiredStateStream<Ev, string, string>({
    name: "t",
    reconnect: { baseMs: 1, capMs: 2 },
    log: recordingLogger(),
    decode: (e) => e,
    onAction: () => undefined,
    open: (_cursor, call) =>
      (async function* (): AsyncGenerator<Ev> {
        for (let i = 1; i <= 5000; i++) {
          yield bookmark(BigInt(i), 60_000);
          if (i % 1000 === 0) listeners.push(getEventListeners(call.signal, "abort").length);
        }
        ac.abort();
        await aborted(call.signal);
      })(),
  });
  await stream.run(ac.signal);
  assert.equal(stream.cursor, 5000n);
  assert.ok(
    listeners.every((n) => n <= 2),
    `abort listeners on the attempt's signal: ${listeners.join(", ")}`,
  );
});

test("a stream whose ctrl announces no keepalive has no silence bound (the session's PINGs bound it)", async () => {
  const ac = new AbortController();
  const reasons: EndReason[] = [];
  const stream = new DesiredStateStream<Ev, string, string>({
    name: "t",
    reconnect: { baseMs: 1, capMs: 2 },
    openTimeoutMs: 20,
    log: recordingLogger(),
    decode: (e) => e,
    onAction: () => undefined,
    onReconnect: (r) => reasons.push(r),
    open: (_cursor, call) =>
      (async function* (): AsyncGenerator<Ev> {
        yield { type: "snapshot-start", version: 0n };
        yield { type: "snapshot-end", version: 0n, head: 4n };
        await aborted(call.signal);
      })(),
  });
  const running = stream.run(ac.signal);
  await sleep(150);
  assert.equal(stream.connected, true);
  ac.abort();
  await running;
  assert.deepEqual(reasons, []);
});

test("a failing handler is logged and the loop goes on; it ends only when its signal aborts, and says so", async () => {
  const ac = new AbortController();
  const log = recordingLogger();
  let n = 0;
  const stream = new DesiredStateStream<Ev, string, string>({
    name: "jobs",
    reconnect: { baseMs: 1, capMs: 2 },
    log,
    decode: (e) => e,
    onAction: (a) => {
      if (a.type === "apply" && a.key === "bad") throw new Error("handler bug");
    },
    open: (_cursor, call) => {
      n++;
      const first = n === 1;
      return (async function* (): AsyncGenerator<Ev> {
        yield bookmark(1n, 60_000);
        if (first) yield { type: "apply", version: 2n, key: "bad", desired: "x" };
        await aborted(call.signal);
      })();
    },
  });
  const running = stream.run(ac.signal);
  await sleep(50);
  assert.equal(n, 2, "reconnected after the failure");
  assert.equal(stream.connected, true);
  ac.abort();
  await running;
  const warn = log.lines.find((l) => l.level === "warn");
  assert.match(JSON.stringify(warn?.obj), /handler bug/);
  assert.equal(log.lines.at(-1)?.msg, "desired-state stream stopped");
});

test("an outage is logged when it starts, again while it lasts, and when it ends", async () => {
  const ac = new AbortController();
  const log = recordingLogger();
  let n = 0;
  const stream = new DesiredStateStream<Ev, string, string>({
    name: "deployments",
    reconnect: { baseMs: 1, capMs: 2, minMs: 1 },
    outageLogEveryMs: 60,
    log,
    decode: (e) => e,
    onAction: () => undefined,
    open: (_cursor, call) => {
      n++;
      const up = performance.now() > started + 150;
      return (async function* (): AsyncGenerator<Ev> {
        if (!up) throw new ConnectError("connect ECONNREFUSED", Code.Unavailable);
        yield bookmark(1n, 60_000);
        await aborted(call.signal);
      })();
    },
  });
  const started = performance.now();
  const running = stream.run(ac.signal);
  await sleep(250);
  ac.abort();
  await running;
  const warns = log.lines.filter((l) => l.level === "warn").map((l) => l.msg);
  assert.equal(warns[0], "desired-state stream lost; reconnecting");
  assert.ok(warns.length >= 2 && warns.length <= 4, `${warns.length} warnings over ${n} attempts: ${warns.join("; ")}`);
  assert.ok(warns.slice(1).every((w) => w === "desired-state stream still down; reconnecting"));
  assert.ok(n > warns.length + 5, "most failed attempts are not logged above debug");
  const back = log.lines.find((l) => l.msg === "desired-state stream connected again");
  assert.ok(back, "the end of the outage is logged");
  assert.ok((back.obj as { downMs: number }).downMs >= 140);
});

test("credential errors are logged loudly and retried no faster than the floor", async () => {
  const ac = new AbortController();
  const log = recordingLogger();
  const opens: number[] = [];
  const stream = new DesiredStateStream<Ev, string, string>({
    name: "t",
    reconnect: { baseMs: 1, capMs: 1 },
    authRetryFloorMs: 30,
    log,
    decode: (e) => e,
    onAction: () => {},
    open: () => {
      opens.push(performance.now());
      if (opens.length === 3) ac.abort();
      return {
        [Symbol.asyncIterator]: () => ({
          next: () => Promise.reject(new ConnectError("no", Code.Unauthenticated)),
        }),
      };
    },
  });
  await stream.run(ac.signal);
  assert.equal(log.errors.length, 2);
  const [a = 0, b = 0] = opens;
  assert.ok(b - a >= 29, "waited at least the floor between attempts");
  assert.equal(stream.connected, false);
});

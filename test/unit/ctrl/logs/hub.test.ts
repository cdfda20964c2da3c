// The log hub between ctrl replicas (two hubs on one bus stand for two replicas): a request
// reaches the agents of its region wherever they are connected, their lines come back to the
// reader's replica (which hears which clusters were asked), a push for another region's request or
// a forgotten one is refused, and a relayed batch always fits a NOTIFY payload.
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { create, toBinary } from "@bufbuild/protobuf";
import {
  AgentLogRequestSchema,
  PushLogsRequestSchema,
  type PushLogsRequest,
} from "../../../../src/gen/krane/ctrl/v1/logs_pb.js";
import { LocalLogBus, MAX_PAYLOAD } from "../../../../src/ctrl/logs/bus.js";
import { LogHub, splitPush } from "../../../../src/ctrl/logs/hub.js";
import { MAX_LINE_BYTES } from "../../../../src/contracts/logs.js";
import { validateLogQuery } from "../../../../src/ctrl/validate/logs.js";
import { DomainError } from "../../../../src/ctrl/errors.js";

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));
const push = (requestId: string, lines: string[], region = "eu"): PushLogsRequest =>
  create(PushLogsRequestSchema, {
    region,
    requestId,
    entries: lines.map((l) => ({ instance: "web-1", entry: { case: "line" as const, value: l } })),
  });

test("a request reaches the region's agent on another replica, and its lines come back to the reader", async () => {
  const bus = new LocalLogBus();
  const reader = new LogHub(bus);
  const agentSide = new LogHub(bus);
  reader.start();
  agentSide.start();
  const eu = agentSide.channel("eu", "c1");
  const us = agentSide.channel("us", "c2");
  const got: string[] = [];
  const cancel = reader.request("eu", create(AgentLogRequestSchema, { requestId: "log_1" }), (_c, p) =>
    got.push(...p.entries.map((e) => (e.entry.case === "line" ? e.entry.value : ""))),
  );
  await tick();
  const m = await eu.next(10, new AbortController().signal);
  assert.equal(m?.message.case, "request");
  assert.equal(await us.next(10, new AbortController().signal), undefined, "another region hears nothing");
  // The agent of another region cannot answer (nor inject lines into) it.
  assert.equal(agentSide.push("us", "c2", push("log_1", ["forged"], "us")), false);
  assert.equal(agentSide.push("eu", "c1", push("log_1", ["a", "b"])), true);
  await tick();
  assert.deepEqual(got, ["a", "b"]);
  cancel();
  await tick();
  assert.equal((await eu.next(10, new AbortController().signal))?.message.case, "cancelRequestId");
  assert.equal(agentSide.push("eu", "c1", push("log_1", ["late"])), false, "cancelled: the agent stops");
  assert.equal(agentSide.push("eu", "c1", push("log_unknown", ["x"])), false);
  reader.close();
  agentSide.close();
});

test("the reader hears which clusters were handed its request, from every replica", async () => {
  const bus = new LocalLogBus();
  const reader = new LogHub(bus);
  const one = new LogHub(bus);
  const two = new LogHub(bus);
  for (const h of [reader, one, two]) h.start();
  one.channel("eu", "c1");
  two.channel("eu", "c2");
  two.channel("us", "c3");
  const asked: string[] = [];
  reader.request(
    "eu",
    create(AgentLogRequestSchema, { requestId: "log_a" }),
    () => undefined,
    (ids) => asked.push(...ids),
  );
  await tick();
  await tick();
  assert.deepEqual(asked.sort(), ["c1", "c2"], "each eu cluster once; none of another region");
  for (const h of [reader, one, two]) h.close();
});

test("a request whose reader's replica stopped keeping it alive is forgotten", async () => {
  const bus = new LocalLogBus();
  // Long enough that the first push below lands before a stalled machine could forget the request.
  const dead = new LogHub(bus, { keepaliveMs: 100, forgetAfterMs: 1_000 });
  const alive = new LogHub(bus, { keepaliveMs: 100, forgetAfterMs: 1_000 });
  alive.start();
  dead.request("eu", create(AgentLogRequestSchema, { requestId: "log_2" }), () => undefined);
  await tick();
  assert.equal(alive.push("eu", "c1", push("log_2", ["x"])), true);
  // Forgotten within a few keepalive periods (polled: timers run late on a busy machine).
  const deadline = Date.now() + 5_000;
  while (alive.push("eu", "c1", push("log_2", ["x"])) && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 20));
  assert.equal(alive.push("eu", "c1", push("log_2", ["x"])), false);
  alive.close();
});

test("a channel whose agent does not read is closed past its backlog", () => {
  const hub = new LogHub(new LocalLogBus(), { channelBacklog: 2 });
  const ch = hub.channel("eu", "c1");
  for (let i = 0; i < 3; i++) ch.send(create(PushLogsRequestSchema) as never);
  assert.equal(ch.closed, true);
  assert.equal(hub.channels, 0);
});

test("property: relayed parts fit a NOTIFY payload, keep every entry in order, and the end", () => {
  fc.assert(
    fc.property(
      fc.array(fc.string({ unit: "binary", maxLength: 200 }), { maxLength: 200 }),
      fc.nat(3),
      fc.boolean(),
      (lines, longOnes, done) => {
        const all = [...lines, ...Array.from({ length: longOnes }, () => "€".repeat(MAX_LINE_BYTES / 3))];
        const p = create(PushLogsRequestSchema, { ...push("log_3", all), done });
        const parts = splitPush(p);
        for (const part of parts) {
          const payload = `p|cluster_0123456789abcdef|${Buffer.from(toBinary(PushLogsRequestSchema, part)).toString("base64")}`;
          assert.ok(Buffer.byteLength(payload) < MAX_PAYLOAD, `${Buffer.byteLength(payload)}`);
        }
        assert.deepEqual(
          parts.flatMap((x) => x.entries.map((e) => e.entry.value)),
          all,
        );
        assert.deepEqual(
          parts.map((x) => x.done),
          parts.map((_, i) => i === parts.length - 1 && done),
        );
      },
    ),
    { numRuns: 40 },
  );
});

test("StreamLogs requests: bad fields are named", () => {
  const base = {
    workspace: "acme",
    project: "shop",
    environment: "prod",
    follow: false,
    sinceUnixMs: 0n,
    revision: 0n,
    region: "",
    instance: "",
    previous: false,
  };
  const now = 1_700_000_000_000;
  const field = (patch: Partial<typeof base> & { tailLines?: number }): string | undefined => {
    try {
      validateLogQuery({ ...base, ...patch }, now);
      return undefined;
    } catch (err) {
      assert.ok(err instanceof DomainError && err.code === "invalid_argument");
      return err.field;
    }
  };
  assert.equal(field({}), undefined);
  assert.equal(field({ tailLines: -1 }), "tail_lines");
  assert.equal(field({ tailLines: 0 }), undefined);
  assert.equal(field({ sinceUnixMs: BigInt(now + 60_000) }), "since_unix_ms");
  assert.equal(field({ sinceUnixMs: BigInt(now + 1_000) }), undefined, "a little clock skew is fine");
  assert.equal(field({ revision: -1n }), "revision");
  assert.equal(field({ region: "Not A Region" }), "region");
  assert.equal(field({ instance: "../etc" }), "instance");
  assert.equal(field({ previous: true, follow: true }), "previous");
  assert.equal(field({ project: "" }), "project");
});

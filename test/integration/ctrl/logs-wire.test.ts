// StreamLogs on every wire, and the clusters of a region: ctrl on SQLite over real HTTP/2, with
// agents that speak the log channel protocol themselves (each a cluster token of its own, on a
// Connect client as the real agent uses), so what they answer and when is up to the test. A
// reader over gRPC and over gRPC-Web gets every line, and each refusal as its code; a region of
// two clusters is read whole even when one cluster answers after the other finished, and a
// cluster that never answers ends the read with a marker naming it; a reader that stops reading
// never holds up an agent, and once it reads again it is told how many lines it missed; ctrl's
// HTTP/2 receive windows are wide enough that a batch of lines is not held to 64 KiB per round trip;
// a --grep regex that backtracks without end is stopped on its worker while ctrl answers other calls.
import assert from "node:assert/strict";
import * as http2 from "node:http2";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Code, createClient, type Client, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import {
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import {
  LogChannelService,
  LogMarkerKind,
  LogService,
  type AgentLogRequest,
  type LogEntry,
} from "../../../src/gen/krane/ctrl/v1/logs_pb.js";
import { HTTP2_CONNECTION_WINDOW, HTTP2_STREAM_WINDOW } from "../../../src/contracts/http2.js";
import { msToNs } from "../../../src/contracts/logs.js";
import { bearer, expectCode, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const REF = { workspace: "acme", project: "shop", environment: "production" };
/** How long ctrl waits for a cluster that was asked (short: the test waits it out once). */
const ANSWER_TIMEOUT_MS = 2_000;
/** Entries a StreamLogs call holds for its reader at most (ctrl's `logs.capacity`; small here). */
const CAPACITY = 2_000;

type Wire = "connect" | "grpc" | "grpc-web";

function transport(url: string, token: string | null, wire: Wire): Transport {
  const opts = { baseUrl: url, interceptors: [bearer(token)] };
  if (wire === "grpc") return createGrpcTransport(opts);
  if (wire === "grpc-web") return createGrpcWebTransport({ ...opts, httpVersion: "2" });
  return createConnectTransport({ ...opts, httpVersion: "2" });
}

/**
 * How a scripted agent answers a request: the pushes it makes, in order, after a delay each. A
 * push with `chunk` is in the chunk form: that text as the instance's lines, as pods/log gives them.
 */
type Script = (req: AgentLogRequest) => { delayMs: number; lines: string[]; done: boolean; chunk?: string }[];

/**
 * An agent of one cluster: opens its log channel and answers every request it hears with the
 * script's pushes (lines of instance `<cluster>-pod`, timed now), as the agent's LogSession does.
 */
function scriptedAgent(
  url: string,
  token: string,
  cluster: string,
  script: Script,
): { stop: () => void; heard: number; pushed: number } {
  const abort = new AbortController();
  const client = createClient(LogChannelService, transport(url, token, "connect"));
  const state = { stop: () => abort.abort(), heard: 0, pushed: 0 };
  void (async () => {
    for await (const m of client.openLogChannel({ region: "eu" }, { signal: abort.signal, timeoutMs: 0 })) {
      if (m.message.case !== "request") continue;
      state.heard++;
      const req = m.message.value;
      void (async () => {
        for (const step of script(req)) {
          await new Promise((r) => setTimeout(r, step.delayMs));
          if (abort.signal.aborted) return;
          const res = await client.pushLogs({
            region: "eu",
            requestId: req.requestId,
            done: step.done,
            entries: step.lines.map((line) => ({
              timeUnixNano: msToNs(Date.now()),
              instance: `${cluster}-pod`,
              entry: { case: "line" as const, value: line },
            })),
            chunks:
              step.chunk === undefined
                ? []
                : [
                    {
                      instance: `${cluster}-pod`,
                      content: { case: "marker", value: { kind: LogMarkerKind.JOINED } },
                      markerTimeUnixNano: 1n,
                    },
                    { instance: `${cluster}-pod`, content: { case: "lines", value: Buffer.from(step.chunk) } },
                  ],
          });
          state.pushed += step.lines.length;
          if (res.cancelled) return;
        }
      })().catch(() => undefined);
    }
  })().catch(() => undefined);
  return state;
}

async function readAll(client: Client<typeof LogService>, req: object = {}): Promise<LogEntry[]> {
  const out: LogEntry[] = [];
  for await (const res of client.streamLogs({ ...REF, ...req }, { timeoutMs: 30_000 })) out.push(...res.entries);
  return out;
}

const linesOf = (entries: LogEntry[]): string[] =>
  entries.flatMap((e) => (e.entry.case === "line" ? [`${e.instance}: ${e.entry.value}`] : []));
const markersOf = (entries: LogEntry[]): string[] =>
  entries.flatMap((e) =>
    e.entry.case === "marker" ? [`${LogMarkerKind[e.entry.value.kind]} ${e.entry.value.message}`] : [],
  );

describe("StreamLogs over gRPC and gRPC-Web, and the clusters of a region", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  const agents: { stop: () => void }[] = [];
  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      logs: { answerTimeoutMs: ANSWER_TIMEOUT_MS, holdMs: 50, capacity: CAPACITY },
    });
    const t = ctrl.adminToken;
    await ctrl.client(RegionService, t).createRegion({ name: "eu" });
    await ctrl.client(WorkspaceService, t).createWorkspace({ slug: REF.workspace });
    await ctrl.client(ProjectService, t).createProject({ workspace: REF.workspace, slug: REF.project });
    await ctrl.client(EnvironmentService, t).createEnvironment({
      ...REF,
      slug: REF.environment,
      regions: [{ region: "eu", replicas: 1 }],
    });
  });
  /** Waits until exactly `n` agent channels are open on ctrl. */
  const channels = async (n: number): Promise<void> => {
    const deadline = Date.now() + 20_000;
    while (ctrl.logHub.channels !== n) {
      if (Date.now() > deadline) throw new Error(`${ctrl.logHub.channels} log channels open, not ${n}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  after(async () => {
    for (const a of agents) a.stop();
    await ctrl.close();
    dir.remove();
  });

  it("a reader over gRPC and over gRPC-Web gets every line; refusals arrive as their codes", async () => {
    const lines = Array.from({ length: 50 }, (_, i) => `line ${i + 1}`);
    const agent = scriptedAgent(ctrl.url, await ctrl.agentToken("eu", "one"), "one", () => [
      { delayMs: 0, lines: lines.slice(0, 20), done: false },
      { delayMs: 20, lines: lines.slice(20), done: true },
    ]);
    agents.push(agent);
    try {
      await channels(1);
      const clusterToken = await ctrl.agentToken("eu", "intruder");
      for (const wire of ["grpc", "grpc-web"] as const) {
        const api = createClient(LogService, transport(ctrl.url, ctrl.adminToken, wire));
        const got = await readAll(api);
        assert.deepEqual(
          linesOf(got),
          lines.map((l) => `one-pod: ${l}`),
          `${wire}: every line, in order`,
        );
        assert.ok(
          got.every((e) => e.region === "eu"),
          `${wire}: ctrl names the region`,
        );
        const first = async (c: Client<typeof LogService>, req: object): Promise<void> => {
          for await (const _ of c.streamLogs({ ...REF, ...req })) break;
        };
        await expectCode(first(api, { tailLines: -1 }), Code.InvalidArgument, /tail_lines/);
        await expectCode(first(api, { region: "mars" }), Code.InvalidArgument, /region/);
        await expectCode(first(api, { environment: "nowhere" }), Code.NotFound, /environment "nowhere"/);
        await expectCode(first(createClient(LogService, transport(ctrl.url, null, wire)), {}), Code.Unauthenticated);
        await expectCode(
          first(createClient(LogService, transport(ctrl.url, clusterToken, wire)), {}),
          Code.PermissionDenied,
        );
      }
    } finally {
      agent.stop();
      await channels(0);
    }
  });

  it("an agent pushing the chunk form: ctrl asked for it, splits the lines, reads their times, applies since", async () => {
    let asked: AgentLogRequest | undefined;
    const agent = scriptedAgent(ctrl.url, await ctrl.agentToken("eu", "raw"), "raw", (req) => {
      asked = req;
      return [
        {
          delayMs: 0,
          lines: [],
          done: true,
          chunk:
            // The API server reads from whole seconds: the first line is before the asked time.
            "2025-01-02T03:04:04.900Z before\n2025-01-02T03:04:05.100000001Z first\n" +
            "no stamp\n2025-01-02T03:04:05.2Z second\n2025-01-02T03:04:06Z unfinished",
        },
      ];
    });
    agents.push(agent);
    try {
      await channels(1);
      const api = createClient(LogService, transport(ctrl.url, ctrl.adminToken, "connect"));
      const since = Date.parse("2025-01-02T03:04:05.050Z");
      const got = await readAll(api, { sinceUnixMs: BigInt(since) });
      assert.equal(asked?.chunks, true, "ctrl takes the chunk form");
      assert.deepEqual(linesOf(got), ["raw-pod: first", "raw-pod: second"]);
      const s5 = BigInt(Date.parse("2025-01-02T03:04:05Z")) * 1_000_000n;
      assert.deepEqual(
        got.filter((e) => e.entry.case === "line").map((e) => e.timeUnixNano),
        [s5 + 100_000_001n, s5 + 200_000_000n],
      );
      assert.deepEqual(markersOf(got), ["JOINED "], "the marker comes with the lines");
    } finally {
      agent.stop();
      await channels(0);
    }
  });

  it("a region of two clusters is read whole, though one answers after the other finished", async () => {
    const quick = scriptedAgent(ctrl.url, await ctrl.agentToken("eu", "quick"), "quick", () => [
      { delayMs: 0, lines: ["q1", "q2"], done: true },
    ]);
    // Starts answering well after the quick cluster is done (and within ctrl's answer timeout).
    const slow = scriptedAgent(ctrl.url, await ctrl.agentToken("eu", "slow"), "slow", () => [
      { delayMs: 800, lines: ["s1"], done: false },
      { delayMs: 100, lines: ["s2"], done: true },
    ]);
    agents.push(quick, slow);
    try {
      await channels(2);
      const api = createClient(LogService, transport(ctrl.url, ctrl.adminToken, "connect"));
      const got = await readAll(api);
      assert.deepEqual(linesOf(got).sort(), ["quick-pod: q1", "quick-pod: q2", "slow-pod: s1", "slow-pod: s2"]);
      assert.deepEqual(markersOf(got), [], "nothing missing");
    } finally {
      quick.stop();
      slow.stop();
      await channels(0);
    }
  });

  it("a cluster that was asked and never answers ends the read with a marker naming it", async () => {
    const quick = scriptedAgent(ctrl.url, await ctrl.agentToken("eu", "quick"), "quick", () => [
      { delayMs: 0, lines: ["q1"], done: true },
    ]);
    const mute = scriptedAgent(ctrl.url, await ctrl.agentToken("eu", "mute"), "mute", () => []);
    agents.push(quick, mute);
    try {
      await channels(2);
      const api = createClient(LogService, transport(ctrl.url, ctrl.adminToken, "connect"));
      const started = Date.now();
      const got = await readAll(api);
      assert.deepEqual(linesOf(got), ["quick-pod: q1"]);
      const markers = markersOf(got);
      assert.equal(markers.length, 1, markers.join("\n"));
      assert.equal(mute.heard, 1, "the mute cluster was asked");
      assert.match(markers[0] ?? "", /^ERROR region eu: cluster mute did not answer within 2 s/);
      assert.ok(Date.now() - started >= ANSWER_TIMEOUT_MS, "it was waited for");
    } finally {
      quick.stop();
      mute.stop();
      await channels(0);
    }
  });

  it("a reader that stops reading holds up no agent, and learns how many lines it missed once it reads again", async () => {
    const TOTAL = 40_000;
    const BATCH = 500;
    const seq = (i: number): string => `seq=${i} ${"x".repeat(40)}`;
    // The agent pushes every line as fast as ctrl answers, the way an agent relays a busy log.
    const agent = scriptedAgent(ctrl.url, await ctrl.agentToken("eu", "busy"), "busy", () =>
      Array.from({ length: TOTAL / BATCH }, (_, b) => ({
        delayMs: 0,
        lines: Array.from({ length: BATCH }, (_, i) => seq(b * BATCH + i + 1)),
        done: false,
      })),
    );
    agents.push(agent);
    const abort = new AbortController();
    try {
      await channels(1);
      const api = createClient(LogService, transport(ctrl.url, ctrl.adminToken, "connect"));
      const reader = api
        .streamLogs({ ...REF, follow: true }, { signal: abort.signal, timeoutMs: 0 })
        [Symbol.asyncIterator]();
      const got: LogEntry[] = [];
      // One answer read, then nothing while the agent pushes all of its lines.
      const first = await reader.next();
      if (!first.done) got.push(...first.value.entries);
      const deadline = Date.now() + 60_000;
      while (agent.pushed < TOTAL) {
        if (Date.now() > deadline) throw new Error(`the agent pushed ${agent.pushed} of ${TOTAL} lines`);
        await new Promise((r) => setTimeout(r, 20));
      }
      // The reader reads again: every line is either printed or counted in a marker.
      const count = (): { lines: number; dropped: number } => {
        let lines = 0;
        let dropped = 0;
        for (const e of got)
          if (e.entry.case === "line") lines++;
          else if (e.entry.case === "marker" && e.entry.value.kind === LogMarkerKind.DROPPED)
            dropped += Number(e.entry.value.dropped);
        return { lines, dropped };
      };
      for (let c = count(); c.lines + c.dropped < TOTAL; c = count()) {
        const r = await reader.next();
        if (r.done) break;
        got.push(...r.value.entries);
      }
      const { lines, dropped } = count();
      assert.equal(lines + dropped, TOTAL, "every line printed or counted as dropped");
      assert.ok(dropped > 0 && lines >= CAPACITY, `${lines} lines read, ${dropped} dropped`);
      const markers = got.filter((e) => e.entry.case === "marker");
      assert.ok(
        markers.every(
          (e) =>
            e.entry.case === "marker" &&
            e.entry.value.kind === LogMarkerKind.DROPPED &&
            e.entry.value.message === "the reader did not keep up" &&
            e.instance === "busy-pod",
        ),
        "the markers say what was dropped, of which instance",
      );
      // What was kept is in order, without a line twice.
      const numbers = got.flatMap((e) =>
        e.entry.case === "line" ? [Number(/^seq=(\d+)/.exec(e.entry.value)?.[1])] : [],
      );
      for (let i = 1; i < numbers.length; i++) assert.ok((numbers[i - 1] as number) < (numbers[i] as number));
    } finally {
      abort.abort();
      agent.stop();
      await channels(0);
    }
  });

  it("a --grep regex that backtracks without end ends its call with invalid_argument naming grep; other calls go on", async () => {
    // 40 a's before a mismatch: /(a+)+$/ tries 2^40 ways on ctrl's event loop without the worker.
    const agent = scriptedAgent(ctrl.url, await ctrl.agentToken("eu", "grep"), "grep", () => [
      { delayMs: 0, lines: ["ok 1", `${"a".repeat(40)}!`, "ok 2"], done: true },
    ]);
    agents.push(agent);
    try {
      await channels(1);
      const api = createClient(LogService, transport(ctrl.url, ctrl.adminToken, "connect"));
      const stuck = expectCode(
        readAll(api, { grep: "/(a+)+$/" }),
        Code.InvalidArgument,
        /grep: the regular expression took more than 2 s over 3 line\(s\) and was stopped/,
      );
      // The lines reached ctrl (its PushLogs answered): the match is under way while ctrl answers more.
      while (agent.pushed < 3) await new Promise((r) => setTimeout(r, 10));
      assert.deepEqual(linesOf(await readAll(api, { grep: "/^ok \\d$/" })), ["grep-pod: ok 1", "grep-pod: ok 2"]);
      const ws = await ctrl.client(WorkspaceService, ctrl.adminToken).getWorkspace({ workspace: REF.workspace });
      assert.equal(ws.workspace?.slug, REF.workspace);
      await stuck;
    } finally {
      agent.stop();
      await channels(0);
    }
  });

  it("ctrl's HTTP/2 windows let a batch of lines arrive without a round trip per 64 KiB", async () => {
    const session = http2.connect(ctrl.url);
    try {
      await new Promise<void>((resolve, reject) => {
        session.once("remoteSettings", () => resolve());
        session.once("error", reject);
      });
      assert.equal(session.remoteSettings.initialWindowSize, HTTP2_STREAM_WINDOW, "per stream");
      // The connection's window comes in a WINDOW_UPDATE right after the settings: a PING after it
      // comes back once it was read.
      await new Promise<void>((resolve, reject) => session.ping((err) => (err ? reject(err) : resolve())));
      assert.equal(session.state.remoteWindowSize, HTTP2_CONNECTION_WINDOW, "per connection");
    } finally {
      session.close();
    }
  });
});

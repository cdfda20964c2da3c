// krane logs on real containers: a workload prints numbered lines at known times in 3 instances
// across 2 regions (a cluster each), and every line arrives (compared with kubectl logs on the same pods), in order
// per instance, merged by time. ctrl runs as two replicas on PostgreSQL and the agents connect to
// one of them (A) while readers use the other (B), so every read crosses replicas (requests and
// lines relayed by NOTIFY). Then: the CLI's flags and bad input, tokens that must get no line,
// `-f` through a rolling update (new instances join, old ones leave with a marker), an agent
// restart and ctrl restarts (of the reader's replica and of the agents') mid-follow (the CLI
// resumes with a marker and prints each line once), and `--previous` after a crash.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { after, before, describe, it } from "node:test";
import { Code } from "@connectrpc/connect";
import type { Agent } from "../../src/agent/agent.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";
import { InstanceStatus } from "../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { LogChannelService, LogMarkerKind, LogService, type LogEntry } from "../../src/gen/krane/ctrl/v1/logs_pb.js";
import { REPO } from "../../src/cluster/checkout.js";
import { eventually } from "../support/cluster.js";
import { freePort } from "../support/ports.js";
import { startPostgres, type TestPostgres } from "../support/postgres.js";
import {
  kubectlJson,
  kubectlOk,
  realNodesSkip,
  useRealCluster,
  type RealClusterHandle,
} from "../support/real-nodes.js";
import { routingAgent } from "./agent/support.js";
import { expectCode, startTestCtrl, type TestCtrl } from "./ctrl/support.js";

const skip = await realNodesSkip();
const REF = { workspace: "acme", project: "shop", environment: "production" };
const NS = "ws-acme";
/** Lines are printed every INTERVAL ms, numbered from 1, with the pod's name and revision. */
const INTERVAL = 100;
const printer = (): string[] => [
  "node",
  "-e",
  `const pod=require("os").hostname();let n=0;setInterval(()=>{n++;console.log("seq="+n+" pod="+pod+" rev="+process.env.REV+" at="+Date.now())},${INTERVAL});` +
    `require("http").createServer((q,s)=>s.end("ok")).listen(8080);process.on("SIGTERM",()=>process.exit(0));`,
];
/** Prints a few lines, its last words, and exits 3: a crash loop. */
const crasher = (): string[] => [
  "node",
  "-e",
  `const pod=require("os").hostname();let n=0;setInterval(()=>console.log("crashy line "+(++n)),100);` +
    `setTimeout(()=>{console.log("last words of "+pod);process.exit(3)},1500);`,
];

interface Req {
  follow?: boolean;
  sinceUnixMs?: bigint;
  tailLines?: number;
  revision?: bigint;
  region?: string;
  instance?: string;
  previous?: boolean;
}

interface Parsed {
  instance: string;
  region: string;
  revision: number;
  seq: number;
  ns: bigint;
}

function parseLine(e: {
  instance: string;
  region: string;
  revision: bigint | number;
  line?: string;
  ns: bigint;
}): Parsed | undefined {
  const m = /^seq=(\d+) pod=(\S+) rev=(\d+)/.exec(e.line ?? "");
  if (!m) return undefined;
  assert.equal(m[2], e.instance, "a line is attributed to the pod that printed it");
  return { instance: e.instance, region: e.region, revision: Number(e.revision), seq: Number(m[1]), ns: e.ns };
}

/** Each instance's numbers are consecutive (nothing lost, nothing twice, in order). */
function assertConsecutive(lines: Parsed[], what: string): Map<string, number[]> {
  const by = new Map<string, number[]>();
  for (const l of lines) by.set(l.instance, [...(by.get(l.instance) ?? []), l.seq]);
  for (const [pod, seqs] of by)
    for (let i = 1; i < seqs.length; i++)
      assert.equal(
        seqs[i],
        (seqs[i - 1] as number) + 1,
        `${what}: ${pod} ${seqs.slice(Math.max(0, i - 3), i + 3).join(",")}`,
      );
  return by;
}

/** The CLI as a user runs it, following; its stdout lines as they come. */
function follow(
  env: Record<string, string>,
  args: string[],
): { lines: string[]; child: ChildProcess; stderr: () => string } {
  const child = spawn(process.execPath, [`${REPO}bin/krane.js`, "logs", ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: string[] = [];
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (l) => lines.push(l));
  return { lines, child, stderr: () => stderr };
}

async function stopChild(c: ChildProcess): Promise<void> {
  if (c.exitCode !== null) return;
  const exited = new Promise((r) => c.once("exit", r));
  c.kill("SIGTERM");
  await exited;
}

/** Runs the CLI to completion; its exit code and output. */
async function cli(
  env: Record<string, string>,
  args: string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  const f = follow(env, args);
  const code = await new Promise<number>((r) => f.child.once("exit", (c) => r(c ?? 1)));
  return { code, stdout: f.lines.join("\n"), stderr: f.stderr() };
}

describe("krane logs on real containers, across regions and ctrl replicas", { skip }, () => {
  // A region per cluster (a deployment's ReplicaSet has the same name in every region), both
  // started at once (this hook runs before the handles' own, which then wait for them).
  before(() => {
    for (const c of [clusters.eu, clusters.us]) void c.ready().catch(() => undefined);
  });
  const clusters: { eu: RealClusterHandle; us: RealClusterHandle } = {
    eu: useRealCluster(["untrusted"]),
    us: useRealCluster(["untrusted"]),
  };
  const clusterOf = (region: string) => clusters[region === "us" ? "us" : "eu"].cluster;
  let pg: TestPostgres;
  let dbUrl = "";
  let portA = 0;
  let portB = 0;
  let a: TestCtrl;
  let b: TestCtrl;
  const agents = new Map<string, Agent>();
  // An agent silent this long is taken as gone. Its heartbeat is every 2 s (agent/logs/session.ts), so
  // 3 s left one second for a busy agent under a loaded CI machine and failed a follow once there
  // ("stopped answering" mid rolling update); 6 s is three heartbeats (ctrl's default is 10 s).
  const logs = { answerTimeoutMs: 6_000, holdMs: 200 };

  const startA = async (): Promise<TestCtrl> =>
    startTestCtrl(dbUrl, { listen: { host: "127.0.0.1", port: portA }, logs, rolloutSweepIntervalMs: 300 });
  const startB = async (): Promise<TestCtrl> =>
    startTestCtrl(dbUrl, { listen: { host: "127.0.0.1", port: portB }, logs, rolloutSweepIntervalMs: 300 });
  const startAgent = async (region: string): Promise<void> => {
    const agent = await routingAgent(clusterOf(region), a, region);
    await agent.start();
    agents.set(region, agent);
  };
  const cliEnv = (): Record<string, string> => ({
    KRANE_CTRL_URL: b.url,
    KRANE_TOKEN: b.adminToken,
    KRANE_WORKSPACE: REF.workspace,
    NO_COLOR: "1",
  });
  const running = async (environment: string): Promise<{ name: string; region: string; revision: number }[]> => {
    const s = await a.client(StatusService, a.adminToken).getEnvironmentStatus({ ...REF, environment });
    return s.deployments.flatMap((d) =>
      d.regions.flatMap((r) =>
        r.instances
          .filter((i) => i.status === InstanceStatus.RUNNING)
          .map((i) => ({ name: i.k8sName, region: r.region, revision: Number(d.deployment?.revision ?? 0) })),
      ),
    );
  };
  const deploy = async (environment: string, command: string[], rev: string): Promise<void> => {
    await a.client(DeploymentService, a.adminToken).createDeployment({
      ...REF,
      environment,
      image: "krane.local/hello:v1",
      command,
      port: 8080,
      cpuMillicores: 100n,
      memoryMib: 128n,
      env: [{ name: "REV", value: rev }],
    });
  };
  const read = async (req: Req, via: TestCtrl = b): Promise<LogEntry[]> => {
    const out: LogEntry[] = [];
    for await (const res of via
      .client(LogService, via.adminToken)
      .streamLogs({ ...REF, ...req }, { timeoutMs: 60_000 }))
      out.push(...res.entries);
    return out;
  };
  const lineOf = (e: LogEntry) =>
    parseLine({ ...e, ns: e.timeUnixNano, line: e.entry.case === "line" ? e.entry.value : undefined });

  before(
    async () => {
      await Promise.all([clusters.eu.ready(), clusters.us.ready()]);
      pg = await startPostgres();
      dbUrl = await pg.newDatabase();
      portA = await freePort();
      portB = await freePort();
      a = await startA();
      b = await startB();
      const t = a.adminToken;
      for (const region of ["eu", "us"]) await a.client(RegionService, t).createRegion({ name: region });
      await a.client(WorkspaceService, t).createWorkspace({ slug: REF.workspace });
      await a.client(ProjectService, t).createProject({ workspace: REF.workspace, slug: REF.project });
      await a.client(EnvironmentService, t).createEnvironment({
        ...REF,
        slug: REF.environment,
        regions: [
          { region: "eu", replicas: 2 },
          { region: "us", replicas: 1 },
        ],
        rollout: { maxSurge: "3", maxUnavailable: "0" },
      });
      await a.client(EnvironmentService, t).createEnvironment({
        workspace: REF.workspace,
        project: REF.project,
        slug: "crashy",
        regions: [{ region: "eu", replicas: 1 }],
      });
      await startAgent("eu");
      await startAgent("us");
      await deploy(REF.environment, printer(), "1");
      await eventually(
        "3 running instances",
        async () => ((await running(REF.environment)).length === 3 ? true : undefined),
        300_000,
      );
    },
    { timeout: 30 * 60_000 },
  );
  after(async () => {
    for (const agent of agents.values()) await agent.stop();
    await b?.close();
    await a?.close();
    await pg?.stop();
  });

  it(
    "every line of 3 instances in 2 regions arrives through the other replica, in order per instance, merged by time",
    { timeout: 120_000 },
    async () => {
      await new Promise((r) => setTimeout(r, 2_000));
      const entries = await read({});
      const lines = entries.map(lineOf).filter((l): l is Parsed => l !== undefined);
      const pods = await running(REF.environment);
      assert.deepEqual(new Set(lines.map((l) => l.instance)), new Set(pods.map((p) => p.name)));
      assert.deepEqual(
        pods.map((p) => lines.find((l) => l.instance === p.name)?.region),
        pods.map((p) => p.region),
        "each line carries its instance's region",
      );
      assert.ok(lines.every((l) => l.revision === 1));
      for (let i = 1; i < lines.length; i++)
        assert.ok((lines[i - 1] as Parsed).ns <= (lines[i] as Parsed).ns, "merged by the kubelet's time");
      const by = assertConsecutive(lines, "first read");
      // What kubectl reads from the same pods: ours is all of it up to our last line.
      for (const p of pods) {
        const mine = by.get(p.name) ?? [];
        assert.ok(mine.length >= 10, `${p.name}: ${mine.length} lines`);
        assert.equal(mine[0], 1, "from the container's first line");
        const theirs = (await kubectlOk(clusterOf(p.region), ["logs", "-n", NS, p.name]))
          .split("\n")
          .filter(Boolean)
          .map((l) => Number(/^seq=(\d+)/.exec(l)?.[1]));
        assert.deepEqual(theirs.slice(0, mine.length), mine, `${p.name} as kubectl logs has it`);
      }
    },
  );

  it("the CLI: prefixes, --tail, --region, --revision, --timestamps, -o json", { timeout: 120_000 }, async () => {
    const json = await cli(cliEnv(), ["shop/production", "--tail", "2", "--region", "us", "-o", "json"]);
    assert.equal(json.code, 0, json.stderr);
    const objs = json.stdout
      .split("\n")
      .map((l) => JSON.parse(l) as { region: string; revision: number; line: string });
    assert.equal(objs.length, 2);
    assert.ok(objs.every((o) => o.region === "us" && o.revision === 1 && o.line.startsWith("seq=")));
    const text = await cli(cliEnv(), ["shop/production", "--tail", "1", "--revision", "1", "--timestamps"]);
    assert.equal(text.code, 0, text.stderr);
    const printed = text.stdout.split("\n");
    assert.equal(printed.length, 3);
    for (const l of printed) assert.match(l, /^\d{4}-\d\d-\d\dT\S+Z \[(eu|us)\/\S+ r1\] seq=\d+ pod=/);
  });

  it("bad input: a clear error naming the flag (invalid_argument on the wire)", { timeout: 120_000 }, async () => {
    for (const [args, want] of [
      [["--tail", "-1"], /--tail: must be 0 or more/],
      [["--since", "2999-01-01T00:00:00Z"], /--since: .* is in the future/],
      [["--revision", "99"], /invalid_argument: revision: environment "production" has no revision 99/],
      [["--region", "mars"], /invalid_argument: region: environment "production" does not run in region "mars"/],
      [["--instance", "web-gone-12345"], /not_found: instance "web-gone-12345" no longer exists.*log history/],
    ] as const) {
      const r = await cli(cliEnv(), ["shop/production", ...args]);
      assert.notEqual(r.code, 0, args.join(" "));
      assert.match(r.stderr, want, args.join(" "));
      assert.equal(r.stdout, "", "no line");
    }
    const api = b.client(LogService, b.adminToken);
    const first = async (req: Req): Promise<void> => {
      for await (const _ of api.streamLogs({ ...REF, ...req })) break;
    };
    await expectCode(first({ tailLines: -1 }), Code.InvalidArgument, /tail_lines/);
    await expectCode(first({ sinceUnixMs: BigInt(Date.now() + 3_600_000) }), Code.InvalidArgument, /since_unix_ms/);
    await expectCode(first({ revision: 99n }), Code.InvalidArgument, /revision/);
    await expectCode(first({ region: "mars" }), Code.InvalidArgument, /region/);
  });

  it(
    "a token that is not a user's gets permission_denied and no line; agents only hear their own region",
    { timeout: 60_000 },
    async () => {
      const clusterToken = await a.agentToken("eu", "intruder");
      const got: LogEntry[] = [];
      await expectCode(
        (async () => {
          for await (const r of b.client(LogService, clusterToken).streamLogs({ ...REF })) got.push(...r.entries);
        })(),
        Code.PermissionDenied,
      );
      assert.equal(got.length, 0);
      await expectCode(
        (async () => {
          for await (const r of b.client(LogService, null).streamLogs({ ...REF })) got.push(...r.entries);
        })(),
        Code.Unauthenticated,
      );
      assert.equal(got.length, 0);
      // A user token cannot pose as an agent; an agent cannot open another region's channel.
      await expectCode(
        (async () => {
          for await (const _ of b.client(LogChannelService, b.adminToken).openLogChannel({ region: "eu" })) break;
        })(),
        Code.PermissionDenied,
      );
      const usToken = await a.agentToken("us", "other");
      await expectCode(
        (async () => {
          for await (const _ of b.client(LogChannelService, usToken).openLogChannel({ region: "eu" })) break;
        })(),
        Code.PermissionDenied,
      );
      // A push for a request that is not its region's is refused as cancelled, and reaches nobody.
      const res = await b.client(LogChannelService, usToken).pushLogs({
        region: "us",
        requestId: "log_made_up",
        entries: [{ instance: "x", entry: { case: "line", value: "forged" } }],
      });
      assert.equal(res.cancelled, true);
    },
  );

  it(
    "-f through a rolling update: the new instances' lines appear, the old ones leave with a marker",
    { timeout: 300_000 },
    async () => {
      const old = new Set((await running(REF.environment)).map((p) => p.name));
      const abort = new AbortController();
      const seen: LogEntry[] = [];
      const reading = (async () => {
        for await (const r of b
          .client(LogService, b.adminToken)
          .streamLogs({ ...REF, follow: true, tailLines: 0 }, { signal: abort.signal, timeoutMs: 0 }))
          seen.push(...r.entries);
      })().catch((err: unknown) => {
        if (!abort.signal.aborted) throw err;
      });
      await eventually("lines while following", async () => (seen.some((e) => lineOf(e)) ? true : undefined), 60_000);
      await deploy(REF.environment, printer(), "2");
      const diagnose = async (): Promise<string> => {
        const st = await a.client(StatusService, a.adminToken).getEnvironmentStatus(REF);
        return JSON.stringify(
          st.deployments.map((d) => ({
            revision: d.deployment?.revision,
            name: d.deployment?.k8sName,
            regions: d.regions.map((r) => [
              r.region,
              r.desiredReplicas,
              r.instances.map((x) => `${x.k8sName}:${x.status}`),
            ]),
          })),
          (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v),
        );
      };
      // What the stream said of each instance, for the message when the wait runs out.
      const heard = (): string =>
        JSON.stringify(
          [...new Set(seen.map((e) => e.instance))].map((n) => ({
            instance: n,
            old: old.has(n),
            lines: seen.filter((e) => e.instance === n && lineOf(e)).length,
            markers: seen
              .filter((e) => e.instance === n && e.entry.case === "marker")
              .map((e) => (e.entry.case === "marker" ? `${e.entry.value.kind}:${e.entry.value.message}` : "")),
          })),
        );
      const fresh = await eventually(
        "3 new instances with lines, and the 3 old ones gone",
        async () => {
          const pods = await running(REF.environment);
          const now = pods.filter((p) => !old.has(p.name));
          if (now.length !== 3 || pods.length !== 3) return undefined;
          const withLines = now.filter((p) => seen.some((e) => e.instance === p.name && lineOf(e)?.revision === 2));
          const left = [...old].filter((n) =>
            seen.some(
              (e) => e.instance === n && e.entry.case === "marker" && e.entry.value.kind === LogMarkerKind.LEFT,
            ),
          );
          return withLines.length === 3 && left.length === 3 ? now : undefined;
        },
        120_000,
      ).catch(async (err: unknown) => {
        throw new Error(`${String(err)}; status: ${await diagnose()}; heard: ${heard()}`);
      });
      abort.abort();
      await reading;
      for (const p of fresh)
        assert.ok(
          seen.some(
            (e) => e.instance === p.name && e.entry.case === "marker" && e.entry.value.kind === LogMarkerKind.JOINED,
          ),
          `${p.name} joined`,
        );
      // Nothing of an old instance after its marker; every instance's lines in order without a gap.
      for (const n of old) {
        const i = seen.findIndex(
          (e) => e.instance === n && e.entry.case === "marker" && e.entry.value.kind === LogMarkerKind.LEFT,
        );
        assert.ok(
          seen.slice(i + 1).every((e) => e.instance !== n),
          `${n}: nothing after it left`,
        );
      }
      assertConsecutive(
        seen.map(lineOf).filter((l): l is Parsed => l !== undefined),
        "rolling update",
      );
    },
  );

  it(
    "an agent restarts mid-follow: the CLI resumes with a marker and prints every line once",
    { timeout: 180_000 },
    async () => {
      const f = follow(cliEnv(), ["shop/production", "-f", "--region", "eu", "--tail", "0", "-o", "json"]);
      try {
        const parsed = (): Parsed[] =>
          f.lines
            .map(
              (l) =>
                JSON.parse(l) as { instance: string; region: string; revision: number; line?: string; time: string },
            )
            .map((o) => parseLine({ ...o, ns: 0n }))
            .filter((l): l is Parsed => l !== undefined);
        await eventually("lines", async () => (parsed().length >= 10 ? true : undefined), 60_000);
        const agent = agents.get("eu");
        await agent?.stop();
        await new Promise((r) => setTimeout(r, 1_000));
        await startAgent("eu");
        await eventually(
          "a resumed marker and lines after it",
          async () => {
            const i = f.lines.findIndex((l) => l.includes('"marker":"resumed"'));
            return i >= 0 && f.lines.slice(i).filter((l) => l.includes('"line"')).length >= 20 ? true : undefined;
          },
          60_000,
        ).catch((err: unknown) => {
          const tail = f.lines.filter((l) => !l.includes('"line"')).slice(-10);
          throw new Error(
            `${String(err)}; markers: ${tail.join("\n")}; stderr: ${f.stderr()}; lines: ${f.lines.length}`,
          );
        });
        assertConsecutive(parsed(), "agent restart");
      } finally {
        await stopChild(f.child);
      }
    },
  );

  it(
    "ctrl restarts mid-follow (the reader's replica, then the agents'): the CLI resumes each time, every line once",
    { timeout: 300_000 },
    async () => {
      const f = follow(cliEnv(), ["shop/production", "-f", "--tail", "0", "-o", "json"]);
      const resumed = (): number => f.lines.filter((l) => l.includes('"marker":"resumed"')).length;
      const linesAfter = (n: number): number => {
        let seen = 0;
        let count = 0;
        for (const l of f.lines) {
          if (l.includes('"marker":"resumed"')) seen++;
          else if (seen >= n && l.includes('"line"')) count++;
        }
        return count;
      };
      try {
        await eventually("lines", async () => (linesAfter(0) >= 10 ? true : undefined), 60_000);
        await b.close();
        await new Promise((r) => setTimeout(r, 500));
        b = await startB();
        await eventually(
          "resumed through the restarted reader's replica",
          async () => (resumed() >= 1 && linesAfter(1) >= 20 ? true : undefined),
          120_000,
        );
        await a.close();
        await new Promise((r) => setTimeout(r, 500));
        a = await startA();
        const before = resumed();
        await eventually(
          "resumed after the agents' ctrl came back",
          async () => (resumed() > before && linesAfter(resumed()) >= 20 ? true : undefined),
          120_000,
        );
        const parsed = f.lines
          .map((l) => JSON.parse(l) as { instance: string; region: string; revision: number; line?: string })
          .map((o) => parseLine({ ...o, ns: 0n }))
          .filter((l): l is Parsed => l !== undefined);
        assertConsecutive(parsed, "ctrl restarts");
      } finally {
        await stopChild(f.child);
      }
    },
  );

  it("--previous after a crash shows the crashed container's last lines", { timeout: 300_000 }, async () => {
    await deploy("crashy", crasher(), "1");
    interface Pod {
      status: { containerStatuses?: { restartCount: number }[] };
    }
    const pod = await eventually(
      "ctrl knows the crashing instance",
      async () => {
        const s = await a.client(StatusService, a.adminToken).getEnvironmentStatus({ ...REF, environment: "crashy" });
        return s.deployments.flatMap((d) => d.regions.flatMap((r) => r.instances.map((i) => i.k8sName)))[0];
      },
      240_000,
    );
    await eventually(
      "the instance restarted after its crash",
      async () => {
        const p = await kubectlJson<Pod>(clusterOf("eu"), ["pod", "-n", NS, pod]);
        return (p.status.containerStatuses?.[0]?.restartCount ?? 0) >= 1 ? true : undefined;
      },
      240_000,
    );
    // The kubelet answers `previous` from the dead container's record, which it replaces while
    // the crash loop restarts the container: a read in that moment can find no previous log (the
    // agent then says so in a marker), so the read is repeated for a while.
    let last = { code: 0, stdout: "", stderr: "" };
    const r = await eventually(
      "the crashed container's last lines",
      async () => {
        last = await cli(cliEnv(), ["shop/crashy", "--previous", "--instance", pod]);
        return last.stdout.includes(`last words of ${pod}`) ? last : undefined;
      },
      60_000,
    ).catch((err: unknown) => {
      throw new Error(
        `${String(err)}; last answer: code ${last.code}, stdout ${JSON.stringify(last.stdout)}, stderr ${JSON.stringify(last.stderr)}`,
      );
    });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`\\[eu/${pod} r1\\] last words of ${pod}`), `stderr: ${r.stderr}`);
    assert.match(r.stdout, /crashy line 1\n/);

    // --events interleaves the instance's events (here its exit 3) with its lines, in time order.
    const withEvents = await eventually(
      "the crash as an event among the lines",
      async () => {
        const o = await cli(cliEnv(), ["shop/crashy", "--events", "--instance", pod, "--timestamps"]);
        return /--- eu\/\S+ r1: .*exit 3/.test(o.stdout) && /crashy line \d+/.test(o.stdout) ? o : undefined;
      },
      60_000,
    );
    assert.equal(withEvents.code, 0, withEvents.stderr);
    const times = withEvents.stdout
      .split("\n")
      .map((l) => /^(\S+Z) /.exec(l)?.[1])
      .filter((t): t is string => t !== undefined);
    assert.deepEqual(times, [...times].sort(), "events and lines are printed in time order");
  });
});

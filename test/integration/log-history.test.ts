// The log history on a real node: a workload prints numbered lines (and, once a secret is set, the
// secret's value); two rolling updates delete its first two pods. `krane logs --since … -f`, started
// while the first pod ran (so it reads kept lines, then live ones), prints every instance's lines
// once each, none missing, across the seam and both rollouts; afterwards `--since … --grep` finds
// the deleted pods' lines, all of them; the secret's value was stored masked, never in clear.
// And streams (the local cluster has the PodLogsQuerySplitStreams gate): a pod that writes
// numbered lines to stdout and stderr in turn has each line kept and shown with its stream, in
// time order, once each across the seam, and `--stream stderr` shows only its stderr lines.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, describe, it } from "node:test";
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
import { ConfigService } from "../../src/gen/krane/ctrl/v1/config_pb.js";
import { REPO } from "../../src/cluster/checkout.js";
import { MASK } from "../../src/ctrl/logs/mask.js";
import { eventually } from "../support/cluster.js";
import { realNodesSkip, useRealCluster } from "../support/real-nodes.js";
import { routingAgent } from "./agent/support.js";
import { randomKeyring, startTestCtrl, tempDir, type TestCtrl } from "./ctrl/support.js";

const skip = await realNodesSkip();
const REF = { workspace: "acme", project: "shop", environment: "production" };
const SECRET = "s3cr3t-Value-9f81";
const printer = (): string[] => [
  "node",
  "-e",
  `const pod=require("os").hostname();let n=0;if(process.env.TOKEN)console.log("token="+process.env.TOKEN);` +
    `setInterval(()=>{n++;console.log("seq="+n+" pod="+pod+" rev="+process.env.REV)},100);` +
    `require("http").createServer((q,s)=>s.end("ok")).listen(8080);process.on("SIGTERM",()=>process.exit(0));`,
];

/** Numbered lines, odd ones on stdout and even ones on stderr, in turn. */
const twoStreams = (): string[] => [
  "node",
  "-e",
  `let n=0;setInterval(()=>{n++;(n%2?process.stdout:process.stderr).write("n="+n+"\\n")},50);` +
    `require("http").createServer((q,s)=>s.end("ok")).listen(8080);process.on("SIGTERM",()=>process.exit(0));`,
];

interface Printed {
  instance: string;
  revision: number;
  stream?: string;
  line?: string;
  marker?: string;
}

/** The CLI as a user runs it, -o json; its stdout lines as they come. */
function krane(
  env: Record<string, string>,
  args: string[],
): { out: Printed[]; child: ChildProcess; stderr: () => string } {
  const child = spawn(process.execPath, [`${REPO}bin/krane.js`, "logs", ...args, "-o", "json"], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const out: Printed[] = [];
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (l) =>
    out.push(JSON.parse(l) as Printed),
  );
  return { out, child, stderr: () => stderr };
}

async function finished(r: ReturnType<typeof krane>): Promise<Printed[]> {
  const code = await new Promise<number>((res) => r.child.once("exit", (c) => res(c ?? 1)));
  assert.equal(code, 0, r.stderr());
  return r.out;
}

/** Each instance's sequence numbers, checked to run 1, 2, 3, … (nothing lost, nothing twice). */
function sequences(printed: readonly Printed[], what: string): Map<string, number[]> {
  const by = new Map<string, number[]>();
  for (const p of printed) {
    const m = /^seq=(\d+) pod=(\S+)/.exec(p.line ?? "");
    if (!m) continue;
    assert.equal(m[2], p.instance, "a line is its pod's");
    by.set(p.instance, [...(by.get(p.instance) ?? []), Number(m[1])]);
  }
  for (const [pod, seqs] of by)
    seqs.forEach((s, i) =>
      assert.equal(s, i + 1, `${what}: ${pod} has ${seqs.slice(Math.max(0, i - 3), i + 3).join(",")} at ${i}`),
    );
  return by;
}

describe("log history on a real node: deleted pods stay searchable, -f from history to live", { skip }, () => {
  const cluster = useRealCluster(["untrusted"]);
  const dir = tempDir("krane-log-history-");
  let ctrl: TestCtrl;
  let agent: Agent | undefined;
  const env = (): Record<string, string> => ({
    KRANE_CTRL_URL: ctrl.url,
    KRANE_TOKEN: ctrl.adminToken,
    KRANE_WORKSPACE: REF.workspace,
    NO_COLOR: "1",
  });
  const running = async (): Promise<{ name: string; revision: number }[]> => {
    const s = await ctrl.client(StatusService, ctrl.adminToken).getEnvironmentStatus(REF);
    return s.deployments.flatMap((d) =>
      d.regions.flatMap((r) =>
        r.instances
          .filter((i) => i.status === InstanceStatus.RUNNING)
          .map((i) => ({ name: i.k8sName, revision: Number(d.deployment?.revision ?? 0) })),
      ),
    );
  };
  /** Waits for the rollout to `revision`: its one instance running, no other. */
  const settled = async (revision: number): Promise<string> =>
    eventually(
      `revision ${revision} alone running`,
      async () => {
        const r = await running();
        return r.length === 1 && r[0]?.revision === revision ? r[0].name : undefined;
      },
      300_000,
    );
  const deploy = async (rev: string): Promise<void> => {
    await ctrl.client(DeploymentService, ctrl.adminToken).createDeployment({
      ...REF,
      image: "krane.local/hello:v1",
      command: printer(),
      port: 8080,
      cpuMillicores: 100n,
      memoryMib: 128n,
      env: [{ name: "REV", value: rev }],
    });
  };
  /** Lines of a pod kept so far. */
  const kept = async (pod: string): Promise<number> =>
    Number(
      (
        await ctrl.store.db
          .selectFrom("log_lines")
          .select((eb) => eb.fn.countAll<number>().as("n"))
          .where("instance", "=", pod)
          .executeTakeFirstOrThrow()
      ).n,
    );

  before(
    async () => {
      await cluster.ready();
      ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
        keyring: randomKeyring(),
        logs: { answerTimeoutMs: 6_000, holdMs: 200 },
        logArchive: { sweepIntervalMs: 500, answerTimeoutMs: 6_000 },
        rolloutSweepIntervalMs: 300,
      });
      const t = ctrl.adminToken;
      await ctrl.client(RegionService, t).createRegion({ name: "eu" });
      await ctrl.client(WorkspaceService, t).createWorkspace({ slug: REF.workspace });
      await ctrl.client(ProjectService, t).createProject({ workspace: REF.workspace, slug: REF.project });
      await ctrl.client(EnvironmentService, t).createEnvironment({
        ...REF,
        slug: REF.environment,
        regions: [{ region: "eu", replicas: 1 }],
        rollout: { maxSurge: "1", maxUnavailable: "0" },
      });
      agent = await routingAgent(cluster.cluster, ctrl, "eu");
      await agent.start();
    },
    { timeout: 30 * 60_000 },
  );
  after(async () => {
    await agent?.stop();
    await ctrl?.close();
    dir.remove();
  });

  it(
    "two rolling updates: -f from --since prints each line once; --grep finds the deleted pods' lines; the secret is kept masked",
    { timeout: 600_000 },
    async () => {
      const since = new Date(Date.now() - 60_000).toISOString();
      await deploy("1");
      const first = await settled(1);
      // Kept lines before the follow starts: its history part is not empty.
      await eventually(
        "the first pod's lines kept",
        async () => ((await kept(first)) >= 20 ? true : undefined),
        60_000,
      );
      const follow = krane(env(), ["shop/production", "--since", since, "-f"]);
      // A secret set makes revision 2 (a rolling update deletes the first pod); revision 3 the second.
      await ctrl
        .client(ConfigService, ctrl.adminToken)
        .setSecrets({ ...REF, secrets: [{ key: "TOKEN", source: { case: "value", value: SECRET } }] });
      const second = await settled(2);
      await eventually(
        "the second pod's lines kept",
        async () => ((await kept(second)) >= 20 ? true : undefined),
        60_000,
      );
      await deploy("3");
      const third = await settled(3);
      await eventually(
        "the third pod's lines kept",
        async () => ((await kept(third)) >= 20 ? true : undefined),
        60_000,
      );
      // The follow has printed past the third pod's 20th line.
      await eventually(
        "the follow reaches the third pod",
        () => Promise.resolve((sequences(follow.out, "-f").get(third)?.length ?? 0) >= 20 ? true : undefined),
        60_000,
      );
      follow.child.kill("SIGTERM");
      const followed = sequences(follow.out, "-f");
      assert.deepEqual([...followed.keys()].sort(), [first, second, third].sort(), follow.stderr());

      // The deleted pods: every line they wrote is found by --since and --grep.
      for (const pod of [first, second]) {
        const found = await finished(krane(env(), ["shop/production", "--since", since, "--grep", `pod=${pod} `]));
        const seqs = sequences(found, `--grep ${pod}`).get(pod) ?? [];
        assert.ok(seqs.length >= (followed.get(pod)?.length ?? 0), `${pod}: ${seqs.length} lines found`);
        assert.ok(
          found.every((p) => p.line === undefined || p.instance === pod),
          "--grep returns only matching lines",
        );
      }
      const byRegex = await finished(
        krane(env(), ["shop/production", "--since", since, "--grep", `/^SEQ=\\d+ pod=${first} rev=\\d+$/i`]),
      );
      const regexLines = byRegex.filter((p) => p.line !== undefined);
      assert.ok(regexLines.length >= (followed.get(first)?.length ?? 1), `${regexLines.length} lines by /regex/i`);
      assert.ok(regexLines.every((p) => p.instance === first && p.revision === 1));

      // The secret: printed by the pods that have it (revision 2 on), kept masked.
      const token = await finished(krane(env(), ["shop/production", "--since", since, "--grep", "token="]));
      const tokens = token.filter((p) => p.line !== undefined);
      assert.ok(
        tokens.some((p) => p.instance === second),
        JSON.stringify(tokens),
      );
      assert.ok(
        tokens.every((p) => p.line === `token=${MASK}`),
        JSON.stringify(tokens),
      );
      const clear = await ctrl.store.db
        .selectFrom("log_lines")
        .select("line")
        .where("line", "like", `%${SECRET}%`)
        .execute();
      assert.equal(clear.length, 0, "no line holds the secret in clear");
    },
  );

  it(
    "a pod writing to stdout and stderr: each line with its stream, in order, once each from history to live; --stream",
    { timeout: 600_000 },
    async () => {
      const ref = { ...REF, environment: "streams" };
      const t = ctrl.adminToken;
      await ctrl.client(EnvironmentService, t).createEnvironment({
        ...ref,
        slug: ref.environment,
        regions: [{ region: "eu", replicas: 1 }],
      });
      const since = new Date(Date.now() - 60_000).toISOString();
      await ctrl.client(DeploymentService, t).createDeployment({
        ...ref,
        image: "krane.local/hello:v1",
        command: twoStreams(),
        port: 8080,
        cpuMillicores: 100n,
        memoryMib: 128n,
      });
      const pod = await eventually(
        "the pod running",
        async () => {
          const s = await ctrl.client(StatusService, t).getEnvironmentStatus(ref);
          return s.deployments
            .flatMap((d) => d.regions.flatMap((r) => r.instances))
            .find((i) => i.status === InstanceStatus.RUNNING)?.k8sName;
        },
        300_000,
      );
      await eventually("its lines kept", async () => ((await kept(pod)) >= 40 ? true : undefined), 60_000);
      const streams = await ctrl.store.db
        .selectFrom("log_lines")
        .select("stream")
        .distinct()
        .where("instance", "=", pod)
        .execute();
      assert.deepEqual(streams.map((r) => r.stream).sort(), ["stderr", "stdout"], "kept with their streams");

      /** The numbers printed, checked: in order, 1, 2, 3, … and each on its stream. */
      const numbers = (printed: readonly Printed[], what: string): number[] => {
        const ns: number[] = [];
        for (const p of printed) {
          const m = /^n=(\d+)$/.exec(p.line ?? "");
          if (!m) continue;
          const n = Number(m[1]);
          assert.equal(p.stream, n % 2 ? "stdout" : "stderr", `${what}: n=${n}`);
          ns.push(n);
        }
        return ns;
      };
      const keptBefore = await kept(pod);
      const follow = krane(env(), ["shop/streams", "--since", since, "-f"]);
      await eventually(
        "the follow goes on live",
        () => Promise.resolve((numbers(follow.out, "-f").at(-1) ?? 0) >= keptBefore + 40 ? true : undefined),
        60_000,
      );
      follow.child.kill("SIGTERM");
      const followed = numbers(follow.out, "-f");
      assert.deepEqual(
        followed,
        Array.from({ length: followed.length }, (_, i) => i + 1),
        "every line once, in time order, across the seam",
      );

      const errs = numbers(
        await finished(krane(env(), ["shop/streams", "--since", since, "--stream", "stderr"])),
        "--stream",
      );
      assert.ok(errs.length >= 20, `${errs.length} stderr lines`);
      assert.deepEqual(
        errs,
        Array.from({ length: errs.length }, (_, i) => 2 * (i + 1)),
        "stderr's lines only, each once",
      );
    },
  );
});

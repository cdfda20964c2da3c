// Secret values in log lines, on every path a line takes: ctrl on SQLite over real HTTP/2, with an
// agent that speaks the log channel protocol itself (pod-log-agent.ts). A pod of a revision with a
// secret prints the secret's value; the archive keeps the line masked; a `--since` read (kept
// lines, then live ones), a live read, a `-f` from history, and a `--grep` for the value's prefix
// show it masked or not at all, never in clear.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { ConfigService } from "../../../src/gen/krane/ctrl/v1/config_pb.js";
import { LogService, type LogEntry } from "../../../src/gen/krane/ctrl/v1/logs_pb.js";
import { MASK } from "../../../src/ctrl/logs/mask.js";
import { eventually } from "../../support/cluster.js";
import { insertRunningInstance, PodLogAgent } from "./pod-log-agent.js";
import { randomKeyring, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const REF = { workspace: "acme", project: "shop", environment: "production" };
const SECRET = "s3cr3t-Value-9f81";
const POD = "web-2";

describe("secret values are masked in every line StreamLogs sends, before --grep", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  let agent: PodLogAgent;
  let deploymentId = "";
  /** The archive is handed lines up to this time only (later ones are live-only). */
  let archivedUpTo = -1n;

  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      keyring: randomKeyring(),
      logs: { answerTimeoutMs: 3_000, holdMs: 50 },
      logArchive: { sweepIntervalMs: 200, answerTimeoutMs: 5_000 },
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
    await ctrl
      .client(DeploymentService, t)
      .createDeployment({ ...REF, image: "registry.example.com/shop:1", port: 8080 });
    // The secret makes revision 2; its pod is the one running.
    await ctrl
      .client(ConfigService, t)
      .setSecrets({ ...REF, secrets: [{ key: "TOKEN", source: { case: "value", value: SECRET } }] });
    const dep = await ctrl.store.db
      .selectFrom("deployments")
      .select("id")
      .where("revision", "=", 2)
      .executeTakeFirstOrThrow();
    deploymentId = dep.id;
    // What an agent's report would have recorded: the revision's instance in eu.
    await insertRunningInstance(ctrl.store.db, {
      deploymentId: deploymentId,
      region: "eu",
      pod: POD,
      address: "10.0.0.2",
    });
    agent = new PodLogAgent({
      url: ctrl.url,
      token: await ctrl.agentToken("eu"),
      region: "eu",
      serve: (req, line) => !req.requestId.startsWith("arc_") || line.ns <= archivedUpTo,
    });
  });
  after(async () => {
    agent?.stop();
    await ctrl?.close();
    dir.remove();
  });

  const read = async (req: object, until?: (lines: string[]) => boolean): Promise<string[]> => {
    const lines: string[] = [];
    const all: LogEntry[] = [];
    const abort = new AbortController();
    try {
      for await (const res of ctrl
        .client(LogService, ctrl.adminToken)
        .streamLogs({ ...REF, ...req }, { timeoutMs: 30_000, signal: abort.signal })) {
        all.push(...res.entries);
        for (const e of res.entries) if (e.entry.case === "line") lines.push(e.entry.value);
        if (until?.(lines)) break;
      }
    } finally {
      abort.abort();
    }
    const sent = JSON.stringify(all, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v));
    assert.ok(!sent.includes(SECRET), `the secret sent in clear: ${lines.join(" | ")}`);
    return lines;
  };

  it("kept and live lines are masked, and a --grep for the value's prefix finds nothing", async () => {
    const since = Date.now() - 60_000;
    archivedUpTo = agent.write(POD, deploymentId, `token=${SECRET}`).ns;
    await eventually(
      "the first line kept",
      async () =>
        (await ctrl.store.db.selectFrom("log_lines").select("line").execute()).length === 1 ? true : undefined,
      30_000,
    );
    // Written after the archive's cut: only the agent has it (the live part of a --since read).
    agent.write(POD, deploymentId, `again token=${SECRET} live`);

    const kept = await ctrl.store.db.selectFrom("log_lines").select("line").execute();
    assert.deepEqual(
      kept.map((r) => r.line),
      [`token=${MASK}`],
      "kept masked",
    );
    const masked = [`token=${MASK}`, `again token=${MASK} live`];
    assert.deepEqual(await read({ sinceUnixMs: BigInt(since), history: true }), masked, "--since: kept, then live");
    assert.deepEqual(await read({}), masked, "live only");
    const prefix = SECRET.slice(0, 8);
    assert.deepEqual(await read({ sinceUnixMs: BigInt(since), history: true, grep: prefix }), [], "--grep <prefix>");
    assert.deepEqual(await read({ grep: `/token=${prefix}/`, history: true }), [], "--grep /regex/");
    assert.deepEqual(await read({ grep: prefix }), [], "--grep on live lines only");

    // -f from history: a line printed while following is masked too, and a --grep that would
    // match the value's prefix lets none of them through (only the line that ends the wait).
    const followed = read({ sinceUnixMs: BigInt(since), history: true, follow: true }, (l) => l.includes("end"));
    const probeAll = read({ sinceUnixMs: BigInt(since), history: true, follow: true, grep: "/end|s3cr/" }, (l) =>
      l.includes("end"),
    );
    await eventually("both follows asked the agent", () =>
      Promise.resolve(agent.heard("log_").filter((r) => r.follow).length >= 2 ? true : undefined),
    );
    agent.write(POD, deploymentId, `third ${SECRET}`);
    agent.write(POD, deploymentId, "end");
    assert.deepEqual(await followed, [...masked, `third ${MASK}`, "end"]);
    assert.deepEqual(await probeAll, ["end"], "-f --grep: the masked lines do not match the prefix");

    const clear = await ctrl.store.db
      .selectFrom("log_lines")
      .select("line")
      .where("line", "like", `%${prefix}%`)
      .execute();
    assert.equal(clear.length, 0, "no kept line holds the secret");
  });
});

// The log archive counts every line it does not keep, by reason, on ctrl's /metrics
// (krane_log_archive_dropped_lines_total{reason}): ctrl on SQLite over real HTTP/2, an agent that
// speaks the log channel protocol itself (pod-log-agent.ts), an environment bound of 20 lines. A
// flood of 100 lines past the bound ("bound": the oldest 80 go), lines the agent dropped for want
// of room ("flood"), and lines past the workspace's retention ("retention") are each counted
// exactly, and what is left is the bound's newest 20.
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
import { DAY_MS, storeLines } from "../../../src/ctrl/logs/history.js";
import { msToNs } from "../../../src/contracts/logs.js";
import { eventually } from "../../support/cluster.js";
import { insertRunningInstance, PodLogAgent } from "./pod-log-agent.js";
import { startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const REF = { workspace: "acme", project: "shop", environment: "production" };
const POD = "web-1";
const BOUND = 20;

describe("the log archive's dropped lines on /metrics", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  let agent: PodLogAgent | undefined;

  before(async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      logs: { answerTimeoutMs: 3_000, holdMs: 50 },
      logArchive: { sweepIntervalMs: 200, answerTimeoutMs: 5_000, pruneIntervalMs: 300, maxLinesPerEnvironment: BOUND },
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
  });
  after(async () => {
    agent?.stop();
    await ctrl.close();
    dir.remove();
  });

  /** The counter's value for each reason, and the stored lines counted. */
  const counted = async (): Promise<Record<string, number>> => {
    const text = await (await fetch(`${ctrl.opsUrl ?? ""}/metrics`)).text();
    const out: Record<string, number> = {};
    for (const m of text.matchAll(/^krane_log_archive_dropped_lines_total\{reason="(\w+)"\} (\d+)$/gm))
      out[m[1] ?? ""] = Number(m[2]);
    out.stored = Number(/^krane_log_archive_stored_lines_total (\d+)$/m.exec(text)?.[1] ?? -1);
    return out;
  };

  it("counts the lines past the bound, past retention and dropped by the agent, each exactly", async () => {
    assert.deepEqual(await counted(), { flood: 0, bound: 0, retention: 0, stored: 0 });
    const db = ctrl.store.db;
    const dep = await db
      .selectFrom("deployments")
      .select(["id", "workspace_id", "environment_id"])
      .executeTakeFirstOrThrow();
    await insertRunningInstance(db, { deploymentId: dep.id, region: "eu", pod: POD, address: "10.0.0.1" });
    // Three lines of a pod long gone, past the workspace's 7 days.
    const old = msToNs(Date.now() - 8 * DAY_MS);
    await storeLines(
      db,
      [0n, 1n, 2n].map((i) => ({
        environmentId: dep.environment_id,
        workspaceId: dep.workspace_id,
        region: "eu",
        instance: "gone-1",
        ns: old + i,
        deploymentId: dep.id,
        revision: 1,
        stream: "",
        line: `old ${i}`,
      })),
    );
    const p = new PodLogAgent({ url: ctrl.url, token: await ctrl.agentToken("eu"), region: "eu", heartbeatMs: 200 });
    agent = p;
    for (let i = 1; i <= 100; i++) p.write(POD, dep.id, `seq=${i}`);
    p.drop(POD, dep.id, 7);

    const want = { flood: 7, bound: 100 - BOUND, retention: 3, stored: 100 };
    await eventually(
      "every drop counted",
      async () => {
        const got = await counted();
        return Object.entries(want).every(([k, v]) => got[k] === v) ? true : undefined;
      },
      30_000,
    );
    const kept = await db.selectFrom("log_lines").select("line").orderBy("time_ns").execute();
    assert.deepEqual(
      kept.map((r) => r.line),
      Array.from({ length: BOUND }, (_, i) => `seq=${100 - BOUND + i + 1}`),
      "the newest lines are kept",
    );
    // Further prunes find nothing more to drop: nothing is counted twice.
    await new Promise((r) => setTimeout(r, 1_000));
    assert.deepEqual(await counted(), want);
  });
});

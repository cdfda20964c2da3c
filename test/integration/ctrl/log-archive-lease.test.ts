// Two ctrl replicas on one PostgreSQL archive an environment once: the one that holds its lease
// (src/ctrl/logs/lease.ts) follows it, the other does not ask at all; when the holder stops, the
// other takes the environment over from what was stored, and every line the pod wrote is kept,
// once, none missing. The agent speaks the log channel protocol itself (pod-log-agent.ts) and is
// connected to the replica that stays, so the first holder's requests reach it through
// PostgreSQL (LISTEN/NOTIFY), as they would in a real installation. The second replica starts once
// the first holds the lease (which one would win a race is not the point).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { leaseHolders } from "../../../src/ctrl/logs/lease.js";
import { eventually } from "../../support/cluster.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { insertRunningInstance, PodLogAgent } from "./pod-log-agent.js";
import { startTestCtrl, type TestCtrl } from "./support.js";

const REF = { workspace: "acme", project: "shop", environment: "production" };
const POD = "web-1";
const settings = {
  logs: { answerTimeoutMs: 3_000, holdMs: 50 },
  logArchive: { sweepIntervalMs: 200, answerTimeoutMs: 3_000, leaseMs: 3_000 },
};

describe("the log archive with two ctrl replicas on one PostgreSQL", () => {
  let pg: TestPostgres;
  let url = "";
  let first: TestCtrl | undefined;
  let second: TestCtrl;
  let agent: PodLogAgent | undefined;
  let writer: NodeJS.Timeout | undefined;
  let written = 0;

  before(async () => {
    pg = await startPostgres();
    url = await pg.newDatabase();
    first = await startTestCtrl(url, settings);
    const t = first.adminToken;
    await first.client(RegionService, t).createRegion({ name: "eu" });
    await first.client(WorkspaceService, t).createWorkspace({ slug: REF.workspace });
    await first.client(ProjectService, t).createProject({ workspace: REF.workspace, slug: REF.project });
    await first.client(EnvironmentService, t).createEnvironment({
      ...REF,
      slug: REF.environment,
      regions: [{ region: "eu", replicas: 1 }],
    });
    await first
      .client(DeploymentService, t)
      .createDeployment({ ...REF, image: "registry.example.com/shop:1", port: 8080 });
  });
  after(async () => {
    clearInterval(writer);
    agent?.stop();
    await first?.close();
    await second?.close();
    await pg?.stop();
  });

  const stored = async (): Promise<number[]> =>
    (await second.store.db.selectFrom("log_lines").select("line").orderBy("time_ns").execute()).map((r) =>
      Number(/^seq=(\d+)$/.exec(r.line)?.[1] ?? -1),
    );
  /** Archive requests the agent serves now (heard, not cancelled by ctrl). */
  const serving = (): number => agent?.heard("arc_").filter((r) => !agent?.cancelled.has(r.requestId)).length ?? 0;

  it("one replica archives; after it stops the other takes over: every line kept once, none missing", async () => {
    const a = first;
    assert.ok(a);
    const dep = await a.store.db.selectFrom("deployments").select("id").executeTakeFirstOrThrow();
    // The first replica takes the environment's lease once it has an instance; the second, started
    // since, finds it held.
    await insertRunningInstance(a.store.db, { deploymentId: dep.id, region: "eu", pod: POD, address: "10.0.0.1" });
    const environmentId = (await a.store.db.selectFrom("environments").select("id").executeTakeFirstOrThrow()).id;
    await eventually("the first replica holds the lease", async () =>
      (await leaseHolders(a.store.db, Date.now())).get(environmentId) === a.logArchive.holder ? true : undefined,
    );
    second = await startTestCtrl(url, settings);
    const p = new PodLogAgent({
      url: second.url,
      token: await second.agentToken("eu"),
      region: "eu",
      heartbeatMs: 200,
    });
    agent = p;
    writer = setInterval(() => p.write(POD, dep.id, `seq=${++written}`), 20);

    await eventually("lines kept", async () => ((await stored()).length >= 50 ? true : undefined), 30_000);
    // Ten sweeps of each replica and more: one archive request is served, never two.
    await eventually("one archive request served", () => Promise.resolve(serving() === 1 ? true : undefined));
    for (let i = 0; i < 30; i++) {
      assert.equal(serving(), 1, `archive requests served: ${serving()} (${p.heard("arc_").length} heard)`);
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal((await leaseHolders(a.store.db, Date.now())).get(environmentId), a.logArchive.holder);

    // The holder stops; the other replica takes the environment over from what was stored.
    const before = p.heard("arc_").length;
    await a.close();
    first = undefined;
    await eventually("the second replica holds the lease", async () =>
      (await leaseHolders(second.store.db, Date.now())).get(environmentId) === second.logArchive.holder
        ? true
        : undefined,
    );
    const kept = (await stored()).length;
    await eventually("lines kept after the handover", async () =>
      (await stored()).length >= kept + 50 ? true : undefined,
    );
    const takeover = p.heard("arc_").slice(before);
    assert.ok(takeover.length >= 1);
    assert.ok(
      takeover.every((r) => r.sinceUnixMs > 0n),
      "the new holder asks from the last stored line, not from the start",
    );
    clearInterval(writer);
    const total = written;
    await eventually("every line written kept", async () => ((await stored()).length >= total ? true : undefined));
    const seqs = await stored();
    assert.deepEqual(
      seqs,
      Array.from({ length: total }, (_, i) => i + 1),
      "each line once, in order, none missing",
    );
  });
});

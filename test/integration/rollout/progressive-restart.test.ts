// A progressive rollout survives ctrl restarts (real ctrl on SQLite and PostgreSQL, HTTP/2, a
// fake agent reporting instances): the state (step, weights, phase) is read back from the
// database, promote continues from where it was, and a timed pause that was running when ctrl
// stopped ends by itself afterwards (the wake-up is stored, the driver's sweep finds it).
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import {
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { RolloutService, type RolloutStatus } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { startTestCtrl, tempDir, type TestCtrl } from "../ctrl/support.js";
import { deploy, FakeAgent, REF } from "./support.js";

const REGION = "eu-west";

async function status(ctrl: TestCtrl): Promise<RolloutStatus> {
  const { status: s } = await ctrl.client(RolloutService, ctrl.adminToken).getRolloutStatus(REF);
  assert.ok(s);
  return s;
}

/** Lets the fake agent follow until `check` holds. */
async function until(
  ctrl: TestCtrl,
  agent: FakeAgent,
  what: string,
  check: (s: RolloutStatus) => boolean,
  timeoutMs = 20_000,
): Promise<RolloutStatus> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    await agent.converge();
    const s = await status(ctrl);
    if (check(s)) return s;
    if (Date.now() > end)
      throw new Error(`timed out waiting for ${what}: ${s.progressive?.phase} ${s.progressive?.reason}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const weight = (s: RolloutStatus, id: string): number =>
  s.progressive?.weights.find((w) => w.region === REGION)?.weights.find((w) => w.deploymentId === id)?.weight ?? 0;

function scenario(name: string, databaseUrl: () => Promise<string>): void {
  describe(`progressive rollout across ctrl restarts (${name})`, () => {
    const dir = tempDir("krane-progressive-restart-");
    let ctrl: TestCtrl | undefined;
    after(async () => {
      await ctrl?.close();
      dir.remove();
    });

    it(
      "resumes at the step it was on; a timed pause ends after a restart without any call",
      { timeout: 120_000 },
      async () => {
        const url = await databaseUrl();
        const start = async (): Promise<{ c: TestCtrl; agent: FakeAgent }> => {
          const c = await startTestCtrl(url, { rolloutSweepIntervalMs: 200 });
          return { c, agent: await FakeAgent.start(c, REGION) };
        };
        let { c, agent } = await start();
        ctrl = c;
        const admin = c.adminToken;
        await c.client(RegionService, admin).createRegion({ name: REGION });
        await c.client(WorkspaceService, admin).createWorkspace({ slug: REF.workspace });
        await c.client(ProjectService, admin).createProject({ workspace: REF.workspace, slug: REF.project });
        await c.client(EnvironmentService, admin).createEnvironment({
          workspace: REF.workspace,
          project: REF.project,
          slug: REF.environment,
          regions: [{ region: REGION, replicas: 4 }],
          rollout: {
            progressive: {
              canary: {
                steps: [
                  { step: { case: "setWeight", value: 25 } },
                  { step: { case: "pause", value: { seconds: 0 } } },
                  { step: { case: "setWeight", value: 50 } },
                  { step: { case: "pause", value: { seconds: 3 } } },
                ],
              },
            },
          },
        });
        const v1 = await deploy(c, "shop:1");
        await until(c, agent, "v1 healthy", (s) => s.progressive?.phase === "Healthy");
        const v2 = await deploy(c, "shop:2");
        await until(c, agent, "paused at 25 %", (s) => s.progressive?.phase === "Paused" && weight(s, v2.id) === 25);

        // Restart: the same step, weights and phase.
        await c.close();
        ({ c, agent } = await start());
        ctrl = c;
        const back = await status(c);
        assert.equal(back.progressive?.phase, "Paused");
        assert.equal(back.progressive?.step, 2);
        assert.equal(back.progressive?.stepName, "pause (until promote)");
        assert.equal(weight(back, v2.id), 25);
        assert.equal(weight(back, v1.id), 75);

        // Promote continues to 50 % and its timed pause; ctrl stops during the pause.
        await c.client(RolloutService, c.adminToken).promote(REF);
        await until(
          c,
          agent,
          "the timed pause at 50 %",
          (s) => s.progressive?.stepName === "pause 3s" && weight(s, v2.id) === 50,
        );
        await c.close();
        ({ c, agent } = await start());
        ctrl = c;
        const done = await until(
          c,
          agent,
          "the rollout complete after the pause, and its event",
          (s) =>
            s.progressive?.phase === "Healthy" &&
            s.progressive.stableDeploymentId === v2.id &&
            (s.regions[0]?.events.some((e) => e.reason === "RolloutCompleted") ?? false),
          30_000,
        );
        assert.equal(weight(done, v2.id), 100);
        assert.ok(done.regions[0]?.events.some((e) => e.reason === "RolloutCompleted"));
      },
    );
  });
}

const sqliteDir = tempDir("krane-progressive-sqlite-");
scenario("SQLite", async () => join(sqliteDir.path, "ctrl.db"));
let pg: TestPostgres | null = null;
scenario("PostgreSQL", async () => {
  pg ??= await startPostgres();
  return pg.newDatabase();
});
after(async () => {
  await pg?.stop();
  sqliteDir.remove();
});

// The rollout commands as a user runs them: real `krane` processes against a real ctrl
// (SQLite, HTTP/2). No cluster is needed: desired state is what ctrl decides.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createApiClients, type ApiClients } from "../../../src/client/node.js";
import { startCtrl, type RunningCtrl } from "../../../src/ctrl/server/server.js";
import { addUserToken, generateToken } from "../../../src/ctrl/domain/tokens.js";
import { spawnKrane } from "../../support/cli.js";

let dir: string;
let ctrl: RunningCtrl;
let token: string;
let api: ApiClients;
const target = { workspace: "acme", project: "shop", environment: "prod" };

/** Runs the CLI without blocking this process, which serves ctrl. */
function krane(...args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawnKrane(args, { KRANE_CTRL_URL: ctrl.url, KRANE_TOKEN: token });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.once("close", (status) => resolve({ status, stdout, stderr })));
}

async function region() {
  const { status } = await api.rollouts.getRolloutStatus(target);
  const r = status?.regions[0];
  assert.ok(r, "the environment has a region");
  return r;
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "krane-rollout-cli-"));
  ctrl = await startCtrl({
    databaseUrl: join(dir, "ctrl.db"),
    listen: { host: "127.0.0.1", port: 0 },
    opsListen: null,
  });
  token = generateToken("user");
  await addUserToken(ctrl.store, "cli", token);
  api = createApiClients(ctrl.url, token);
  await api.regions.createRegion({ name: "eu" });
  await api.workspaces.createWorkspace({ slug: target.workspace });
  await api.projects.createProject({ workspace: target.workspace, slug: target.project });
  await api.environments.createEnvironment({
    ...target,
    slug: target.environment,
    regions: [{ region: "eu", replicas: 3 }],
  });
  await api.deployments.createDeployment({ ...target, image: "registry.example.com/shop:1" });
  await api.deployments.createDeployment({ ...target, image: "registry.example.com/shop:2" });
});

after(async () => {
  await ctrl?.close();
  await rm(dir, { recursive: true, force: true });
});

test("scale, pause, resume, history and undo act on the environment and report what they did", async () => {
  const scaled = await krane("scale", "shop/prod", "--replicas", "6");
  assert.equal(scaled.status, 0, scaled.stderr);
  assert.equal((await region()).replicas, 6);

  assert.equal((await krane("rollout", "pause", "shop/prod")).status, 0);
  assert.equal((await region()).paused, true);
  assert.equal((await krane("rollout", "resume", "shop/prod")).status, 0);
  assert.equal((await region()).paused, false);

  const history = await krane("rollout", "history", "shop/prod");
  assert.equal(history.status, 0, history.stderr);
  assert.match(history.stdout, /registry\.example\.com\/shop:1/);
  assert.match(history.stdout, /registry\.example\.com\/shop:2/);

  const before = (await region()).targetDeploymentId;
  const undo = await krane("rollout", "undo", "shop/prod");
  assert.equal(undo.status, 0, undo.stderr);
  const afterUndo = await region();
  assert.notEqual(afterUndo.targetDeploymentId, before, "undo switches the target to the previous revision");
  const { deployments } = await api.deployments.listDeployments(target);
  const v1 = deployments.find((d) => d.image.endsWith(":1"));
  assert.equal(afterUndo.targetDeploymentId, v1?.id);
});

test("bad input exits non-zero with the field named, and changes nothing", async () => {
  const replicasBefore = (await region()).replicas;
  const bad = await krane("scale", "shop/prod", "--replicas", "-2");
  assert.notEqual(bad.status, 0);
  assert.match(bad.stderr, /replicas/);
  assert.equal((await region()).replicas, replicasBefore);
  const missing = await krane("rollout", "undo", "shop/prod", "--to-revision", "99");
  assert.notEqual(missing.status, 0);
  assert.match(missing.stderr, /revision/i);
});

test("krane rollback pins the environment, a deploy says so, rollout status shows it, --unpin lifts it", async () => {
  const live = { ...target, environment: "live" };
  await api.environments.createEnvironment({
    ...live,
    slug: live.environment,
    regions: [{ region: "eu", replicas: 2 }],
  });
  await api.deployments.createDeployment({ ...live, image: "registry.example.com/shop:1" });
  await api.deployments.createDeployment({ ...live, image: "registry.example.com/shop:2" });
  const status = async () => (await api.rollouts.getRolloutStatus(live)).status;

  // No sentinel: nothing is kept warm, so --instant refuses, naming the region, and pins nothing.
  const instant = await krane("rollback", "shop/live", "--instant");
  assert.notEqual(instant.status, 0);
  assert.match(instant.stderr, /keeps nothing warm to roll back to in region "eu"/);
  assert.equal((await status())?.pinnedDeploymentId, "");

  const rolled = await krane("rollback", "shop/live");
  assert.equal(rolled.status, 0, rolled.stderr);
  assert.match(
    rolled.stdout,
    /rolling back to revision 1 \(nothing warm in eu: new pods\); pinned until `krane rollback --unpin shop\/live`/,
  );
  const { deployments } = await api.deployments.listDeployments(live);
  const v1 = deployments.find((d) => d.image.endsWith(":1"));
  assert.equal((await status())?.pinnedDeploymentId, v1?.id);

  const deployed = await krane("deploy", "shop/live", "--image", "registry.example.com/shop:3");
  assert.equal(deployed.status, 0, deployed.stderr);
  assert.match(
    deployed.stdout,
    /is pinned to .* revision 3 is recorded but takes no traffic until `krane rollback --unpin shop\/live`/,
  );
  assert.equal((await status())?.regions[0]?.targetDeploymentId, v1?.id);

  const shown = await krane("rollout", "status", "shop/live", "--no-watch");
  assert.equal(shown.status, 0, shown.stderr);
  assert.match(shown.stdout, /^pinned to revision 1 /m);

  const unpinned = await krane("rollback", "shop/live", "--unpin");
  assert.equal(unpinned.status, 0, unpinned.stderr);
  assert.match(unpinned.stdout, /^unpinned: the newest revision rolls out$/m);
  const v3 = (await api.deployments.listDeployments(live)).deployments.find((d) => d.image.endsWith(":3"));
  assert.equal((await status())?.regions[0]?.targetDeploymentId, v3?.id);
});

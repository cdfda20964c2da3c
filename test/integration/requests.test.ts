// The live request view end to end, real parts only: ctrl (SQLite, HTTP/2) → the agent (as its
// RBAC ServiceAccount) → the real local Kubernetes, whose pod stand-ins run krane's own sentinel
// and the user's pods. `krane requests -f` (the real CLI) shows requests sent through the
// sentinel's real socket as they pass, one allowed and one refused by an edge policy, with their
// method, path (query values hidden), status, latency, revision, instance, refusing policy and
// client; the sentinel records nothing before anyone watches; another workspace's token is
// refused not_found.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { join } from "node:path";
import { Pool } from "undici";
import type { Agent } from "../../src/agent/agent.js";
import { REPO } from "../../src/cluster/checkout.js";
import {
  ApiTokenService,
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";
import { InstanceStatus } from "../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { PolicyService } from "../../src/gen/krane/ctrl/v1/exposure_pb.js";
import type { KubeClient } from "../../src/kube/client.js";
import { SENTINEL_OPS_PORT } from "../../src/contracts/routing.js";
import { SENTINEL_REQUESTS_PATH, type SentinelRequests } from "../../src/contracts/request-view.js";
import { applySentinelRbac } from "../../src/sentinel/rbac.js";
import { eventually, useCluster } from "../support/cluster.js";
import { adminKube, routingAgent } from "./agent/support.js";
import { startTestCtrl, tempDir, type TestCtrl } from "./ctrl/support.js";
import { hit, runningSentinel } from "./sentinel/support.js";

const handle = useCluster({ standins: true, pods: { readyDelayMs: 500, readyJitterMs: 200 } });
const REGION = "local";
const REF = { workspace: "acme", project: "shop", environment: "production" };
const dir = tempDir("krane-requests-");
let ctrl: TestCtrl;
let agent: Agent;
let kube: KubeClient;
let pool: Pool;
let envId = "";
let deploymentId = "";

interface Shown {
  method: string;
  path: string;
  status: number;
  latencyMs: number;
  revision: number;
  instance: string;
  policy: string;
  client: string;
  region: string;
}

/** `krane requests -f` as a user runs it; its stdout lines as they come. */
function watch(token: string, args: string[]): { lines: string[]; child: ChildProcess; stderr: () => string } {
  const child = spawn(process.execPath, [`${REPO}bin/krane.js`, "requests", ...args], {
    env: {
      ...process.env,
      KRANE_CTRL_URL: ctrl.url,
      KRANE_TOKEN: token,
      KRANE_WORKSPACE: REF.workspace,
      NO_COLOR: "1",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: string[] = [];
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (l) => lines.push(l));
  return { lines, child, stderr: () => stderr };
}

async function stop(c: ChildProcess): Promise<void> {
  if (c.exitCode !== null) return;
  const exited = new Promise((r) => c.once("exit", r));
  c.kill("SIGTERM");
  await exited;
}

describe("krane requests -f: the live request view through a real sentinel", () => {
  before(
    async () => {
      const cluster = await handle.ready();
      await applySentinelRbac(cluster.kubeConfig());
      kube = adminKube(cluster);
      ctrl = await startTestCtrl(join(dir.path, "ctrl.db"));
      const t = ctrl.adminToken;
      await ctrl.client(RegionService, t).createRegion({ name: REGION });
      await ctrl.client(WorkspaceService, t).createWorkspace({ slug: REF.workspace });
      await ctrl.client(ProjectService, t).createProject({ workspace: REF.workspace, slug: REF.project });
      const { environment } = await ctrl.client(EnvironmentService, t).createEnvironment({
        workspace: REF.workspace,
        project: REF.project,
        slug: REF.environment,
        regions: [{ region: REGION, replicas: 1 }],
        sentinel: { image: "", replicas: 1 },
      });
      envId = environment?.id ?? "";
      agent = await routingAgent(cluster, ctrl, REGION, { sentinelObserveIntervalMs: 500 });
      await agent.start();
      const { deployment } = await ctrl
        .client(DeploymentService, t)
        .createDeployment({ ...REF, image: "registry.example.com/shop:1", port: 8080 });
      deploymentId = deployment?.id ?? "";
      // Only GET: a DELETE is refused by the sentinel, naming this policy.
      await ctrl.client(PolicyService, t).addPolicy({
        ...REF,
        policy: { name: "read-only", kind: { case: "limits", value: { methods: ["GET"] } } },
      });
      const sentinel = await runningSentinel(cluster, kube, envId);
      pool = new Pool(sentinel.url, { connections: 4 });
      await eventually(
        "the instance answering through the sentinel, and DELETE refused by the policy",
        async () => {
          const ok = await hit(pool, "/");
          const refused = await pool.request({ method: "DELETE", path: "/", headers: { host: "shop.example.com" } });
          await refused.body.text();
          return ok.answer?.revision === deploymentId && refused.statusCode === 405 ? true : undefined;
        },
        120_000,
      );
    },
    { timeout: 15 * 60_000 },
  );

  after(async () => {
    await pool?.close();
    await agent?.stop();
    await ctrl?.close();
    kube?.close();
    dir.remove();
  });

  test("nobody watching: the sentinel keeps no record", async () => {
    await hit(pool, "/before-anyone-watches");
    const sentinel = await runningSentinel(handle.cluster, kube, envId);
    const ops = sentinel.url.replace(/:\d+$/, `:${SENTINEL_OPS_PORT}`);
    // This ask turns recording on; what passed before it is not there.
    const res = await fetch(`${ops}${SENTINEL_REQUESTS_PATH}?after=0`);
    const doc = (await res.json()) as SentinelRequests;
    assert.deepEqual(doc.records, []);
  });

  test(
    "requests show up as they pass: an allowed one with its revision and instance, a refused one with its policy",
    { timeout: 180_000 },
    async () => {
      const running = await ctrl.client(StatusService, ctrl.adminToken).getEnvironmentStatus(REF);
      const instances = (running.deployments[0]?.regions[0]?.instances ?? [])
        .filter((i) => i.status === InstanceStatus.RUNNING)
        .map((i) => i.k8sName);
      const w = watch(ctrl.adminToken, ["-f", "shop/production", "-o", "json"]);
      try {
        const shown = (): Shown[] => w.lines.flatMap((l) => (l.includes('"method"') ? [JSON.parse(l) as Shown] : []));
        const { ok, refused } = await eventually(
          "both requests in the view",
          async () => {
            // Sent again until the view (which starts asking the sentinel once it is open) shows them.
            await hit(pool, "/books/7?token=s3cret&page=2");
            const r = await pool.request({ method: "DELETE", path: "/books/7", headers: { host: "shop.example.com" } });
            await r.body.text();
            const all = shown();
            const ok = all.find((s) => s.method === "GET" && s.path.startsWith("/books/7"));
            const refused = all.find((s) => s.method === "DELETE" && s.path === "/books/7");
            return ok && refused ? { ok, refused } : undefined;
          },
          120_000,
        );
        assert.equal(ok.path, "/books/7?token=…&page=…", "query values are never shown");
        assert.equal(ok.status, 200);
        assert.equal(ok.revision, 1);
        assert.ok(instances.includes(ok.instance), `${ok.instance} is one of ${instances.join(", ")}`);
        assert.equal(ok.policy, "");
        assert.equal(ok.region, REGION);
        assert.ok(ok.latencyMs > 0);
        assert.ok(ok.client !== "");
        assert.equal(refused.status, 405);
        assert.equal(refused.policy, "read-only");
        assert.equal(refused.instance, "", "a refused request reaches no instance");
        assert.equal(refused.revision, 0);
        assert.ok(!w.lines.join("\n").includes("s3cret"), "no query value anywhere in the view");
        assert.equal(w.child.exitCode, null, `the view still follows: ${w.stderr()}`);
      } finally {
        await stop(w.child);
      }
    },
  );

  test("another workspace's token gets not_found", { timeout: 60_000 }, async () => {
    const t = ctrl.adminToken;
    await ctrl.client(WorkspaceService, t).createWorkspace({ slug: "evil" });
    const { token } = await ctrl.client(ApiTokenService, t).createApiToken({ name: "ci", workspace: "evil" });
    const w = watch(token, ["-f", "shop/production"]);
    const code = await new Promise<number>((r) => w.child.once("exit", (c) => r(c ?? 1)));
    assert.notEqual(code, 0);
    assert.match(w.stderr(), /not.found/i);
    assert.deepEqual(w.lines, []);
  });
});

// A workspace's quota objects in its namespace (src/agent/deployments/quota.ts) wherever krane
// puts its pods, kept and followed, real parts only: ctrl (SQLite, HTTP/2) ← the agent (as its
// RBAC ServiceAccount, behind the admission fence) → the real local Kubernetes.
//   - a namespace with only a cron job, or only a release, gets its ResourceQuota and
//     LimitRange (no deployment ever made it);
//   - `krane quota set` reaches the namespace with no deploy;
//   - a ResourceQuota deleted and a LimitRange edited by hand are restored (drift repair), in a
//     deployment's namespace and in a cron job's;
//   - ctrl started again with another `--default-quota` re-renders the workspaces it changes,
//     and their namespaces follow before any deploy.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import type { KubeConfig } from "@kubernetes/client-node";
import { eventually, useCluster } from "../support/cluster.js";
import { startTestCtrl, tempDir, type TestCtrl } from "./ctrl/support.js";
import { adminKube, agentKubeConfig, startAgent } from "./agent/support.js";
import type { Agent } from "../../src/agent/agent.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";
import { JobService } from "../../src/gen/krane/ctrl/v1/job_pb.js";
import { QuotaService } from "../../src/gen/krane/ctrl/v1/quota_pb.js";
import { ReleaseService } from "../../src/gen/krane/ctrl/v1/release_pb.js";
import { QUOTA_OBJECT_NAME } from "../../src/agent/deployments/quota.js";
import { parseQuotaList } from "../../src/contracts/quotas.js";
import { startCtrl } from "../../src/ctrl/server/server.js";
import type { RunningCtrl } from "../../src/ctrl/server/settings.js";
import type { KubeClient } from "../../src/kube/client.js";
import { isRecord, type KubeObject } from "../../src/kube/object.js";
import { resourcePath, resources } from "../../src/kube/resources.js";

const handle = useCluster();
const dir = tempDir();
const DB = () => join(dir.path, "ctrl.db");
const REGION = "local";
let ctrl: TestCtrl | undefined;
/** ctrl started again (the last test), closed at the end. */
let restarted: RunningCtrl | undefined;
/** The first ctrl, while it runs. */
function c(): TestCtrl {
  assert.ok(ctrl, "ctrl runs");
  return ctrl;
}
let kc: KubeConfig;
let admin: KubeClient;
let agent: Agent;

before(
  async () => {
    const cluster = await handle.ready();
    kc = await agentKubeConfig(cluster);
    admin = adminKube(cluster);
    const t = (ctrl = await startTestCtrl(DB()));
    const a = t.adminToken;
    await t.client(RegionService, a).createRegion({ name: REGION });
    for (const ws of ["cron", "rel", "dep"]) {
      await t.client(WorkspaceService, a).createWorkspace({ slug: ws });
      await t.client(ProjectService, a).createProject({ workspace: ws, slug: "p" });
      await t.client(EnvironmentService, a).createEnvironment({
        workspace: ws,
        project: "p",
        slug: "prod",
        regions: [{ region: REGION, replicas: 1 }],
      });
    }
    agent = startAgent(kc, { url: t.url, token: await t.agentToken(REGION) }, REGION);
    await agent.start();
    await eventually("agent ready", async () => (agent.ready ? true : undefined), 60_000);
  },
  { timeout: 16 * 60_000 },
);

after(async () => {
  await agent?.stop();
  await restarted?.close();
  await ctrl?.close();
  admin?.close();
  dir.remove();
});

function hardOf(o: KubeObject | undefined): Record<string, unknown> | undefined {
  return o && isRecord(o.spec) && isRecord(o.spec.hard) ? o.spec.hard : undefined;
}

/** The ResourceQuota once its hard limits are `want` (the API server's own spelling, any order). */
async function quotaBecomes(ns: string, want: Record<string, string>): Promise<KubeObject> {
  const sorted = (h: Record<string, unknown>) =>
    JSON.stringify(Object.entries(h).sort(([a], [b]) => a.localeCompare(b)));
  let last: unknown = "none";
  return eventually(
    `ResourceQuota of ${ns} at ${JSON.stringify(want)}`,
    async () => {
      const rq = await admin.get(resources.resourceQuotas, ns, QUOTA_OBJECT_NAME);
      last = hardOf(rq) ?? "none";
      if (rq && sorted(hardOf(rq) ?? {}) === sorted(want)) return rq;
      throw new Error(`ResourceQuota of ${ns} holds ${JSON.stringify(last)}`);
    },
    60_000,
  );
}

/** The LimitRange's default CPU for a container. */
async function limitRangeCpu(ns: string): Promise<string | undefined> {
  const lr = await admin.get(resources.limitRanges, ns, QUOTA_OBJECT_NAME);
  const limits = (lr?.spec as { limits?: { default?: { cpu?: string } }[] } | undefined)?.limits;
  return limits?.[0]?.default?.cpu;
}

const CRON = { "limits.cpu": "5", "requests.cpu": "5", pods: "8" };

test("a namespace with only a cron job gets the quota objects; `krane quota set` reaches it with no deploy", async () => {
  const a = c().adminToken;
  await c()
    .client(QuotaService, a)
    .setQuota({ workspace: "cron", values: { cpu: "2", instances: "3" } });
  // Its own image: the environment has no deployment, and never had one.
  await c()
    .client(JobService, a)
    .putJob({
      workspace: "cron",
      project: "p",
      environment: "prod",
      spec: { name: "tick", schedule: "0 0 1 1 *", image: "registry.example.com/tools:1" } as never,
    });
  await eventually(
    "the CronJob",
    async () => (await admin.list(resources.cronJobs, { namespace: "ws-cron" })).items[0],
    60_000,
  );
  // 2 CPU and 3 instances with the room (× 2.5, rounded up).
  await quotaBecomes("ws-cron", CRON);
  assert.equal(await limitRangeCpu("ws-cron"), "250m");

  await c()
    .client(QuotaService, a)
    .setQuota({ workspace: "cron", values: { instances: "4" } });
  await quotaBecomes("ws-cron", { ...CRON, pods: "10" });
  await c()
    .client(QuotaService, a)
    .setQuota({ workspace: "cron", values: { instances: "3" } });
  await quotaBecomes("ws-cron", CRON);
});

test("a namespace with only a release gets the quota objects", async () => {
  await c()
    .client(QuotaService, c().adminToken)
    .setQuota({ workspace: "rel", values: { instances: "2" } });
  await c()
    .client(ReleaseService, c().adminToken)
    .applyRelease({
      workspace: "rel",
      project: "p",
      environment: "prod",
      files: [{ name: "r.yaml", content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}" }],
    });
  await eventually(
    "the release's ConfigMap",
    async () => admin.get(resources.configMaps, "ws-rel", "settings"),
    60_000,
  );
  await quotaBecomes("ws-rel", { pods: "5" });
  assert.equal(await limitRangeCpu("ws-rel"), "250m");
});

/** Deletes the namespace's ResourceQuota and edits its LimitRange as `kubectl edit` does (an update by another manager). */
async function tamper(ns: string): Promise<void> {
  assert.equal(await admin.delete(resources.resourceQuotas, ns, QUOTA_OBJECT_NAME), "deleted");
  const lr = await admin.get(resources.limitRanges, ns, QUOTA_OBJECT_NAME);
  assert.ok(lr);
  const first = (lr.spec as { limits: { default: { cpu: string } }[] }).limits[0];
  assert.ok(first);
  first.default.cpu = "4";
  await admin.raw("PUT", resourcePath(resources.limitRanges, ns, QUOTA_OBJECT_NAME), lr);
}

async function restored(ns: string, hard: Record<string, string>): Promise<void> {
  await quotaBecomes(ns, hard);
  await eventually(
    `the LimitRange's default in ${ns} restored`,
    async () => {
      const cpu = await limitRangeCpu(ns);
      if (cpu === "250m") return true;
      throw new Error(`the LimitRange of ${ns} gives ${cpu}`);
    },
    60_000,
  );
}

test("a ResourceQuota deleted and a LimitRange edited by hand are restored (a deployment's namespace, a cron job's)", async () => {
  const a = c().adminToken;
  await c()
    .client(QuotaService, a)
    .setQuota({ workspace: "dep", values: { instances: "2" } });
  await c()
    .client(DeploymentService, a)
    .createDeployment({ workspace: "dep", project: "p", environment: "prod", image: "registry.example.com/web:1" });
  await quotaBecomes("ws-dep", { pods: "5" });
  await tamper("ws-dep");
  await restored("ws-dep", { pods: "5" });

  await tamper("ws-cron");
  await restored("ws-cron", CRON);
});

test("ctrl started with another --default-quota: the namespaces it changes follow before any deploy", async () => {
  const port = Number(new URL(c().url).port);
  await ctrl?.close();
  ctrl = undefined;
  // The same database and port: the agent reconnects with its token.
  restarted = await startCtrl({
    databaseUrl: DB(),
    listen: { host: "127.0.0.1", port },
    opsListen: { host: "127.0.0.1", port: 0 },
    shutdownGraceMs: 2000,
    defaultQuota: parseQuotaList("memory=1Gi,instances=6"),
  });
  // Each took the new memory default (1Gi × 2.5) and keeps the instances it set itself.
  const memory = { "limits.memory": "2560Mi", "requests.memory": "2560Mi" };
  await quotaBecomes("ws-cron", { ...CRON, ...memory });
  await quotaBecomes("ws-rel", { pods: "5", ...memory });
  await quotaBecomes("ws-dep", { pods: "5", ...memory });
});

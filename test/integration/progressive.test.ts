// Progressive delivery end to end, real parts only: ctrl (SQLite, HTTP/2) with its progressive
// engine → the agent (as its RBAC ServiceAccount) → the real local Kubernetes, whose pod
// stand-ins run krane's own sentinel and small HTTP servers for the user's pods. Traffic goes
// through real sockets to the sentinel pod. Checked: a canary's observed split over 10,000
// requests at every weight step, completion on promote, an abort (100 % stable at once, the
// canary scaled to 0); blue-green preview by header, the switch, and a rollback within the
// window that creates no pod, with no failed request under load during both.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import { Pool } from "undici";
import { followRollout } from "../../src/cli/rollout.js";
import { Agent } from "../../src/agent/agent.js";
import { STANDIN_ANNOTATION } from "../../src/cluster/standin/app.js";
import { LABEL_DEPLOYMENT_ID, LABEL_ENVIRONMENT_ID } from "../../src/contracts/labels.js";
import { PREVIEW_HEADER, PREVIEW_HEADER_VALUE } from "../../src/contracts/routing.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";
import { RolloutService, type RolloutStatus } from "../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { InstanceStatus } from "../../src/gen/krane/ctrl/v1/cluster_pb.js";
import type { KubeClient } from "../../src/kube/client.js";
import { resources } from "../../src/kube/resources.js";
import { applySentinelRbac } from "../../src/sentinel/rbac.js";
import { eventually, useCluster } from "../support/cluster.js";
import { adminKube, routingAgent } from "./agent/support.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "./ctrl/support.js";
import { countBy, failure, hitMany, openLoad, runningSentinel } from "./sentinel/support.js";

const handle = useCluster({ standins: true, pods: { readyDelayMs: 300, readyJitterMs: 300 } });
const REGION = "local";
const NS = "ws-acme";
const CANARY = { workspace: "acme", project: "shop", environment: "production" };
const BLUE_GREEN = { workspace: "acme", project: "shop", environment: "staging" };
const ANALYSED = { workspace: "acme", project: "shop", environment: "analysed" };
/** The analysis step's interval (s) and the agent's collection interval (ms). */
const INTERVAL = 3;
const MEASURE_MS = 500;
type Ref = typeof CANARY;
const PORT = 8080;
const RATE = 100;
const dir = tempDir("krane-progressive-");
let ctrl: TestCtrl;
let agent: Agent;
let kube: KubeClient;
const envIds = new Map<string, string>();
const pools: Pool[] = [];

async function sentinelPool(ref: Ref): Promise<Pool> {
  const { url } = await runningSentinel(handle.cluster, kube, envIds.get(ref.environment) ?? "");
  const p = new Pool(url, { connections: 32, pipelining: 1, keepAliveTimeout: 10_000 });
  pools.push(p);
  return p;
}

async function running(ref: Ref, deploymentId: string): Promise<number> {
  const s = await ctrl.client(StatusService, ctrl.adminToken).getEnvironmentStatus(ref);
  const d = s.deployments.find((x) => x.deployment?.id === deploymentId);
  return (d?.regions[0]?.instances ?? []).filter((i) => i.status === InstanceStatus.RUNNING).length;
}

async function deploy(ref: Ref, image: string): Promise<string> {
  const { deployment } = await ctrl
    .client(DeploymentService, ctrl.adminToken)
    .createDeployment({ ...ref, image, port: PORT });
  assert.ok(deployment);
  return deployment.id;
}

async function rolloutStatus(ref: Ref): Promise<RolloutStatus> {
  const { status } = await ctrl.client(RolloutService, ctrl.adminToken).getRolloutStatus(ref);
  assert.ok(status);
  return status;
}

function weightOf(s: RolloutStatus, deploymentId: string): number {
  return (
    s.progressive?.weights.find((w) => w.region === REGION)?.weights.find((w) => w.deploymentId === deploymentId)
      ?.weight ?? 0
  );
}

/** Waits until the environment's sentinel serves ctrl's current routing version. */
async function routingServed(ref: Ref): Promise<void> {
  await eventually(
    `${ref.environment}'s sentinel serving the current routing version`,
    async () => {
      const s = await ctrl.client(StatusService, ctrl.adminToken).getEnvironmentStatus(ref);
      const snt = s.sentinels[0];
      return snt && snt.servedRoutingVersion > 0n && snt.servedRoutingVersion === snt.routingVersion ? true : undefined;
    },
    60_000,
  );
}

/** Sends n requests and returns the percent that reached `deploymentId`; every request must succeed. */
async function shareOf(p: Pool, n: number, deploymentId: string): Promise<number> {
  const all = await hitMany(p, n);
  const failed = all.filter((h) => h.status !== 200);
  assert.deepEqual([...countBy(failed, failure)], [], "no request fails");
  return (100 * all.filter((h) => h.answer?.revision === deploymentId).length) / n;
}

async function podNames(ref: Ref): Promise<Set<string>> {
  const { items } = await kube.list(resources.pods, {
    namespace: NS,
    labelSelector: `${LABEL_ENVIRONMENT_ID}=${envIds.get(ref.environment) ?? ""}`,
  });
  return new Set(items.map((p) => p.metadata.uid ?? p.metadata.name ?? ""));
}

describe("progressive delivery through krane's own sentinel", () => {
  before(
    async () => {
      const cluster = await handle.ready();
      await applySentinelRbac(cluster.kubeConfig());
      kube = adminKube(cluster);
      // ctrl's own measurement source, as `ctrl serve` wires it: the agent collects the sentinels'
      // metrics and reports them, ctrl stores them (StoredMeasurements).
      ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { rolloutSweepIntervalMs: 300 });
      const t = ctrl.adminToken;
      await ctrl.client(RegionService, t).createRegion({ name: REGION });
      await ctrl.client(WorkspaceService, t).createWorkspace({ slug: CANARY.workspace });
      await ctrl.client(ProjectService, t).createProject({ workspace: CANARY.workspace, slug: CANARY.project });
      const envs = ctrl.client(EnvironmentService, t);
      const canary = await envs.createEnvironment({
        workspace: CANARY.workspace,
        project: CANARY.project,
        slug: CANARY.environment,
        regions: [{ region: REGION, replicas: 4 }],
        sentinel: { image: "", replicas: 1 },
        rollout: {
          progressive: {
            canary: {
              steps: [
                { step: { case: "setWeight", value: 20 } },
                { step: { case: "pause", value: { seconds: 0 } } },
                { step: { case: "setWeight", value: 50 } },
                { step: { case: "pause", value: { seconds: 0 } } },
              ],
            },
          },
        },
      });
      envIds.set(CANARY.environment, canary.environment?.id ?? "");
      const bg = await envs.createEnvironment({
        workspace: BLUE_GREEN.workspace,
        project: BLUE_GREEN.project,
        slug: BLUE_GREEN.environment,
        regions: [{ region: REGION, replicas: 2 }],
        sentinel: { image: "", replicas: 1 },
        rollout: { progressive: { blueGreen: { scaleDownDelaySeconds: 600 } } },
      });
      envIds.set(BLUE_GREEN.environment, bg.environment?.id ?? "");
      const analysed = await envs.createEnvironment({
        workspace: ANALYSED.workspace,
        project: ANALYSED.project,
        slug: ANALYSED.environment,
        regions: [{ region: REGION, replicas: 2 }],
        sentinel: { image: "", replicas: 1 },
        rollout: {
          progressive: {
            canary: {
              steps: [
                { step: { case: "setWeight", value: 50 } },
                {
                  step: {
                    case: "analysis",
                    value: {
                      minSuccessRatePercent: 99,
                      minRequests: 20,
                      intervalSeconds: INTERVAL,
                      checks: 2,
                      failuresAllowed: 0,
                    },
                  },
                },
              ],
            },
          },
        },
      });
      envIds.set(ANALYSED.environment, analysed.environment?.id ?? "");
      agent = await routingAgent(cluster, ctrl, REGION, {
        sentinelObserveIntervalMs: 300,
        measureIntervalMs: MEASURE_MS,
      });
      await agent.start();
    },
    { timeout: 15 * 60_000 },
  );

  after(async () => {
    for (const p of pools) await p.close();
    await agent?.stop();
    await ctrl?.close();
    kube?.close();
    dir.remove();
  });

  test(
    "canary 20 → pause → 50 → pause → 100: the split over 10,000 requests is within ±2 points of each weight; promote completes; abort is 100 % stable with the canary at 0",
    { timeout: 600_000 },
    async () => {
      const rollout = ctrl.client(RolloutService, ctrl.adminToken);
      const v1 = await deploy(CANARY, "registry.example.com/shop:1");
      await eventually(
        "v1 healthy with 4 instances",
        async () =>
          (await rolloutStatus(CANARY)).progressive?.phase === "Healthy" && (await running(CANARY, v1)) === 4
            ? true
            : undefined,
        120_000,
      );
      const p = await sentinelPool(CANARY);
      await routingServed(CANARY);
      assert.equal(await shareOf(p, 500, v1), 100);

      const v2 = await deploy(CANARY, "registry.example.com/shop:2");
      const paused = await eventually(
        "the canary paused at 20 %",
        async () => {
          const s = await rolloutStatus(CANARY);
          return s.progressive?.phase === "Paused" && weightOf(s, v2) === 20 ? s : undefined;
        },
        120_000,
      );
      assert.equal(paused.progressive?.stepName, "pause (until promote)");
      assert.equal(
        paused.regions[0]?.revisions.find((r) => r.deploymentId === v2)?.desiredReplicas,
        1,
        "canary sized to its share (20 % of 4, rounded up)",
      );
      assert.equal(
        paused.regions[0]?.revisions.find((r) => r.deploymentId === v1)?.desiredReplicas,
        4,
        "stable at full size",
      );
      await routingServed(CANARY);
      const at20 = await shareOf(p, 10_000, v2);
      assert.ok(Math.abs(at20 - 20) <= 2, `20 % step: observed ${at20.toFixed(2)} %`);

      await rollout.promote(CANARY);
      await eventually(
        "the canary paused at 50 %",
        async () => {
          const s = await rolloutStatus(CANARY);
          return s.progressive?.phase === "Paused" && weightOf(s, v2) === 50 ? true : undefined;
        },
        120_000,
      );
      await routingServed(CANARY);
      const at50 = await shareOf(p, 10_000, v2);
      assert.ok(Math.abs(at50 - 50) <= 2, `50 % step: observed ${at50.toFixed(2)} %`);

      await rollout.promote(CANARY);
      const done = await eventually(
        "the rollout complete",
        async () => {
          const s = await rolloutStatus(CANARY);
          return s.progressive?.phase === "Healthy" &&
            s.progressive.stableDeploymentId === v2 &&
            s.regions.every((r) => r.complete)
            ? s
            : undefined;
        },
        180_000,
      );
      assert.equal(weightOf(done, v2), 100);
      await routingServed(CANARY);
      const at100 = await shareOf(p, 10_000, v2);
      assert.equal(at100, 100, "100 % after the last step");
      await eventually("v1 scaled down", async () => ((await running(CANARY, v1)) === 0 ? true : undefined), 120_000);

      // Abort mid-canary: 100 % stable in the same decision, the canary scaled to 0, Degraded.
      const v3 = await deploy(CANARY, "registry.example.com/shop:3");
      await eventually(
        "v3 at 20 % and running",
        async () => {
          const s = await rolloutStatus(CANARY);
          return s.progressive?.phase === "Paused" && weightOf(s, v3) === 20 && (await running(CANARY, v3)) === 1
            ? true
            : undefined;
        },
        120_000,
      );
      const { status: aborted } = await rollout.abort(CANARY);
      assert.ok(aborted?.progressive);
      assert.equal(aborted.progressive.phase, "Degraded");
      assert.equal(aborted.progressive.aborted, true);
      assert.match(aborted.progressive.reason, /aborted/);
      assert.equal(weightOf(aborted, v2), 100, "100 % stable in the answer to abort");
      assert.equal(
        aborted.regions[0]?.revisions.find((r) => r.deploymentId === v3)?.desiredReplicas ?? 0,
        0,
        "canary scaled to 0",
      );
      assert.ok(
        aborted.regions[0]?.events.some((e) => e.reason === "RolloutAborted" && e.type === "Warning"),
        "an abort event",
      );
      await routingServed(CANARY);
      assert.equal(await shareOf(p, 1000, v2), 100, "all traffic on the stable revision");
      await eventually(
        "the canary's pods gone",
        async () => ((await running(CANARY, v3)) === 0 ? true : undefined),
        120_000,
      );
      const metrics = await (await fetch(`${ctrl.opsUrl ?? ""}/metrics`)).text();
      assert.match(metrics, /^krane_rollout_aborts_total 1$/m);
      // `krane rollout status` fails on an aborted rollout, naming the reason.
      await assert.rejects(
        followRollout(async () => rolloutStatus(CANARY), { intervalMs: 50, timeoutMs: 5_000, log: () => undefined }),
        /rollout aborted \(Degraded\): aborted by/,
      );
      // The rolling engine's undo does not apply; promote retries from the first step.
      await expectCode(rollout.undo(CANARY), Code.FailedPrecondition, /progressively/);
    },
  );

  test(
    "blue-green: preview by header at 0 % normal traffic; promote switches; rollback within the window flips back with 0 new pods; 0 failed requests at 100 requests/s",
    { timeout: 600_000 },
    async () => {
      const rollout = ctrl.client(RolloutService, ctrl.adminToken);
      const blue = await deploy(BLUE_GREEN, "registry.example.com/shop:blue");
      await eventually(
        "blue healthy",
        async () =>
          (await rolloutStatus(BLUE_GREEN)).progressive?.phase === "Healthy" && (await running(BLUE_GREEN, blue)) === 2
            ? true
            : undefined,
        120_000,
      );
      const p = await sentinelPool(BLUE_GREEN);
      await routingServed(BLUE_GREEN);

      const green = await deploy(BLUE_GREEN, "registry.example.com/shop:green");
      const preview = await eventually(
        "green previewing at full size",
        async () => {
          const s = await rolloutStatus(BLUE_GREEN);
          return s.progressive?.phase === "Paused" && (await running(BLUE_GREEN, green)) === 2 ? s : undefined;
        },
        120_000,
      );
      assert.equal(preview.progressive?.weights[0]?.previewDeploymentId, green);
      assert.equal(weightOf(preview, green), 0);
      await routingServed(BLUE_GREEN);
      assert.equal(await shareOf(p, 1000, blue), 100, "normal traffic stays on blue");
      const viaHeader = await hitMany(p, 200, 16, "/", { [PREVIEW_HEADER]: PREVIEW_HEADER_VALUE });
      assert.deepEqual(
        [...countBy(viaHeader, (h) => `${h.status} ${h.answer?.revision ?? h.cause ?? h.error ?? ""}`)],
        [[`200 ${green}`, 200]],
        "the preview header reaches green only",
      );

      // Promote under load.
      const run1 = openLoad(p, RATE);
      await new Promise((r) => setTimeout(r, 1500));
      await rollout.promote(BLUE_GREEN);
      await routingServed(BLUE_GREEN);
      await new Promise((r) => setTimeout(r, 1500));
      const during1 = await run1.stop();
      assert.deepEqual(
        [
          ...countBy(
            during1.filter((h) => h.status !== 200),
            failure,
          ),
        ],
        [],
        `0 of ${during1.length} requests fail during the switch`,
      );
      assert.equal(await shareOf(p, 1000, green), 100, "green takes all traffic");
      const switched = await rolloutStatus(BLUE_GREEN);
      assert.equal(switched.progressive?.previousDeploymentId, blue, "blue kept for the window");
      assert.equal(await running(BLUE_GREEN, blue), 2);

      // Rollback within the window: a route swap, no pod created.
      const podsBefore = await podNames(BLUE_GREEN);
      const run2 = openLoad(p, RATE);
      await new Promise((r) => setTimeout(r, 1500));
      const { status: back } = await rollout.abort(BLUE_GREEN);
      assert.equal(back?.progressive?.stableDeploymentId, blue);
      await routingServed(BLUE_GREEN);
      await new Promise((r) => setTimeout(r, 1500));
      const during2 = await run2.stop();
      assert.deepEqual(
        [
          ...countBy(
            during2.filter((h) => h.status !== 200),
            failure,
          ),
        ],
        [],
        `0 of ${during2.length} requests fail during the rollback`,
      );
      assert.equal(await shareOf(p, 1000, blue), 100, "blue serves again");
      const created = [...(await podNames(BLUE_GREEN))].filter((u) => !podsBefore.has(u));
      assert.deepEqual(created, [], "no pod created by the rollback");
    },
  );

  test(
    `analysis: a canary answering 10 % 5xx is aborted within 2 intervals (${INTERVAL} s) naming the success rate; a healthy one completes`,
    { timeout: 600_000 },
    async () => {
      const v1 = await deploy(ANALYSED, "registry.example.com/shop:a1");
      await eventually(
        "v1 healthy",
        async () =>
          (await rolloutStatus(ANALYSED)).progressive?.phase === "Healthy" && (await running(ANALYSED, v1)) === 2
            ? true
            : undefined,
        120_000,
      );
      const p = await sentinelPool(ANALYSED);
      await routingServed(ANALYSED);
      const run = openLoad(p, RATE);
      try {
        // A canary whose pods answer 10 % of requests with 500, from the moment they exist.
        const bad = await deploy(ANALYSED, "registry.example.com/shop:a2");
        await eventually(
          "the bad canary's pod misbehaving",
          async () => {
            const { items } = await kube.list(resources.pods, {
              namespace: NS,
              labelSelector: `${LABEL_DEPLOYMENT_ID}=${bad}`,
            });
            if (items.length === 0) return undefined;
            for (const pod of items)
              await kube.apply(
                resources.pods,
                {
                  metadata: {
                    name: pod.metadata.name,
                    namespace: NS,
                    annotations: { [STANDIN_ANNOTATION.errorRate]: "0.1" },
                  },
                },
                { force: true },
              );
            return true;
          },
          60_000,
        );
        const analysing = await eventually(
          "the analysis step started",
          async () => {
            const s = await rolloutStatus(ANALYSED);
            return s.progressive?.stepName === "analysis" || s.progressive?.aborted ? performance.now() : undefined;
          },
          60_000,
        );
        const aborted = await eventually(
          "the analysis aborting the canary",
          async () => {
            const s = await rolloutStatus(ANALYSED);
            return s.progressive?.aborted ? { s, at: performance.now() } : undefined;
          },
          60_000,
        );
        const pr = aborted.s.progressive;
        assert.match(pr?.reason ?? "", /^analysis failed: success rate \d+(\.\d)? % < 99 % over [\d,]+ requests/);
        assert.equal(pr?.lastAnalysis, "fail");
        assert.equal(weightOf(aborted.s, v1), 100, "100 % stable");
        assert.ok(
          aborted.at - analysing <= 2 * INTERVAL * 1000 + 1000,
          `aborted ${((aborted.at - analysing) / 1000).toFixed(1)} s after the analysis step started (2 intervals: ${2 * INTERVAL} s)`,
        );
        await routingServed(ANALYSED);
        const after = await hitMany(p, 500);
        assert.equal(
          after.filter((h) => h.answer?.revision === v1 && h.status === 200).length,
          500,
          "all traffic on the stable revision, all answered",
        );

        // A healthy canary passes its checks and completes.
        const good = await deploy(ANALYSED, "registry.example.com/shop:a3");
        const done = await eventually(
          "the healthy canary complete",
          async () => {
            const s = await rolloutStatus(ANALYSED);
            return s.progressive?.phase === "Healthy" && s.progressive.stableDeploymentId === good ? s : undefined;
          },
          120_000,
        );
        assert.equal(done.progressive?.lastAnalysis, "pass");
        assert.match(done.progressive?.lastAnalysisReason ?? "", /success rate .* over [\d,]+ requests/);
      } finally {
        await run.stop();
      }
    },
  );
});

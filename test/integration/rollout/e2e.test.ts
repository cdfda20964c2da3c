// Rollouts end to end on the real cluster: ctrl (SQLite) drives the engine, the agent (as its
// ServiceAccount) applies ReplicaSets, KWOK makes pods ready after ~1–2 s (or never, for one
// image), and the ReplicaSet sizes are sampled from the Kubernetes API throughout. With 10
// replicas, maxSurge 25% and maxUnavailable 0: v1 → v2 within bounds to completion; pause holds,
// resume continues; undo returns to v1; a never-ready v3 exceeds its progress deadline while v1
// keeps serving and `krane rollout status` exits non-zero; Recreate waits for the old pods.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { Registry } from "prom-client";
import { eventually, useCluster } from "../../support/cluster.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  RolloutStrategy,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { RolloutService, type RegionRollout } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { resources } from "../../../src/kube/resources.js";
import type { KubeClient } from "../../../src/kube/client.js";
import { isRecord, type KubeObject } from "../../../src/kube/object.js";
import { Agent } from "../../../src/agent/agent.js";
import { silentLogger } from "../../../src/base/log.js";
import { adminKube, agentKubeConfig } from "../agent/support.js";
import { startTestCtrl, tempDir, type TestCtrl } from "../ctrl/support.js";
import { KRANE_BIN } from "../ctrl/process.js";

const BAD = "ghcr.io/krane/never-ready:1";
const handle = useCluster({ pods: { readyDelayMs: 1000, readyJitterMs: 1000, neverReadyImages: [BAD] } });
const REGION = "local";
const NS = "ws-acme";
const REF = { workspace: "acme", project: "shop", environment: "production" };
const dir = tempDir("krane-rollout-e2e-");
let ctrl: TestCtrl;
let agent: Agent;
let kube: KubeClient;

interface RsSample {
  deploymentId: string;
  image: string;
  spec: number;
  pods: number;
  available: number;
}

function num(v: unknown): number {
  return typeof v === "number" ? v : 0;
}

function podReady(pod: KubeObject): boolean {
  if (pod.metadata.deletionTimestamp) return false;
  const status = isRecord(pod.status) ? pod.status : {};
  const conditions: unknown[] = Array.isArray(status.conditions) ? status.conditions : [];
  return conditions.some((c) => isRecord(c) && c.type === "Ready" && c.status === "True");
}

/**
 * The environment's ReplicaSets: spec sizes from the ReplicaSets, pod and available counts from
 * the pods themselves (ReplicaSet status lags the pods it counts).
 */
async function replicaSets(envId: string): Promise<RsSample[]> {
  const selector = `krane.dev/environment-id=${envId}`;
  const { items } = await kube.list(resources.replicaSets, { namespace: NS, labelSelector: selector });
  const pods = (await kube.list(resources.pods, { namespace: NS, labelSelector: selector })).items;
  const of = (id: string): KubeObject[] => pods.filter((p) => p.metadata.labels?.["krane.dev/deployment-id"] === id);
  return items.map((rs: KubeObject) => {
    const id = rs.metadata.labels?.["krane.dev/deployment-id"] ?? "";
    const spec = isRecord(rs.spec) ? rs.spec : {};
    const tpl = isRecord(spec.template) && isRecord(spec.template.spec) ? spec.template.spec : {};
    const c0: unknown = Array.isArray(tpl.containers) ? tpl.containers[0] : undefined;
    return {
      deploymentId: id,
      image: isRecord(c0) && typeof c0.image === "string" ? c0.image : "",
      spec: num(spec.replicas),
      pods: of(id).length,
      available: of(id).filter(podReady).length,
    };
  });
}

/** Samples the environment's ReplicaSets from the API server until stopped. */
function record(envId: string): { samples: RsSample[][]; stop: () => Promise<RsSample[][]> } {
  const samples: RsSample[][] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      samples.push(await replicaSets(envId));
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return {
    samples,
    stop: async () => {
      running = false;
      await loop;
      return samples;
    },
  };
}

async function region(env = REF): Promise<RegionRollout> {
  const { status } = await ctrl.client(RolloutService, ctrl.adminToken).getRolloutStatus(env);
  const r = status?.regions[0];
  if (!r) throw new Error("no region");
  return r;
}

async function deploy(image: string, env = REF): Promise<string> {
  const { deployment } = await ctrl.client(DeploymentService, ctrl.adminToken).createDeployment({ ...env, image });
  return deployment?.id ?? "";
}

async function complete(env = REF, timeoutMs = 120_000): Promise<RegionRollout> {
  return eventually(
    "the rollout to complete",
    async () => {
      const r = await region(env);
      return r.complete ? r : undefined;
    },
    timeoutMs,
  );
}

/** `krane rollout status` as a real process (asynchronous: ctrl runs in this process). */
function rolloutStatusCli(
  target: string,
  timeoutSeconds: number,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [KRANE_BIN, "rollout", "status", target, "--timeout", String(timeoutSeconds)],
      { env: { ...process.env, KRANE_CTRL_URL: ctrl.url, KRANE_TOKEN: ctrl.adminToken, KRANE_WORKSPACE: "acme" } },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === "number" ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

describe("rollouts on the real cluster", () => {
  before(
    async () => {
      ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { rolloutSweepIntervalMs: 500 });
      const t = ctrl.adminToken;
      await ctrl.client(RegionService, t).createRegion({ name: REGION });
      await ctrl.client(WorkspaceService, t).createWorkspace({ slug: "acme" });
      await ctrl.client(ProjectService, t).createProject({ workspace: "acme", slug: "shop" });
      await ctrl.client(EnvironmentService, t).createEnvironment({
        workspace: "acme",
        project: "shop",
        slug: "production",
        regions: [{ region: REGION, replicas: 10 }],
        rollout: { maxSurge: "25%", maxUnavailable: "0", progressDeadlineSeconds: 10 },
      });
      kube = adminKube(handle.cluster);
      agent = new Agent({
        ctrlUrl: ctrl.url,
        token: await ctrl.agentToken(REGION),
        region: REGION,
        kubeconfig: await agentKubeConfig(handle.cluster),
        log: silentLogger,
        registry: new Registry(),
        opsPort: -1,
        resyncPeriodMs: 5_000,
        callTimeoutMs: 3_000,
        runtime: { reconnect: { baseMs: 100, capMs: 1_000, minMs: 50 } },
      });
      await agent.start();
    },
    { timeout: 120_000 },
  );

  after(async () => {
    await agent?.stop();
    await ctrl?.close();
    dir.remove();
  });

  let envId = "";

  test(
    "v1 → v2 with 10 replicas, maxSurge 25%, maxUnavailable 0: bounds hold throughout and the rollout completes",
    { timeout: 240_000 },
    async () => {
      await deploy("shop:1");
      const r1 = await complete();
      const { status } = await ctrl.client(RolloutService, ctrl.adminToken).getRolloutStatus(REF);
      envId = status?.environmentId ?? "";
      assert.equal(r1.availableReplicas, 10);

      const rec = record(envId);
      const v2 = await deploy("shop:2");
      await complete();
      await eventually(
        "v1 scaled to 0 with its pods gone",
        async () => {
          const rs = await replicaSets(envId);
          return rs.filter((x) => x.deploymentId !== v2).every((x) => x.spec === 0 && x.pods === 0) ? true : undefined;
        },
        60_000,
      );
      const samples = await rec.stop();
      assert.ok(samples.length > 5, "sampled the ReplicaSets during the rollout");
      let sawBoth = false;
      for (const s of samples) {
        const total = s.reduce((a, x) => a + x.spec, 0);
        const available = s.reduce((a, x) => a + x.available, 0);
        assert.ok(total <= 13, `ReplicaSet sizes sum to ${total} > replicas + maxSurge (13): ${JSON.stringify(s)}`);
        assert.ok(available >= 10, `${available} available < replicas - maxUnavailable (10): ${JSON.stringify(s)}`);
        if (s.filter((x) => x.spec > 0).length === 2) sawBoth = true;
      }
      assert.ok(sawBoth, "old and new ReplicaSets ran side by side (a rolling update, not a swap)");
      const last = samples[samples.length - 1] ?? [];
      assert.equal(last.find((x) => x.deploymentId === v2)?.spec, 10);
    },
  );

  test("pause mid-rollout holds the sizes; resume continues to completion", { timeout: 240_000 }, async () => {
    const rollouts = ctrl.client(RolloutService, ctrl.adminToken);
    const v3 = await deploy("shop:3");
    // Let it take a step or two, then pause.
    await eventually(
      "the new revision to get replicas",
      async () => (((await replicaSets(envId)).find((x) => x.deploymentId === v3)?.spec ?? 0) > 0 ? true : undefined),
      60_000,
    );
    await rollouts.pause(REF);
    const held = (await replicaSets(envId)).map((x) => [x.deploymentId, x.spec]).sort();
    await new Promise((r) => setTimeout(r, 4000)); // pods of the held sizes become ready meanwhile
    assert.deepEqual(
      (await replicaSets(envId)).map((x) => [x.deploymentId, x.spec]).sort(),
      held,
      "sizes hold while paused",
    );
    assert.equal((await region()).complete, false);
    await rollouts.resume(REF);
    const done = await complete();
    assert.equal(done.targetDeploymentId, v3);
    assert.equal((await replicaSets(envId)).find((x) => x.deploymentId === v3)?.spec, 10);
  });

  test("undo returns to the previous revision", { timeout: 240_000 }, async () => {
    const before = await region();
    const previous = before.revisions.find((x) => x.image === "shop:2");
    await ctrl.client(RolloutService, ctrl.adminToken).undo(REF);
    const done = await complete();
    assert.equal(done.targetDeploymentId, previous?.deploymentId);
    const rs = await replicaSets(envId);
    assert.equal(rs.find((x) => x.image === "shop:2")?.spec, 10);
    assert.ok(rs.filter((x) => x.image !== "shop:2").every((x) => x.spec === 0));
  });

  test(
    "a revision that never becomes ready exceeds the progress deadline while the old one keeps serving; rollout status exits non-zero",
    { timeout: 240_000 },
    async () => {
      const serving = (await region()).targetDeploymentId;
      const bad = await deploy(BAD);
      const cli = await rolloutStatusCli("shop/production", 120);
      assert.notEqual(cli.code, 0, `krane rollout status exited 0: ${cli.stdout}`);
      assert.match(cli.stderr, /progress deadline/);
      assert.match(cli.stdout, /\[local\] waiting for rollout to finish/);
      const r = await region();
      const progressing = r.conditions.find((c) => c.type === "Progressing");
      assert.equal(progressing?.status, "False");
      assert.equal(progressing?.reason, "ProgressDeadlineExceeded");
      const rs = await replicaSets(envId);
      assert.equal(rs.find((x) => x.deploymentId === serving)?.spec, 10);
      assert.equal(rs.find((x) => x.deploymentId === serving)?.available, 10);
      assert.equal(rs.find((x) => x.deploymentId === bad)?.spec, 3, "only the surge was tried");
      // And a good rollout reports success with exit 0.
      await ctrl.client(RolloutService, ctrl.adminToken).undo(REF);
      const ok = await rolloutStatusCli("acme/shop/production", 120);
      assert.equal(ok.code, 0, ok.stderr);
      assert.match(ok.stdout, /successfully rolled out/);
    },
  );

  test(
    "Recreate: the new revision gets no replicas until the old pods are gone, terminating ones included",
    { timeout: 240_000 },
    async () => {
      const t = ctrl.adminToken;
      const ref = { ...REF, environment: "batch" };
      const { environment } = await ctrl.client(EnvironmentService, t).createEnvironment({
        workspace: "acme",
        project: "shop",
        slug: "batch",
        regions: [{ region: REGION, replicas: 4 }],
        rollout: { strategy: RolloutStrategy.RECREATE, progressDeadlineSeconds: 60 },
      });
      const id = environment?.id ?? "";
      const old = await deploy("batch:1", ref);
      await complete(ref);
      // A finalizer holds the old pods in Terminating once they are deleted, the way a slow
      // shutdown would: their ReplicaSet no longer counts them, but their processes still run.
      const HOLD = "test.krane.dev/hold";
      const oldPods = (
        await kube.list(resources.pods, { namespace: NS, labelSelector: `krane.dev/deployment-id=${old}` })
      ).items;
      assert.equal(oldPods.length, 4);
      const hold = (pod: KubeObject, finalizers: string[]): Promise<KubeObject> =>
        kube.apply(
          resources.pods,
          { metadata: { name: pod.metadata.name, namespace: NS, finalizers } },
          { fieldManager: "test-hold" },
        );
      await Promise.all(oldPods.map((p) => hold(p, [HOLD])));
      const rec = record(id);
      const next = await deploy("batch:2", ref);
      try {
        await eventually("the old pods terminating", async () => {
          const s = (await replicaSets(id)).find((x) => x.deploymentId === old);
          return s && s.spec === 0 && s.pods === 4 ? true : undefined;
        });
        // Held for a while: several passes run (the sweep is every 0.5 s) and none sizes the new revision.
        await new Promise((r) => setTimeout(r, 3_000));
        const held = await replicaSets(id);
        assert.equal(
          held.find((x) => x.deploymentId === next)?.spec ?? 0,
          0,
          `new revision sized while old pods terminate: ${JSON.stringify(held)}`,
        );
        assert.equal((await region(ref)).complete, false, "not complete while the old pods terminate");
      } finally {
        await Promise.all(oldPods.map((p) => hold(p, []).catch(() => undefined)));
      }
      await complete(ref);
      const samples = await rec.stop();
      for (const s of samples) {
        const o = s.find((x) => x.deploymentId === old);
        const n = s.find((x) => x.deploymentId === next);
        if ((n?.spec ?? 0) > 0)
          assert.equal(o?.pods ?? 0, 0, `new revision sized while old pods exist: ${JSON.stringify(s)}`);
      }
      assert.ok(samples.some((s) => (s.find((x) => x.deploymentId === next)?.spec ?? 0) === 4));
    },
  );
});

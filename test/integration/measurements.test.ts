// Rollout analysis's measurements end to end, real parts only: ctrl (SQLite, HTTP/2) → the agent
// (as its RBAC ServiceAccount, scraping every second) → the real local Kubernetes, whose pod
// stand-ins run krane's own sentinel and the user's pods. Two revisions run side by side under a
// weighted routing policy; one answers 10 % of requests with 500 and 240 ms late. After ~2,000
// requests through the sentinel, ctrl's MeasurementSource (StoredMeasurements) has each
// revision's count within 3 % of what the clients saw, the bad one's 5xx fraction near 10 % and
// the good one's 0, and latency buckets that show the added delay. The sentinel pod is replaced
// halfway: counts neither go negative nor double. `krane metrics -o json` (the metrics history,
// through the real CLI) then shows each revision's requests and error rate within 5 % of what the
// clients saw (the warm-up's requests included), the delayed revision's p50 within 5 % of its
// 240 ms (the upper bound of the sentinel's 100–250 ms bucket) and its p95 and p99 in that bucket
// or the next, and each instance's requests within 5 % of what that pod answered. An agent token of one region cannot report for another.
//
// The weighted policy is written into ctrl's database here through the routing's owner
// (domain/environments.ts setRouting: a new routing version, the sentinels re-rendered), standing
// in for a progressive rollout's decision; everything downstream of it is the product.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { Pool } from "undici";
import { Agent } from "../../src/agent/agent.js";
import { STANDIN_ANNOTATION } from "../../src/cluster/standin/app.js";
import { LATENCY_BUCKETS_MS } from "../../src/contracts/analysis.js";
import { SENTINEL_NAMESPACE } from "../../src/contracts/cluster.js";
import { LABEL_DEPLOYMENT_ID } from "../../src/contracts/labels.js";
import { StoredMeasurements } from "../../src/ctrl/domain/measurements.js";
import { environmentRegions, setRouting } from "../../src/ctrl/domain/environments.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";
import {
  ClusterService,
  InstanceStatus,
  ReportMeasurementsRequestSchema,
} from "../../src/gen/krane/ctrl/v1/cluster_pb.js";
import type { GetMetricsHistoryResponseJson } from "../../src/gen/krane/ctrl/v1/live_pb.js";
import { RolloutService } from "../../src/gen/krane/ctrl/v1/rollout_pb.js";
import type { KubeClient } from "../../src/kube/client.js";
import { resources } from "../../src/kube/resources.js";
import { applySentinelRbac } from "../../src/sentinel/rbac.js";
import { eventually, useCluster } from "../support/cluster.js";
import { adminKube, routingAgent } from "./agent/support.js";
import { kraneAsync } from "./ctrl/process.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "./ctrl/support.js";
import { hit, hitMany, runningSentinel, type Hit } from "./sentinel/support.js";

const handle = useCluster({ standins: true, pods: { readyDelayMs: 1_500, readyJitterMs: 300 } });
const REGION = "local";
const NS = "ws-acme";
const REF = { workspace: "acme", project: "shop", environment: "production" };
const PORT = 8080;
/** The bad revision's added delay (ms). */
const DELAY_MS = 240;
const dir = tempDir("krane-measure-");
let ctrl: TestCtrl;
let agent: Agent;
let kube: KubeClient;
let envId = "";

async function sentinelPod(not?: string): Promise<{ name: string; url: string }> {
  return runningSentinel(handle.cluster, kube, envId, not);
}

async function running(deploymentId: string): Promise<number> {
  const s = await ctrl.client(StatusService, ctrl.adminToken).getEnvironmentStatus(REF);
  const d = s.deployments.find((x) => x.deployment?.id === deploymentId);
  return (d?.regions[0]?.instances ?? []).filter((i) => i.status === InstanceStatus.RUNNING).length;
}

/** Stands in for a progressive rollout: the same weights in every region, stored and rendered as ctrl does. */
async function setWeights(weights: { deploymentId: string; weight: number }[]): Promise<void> {
  await ctrl.store.write(async (tx) => {
    const env = await tx.trx.selectFrom("environments").selectAll().where("id", "=", envId).executeTakeFirstOrThrow();
    const project = await tx.trx
      .selectFrom("projects")
      .selectAll()
      .where("id", "=", env.project_id)
      .executeTakeFirstOrThrow();
    const regions = await environmentRegions(tx.trx, envId);
    await setRouting(tx, project, env, new Map(regions.map((r) => [r.region, { weights, preview: null }])));
  });
}

describe("measurements from the sentinels reach ctrl's MeasurementSource", () => {
  before(
    async () => {
      const cluster = await handle.ready();
      await applySentinelRbac(cluster.kubeConfig());
      kube = adminKube(cluster);
      ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { rolloutSweepIntervalMs: 200 });
      const t = ctrl.adminToken;
      await ctrl.client(RegionService, t).createRegion({ name: REGION });
      await ctrl.client(RegionService, t).createRegion({ name: "elsewhere" });
      await ctrl.client(WorkspaceService, t).createWorkspace({ slug: REF.workspace });
      await ctrl.client(ProjectService, t).createProject({ workspace: REF.workspace, slug: REF.project });
      const { environment } = await ctrl.client(EnvironmentService, t).createEnvironment({
        workspace: REF.workspace,
        project: REF.project,
        slug: REF.environment,
        regions: [{ region: REGION, replicas: 3 }],
        sentinel: { image: "", replicas: 1 },
        // The test sets the weights itself: no warm revision for the rollout driver to route around.
        rollout: { maxSurge: "1", maxUnavailable: "0", warmWindowSeconds: 0 },
      });
      envId = environment?.id ?? "";
      agent = await routingAgent(cluster, ctrl, REGION, { sentinelObserveIntervalMs: 500, measureIntervalMs: 1_000 });
      await agent.start();
    },
    { timeout: 15 * 60_000 },
  );

  after(async () => {
    await agent?.stop();
    await ctrl?.close();
    kube?.close();
    dir.remove();
  });

  test(
    "two weighted revisions, one failing 10 % and slow: counts, 5xx fraction and latency; a replaced sentinel pod",
    { timeout: 600_000 },
    async (t) => {
      const admin = ctrl.adminToken;
      const rollout = ctrl.client(RolloutService, admin);
      const deploy = async (image: string): Promise<string> => {
        const { deployment } = await ctrl
          .client(DeploymentService, admin)
          .createDeployment({ ...REF, image, port: PORT });
        assert.ok(deployment);
        return deployment.id;
      };
      const good = await deploy("registry.example.com/shop:1");
      await eventually(
        "3 running instances of the first revision",
        async () => ((await running(good)) === 3 ? true : undefined),
        180_000,
      );
      // The second revision: its rolling update is paused while both revisions run.
      await rollout.pause(REF);
      const bad = await deploy("registry.example.com/shop:2");
      await rollout.resume(REF);
      await eventually(
        "both revisions running",
        async () => ((await running(bad)) >= 1 && (await running(good)) >= 1 ? true : undefined),
        180_000,
      );
      await rollout.pause(REF);
      await new Promise((r) => setTimeout(r, 3_000));
      assert.ok((await running(good)) >= 1 && (await running(bad)) >= 1, "the paused rollout keeps both revisions");
      await setWeights([
        { deploymentId: good, weight: 50 },
        { deploymentId: bad, weight: 50 },
      ]);

      // The bad revision's pods fail 10 % of requests and answer 240 ms late (just under the
      // sentinel's 250 ms bucket bound, so its percentiles can be read within 5 %).
      const { items } = await kube.list(resources.pods, {
        namespace: NS,
        labelSelector: `${LABEL_DEPLOYMENT_ID}=${bad}`,
      });
      for (const pod of items) {
        await kube.apply(
          resources.pods,
          {
            metadata: {
              name: pod.metadata.name,
              namespace: NS,
              annotations: { [STANDIN_ANNOTATION.errorRate]: "0.1", [STANDIN_ANNOTATION.latencyMs]: String(DELAY_MS) },
            },
          },
          { force: true },
        );
      }

      let entry = await sentinelPod();
      let pool = new Pool(entry.url, { connections: 16, pipelining: 1, keepAliveTimeout: 10_000 });
      // Every request the clients sent, for the history (which keeps the warm-up's too).
      const all: Hit[] = [];
      // Warm up until both revisions answer through the weighted policy, the bad one with errors.
      await eventually(
        "both revisions answering, the bad one failing sometimes",
        async () => {
          const hs = await hitMany(pool, 200, 8);
          all.push(...hs);
          return hs.some((h) => h.answer?.revision === good) &&
            hs.some((h) => h.answer?.revision === bad && h.status === 500)
            ? true
            : undefined;
        },
        120_000,
      );
      // Quiet for more than two scrape intervals, so no warm-up request falls in a window after `since`.
      await new Promise((r) => setTimeout(r, 3_000));
      const since = Date.now();

      const source = new StoredMeasurements(ctrl.store);
      const sent: Hit[] = await hitMany(pool, 1_000, 8);
      // Everything sent so far reaches ctrl; then the sentinel pod is replaced.
      const firstHalf = sent.filter((h) => h.answer?.revision !== undefined).length;
      await eventually(
        "the first half reported",
        async () => {
          const s = await source.samples(envId, [good, bad], since);
          const n = (s.get(good)?.requests ?? 0) + (s.get(bad)?.requests ?? 0);
          return n >= firstHalf ? true : undefined;
        },
        60_000,
      );
      await pool.close();
      await kube.delete(resources.pods, SENTINEL_NAMESPACE, entry.name);
      entry = await sentinelPod(entry.name);
      pool = new Pool(entry.url, { connections: 16, pipelining: 1, keepAliveTimeout: 10_000 });
      // Probes count as sent: they go through the sentinel like the rest.
      await eventually(
        "the new sentinel pod routing",
        async () => {
          const h = await hit(pool);
          sent.push(h);
          return h.answer?.revision !== undefined ? true : undefined;
        },
        120_000,
      );
      sent.push(...(await hitMany(pool, 1_000, 8)));
      await pool.close();

      const byRev = (rev: string): Hit[] => sent.filter((h) => h.answer?.revision === rev);
      const sentGood = byRev(good).length;
      const sentBad = byRev(bad).length;
      const settled = await eventually(
        "the counts to settle",
        async () => {
          const s = await source.samples(envId, [good, bad], since);
          const g = s.get(good)?.requests ?? 0;
          const b = s.get(bad)?.requests ?? 0;
          return g >= sentGood && b >= sentBad ? s : undefined;
        },
        60_000,
      );
      await new Promise((r) => setTimeout(r, 2_500));
      const s = await source.samples(envId, [good, bad], since);
      assert.deepEqual([...s.keys()].sort(), [...settled.keys()].sort());
      const g = s.get(good);
      const b = s.get(bad);
      assert.ok(g && b);
      const note = `sent good ${sentGood} bad ${sentBad}; measured good ${JSON.stringify(g.byClass)} bad ${JSON.stringify(b.byClass)}`;
      t.diagnostic(note);
      assert.ok(sentGood > 500 && sentBad > 500, `the weighted policy splits the traffic: ${note}`);
      assert.ok(Math.abs(g.requests - sentGood) <= sentGood * 0.03, `good revision's count within 3 %: ${note}`);
      assert.ok(
        Math.abs(b.requests - sentBad) <= sentBad * 0.03,
        `bad revision's count within 3 % (not doubled by the pod's replacement): ${note}`,
      );
      assert.equal(g.byClass["5xx"], 0, note);
      const badFraction = b.byClass["5xx"] / b.requests;
      assert.ok(
        Math.abs(badFraction - 0.1) <= 0.03,
        `bad revision's 5xx fraction ${badFraction.toFixed(3)} ≈ 0.10: ${note}`,
      );
      assert.equal(
        b.byClass["5xx"],
        byRev(bad).filter((h) => h.status === 500).length,
        "the sentinel counted exactly the 500s the clients got",
      );
      for (const x of [g, b]) {
        assert.equal(x.latencyBuckets.length, LATENCY_BUCKETS_MS.length + 1);
        assert.ok(
          x.latencyBuckets.every((v) => v >= 0),
          "never negative",
        );
        assert.deepEqual(x.regions, [REGION]);
      }
      // Latency: the bad revision's answers take ≥ 240 ms, so almost none are in the ≤ 25 ms buckets.
      const upTo25 = (buckets: readonly number[]): number =>
        buckets.slice(0, LATENCY_BUCKETS_MS.indexOf(25) + 1).reduce((a, v) => a + v, 0);
      const total = (buckets: readonly number[]): number => buckets.reduce((a, v) => a + v, 0);
      assert.ok(
        upTo25(b.latencyBuckets) <= total(b.latencyBuckets) * 0.02,
        `bad revision ≥ 240 ms: ${JSON.stringify(b.latencyBuckets)}`,
      );
      assert.ok(
        upTo25(g.latencyBuckets) >= total(g.latencyBuckets) * 0.5,
        `good revision mostly fast: ${JSON.stringify(g.latencyBuckets)}`,
      );

      // The metrics history through the real CLI: every request the clients sent since the start.
      all.push(...sent);
      const clients = (rev: string): { n: number; errors: number } => {
        const hs = all.filter((h) => h.answer?.revision === rev);
        return { n: hs.length, errors: hs.filter((h) => h.status >= 500).length };
      };
      const cli = await kraneAsync(["metrics", "shop/production", "--since", "1h", "-o", "json"], {
        KRANE_CTRL_URL: ctrl.url,
        KRANE_TOKEN: admin,
        KRANE_WORKSPACE: REF.workspace,
      });
      assert.equal(cli.status, 0, cli.stderr);
      const history = JSON.parse(cli.stdout) as GetMetricsHistoryResponseJson;
      const totalOf = (rev: string) => {
        const s = (history.series ?? []).filter((x) => x.deploymentId === rev && (x.instance ?? "") === "");
        assert.equal(s.length, 1, `one series (region ${REGION}, instance "") for ${rev}: ${cli.stdout.slice(0, 400)}`);
        return s[0]?.total ?? {};
      };
      for (const [rev, name] of [
        [good, "good"],
        [bad, "bad"],
      ] as const) {
        const c = clients(rev);
        const h = totalOf(rev);
        const n = Number(h.requests ?? 0);
        const errorRate = Number(h.errorRatePercent ?? 0);
        const clientRate = (100 * c.errors) / c.n;
        const note = `${name}: clients ${c.n} requests, ${c.errors} 5xx; krane metrics ${JSON.stringify(h)}`;
        t.diagnostic(note);
        assert.ok(Math.abs(n - c.n) <= c.n * 0.05, `requests within 5 %: ${note}`);
        assert.ok(
          name === "good" ? errorRate === 0 : Math.abs(errorRate - clientRate) <= clientRate * 0.05,
          `error rate within 5 %: ${note}`,
        );
        if (name === "bad") {
          assert.ok(
            Math.abs(Number(h.p50Ms) - DELAY_MS) <= DELAY_MS * 0.05,
            `p50 within 5 % of ${DELAY_MS} ms: ${note}`,
          );
          // The tail on a loaded machine may cross the 250 ms bound (the sentinel counts what the
          // client waited, the machine's stalls included): in that bucket or the next.
          for (const q of ["p95Ms", "p99Ms"] as const)
            assert.ok(Number(h[q]) >= DELAY_MS && Number(h[q]) <= 500, `${q} in the bucket or the next: ${note}`);
        } else assert.ok(Number(h.p50Ms) <= 25, `the good revision is fast: ${note}`);
      }
      // Per instance: what each pod answered, as the clients saw it (a pod's share of its revision).
      const pods = new Map<string, number>();
      for (const h of all) if (h.answer?.pod) pods.set(h.answer.pod, (pods.get(h.answer.pod) ?? 0) + 1);
      assert.ok(pods.size >= 2, "several instances answered");
      for (const [pod, n] of pods) {
        const series = (history.series ?? []).filter((x) => x.instance === pod);
        const got = series.reduce((a, x) => a + Number(x.total?.requests ?? 0), 0);
        const note = `instance ${pod}: clients ${n}, krane metrics ${got}`;
        t.diagnostic(note);
        assert.ok(Math.abs(got - n) <= Math.max(3, n * 0.05), `an instance's requests within 5 %: ${note}`);
      }
    },
  );

  test("an agent token of one region cannot report for another", async () => {
    const local = ctrl.client(ClusterService, await ctrl.agentToken(REGION));
    const now = Date.now();
    const req = create(ReportMeasurementsRequestSchema, {
      region: "elsewhere",
      fromUnixMs: BigInt(now - 1_000),
      toUnixMs: BigInt(now),
      revisions: [{ environmentId: envId, deploymentId: "dep_x", responses2xx: 1n }],
    });
    await expectCode(local.reportMeasurements(req), Code.PermissionDenied, /bound to region "local"/);
    // The other region's own token: the environment has no sentinel there.
    const other = ctrl.client(ClusterService, await ctrl.agentToken("elsewhere"));
    await expectCode(other.reportMeasurements(req), Code.PermissionDenied, /revisions\[0\]\.environment_id/);
  });
});

// Zero downtime on real containers: 200 requests/s through the environment's sentinel Service
// (kube-proxy on the real nodes) while the deployment rolls out a new image (3 → 3, maxSurge 1,
// maxUnavailable 0), scales down 3 → 1, and one of the two sentinels is scaled away — and not one
// request fails. Nothing is simulated: ctrl and the fenced agent drive the cluster, the kubelet's
// readiness probes decide when new containers are ready, deleted pods get a real SIGTERM (the
// hello app keeps serving for 2 s while it leaves the routing table, then exits), and krane's own
// sentinel drains in its container (a container of krane's image).
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Pool } from "undici";
import type { Agent } from "../../src/agent/agent.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";
import { InstanceStatus } from "../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { RolloutService } from "../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { SENTINEL_NAMESPACE, SENTINEL_PORT } from "../../src/contracts/cluster.js";
import { applySentinelRbac } from "../../src/sentinel/rbac.js";
import { eventually } from "../support/cluster.js";
import { getJson } from "../../src/cluster/kube-http.js";
import { kubectl, kubectlJson, realNodesSkip, useRealCluster } from "../support/real-nodes.js";
import { routingAgent } from "./agent/support.js";
import { startTestCtrl, tempDir, type TestCtrl } from "./ctrl/support.js";
import { countBy, failure, openLoad } from "./sentinel/support.js";

const skip = await realNodesSkip();
const REGION = "local";
const REF = { workspace: "acme", project: "shop", environment: "production" };
const RATE = 200;

describe("zero downtime on real containers", { skip }, () => {
  const h = useRealCluster(["untrusted", "sentinel"]);
  const dir = tempDir("krane-zero-downtime-");
  let ctrl: TestCtrl;
  let agent: Agent;
  let pool: Pool | undefined;

  const status = () => ctrl.client(StatusService, ctrl.adminToken).getEnvironmentStatus(REF);
  /** Running instances of a deployment, as ctrl hears from the agent. */
  const running = async (deploymentId: string): Promise<number> => {
    const d = (await status()).deployments.find((x) => x.deployment?.id === deploymentId);
    return (d?.regions[0]?.instances ?? []).filter((i) => i.status === InstanceStatus.RUNNING).length;
  };
  const deploy = async (image: string): Promise<string> => {
    const { deployment } = await ctrl.client(DeploymentService, ctrl.adminToken).createDeployment({
      ...REF,
      image,
      port: 8080,
      // CPU limits are real here (CFS quota): a smaller one throttles the app under gVisor until
      // its readiness probe times out, and every pod of a revision can turn unready at once.
      cpuMillicores: 500n,
      memoryMib: 256n,
      healthCheck: {
        method: "GET",
        path: "/healthz",
        intervalSeconds: 1,
        timeoutSeconds: 2,
        failureThreshold: 3,
        initialDelaySeconds: 1,
      },
    });
    assert.ok(deployment);
    return deployment.id;
  };
  interface Pod {
    metadata: { name: string; deletionTimestamp?: string };
    status: { conditions?: { type: string; status: string }[] };
  }
  const readySentinels = async (): Promise<number> =>
    (
      await kubectlJson<{ items: Pod[] }>(h.cluster, [
        "pods",
        "-n",
        SENTINEL_NAMESPACE,
        "-l",
        "app.kubernetes.io/component=sentinel",
      ])
    ).items.filter(
      (p) =>
        p.metadata.deletionTimestamp === undefined &&
        (p.status.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True"),
    ).length;

  /** What the cluster looked like, printed when requests failed. */
  const diagnose = async (): Promise<void> => {
    for (const args of [
      ["get", "pods", "-A", "-o", "wide"],
      ["get", "events", "-A", "--sort-by=.lastTimestamp"],
      ["get", "endpointslices", "-n", SENTINEL_NAMESPACE, "-o", "yaml"],
      ["logs", "-n", SENTINEL_NAMESPACE, "-l", "app.kubernetes.io/component=sentinel", "--prefix", "--tail=40"],
      ["logs", "-n", "ws-acme", "-l", "app.kubernetes.io/component=deployment", "--prefix", "--tail=20"],
    ])
      console.log(`$ kubectl ${args.join(" ")}\n${(await kubectl(h.cluster, args)).stdout}`);
    console.log(await sentinelCounters());
    if (beforeSentinelScaleDown) console.log(`before the sentinel scale-down:\n${beforeSentinelScaleDown}`);
  };
  /** Each sentinel's status and the counters that say where a failed request ended. */
  const sentinelCounters = async (): Promise<string> => {
    const pods = await kubectlJson<{ items: { status: { podIP?: string } }[] }>(h.cluster, [
      "pods",
      "-n",
      SENTINEL_NAMESPACE,
    ]);
    const out: string[] = [];
    for (const p of pods.items) {
      const ops = (path: string): Promise<string> =>
        fetch(`http://${p.status.podIP}:8041${path}`).then(
          (r) => r.text(),
          (e: unknown) => String(e),
        );
      out.push(`sentinel ${p.status.podIP} /status: ${await ops("/status")}`);
      // Cut mid-answer ("aborted"), an instance's reset, a client error.
      const counters = (await ops("/metrics"))
        .split("\n")
        .filter((l) => /^krane_sentinel_(requests_total|upstream_resets|retries|client_errors)/.test(l));
      out.push(`sentinel ${p.status.podIP} counters:\n${counters.join("\n")}`);
    }
    return out.join("\n");
  };
  let beforeSentinelScaleDown = "";

  before(
    async () => {
      const cluster = await h.ready();
      await applySentinelRbac(cluster.kubeConfig());
      ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), { rolloutSweepIntervalMs: 300 });
      const t = ctrl.adminToken;
      await ctrl.client(RegionService, t).createRegion({ name: REGION });
      await ctrl.client(WorkspaceService, t).createWorkspace({ slug: REF.workspace });
      await ctrl.client(ProjectService, t).createProject({ workspace: REF.workspace, slug: REF.project });
      await ctrl.client(EnvironmentService, t).createEnvironment({
        workspace: REF.workspace,
        project: REF.project,
        slug: REF.environment,
        regions: [{ region: REGION, replicas: 3 }],
        // krane's own sentinel, two of them behind their Service.
        sentinel: { image: "", replicas: 2, cpuMillicores: 1000n, memoryMib: 256n },
        // The old pods go as the rolling update goes (nothing kept warm for a rollback).
        rollout: { maxSurge: "1", maxUnavailable: "0", warmWindowSeconds: 0 },
      });
      agent = await routingAgent(cluster, ctrl, REGION, {
        sentinelImage: (await h.images()).krane.name,
        sentinelObserveIntervalMs: 500,
      });
      await agent.start();
    },
    { timeout: 30 * 60_000 },
  );
  after(async () => {
    await pool?.close();
    await agent?.stop();
    await ctrl?.close();
    dir.remove();
  });

  it(
    "0 failed requests at 200/s through a rolling update, a scale-down and a sentinel scale-down",
    {
      timeout: 15 * 60_000,
    },
    async () => {
      const v1 = await deploy("krane.local/hello:v1");
      await eventually(
        "3 running instances of v1",
        async () => ((await running(v1)) === 3 ? true : undefined),
        300_000,
      );
      await eventually("2 sentinels Ready", async () => ((await readySentinels()) === 2 ? true : undefined), 240_000);
      const svc = await kubectlJson<{ items: { spec: { clusterIP: string } }[] }>(h.cluster, [
        "services",
        "-n",
        SENTINEL_NAMESPACE,
      ]);
      const podIps = (
        await kubectlJson<{ items: { status: { podIP: string } }[] }>(h.cluster, ["pods", "-n", SENTINEL_NAMESPACE])
      ).items.map((x) => x.status.podIP);
      const ip = process.env.ZD_TARGET === "pod" ? podIps[0] : svc.items[0]?.spec.clusterIP;
      assert.ok(ip, "the sentinel's Service");
      pool = new Pool(`http://${ip}:${SENTINEL_PORT}`, { connections: 32, pipelining: 1, keepAliveTimeout: 10_000 });
      const p = pool;
      await eventually(
        "the sentinels route to v1",
        async () => {
          const res = await p.request({ method: "GET", path: "/" });
          const body = (await res.body.json()) as { revision?: string };
          return res.statusCode === 200 && body.revision === "1" ? true : undefined;
        },
        120_000,
      );

      const started = performance.now();
      // Diagnostics: the sentinel Service's ready endpoints over time.
      const ep = h.cluster.endpoint();
      const trail: string[] = [];
      let sampling = true;
      const sampler = (async () => {
        let last = "";
        while (sampling) {
          const slices = await getJson<{
            items: {
              endpoints?: {
                addresses: string[];
                conditions?: { ready?: boolean; serving?: boolean; terminating?: boolean };
              }[];
            }[];
          }>(
            ep,
            `/apis/discovery.k8s.io/v1/namespaces/${SENTINEL_NAMESPACE}/endpointslices?labelSelector=kubernetes.io/service-name`,
          ).catch((e: unknown) => ({ error: String(e).slice(0, 80) }));
          const now =
            "error" in slices
              ? `(API: ${slices.error})`
              : slices.items
                  .flatMap((x) => x.endpoints ?? [])
                  .map(
                    (e) =>
                      `${e.addresses[0]}:${e.conditions?.ready ? "R" : "-"}${e.conditions?.serving ? "S" : "-"}${e.conditions?.terminating ? "T" : "-"}`,
                  )
                  .sort()
                  .join(" ");
          if (now !== last) trail.push(`${((performance.now() - started) / 1000).toFixed(1)} s ${now}`);
          last = now;
          await new Promise((r) => setTimeout(r, 100));
        }
      })();
      const load = openLoad(p, RATE);
      const phases: [string, number][] = [];
      const phase = (name: string): void => void phases.push([name, performance.now() - started]);
      await new Promise((r) => setTimeout(r, 3_000));
      phase("rolling update");
      // The rolling update: one new pod at a time, ready by its probe, then one old pod goes.
      const v2 = await deploy("krane.local/hello:v2");
      await eventually(
        "v2 rolled out (3 running) and v1 gone",
        async () => ((await running(v2)) === 3 && (await running(v1)) === 0 ? true : undefined),
        300_000,
      );
      await new Promise((r) => setTimeout(r, 3_000));
      // The scale-down: two pods get SIGTERM.
      phase("scale-down");
      await ctrl.client(RolloutService, ctrl.adminToken).scale({ ...REF, region: "", replicas: 1 });
      await eventually("1 running instance", async () => ((await running(v2)) === 1 ? true : undefined), 120_000);
      await new Promise((r) => setTimeout(r, 3_000));
      // One of the two sentinels goes: it drains in its container while the Service stops sending it traffic.
      phase("sentinel scale-down");
      // The sentinel that goes takes its counters with it.
      beforeSentinelScaleDown = await sentinelCounters();
      if (process.env.ZD_TARGET !== "pod") {
        await ctrl.client(EnvironmentService, ctrl.adminToken).updateEnvironment({ ...REF, sentinel: { replicas: 1 } });
        await eventually("1 sentinel left", async () => ((await readySentinels()) === 1 ? true : undefined), 120_000);
      }
      await new Promise((r) => setTimeout(r, 5_000));
      const hits = await load.stop();
      sampling = false;
      await sampler;

      const failed = hits.filter((x) => x.status !== 200);
      if (failed.length > 0) {
        await diagnose();
        console.log(`the sentinel Service's endpoints:\n${trail.join("\n")}`);
        const times = failed.map((x) => ((x.at ?? 0) / 1000).toFixed(1));
        console.log(`failures at: ${[...new Set(times)].join(" ")}`);
      }
      const during = (at = 0): string => phases.filter(([, t]) => t <= at).at(-1)?.[0] ?? "before";
      assert.deepEqual(
        [...countBy(failed, (x) => `${failure(x)} (${during(x.at)})`)],
        [],
        `0 of ${hits.length} requests may fail; phases at ${phases.map(([n, t]) => `${n} ${(t / 1000).toFixed(1)} s`).join(", ")}`,
      );
      assert.ok(hits.length >= RATE * 15, `a real load: ${hits.length} requests`);
      const byImage = countBy(hits, (x) => x.answer?.image ?? "?");
      assert.ok(
        (byImage.get("krane.local/hello:v1") ?? 0) > 0 && (byImage.get("krane.local/hello:v2") ?? 0) > 0,
        `both images served: ${[...byImage]}`,
      );
      const last = hits.slice(-RATE);
      assert.equal(new Set(last.map((x) => x.answer?.pod)).size, 1, "in the end one pod serves");
      console.log(
        `zero downtime: ${hits.length} requests, 0 failed; by image ${[...byImage].map(([k, v]) => `${k} ${v}`).join(", ")}`,
      );
    },
  );
});

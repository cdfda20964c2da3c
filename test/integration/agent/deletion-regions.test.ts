// Deleting an exposed environment across two real clusters (real API servers, KWOK nodes), one
// region whose agent runs the gateway kind (a Gateway configured) and one whose agent does not:
// the endpoint's routes are desired in both regions, and the deletion still finishes on the
// agents' own confirmations — no region forced — because ctrl does not wait for a kind the
// region's agent says (in its heartbeat) it does not run. Afterwards nothing krane applied for
// the environment is left in either cluster (the workspace namespace stays: it is the
// workspace's, and the workspace still exists).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { Registry } from "prom-client";
import { eventually, useCluster, type ClusterHandle } from "../../support/cluster.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { EndpointService } from "../../../src/gen/krane/ctrl/v1/exposure_pb.js";
import { resources, type ResourceType } from "../../../src/kube/resources.js";
import type { KubeClient } from "../../../src/kube/client.js";
import type { KubeObject } from "../../../src/kube/object.js";
import { Agent } from "../../../src/agent/agent.js";
import { silentLogger } from "../../../src/base/log.js";
import { COMPONENT, LABEL_COMPONENT, LABEL_MANAGED_BY, MANAGED_BY } from "../../../src/contracts/labels.js";
import { adminKube, agentKubeConfig } from "./support.js";
import { startTestCtrl, tempDir, type TestCtrl } from "../ctrl/support.js";

const REGIONS = ["gw", "plain"] as const;
type Region = (typeof REGIONS)[number];
const handles: Record<Region, ClusterHandle> = { gw: useCluster(), plain: useCluster() };
const ref = { workspace: "acme", project: "shop", environment: "production" };
const dir = tempDir();
const kubes = new Map<Region, KubeClient>();
const agents: Agent[] = [];
let ctrl: TestCtrl;
let envId = "";

before(
  async () => {
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      exposure: { publicApex: "apps.example.net", organizationApex: "internal.example.net" },
      deletionSweepIntervalMs: 200,
    });
    const t = ctrl.adminToken;
    for (const region of REGIONS) await ctrl.client(RegionService, t).createRegion({ name: region });
    await ctrl.client(WorkspaceService, t).createWorkspace({ slug: ref.workspace });
    await ctrl.client(ProjectService, t).createProject({ workspace: ref.workspace, slug: ref.project });
    const env = await ctrl.client(EnvironmentService, t).createEnvironment({
      ...ref,
      slug: ref.environment,
      regions: REGIONS.map((region) => ({ region, replicas: 1 })),
      sentinel: { image: "ghcr.io/krane/sentinel:1", replicas: 1, cpuMillicores: 100n, memoryMib: 64n },
    });
    envId = env.environment?.id ?? "";
    for (const region of REGIONS) {
      const cluster = await handles[region].ready();
      kubes.set(region, adminKube(cluster));
      const a = new Agent({
        ctrlUrl: ctrl.url,
        token: await ctrl.agentToken(region),
        region,
        kubeconfig: await agentKubeConfig(cluster),
        log: silentLogger,
        registry: new Registry(),
        opsPort: -1,
        resyncPeriodMs: 2_000,
        callTimeoutMs: 3_000,
        heartbeatMs: 1_000,
        runtime: {
          reconnect: { baseMs: 100, capMs: 1_000, minMs: 50 },
          retry: { baseMs: 100, capMs: 1_000, minMs: 50 },
        },
        // Only gw's agent has a Gateway: plain's runs no gateway kind at all.
        ...(region === "gw"
          ? { gateway: { public: { namespace: "platform", name: "external", sectionName: "" } } }
          : {}),
      });
      await a.start();
      agents.push(a);
    }
  },
  { timeout: 15 * 60_000 },
);

after(async () => {
  for (const a of agents) await a.stop();
  await ctrl?.close();
  for (const k of kubes.values()) k.close();
  dir.remove();
});

/**
 * Every object krane manages in a cluster, of every type the agent knows, but the workspace
 * namespace's own: the namespace, and its quota backstop (ResourceQuota, LimitRange), which
 * belong to the workspace and stay with its namespace when an environment goes.
 */
async function managed(region: Region): Promise<string[]> {
  const kube = kubes.get(region);
  assert.ok(kube);
  const out: string[] = [];
  for (const [name, r] of Object.entries(resources) as [string, ResourceType][]) {
    if (r === resources.namespaces) continue;
    let items: KubeObject[];
    try {
      items = (await kube.list(r, { labelSelector: `${LABEL_MANAGED_BY}=${MANAGED_BY}` })).items;
    } catch (err) {
      // A type this cluster does not serve (a CRD not installed) holds nothing.
      if (/404|not found/i.test(String(err))) continue;
      throw err;
    }
    for (const o of items)
      if (o.metadata.labels?.[LABEL_COMPONENT] !== COMPONENT.quota)
        out.push(`${name} ${o.metadata.namespace ?? ""}/${o.metadata.name ?? ""}`);
  }
  return out.sort();
}

test(
  "an exposed environment in a region with the gateway kind and one without is deleted completely, no region forced",
  { timeout: 600_000 },
  async () => {
    const t = ctrl.adminToken;
    // (A CRD just installed may answer 429 while its storage initialises: eventually retries.)
    const baseline = {
      gw: await eventually("gw's objects before", () => managed("gw")),
      plain: await eventually("plain's objects before", () => managed("plain")),
    };
    await ctrl.client(DeploymentService, t).createDeployment({ ...ref, image: "registry.example.com/shop:1" });
    await ctrl.client(EndpointService, t).setEndpoint({ ...ref, visibility: "public" });

    // The route is desired in both regions; only gw's agent writes it.
    const desired = await ctrl.store.db
      .selectFrom("desired_objects")
      .select("region")
      .where("kind", "=", "gateway")
      .where("object_id", "=", envId)
      .execute();
    assert.deepEqual(desired.map((d) => d.region).sort(), ["gw", "plain"]);
    await eventually(
      "gw's HTTPRoute, and the ReplicaSets and sentinels in both regions",
      async () => {
        const gw = await managed("gw");
        const plain = await managed("plain");
        const has = (xs: string[], kind: string): boolean => xs.some((x) => x.startsWith(`${kind} `));
        return has(gw, "httpRoutes") &&
          has(gw, "replicaSets") &&
          has(gw, "deployments") &&
          has(plain, "replicaSets") &&
          has(plain, "deployments") &&
          !has(plain, "httpRoutes")
          ? true
          : undefined;
      },
      120_000,
    );
    // Both agents have told ctrl which kinds they run.
    await eventually("both agents' heartbeats", async () => {
      const rows = await ctrl.store.db.selectFrom("cluster_cursors").select(["kind"]).execute();
      return rows.filter((r) => r.kind === "gateway").length === 1 && rows.length === 9 ? true : undefined;
    });

    const { deletion } = await ctrl
      .client(EnvironmentService, t)
      .deleteEnvironment({ ...ref, confirm: ref.environment, forceRegions: [] });
    assert.equal(deletion?.done, false);
    assert.deepEqual(
      deletion?.regions.find((r) => r.region === "plain")?.kinds.map((k) => k.kind),
      ["deployment", "sentinel"],
      "plain's agent is not waited for a gateway kind it does not run",
    );
    assert.ok(deletion?.regions.find((r) => r.region === "gw")?.kinds.some((k) => k.kind === "gateway"));

    const done = await eventually(
      "the deletion finished on the agents' confirmations",
      async () => {
        const { deletion: d } = await ctrl
          .client(EnvironmentService, t)
          .deleteEnvironment({ ...ref, confirm: ref.environment, forceRegions: [] })
          .catch(() => ({ deletion: { done: true, regions: [] as { forced: boolean }[] } }));
        return d?.done ? d : undefined;
      },
      180_000,
    );
    assert.ok(done.regions.every((r) => !r.forced));
    // What krane manages there now, less what it managed before the environment had anything
    // (the agent's own RBAC and the like): nothing.
    const extra = async (region: Region): Promise<string[]> => {
      const before = new Set(baseline[region]);
      return (await managed(region)).filter((x) => !before.has(x));
    };
    for (const region of REGIONS)
      await eventually(
        `nothing of the environment left in ${region}`,
        async () => ((await extra(region)).length === 0 ? true : undefined),
        60_000,
      ).catch(async (err: unknown) => {
        throw new Error(
          `${String(err)}\nleft in ${region}:\n${(await extra(region)).join("\n")}\nbefore:\n${baseline[region].join("\n")}`,
        );
      });
    const rows = await ctrl.store.db.selectFrom("environments").select("id").where("id", "=", envId).execute();
    assert.equal(rows.length, 0, "the environment's rows are purged");
  },
);

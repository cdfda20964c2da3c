// Configuration, secrets, releases, cron jobs and deletion end to end, real parts only: ctrl
// (SQLite, HTTP/2, a master key) ← agents (as their RBAC ServiceAccount, behind the admission
// fence) → the real local Kubernetes (KWOK completes Job pods; the job and cronjob controllers
// run).
//   - config and secret values reach the pods' environment (immutable objects per revision,
//     content-hashed names), and undo brings back the previous revision with its own values;
//   - a release with a ConfigMap, a Service and a Job: applied, healthy; an object removed from
//     the set is pruned; a kind removed entirely is still pruned; a refused kind applies nothing;
//     a kind the cluster does not serve is a per-object status;
//   - a CronJob runs and its runs show in status;
//   - deleting a project with two environments in two regions (one each: two regions' agents
//     share this one cluster, and a deployment's objects are named alike in every region) leaves
//     no krane-managed object of it; with one region's agent stopped, --force finishes, and that
//     region is cleaned when its agent returns.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import type { KubeConfig } from "@kubernetes/client-node";
import { eventually, useCluster } from "../support/cluster.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "./ctrl/support.js";
import { adminKube, agentKubeConfig, kubeWrites, startAgent } from "./agent/support.js";
import type { Agent } from "../../src/agent/agent.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";
import { ConfigService } from "../../src/gen/krane/ctrl/v1/config_pb.js";
import { JobRunResult, ObjectHealth } from "../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { JobService } from "../../src/gen/krane/ctrl/v1/job_pb.js";
import { ReleaseService } from "../../src/gen/krane/ctrl/v1/release_pb.js";
import { RolloutService } from "../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { Keyring } from "../../src/ctrl/secrets/keyring.js";
import { DEFAULT_RELEASE_KINDS } from "../../src/contracts/releases.js";
import { LABEL_ENVIRONMENT_ID, LABEL_MANAGED_BY } from "../../src/contracts/labels.js";
import type { KubeClient } from "../../src/kube/client.js";
import type { KubeObject } from "../../src/kube/object.js";
import { resources, type ResourceType } from "../../src/kube/resources.js";

const handle = useCluster();
const dir = tempDir();
let ctrl: TestCtrl;
let kc: KubeConfig;
let admin: KubeClient;
const agents = new Map<string, Agent>();

const WS = "acme";
const NS = "ws-acme";

async function startRegionAgent(region: string): Promise<Agent> {
  const token = await ctrl.agentToken(region);
  const agent = startAgent(kc, { url: ctrl.url, token }, region);
  await agent.start();
  agents.set(region, agent);
  await eventually(`agent ${region} ready`, async () => (agent.ready ? true : undefined), 60_000);
  return agent;
}

before(
  async () => {
    const cluster = await handle.ready();
    kc = await agentKubeConfig(cluster);
    admin = adminKube(cluster);
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      keyring: new Keyring(randomBytes(32)),
      // The platform allows one kind the local cluster does not serve.
      releaseKinds: [...DEFAULT_RELEASE_KINDS, { group: "monitoring.coreos.com", kind: "ServiceMonitor" }],
      deletionSweepIntervalMs: 500,
    });
    const a = ctrl.adminToken;
    for (const r of ["eu", "us"]) await ctrl.client(RegionService, a).createRegion({ name: r });
    await ctrl.client(WorkspaceService, a).createWorkspace({ slug: WS });
    await startRegionAgent("eu");
    await startRegionAgent("us");
  },
  { timeout: 16 * 60_000 },
);

after(async () => {
  for (const a of agents.values()) await a.stop();
  admin?.close();
  await ctrl?.close();
  dir.remove();
});

async function environment(project: string, env: string, regions: string[]): Promise<string> {
  const a = ctrl.adminToken;
  await ctrl
    .client(ProjectService, a)
    .createProject({ workspace: WS, slug: project })
    .catch(() => undefined);
  const { environment: e } = await ctrl.client(EnvironmentService, a).createEnvironment({
    workspace: WS,
    project,
    slug: env,
    regions: regions.map((region) => ({ region, replicas: 2 })),
    rollout: { maxSurge: "100%", maxUnavailable: "0" } as never,
  });
  return e?.id ?? "";
}

function podSpecOf(rs: KubeObject | undefined): { containers: { envFrom?: unknown[] }[] } {
  return ((rs?.spec as { template?: { spec?: unknown } } | undefined)?.template?.spec ?? { containers: [] }) as {
    containers: { envFrom?: unknown[] }[];
  };
}

async function list(r: ResourceType, selector: string): Promise<KubeObject[]> {
  return (await admin.list(r, { namespace: NS, labelSelector: selector })).items.filter(
    (o) => !o.metadata.deletionTimestamp,
  );
}

describe("configuration and secrets", () => {
  it(
    "reach the pods' environment as immutable per-revision objects; undo brings back the old values",
    { timeout: 240_000 },
    async () => {
      await environment("web", "prod", ["eu"]);
      const ref = { workspace: WS, project: "web", environment: "prod" };
      const a = ctrl.adminToken;
      await ctrl.client(ConfigService, a).setConfig({ ...ref, values: [{ key: "LOG_LEVEL", value: "info" }] });
      await ctrl.client(DeploymentService, a).createDeployment({ ...ref, image: "registry.example.com/web:1" });
      const secret = `pw-${randomBytes(8).toString("hex")}`;
      const { change } = await ctrl
        .client(ConfigService, a)
        .setSecrets({ ...ref, secrets: [{ key: "DB_PASSWORD", source: { case: "value", value: secret } }] });
      const rev = change?.deployment;
      assert.ok(rev);
      const rs = await eventually(
        "the new revision's ReplicaSet",
        async () => admin.get(resources.replicaSets, NS, rev.k8sName),
        60_000,
      );
      const envFrom = podSpecOf(rs).containers[0]?.envFrom as {
        configMapRef?: { name: string };
        secretRef?: { name: string };
      }[];
      const cmName = envFrom.find((e) => e.configMapRef)?.configMapRef?.name ?? "";
      const secretName = envFrom.find((e) => e.secretRef)?.secretRef?.name ?? "";
      assert.match(cmName, new RegExp(`^${rev.k8sName}-config-[0-9a-f]{10}$`));
      const cm = await eventually("its ConfigMap", async () => admin.get(resources.configMaps, NS, cmName));
      assert.deepEqual(cm.data, { LOG_LEVEL: "info" });
      assert.equal(cm.immutable, true);
      const s = await eventually("its Secret", async () => admin.get(resources.secrets, NS, secretName));
      assert.equal(Buffer.from((s.data as Record<string, string>).DB_PASSWORD ?? "", "base64").toString(), secret);
      assert.equal(s.immutable, true);
      // The pods of the revision run with it.
      await eventually(
        "pods of the new revision running",
        async () => {
          const pods = await list(resources.pods, `krane.dev/deployment-id=${rev.id}`);
          return pods.length === 2 && pods.every((p) => (p.status as { phase?: string }).phase === "Running")
            ? pods
            : undefined;
        },
        90_000,
      );
      const pods = await list(resources.pods, `krane.dev/deployment-id=${rev.id}`);
      for (const p of pods)
        assert.deepEqual((p.spec as { containers: { envFrom: unknown }[] }).containers[0]?.envFrom, envFrom);

      // Undo: revision 1 again, with its own configuration and no secret.
      await ctrl.client(RolloutService, a).undo(ref);
      const { deployments } = await ctrl.client(DeploymentService, a).listDeployments(ref);
      const first = deployments.find((d) => d.revision === 1n);
      assert.ok(first);
      await eventually(
        "revision 1 back at 2 replicas",
        async () => {
          const r1 = await admin.get(resources.replicaSets, NS, first.k8sName);
          return (r1?.spec as { replicas?: number } | undefined)?.replicas === 2 ? r1 : undefined;
        },
        90_000,
      );
      const r1 = await admin.get(resources.replicaSets, NS, first.k8sName);
      const oldFrom = podSpecOf(r1).containers[0]?.envFrom as {
        configMapRef?: { name: string };
        secretRef?: unknown;
      }[];
      assert.equal(
        oldFrom.some((e) => e.secretRef),
        false,
      );
      const oldCm = await admin.get(resources.configMaps, NS, oldFrom[0]?.configMapRef?.name ?? "");
      assert.deepEqual(oldCm?.data, { LOG_LEVEL: "info" });
    },
  );
});

describe("releases", () => {
  const ref = { workspace: WS, project: "web", environment: "release" };
  const files = (objects: string[]) => [{ name: "release.yaml", content: objects.join("\n---\n") }];
  const CM = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: fast}";
  const SVC = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: 80}], selector: {app: web}}";
  const JOB =
    "apiVersion: batch/v1\nkind: Job\nmetadata: {name: migrate}\nspec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: m, image: busybox}]";
  const MONITOR = "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: web}\nspec: {}";
  const SECRET = "apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\nstringData: {token: abc}";
  const health = async (): Promise<Map<string, ObjectHealth>> => {
    const { release } = await ctrl.client(ReleaseService, ctrl.adminToken).getRelease({ ...ref, name: "" });
    const region = release?.regions.find((r) => r.region === "eu" && r.observedVersion === release.version);
    return new Map(region?.objects.map((o) => [`${o.kind?.kind}/${o.name}`, o.health]) ?? []);
  };

  it(
    "applied and healthy; pruned when an object or a whole kind leaves; refused kinds apply nothing; a missing kind is a status",
    { timeout: 240_000 },
    async () => {
      await environment("web", "release", ["eu"]);
      const releases = ctrl.client(ReleaseService, ctrl.adminToken);
      const v1 = await releases.applyRelease({ ...ref, files: files([CM, SVC, JOB, MONITOR, SECRET]) });
      assert.equal(v1.release?.version, 1n);
      await eventually(
        "all healthy or known missing",
        async () => {
          const h = await health();
          if (
            h.get("ConfigMap/settings") === ObjectHealth.HEALTHY &&
            h.get("Service/web") === ObjectHealth.HEALTHY &&
            h.get("Job/migrate") === ObjectHealth.HEALTHY &&
            h.get("Secret/creds") === ObjectHealth.HEALTHY &&
            h.get("ServiceMonitor/web") === ObjectHealth.KIND_MISSING
          ) {
            return h;
          }
          // (thrown, so a timeout says what was last reported)
          throw new Error(
            `reported: ${JSON.stringify(Object.fromEntries([...h].map(([k, v]) => [k, ObjectHealth[v]])))}`,
          );
        },
        120_000,
      );
      const cm = await admin.get(resources.configMaps, NS, "settings");
      assert.equal(cm?.metadata.labels?.["krane.dev/release-id"], v1.release?.id);
      assert.equal(cm?.metadata.labels?.[LABEL_MANAGED_BY], "krane");
      const secret = await admin.get(resources.secrets, NS, "creds");
      assert.equal(Buffer.from((secret?.data as Record<string, string>).token ?? "", "base64").toString(), "abc");
      const job = await admin.get(resources.jobs, NS, "migrate");
      assert.equal(
        (job?.spec as { template: { spec: { runtimeClassName: string } } }).template.spec.runtimeClassName,
        "gvisor",
        "release pods get the user workloads' isolation",
      );

      // An identical apply makes no version; an idle resync writes nothing.
      assert.equal(
        (await releases.applyRelease({ ...ref, files: files([CM, SVC, JOB, MONITOR, SECRET]) })).changed,
        false,
      );
      const agent = agents.get("eu") as Agent;
      const writes = await kubeWrites(agent);
      await agent.runtime("releases")?.resyncOnce();
      await agent.runtime("releases")?.idle();
      assert.equal(await kubeWrites(agent), writes, "a resync with nothing changed writes nothing");

      // The Service leaves the set: pruned.
      await releases.applyRelease({ ...ref, files: files([CM, JOB, SECRET]) });
      await eventually(
        "the Service pruned",
        async () => ((await admin.get(resources.services, NS, "web")) ? undefined : true),
        60_000,
      );
      // Every ConfigMap and Secret leave (whole kinds): still pruned.
      await releases.applyRelease({ ...ref, files: files([JOB]) });
      await eventually(
        "the ConfigMap pruned",
        async () => ((await admin.get(resources.configMaps, NS, "settings")) ? undefined : true),
        60_000,
      );
      await eventually(
        "the Secret pruned",
        async () => ((await admin.get(resources.secrets, NS, "creds")) ? undefined : true),
        60_000,
      );
      assert.ok(await admin.get(resources.jobs, NS, "migrate"), "what stays in the set stays");

      // A refused kind: nothing applied, no version.
      const before = (await releases.getRelease({ ...ref, name: "" })).release?.version;
      await expectCode(
        releases.applyRelease({
          ...ref,
          files: files([CM, "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\nspec: {}"]),
        }),
        Code.InvalidArgument,
        /DaemonSet is not on the platform's allow-list/,
      );
      assert.equal((await releases.getRelease({ ...ref, name: "" })).release?.version, before);
      assert.equal(
        await admin.get(resources.configMaps, NS, "settings"),
        undefined,
        "nothing of the refused release was applied",
      );

      // Deleting the release removes what is left.
      await releases.deleteRelease({ ...ref, name: "" });
      await eventually(
        "the Job deleted",
        async () => ((await admin.get(resources.jobs, NS, "migrate")) ? undefined : true),
        60_000,
      );
    },
  );
});

describe("scheduled jobs", () => {
  it("a CronJob runs (KWOK completes its pods) and its runs show in status", { timeout: 240_000 }, async () => {
    await environment("web", "cron", ["eu"]);
    const ref = { workspace: WS, project: "web", environment: "cron" };
    const a = ctrl.adminToken;
    await ctrl.client(DeploymentService, a).createDeployment({ ...ref, image: "registry.example.com/web:1" });
    await ctrl.client(JobService, a).putJob({ ...ref, spec: { name: "tick", schedule: "* * * * *" } as never });
    const cronJob = await eventually(
      "the CronJob",
      async () => (await list(resources.cronJobs, "krane.dev/job-id"))[0],
      60_000,
    );
    const pod = (cronJob.spec as { jobTemplate: { spec: { template: { spec: Record<string, unknown> } } } }).jobTemplate
      .spec.template.spec;
    assert.equal(pod.runtimeClassName, "gvisor");
    assert.equal(pod.automountServiceAccountToken, false);
    const job = await eventually(
      "a succeeded run in status",
      async () => {
        const { jobs } = await ctrl.client(JobService, a).listJobs(ref);
        const runs = jobs[0]?.regions.find((r) => r.region === "eu")?.runs ?? [];
        return runs.some((r) => r.result === JobRunResult.SUCCEEDED && r.finishedUnixMs > 0n) ? jobs[0] : undefined;
      },
      150_000,
    );
    assert.ok((job.regions[0]?.lastScheduleUnixMs ?? 0n) > 0n);
  });
});

describe("deletion", () => {
  it(
    "a project with two environments in two regions: nothing krane-managed left; --force past a stopped region, cleaned when it returns",
    { timeout: 360_000 },
    async () => {
      const a = ctrl.adminToken;
      const envIds: string[] = [];
      for (const [env, region] of [
        ["production", "eu"],
        ["staging", "us"],
      ] as const) {
        envIds.push(await environment("shop", env, [region]));
        const ref = { workspace: WS, project: "shop", environment: env };
        await ctrl.client(DeploymentService, a).createDeployment({ ...ref, image: "registry.example.com/shop:1" });
        await ctrl.client(ConfigService, a).setConfig({ ...ref, values: [{ key: "A", value: "b" }] });
        await ctrl
          .client(ConfigService, a)
          .setSecrets({ ...ref, secrets: [{ key: "S", source: { case: "value", value: "t" } }] });
        await ctrl.client(ReleaseService, a).applyRelease({
          ...ref,
          files: [
            {
              name: "cm.yaml",
              content: `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra-${env}}\ndata: {a: b}`,
            },
          ],
        });
        await ctrl.client(JobService, a).putJob({ ...ref, spec: { name: "nightly", schedule: "@daily" } as never });
      }
      const selector = (envId: string) => `${LABEL_MANAGED_BY}=krane,${LABEL_ENVIRONMENT_ID}=${envId}`;
      const kinds = [
        resources.replicaSets,
        resources.configMaps,
        resources.secrets,
        resources.cronJobs,
        resources.ciliumNetworkPolicies,
        resources.pods,
      ];
      const managed = async (ids = envIds): Promise<string[]> => {
        const out: string[] = [];
        for (const id of ids)
          for (const r of kinds) for (const o of await list(r, selector(id))) out.push(`${r.kind}/${o.metadata.name}`);
        return out;
      };
      const everyKind = (m: string[]): boolean =>
        ["ReplicaSet/", "ConfigMap/", "Secret/", "CronJob/"].every((k) => m.some((x) => x.startsWith(k)));
      await eventually(
        "both environments running, one in each region",
        async () => {
          const [prod, staging] = [await managed([envIds[0] ?? ""]), await managed([envIds[1] ?? ""])];
          return everyKind(prod) &&
            everyKind(staging) &&
            prod.includes("ConfigMap/extra-production") &&
            staging.includes("ConfigMap/extra-staging")
            ? true
            : undefined;
        },
        120_000,
      );

      // The us agent goes away for good (as far as ctrl can tell).
      const us = agents.get("us") as Agent;
      await us.stop();
      agents.delete("us");
      const projects = ctrl.client(ProjectService, a);
      const started = await projects.deleteProject({
        workspace: WS,
        project: "shop",
        confirm: "shop",
        forceRegions: [],
      });
      assert.equal(started.deletion?.done, false);
      await eventually(
        "eu confirmed everything, us still pending",
        async () => {
          const { deletion } = await projects.deleteProject({
            workspace: WS,
            project: "shop",
            confirm: "shop",
            forceRegions: [],
          });
          return deletion?.regions.map((r) => r.region).join() === "us" ? deletion : undefined;
        },
        120_000,
      );
      const forced = await projects.deleteProject({
        workspace: WS,
        project: "shop",
        confirm: "shop",
        forceRegions: ["us"],
      });
      assert.equal(forced.deletion?.done, true);
      // eu's objects are gone; us's are still there (its agent is down).
      // (Pods go with their ReplicaSet through Kubernetes' garbage collector, a moment later.)
      await eventually(
        "nothing of production (eu) left",
        async () => ((await managed([envIds[0] ?? ""])).length === 0 ? true : undefined),
        60_000,
      );
      assert.ok(everyKind(await managed([envIds[1] ?? ""])), "us's objects stay while its agent is down");

      // us's agent returns: its orphan GC cleans the region.
      await startRegionAgent("us");
      await eventually(
        "nothing krane-managed of the project left",
        async () => ((await managed()).length === 0 ? true : undefined),
        120_000,
      );
      await expectCode(projects.getProject({ workspace: WS, project: "shop" }), Code.NotFound);
    },
  );
});

// The whole system, real parts only: ctrl (SQLite file, HTTP/2) ← agent (as its RBAC
// ServiceAccount) → the real local Kubernetes. Deploy, scale and delete through the public API,
// and a ctrl restart during which changes are committed: the agent reconnects and converges;
// `krane logs` on the cluster's stand-in pods (KWOK) says why there is no line.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Registry } from "prom-client";
import { Agent } from "../../src/agent/agent.js";
import { agentKubeConfigFrom } from "../../src/agent/rbac.js";
import { silentLogger } from "../../src/base/log.js";
import { createApiClients, type ApiClients } from "../../src/client/node.js";
import { startCtrl, type RunningCtrl } from "../../src/ctrl/server/server.js";
import { addUserToken, generateToken } from "../../src/ctrl/domain/tokens.js";
import { InstanceStatus } from "../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { KubeClient } from "../../src/kube/client.js";
import type { KubeObject } from "../../src/kube/object.js";
import { resources } from "../../src/kube/resources.js";
import { eventually, useCluster } from "../support/cluster.js";
import { kraneAsync } from "./ctrl/process.js";

const h = useCluster();
const target = { workspace: "acme", project: "shop", environment: "prod" };
let dir: string;
let ctrl: RunningCtrl;
let port = 0;
let userToken: string;
let api: ApiClients;
let agent: Agent;
let kube: KubeClient;

async function serveCtrl(): Promise<RunningCtrl> {
  const c = await startCtrl({
    databaseUrl: join(dir, "ctrl.db"),
    listen: { host: "127.0.0.1", port },
    opsListen: null,
    shutdownGraceMs: 500,
  });
  port = Number(new URL(c.url).port);
  return c;
}

before(async () => {
  const cluster = await h.ready();
  dir = await mkdtemp(join(tmpdir(), "krane-e2e-"));
  ctrl = await serveCtrl();
  userToken = generateToken("user");
  await addUserToken(ctrl.store, "e2e", userToken);
  api = createApiClients(ctrl.url, userToken);
  await api.regions.createRegion({ name: "eu" });
  const { token } = await api.regions.createClusterToken({ region: "eu", clusterName: "eu-1" });
  agent = new Agent({
    ctrlUrl: ctrl.url,
    token,
    region: "eu",
    kubeconfig: await agentKubeConfigFrom(cluster.kubeConfig()),
    log: silentLogger,
    registry: new Registry(),
    opsPort: 0,
    opsHost: "127.0.0.1",
    resyncPeriodMs: 5_000,
    runtime: { reconnect: { baseMs: 200, capMs: 2_000, minMs: 100 } },
  });
  await agent.start();
  kube = new KubeClient(cluster.kubeConfig(), { fieldManager: "e2e-reader" });
  await api.workspaces.createWorkspace({ slug: target.workspace });
  await api.projects.createProject({ workspace: target.workspace, slug: target.project });
  await api.environments.createEnvironment({
    ...target,
    slug: target.environment,
    regions: [{ region: "eu", replicas: 3 }],
  });
});

after(async () => {
  await agent?.stop();
  kube?.close();
  await ctrl?.close();
  await rm(dir, { recursive: true, force: true });
});

function replicas(rs: KubeObject | undefined): number | undefined {
  const spec = (rs as { spec?: { replicas?: number } } | undefined)?.spec;
  return spec?.replicas;
}

async function runningInstances(deploymentId: string): Promise<number> {
  const s = await api.status.getEnvironmentStatus(target);
  const d = s.deployments.find((x) => x.deployment?.id === deploymentId);
  return d?.regions[0]?.instances.filter((i) => i.status === InstanceStatus.RUNNING).length ?? 0;
}

test("deploy, scale and delete through the public API reach the cluster and come back in status", async () => {
  const { deployment } = await api.deployments.createDeployment({
    ...target,
    image: "registry.example.com/shop:1",
    port: 9000,
  });
  assert.ok(deployment);
  const rs = await eventually(
    "the ReplicaSet with 3 replicas",
    async () => {
      const o = await kube.get(resources.replicaSets, deployment.k8sNamespace, deployment.k8sName);
      return replicas(o) === 3 ? o : undefined;
    },
    60_000,
  );
  assert.equal(rs.metadata.labels?.["krane.dev/deployment-id"], deployment.id);
  await eventually(
    "3 running instances in status",
    async () => ((await runningInstances(deployment.id)) === 3 ? true : undefined),
    60_000,
  );
  const s = await api.status.getEnvironmentStatus(target);
  const instances = s.deployments[0]?.regions[0]?.instances ?? [];
  assert.ok(
    instances.every((i) => /^\d+\.\d+\.\d+\.\d+:9000$/.test(i.address)),
    "addresses are ip:port",
  );
  assert.equal(new Set(instances.map((i) => i.zone)).size, 3, "one replica per zone");

  await api.rollouts.scale({ ...target, replicas: 5 });
  await eventually("the ReplicaSet scaled to 5", async () =>
    replicas(await kube.get(resources.replicaSets, deployment.k8sNamespace, deployment.k8sName)) === 5
      ? true
      : undefined,
  );
  await eventually(
    "5 running instances",
    async () => ((await runningInstances(deployment.id)) === 5 ? true : undefined),
    60_000,
  );

  await api.deployments.deleteDeployment({ deploymentId: deployment.id });
  await eventually("the ReplicaSet gone", async () =>
    (await kube.get(resources.replicaSets, deployment.k8sNamespace, deployment.k8sName)) ? undefined : true,
  );
  await eventually("no instances left in status", async () =>
    (await runningInstances(deployment.id)) === 0 ? true : undefined,
  );
});

test("ctrl restarted while changes are committed: the agent reconnects and converges with nothing missed", async () => {
  const { deployment: first } = await api.deployments.createDeployment({
    ...target,
    image: "registry.example.com/shop:2",
  });
  assert.ok(first);
  await eventually(
    "the first ReplicaSet",
    async () =>
      replicas(await kube.get(resources.replicaSets, first.k8sNamespace, first.k8sName)) === 5 ? true : undefined,
    60_000,
  );

  await ctrl.close();
  // The agent keeps running without ctrl (and keeps what it applied).
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(replicas(await kube.get(resources.replicaSets, first.k8sNamespace, first.k8sName)), 5);

  // Back on the same port and database; changes land before the agent's next reconnect attempt.
  ctrl = await serveCtrl();
  api = createApiClients(ctrl.url, userToken);
  await api.rollouts.scale({ ...target, replicas: 2 });
  await api.deployments.deleteDeployment({ deploymentId: first.id });
  const { deployment: second } = await api.deployments.createDeployment({
    ...target,
    image: "registry.example.com/shop:3",
  });
  assert.ok(second);

  await eventually(
    "the deleted revision's ReplicaSet gone",
    async () => ((await kube.get(resources.replicaSets, first.k8sNamespace, first.k8sName)) ? undefined : true),
    60_000,
  );
  await eventually(
    "the new revision at 2 replicas",
    async () =>
      replicas(await kube.get(resources.replicaSets, second.k8sNamespace, second.k8sName)) === 2 ? true : undefined,
    60_000,
  );
  await eventually(
    "2 running instances of the new revision",
    async () => ((await runningInstances(second.id)) === 2 ? true : undefined),
    60_000,
  );
});

test("krane logs on the local cluster's stand-ins says there is no log to read, and exits 1", async () => {
  // The revision of the test above runs 2 KWOK pods: Running, with no container and so no log.
  const s = await api.status.getEnvironmentStatus(target);
  const running = s.deployments.flatMap((d) =>
    (d.regions[0]?.instances ?? []).filter((i) => i.status === InstanceStatus.RUNNING),
  );
  assert.ok(running.length > 0, "instances to read");
  const env = { KRANE_CTRL_URL: ctrl.url, KRANE_TOKEN: userToken };
  const r = await kraneAsync(["logs", `${target.project}/${target.environment}`], env);
  assert.equal(r.status, 1, r.stderr);
  for (const i of running)
    assert.match(r.stdout, new RegExp(`--- eu/${i.k8sName} r\\d+: no log: this instance is a stand-in .* ---`));
  assert.match(
    r.stderr,
    new RegExp(`^krane: no line could be read from shop/prod: the ${running.length} errors above say why$`, "m"),
  );
  // Asked for one of them, the same.
  const one = await kraneAsync(["logs", "shop/prod", "--instance", running[0]?.k8sName ?? ""], env);
  assert.equal(one.status, 1, one.stderr);
  assert.match(one.stdout, /stand-in/);
  assert.doesNotMatch(one.stdout, /no started container/);
  // Nothing to read and nothing wrong: said on stderr, exit 0.
  await api.environments.createEnvironment({ ...target, slug: "empty", regions: [{ region: "eu", replicas: 0 }] });
  await api.deployments.createDeployment({ ...target, environment: "empty", image: "registry.example.com/shop:1" });
  const none = await kraneAsync(["logs", "shop/empty"], env);
  assert.equal(none.status, 0, none.stderr);
  assert.equal(none.stdout, "");
  assert.match(
    none.stderr,
    /^krane logs: no lines: no instance of shop\/empty has written a line, or none has started yet$/m,
  );
});

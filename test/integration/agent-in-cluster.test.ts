// `krane agent --kubeconfig in-cluster` as a pod runs it: the agent process gets exactly what
// a pod has — KUBERNETES_SERVICE_HOST/PORT and the ServiceAccount token, CA and namespace files
// (under KRANE_IN_CLUSTER_ROOT instead of /) — with a token the API server issued
// (TokenRequest) for krane-system/krane-agent, and no kubeconfig anywhere. It must sync a
// deployment into the cluster, report it back, and send its build in the Heartbeat.
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { agentKubeConfigFrom } from "../../src/agent/rbac.js";
import { createApiClients, type ApiClients } from "../../src/client/node.js";
import { startCtrl, type RunningCtrl } from "../../src/ctrl/server/server.js";
import { addUserToken, generateToken } from "../../src/ctrl/domain/tokens.js";
import { InstanceStatus } from "../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { KubeClient } from "../../src/kube/client.js";
import { resources } from "../../src/kube/resources.js";
import { eventually, useCluster } from "../support/cluster.js";
import { KRANE_BIN } from "./ctrl/process.js";

const h = useCluster();
const target = { workspace: "acme", project: "shop", environment: "prod" };
const dir = mkdtempSync(join(tmpdir(), "krane-incluster-"));
let ctrl: RunningCtrl;
let api: ApiClients;
let clusterToken = "";
let agent: ChildProcess | undefined;
let stderr = "";

async function freePort(): Promise<number> {
  const s = createServer();
  s.listen(0, "127.0.0.1");
  await once(s, "listening");
  const port = (s.address() as { port: number }).port;
  s.close();
  return port;
}

/** The environment of a pod: the service variables, and no kubeconfig to fall back on. */
function podEnv(server: URL, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: join(dir, "home"), ...extra };
  if (server.hostname) env.KUBERNETES_SERVICE_HOST = server.hostname;
  env.KUBERNETES_SERVICE_PORT = server.port;
  return env;
}

before(
  async () => {
    const cluster = await h.ready();
    ctrl = await startCtrl({
      databaseUrl: join(dir, "ctrl.db"),
      listen: { host: "127.0.0.1", port: 0 },
      opsListen: null,
      shutdownGraceMs: 500,
    });
    const userToken = generateToken("user");
    await addUserToken(ctrl.store, "test", userToken);
    api = createApiClients(ctrl.url, userToken);
    await api.regions.createRegion({ name: "eu" });
    clusterToken = (await api.regions.createClusterToken({ region: "eu", clusterName: "eu-1" })).token;
    await api.workspaces.createWorkspace({ slug: target.workspace });
    await api.projects.createProject({ workspace: target.workspace, slug: target.project });
    await api.environments.createEnvironment({
      ...target,
      slug: target.environment,
      regions: [{ region: "eu", replicas: 2 }],
    });

    // The ServiceAccount token a pod of krane-system/krane-agent would have mounted.
    const agentKc = await agentKubeConfigFrom(cluster.kubeConfig(), 600);
    const token = agentKc.getCurrentUser()?.token;
    assert.ok(token, "TokenRequest issued a token");
    const sa = join(dir, "root/var/run/secrets/kubernetes.io/serviceaccount");
    mkdirSync(sa, { recursive: true });
    writeFileSync(join(sa, "token"), token);
    const ca = cluster.endpoint().ca;
    assert.ok(ca, "the local cluster serves TLS with its own CA");
    writeFileSync(join(sa, "ca.crt"), ca);
    writeFileSync(join(sa, "namespace"), "krane-system");
    mkdirSync(join(dir, "home"), { recursive: true });
  },
  { timeout: 15 * 60_000 },
);

after(async () => {
  if (agent && agent.exitCode === null) {
    const exited = once(agent, "exit");
    agent.kill("SIGTERM");
    await exited;
  }
  await ctrl?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("the agent with --kubeconfig in-cluster", () => {
  it("says what is missing when it does not run in a pod", () => {
    const r = spawnSync(
      process.execPath,
      [
        KRANE_BIN,
        "agent",
        "--kubeconfig",
        "in-cluster",
        "--ctrl-url",
        ctrl.url,
        "--token",
        clusterToken,
        "--region",
        "eu",
      ],
      {
        env: { PATH: process.env.PATH, HOME: join(dir, "home"), KRANE_IN_CLUSTER_ROOT: join(dir, "nowhere") },
        encoding: "utf8",
        timeout: 60_000,
      },
    );
    assert.equal(r.status, 1);
    assert.match(r.stderr, /--kubeconfig in-cluster:\n {2}KUBERNETES_SERVICE_HOST is not set/);
    assert.match(r.stderr, /cannot read .*\/nowhere\/var\/run\/secrets\/kubernetes\.io\/serviceaccount\/token/);
  });

  it("syncs a deployment with the ServiceAccount's token and reports it, with its build", async () => {
    const server = new URL(h.cluster.server);
    const ops = await freePort();
    agent = spawn(
      process.execPath,
      [
        KRANE_BIN,
        "agent",
        "--kubeconfig",
        "in-cluster",
        "--ctrl-url",
        ctrl.url,
        "--token",
        clusterToken,
        "--region",
        "eu",
        "--ops-port",
        String(ops),
        "--resync-period",
        "5",
      ],
      {
        env: podEnv(server, { KRANE_IN_CLUSTER_ROOT: join(dir, "root"), KRANE_LOG_LEVEL: "warn" }),
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    // pino logs to stdout; crashes go to stderr.
    agent.stdout?.on("data", (d: Buffer) => (stderr += d.toString()));
    agent.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
    await eventually(
      "the agent ready on its ops port",
      async () => {
        if (agent?.exitCode !== null) throw new Error(`the agent exited: ${stderr}`);
        const res = await fetch(`http://127.0.0.1:${ops}/readyz`).catch(() => undefined);
        return res?.status === 200 ? true : undefined;
      },
      60_000,
    );

    const { deployment } = await api.deployments.createDeployment({ ...target, image: "registry.example.com/shop:1" });
    assert.ok(deployment);
    const kube = new KubeClient(h.cluster.kubeConfig(), { fieldManager: "test-reader" });
    try {
      const rs = await eventually(
        "the ReplicaSet in the cluster",
        () => kube.get(resources.replicaSets, deployment.k8sNamespace, deployment.k8sName),
        60_000,
      );
      assert.equal(rs.metadata.labels?.["krane.dev/deployment-id"], deployment.id);
      // Applied by the agent's identity: the ServiceAccount, not an admin.
      const managers =
        (rs.metadata as { managedFields?: { manager?: string }[] }).managedFields?.map((m) => m.manager) ?? [];
      assert.ok(managers.includes("krane"), managers.join(","));
    } finally {
      kube.close();
    }
    await eventually(
      "2 running instances reported",
      async () => {
        const s = await api.status.getEnvironmentStatus(target);
        const running = s.deployments
          .find((d) => d.deployment?.id === deployment.id)
          ?.regions[0]?.instances.filter((i) => i.status === InstanceStatus.RUNNING).length;
        return running === 2 ? true : undefined;
      },
      60_000,
    );
    const cluster = await eventually(
      "the agent's heartbeat",
      async () => {
        const { clusters } = await api.regions.listClusters({ region: "eu" });
        return clusters.find((c) => c.lastHeartbeatUnixMs > 0n);
      },
      30_000,
    );
    // The CLI hands the agent this build's label ("0.1.0+<commit>", or "+dev" from source).
    assert.match(cluster.build, /^\d+\.\d+\.\d+\+(dev|[0-9a-f]{12}(-dirty)?|unknown)$/);
    const errors = stderr.split("\n").filter((l) => /"level":(50|60)/.test(l));
    assert.deepEqual(errors, [], "the agent logged no errors");
  });
});

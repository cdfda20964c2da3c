// User code really runs sandboxed on real nodes: a deployment made through ctrl and applied by
// the (fenced) agent runs its containers under gVisor — the kernel they see is gVisor's, and
// runsc on the node holds them — while a plain container on the same node sees this machine's
// kernel. A sentinel of the user's own image runs under gVisor too, and the agent's fence refuses
// one without the RuntimeClass.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { release } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";
import type { Agent } from "../../src/agent/agent.js";
import { AS_UNRESTRICTED_AGENT } from "../../src/cluster/index.js";
import { findGoBuild, GVISOR_BUILD } from "../../src/cluster/build.js";
import { nodeDirs } from "../../src/cluster/nodes/config.js";
import { kubeRequest } from "../../src/cluster/kube-http.js";
import { SENTINEL_NAMESPACE } from "../../src/contracts/cluster.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";
import { applySentinelRbac } from "../../src/sentinel/rbac.js";
import { eventually } from "../support/cluster.js";
import { kubectlJson, kubectlOk, realNodesSkip, useRealCluster } from "../support/real-nodes.js";
import { routingAgent } from "./agent/support.js";
import { startTestCtrl, tempDir, type TestCtrl } from "./ctrl/support.js";

const run = promisify(execFile);
const skip = await realNodesSkip();
const REGION = "local";
const REF = { workspace: "acme", project: "shop", environment: "production" };

interface Pod {
  metadata: { name: string; namespace: string; deletionTimestamp?: string };
  spec: { nodeName?: string; runtimeClassName?: string };
  status: {
    podIP?: string;
    conditions?: { type: string; status: string }[];
    containerStatuses?: { containerID?: string }[];
  };
}
const ready = (p: Pod): boolean =>
  p.metadata.deletionTimestamp === undefined &&
  (p.status.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");

describe("gVisor on real nodes", { skip }, () => {
  const h = useRealCluster(["untrusted", "sentinel"]);
  const dir = tempDir("krane-gvisor-");
  let ctrl: TestCtrl;
  let agent: Agent;

  const podsOf = async (selector: string, ns = "-A"): Promise<Pod[]> =>
    (
      await kubectlJson<{ items: Pod[] }>(h.cluster, ["pods", ...(ns === "-A" ? ["-A"] : ["-n", ns]), "-l", selector])
    ).items.filter(ready);
  /** The kernel release a container sees, asked through the kubelet (kubectl exec). */
  const kernelIn = async (p: Pod): Promise<string> =>
    (
      await kubectlOk(h.cluster, [
        "exec",
        "-n",
        p.metadata.namespace,
        p.metadata.name,
        "--",
        "node",
        "-p",
        "require('os').release() + ' | ' + require('fs').readFileSync('/proc/version', 'utf8').trim()",
      ])
    ).trim();
  /** Container ids runsc holds on a node (its state directory, the shim's namespace k8s.io). */
  const runscContainers = async (pool: string): Promise<string[]> => {
    const node = h.cluster.realNodes?.nodes.find((n) => n.pool === pool);
    assert.ok(node);
    const gvisor = await findGoBuild(GVISOR_BUILD);
    assert.ok(gvisor, "gVisor is built");
    const root = join(nodeDirs(h.cluster.dir, node).runscRoot, "k8s.io");
    const { stdout } = await run(join(gvisor, "bin", "runsc"), ["--root", root, "list", "-quiet"]);
    return stdout.split("\n").filter((l) => l.trim() !== "");
  };

  before(
    async () => {
      const cluster = await h.ready();
      await applySentinelRbac(cluster.kubeConfig());
      ctrl = await startTestCtrl(join(dir.path, "ctrl.db"));
      const t = ctrl.adminToken;
      await ctrl.client(RegionService, t).createRegion({ name: REGION });
      await ctrl.client(WorkspaceService, t).createWorkspace({ slug: REF.workspace });
      await ctrl.client(ProjectService, t).createProject({ workspace: REF.workspace, slug: REF.project });
      // The environment's sentinel is an image of the user's (the hello app plays one).
      await ctrl.client(EnvironmentService, t).createEnvironment({
        workspace: REF.workspace,
        project: REF.project,
        slug: REF.environment,
        regions: [{ region: REGION, replicas: 1 }],
        sentinel: { image: "krane.local/hello:v2", replicas: 1, cpuMillicores: 100n, memoryMib: 128n },
      });
      agent = await routingAgent(cluster, ctrl, REGION, { sentinelImage: (await h.images()).krane.name });
      await agent.start();
      await ctrl.client(DeploymentService, t).createDeployment({
        ...REF,
        image: "krane.local/hello:v1",
        port: 8080,
        cpuMillicores: 100n,
        memoryMib: 128n,
        healthCheck: { method: "GET", path: "/healthz", intervalSeconds: 2, timeoutSeconds: 2, failureThreshold: 2 },
      });
    },
    { timeout: 30 * 60_000 },
  );
  after(async () => {
    await agent?.stop();
    await ctrl?.close();
    dir.remove();
  });

  it(
    "a user workload's kernel is gVisor's, runsc on the node holds it; a plain container there sees this machine's",
    { timeout: 5 * 60_000 },
    async () => {
      const [pod] = await eventually(
        "the deployment's pod Ready",
        async () => {
          const p = await podsOf("app.kubernetes.io/component=deployment");
          return p.length === 1 ? p : undefined;
        },
        240_000,
      );
      assert.ok(pod);
      assert.equal(pod.spec.runtimeClassName, "gvisor", "the agent asked for gVisor");
      assert.equal(pod.spec.nodeName, "untrusted-real");
      const inside = await kernelIn(pod);
      assert.match(inside, /gvisor/, `the container's kernel: ${inside}`);
      assert.doesNotMatch(inside, new RegExp(release().replace(/[.+]/g, "\\$&")), "not this machine's kernel");
      // The app says the same over HTTP (this machine reaches the pod IP).
      const kernel = (await (await fetch(`http://${pod.status.podIP}:8080/_hello/kernel`)).json()) as {
        release: string;
      };
      assert.match(kernel.release, /gvisor/);
      // On the node: runsc holds the container (its id from the pod's status).
      const id = pod.status.containerStatuses?.[0]?.containerID?.replace(/^containerd:\/\//, "") ?? "";
      assert.ok(id !== "");
      assert.ok((await runscContainers("untrusted")).includes(id), "runsc on untrusted-real runs the container");

      // The control: a container of the same image without the RuntimeClass, on the same node.
      await kubectlOk(
        h.cluster,
        ["apply", "-f", "-"],
        JSON.stringify({
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name: "plain-runc", namespace: "default", labels: { test: "plain-runc" } },
          spec: {
            automountServiceAccountToken: false,
            nodeSelector: { "node-class": "untrusted" },
            tolerations: [{ key: "node-class", operator: "Equal", value: "untrusted", effect: "NoSchedule" }],
            containers: [{ name: "app", image: "krane.local/hello:v1" }],
          },
        }),
      );
      const [plain] = await eventually(
        "the plain pod Ready",
        async () => {
          const p = await podsOf("test=plain-runc", "default");
          return p.length === 1 ? p : undefined;
        },
        120_000,
      );
      assert.ok(plain);
      const outside = await kernelIn(plain);
      assert.ok(outside.startsWith(`${release()} |`), `runc shares this machine's kernel: ${outside}`);
    },
  );

  it(
    "a sentinel of the user's image runs under gVisor; the fence refuses one without the RuntimeClass",
    { timeout: 5 * 60_000 },
    async () => {
      const [sentinel] = await eventually(
        "the environment's sentinel Ready",
        async () => {
          const p = await podsOf("app.kubernetes.io/component=sentinel", SENTINEL_NAMESPACE);
          return p.length === 1 ? p : undefined;
        },
        240_000,
      );
      assert.ok(sentinel);
      assert.equal(sentinel.spec.runtimeClassName, "gvisor");
      assert.equal(sentinel.spec.nodeName, "sentinel-real");
      assert.match(await kernelIn(sentinel), /gvisor/);
      const id = sentinel.status.containerStatuses?.[0]?.containerID?.replace(/^containerd:\/\//, "") ?? "";
      assert.ok((await runscContainers("sentinel")).includes(id), "runsc on sentinel-real runs it");

      // The same Deployment as the agent wrote it, without the RuntimeClass, as the agent (with
      // every RBAC right): the fence refuses it.
      const deployments = await kubectlJson<{ items: { metadata: { name: string } }[] }>(h.cluster, [
        "deployments",
        "-n",
        SENTINEL_NAMESPACE,
      ]);
      const name = deployments.items[0]?.metadata.name ?? "";
      const d = await kubectlJson<{
        metadata: Record<string, unknown>;
        spec: { template: { spec: Record<string, unknown> } };
      }>(h.cluster, ["deployment", name, "-n", SENTINEL_NAMESPACE]);
      delete d.spec.template.spec.runtimeClassName;
      const res = await kubeRequest(
        h.cluster.endpoint(),
        "PUT",
        `/apis/apps/v1/namespaces/${SENTINEL_NAMESPACE}/deployments/${name}?dryRun=All`,
        d,
        "application/json",
        AS_UNRESTRICTED_AGENT,
      );
      assert.equal(res.status, 403, res.body.slice(0, 300));
      assert.match(res.body, /krane-agent-fence/);
      assert.match(res.body, /RuntimeClass gvisor/);
    },
  );
});

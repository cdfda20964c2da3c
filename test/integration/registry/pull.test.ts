// Private images pulled by real nodes (containerd under a real kubelet) from the distribution
// project's registry on this machine (TLS from a CA of its own, htpasswd auth), listening on the
// cluster's link address, which ctrl and the nodes' containerd both reach; the nodes trust its CA
// through containerd's hosts.toml (LocalCluster.trustRegistry). The hello image is pushed there.
// ctrl pins the tag with the right credential while the environment runs no instance; the
// credential is then replaced by a wrong one and the environment scaled up: the pod's pull is
// refused, and `krane status` names the registry and the 401. The right credential back, a restart
// runs. The pull Secret is the agent's (labelled krane's), and the password is in no pod spec.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { toJson } from "@bufbuild/protobuf";
import type { Agent } from "../../../src/agent/agent.js";
import { renderEnvironmentStatus } from "../../../src/cli/status-view.js";
import { PULL_SECRET_NAME } from "../../../src/contracts/images.js";
import {
  DeploymentService,
  EnvironmentService,
  GetEnvironmentStatusResponseSchema,
  ProjectService,
  RegionService,
  RegistryService,
  StatusService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { InstanceEventSchema, InstanceEventService } from "../../../src/gen/krane/ctrl/v1/events_pb.js";
import { RolloutService } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { eventually } from "../../support/cluster.js";
import { kubectlJson, realNodesSkip, useRealCluster } from "../../support/real-nodes.js";
import { startTestRegistry, type TestRegistry } from "../../support/registry.js";
import { routingAgent } from "../agent/support.js";
import { randomKeyring, startTestCtrl, tempDir, type TestCtrl } from "../ctrl/support.js";

const skip = await realNodesSkip();
const REGION = "local";
const REF = { workspace: "acme", project: "shop", environment: "production" };

interface PodList {
  items: {
    metadata: { name: string; namespace: string };
    spec: { imagePullSecrets?: { name: string }[]; containers: { image: string }[] };
    status: { phase?: string; containerStatuses?: { ready?: boolean; imageID?: string }[] };
  }[];
}

describe("private images on real nodes", { skip }, () => {
  const h = useRealCluster(["untrusted"]);
  const dir = tempDir("krane-pull-");
  let ctrl: TestCtrl;
  let agent: Agent;
  let reg: TestRegistry;
  let digest: string;

  before(
    async () => {
      const cluster = await h.ready();
      const plan = cluster.realNodes;
      if (!plan) throw new Error("the cluster has no real nodes");
      reg = await startTestRegistry({ dir: dir.path, address: plan.hostIp });
      await cluster.trustRegistry(reg.host, reg.caPem);
      digest = await reg.push((await h.images()).hello.archive, "v1", "shop/hello", "v1");
      ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
        keyring: randomKeyring(),
        images: { localHosts: [], ca: [reg.caPem], privateHosts: [plan.hostIp] },
      });
      const t = ctrl.adminToken;
      await ctrl.client(RegionService, t).createRegion({ name: REGION });
      await ctrl.client(WorkspaceService, t).createWorkspace({ slug: REF.workspace });
      await ctrl.client(ProjectService, t).createProject({ workspace: REF.workspace, slug: REF.project });
      await ctrl.client(EnvironmentService, t).createEnvironment({
        workspace: REF.workspace,
        project: REF.project,
        slug: REF.environment,
        regions: [{ region: REGION, replicas: 0 }],
      });
      agent = await routingAgent(cluster, ctrl, REGION);
      await agent.start();
    },
    { timeout: 30 * 60_000 },
  );
  after(async () => {
    await agent?.stop();
    await ctrl?.close();
    await reg?.stop();
    dir.remove();
  });

  const pods = async (): Promise<PodList["items"]> =>
    (await kubectlJson<PodList>(h.cluster, ["pods", "-A", "-l", "krane.dev/region=local"])).items;

  it(
    "a wrong password is an instance event naming the registry and the 401; the right one runs",
    { timeout: 10 * 60_000 },
    async () => {
      const t = ctrl.adminToken;
      const user = reg.users[0]!;
      const registries = ctrl.client(RegistryService, t);
      await registries.addRegistry({ workspace: REF.workspace, host: reg.host, ...user });
      const image = `${reg.host}/shop/hello:v1`;
      const dep = (
        await ctrl
          .client(DeploymentService, t)
          .createDeployment({ ...REF, image, port: 8080, cpuMillicores: 100n, memoryMib: 128n })
      ).deployment!;
      assert.equal(dep.imageDigest, digest, "ctrl pinned the tag with the right credential");

      // The credential goes wrong (an expired token); the first instance then pulls with it.
      await registries.addRegistry({
        workspace: REF.workspace,
        host: reg.host,
        username: user.username,
        password: "expired",
      });
      await ctrl
        .client(EnvironmentService, t)
        .updateEnvironment({ ...REF, regions: [{ region: REGION, replicas: 1 }] });
      const event = await eventually(
        "a pull error of the instance",
        async () =>
          (await ctrl.client(InstanceEventService, t).listInstanceEvents({ ...REF, latest: true })).events.find((e) =>
            /ErrImagePull|ImagePullBackOff/.test(e.reason),
          ),
        5 * 60_000,
      );
      assert.equal(event.image, `${reg.host}/shop/hello@${digest}`, "the pod runs the pinned digest");
      const status = await ctrl.client(StatusService, t).getEnvironmentStatus(REF);
      const { events } = await ctrl.client(InstanceEventService, t).listInstanceEvents({ ...REF, latest: true });
      const text = renderEnvironmentStatus(
        toJson(GetEnvironmentStatusResponseSchema, status),
        Date.now(),
        undefined,
        events.map((x) => toJson(InstanceEventSchema, x)),
      );
      assert.match(text, new RegExp(`\\(registry ${reg.host.replace(/\./g, "\\.")}: 401 unauthorized\\)`), text);

      // The pods name the agent's pull Secret and hold no password.
      const failing = await pods();
      assert.ok(failing.length > 0);
      for (const p of failing) {
        assert.deepEqual(p.spec.imagePullSecrets, [{ name: PULL_SECRET_NAME }]);
        const spec = JSON.stringify(p);
        assert.ok(!spec.includes(user.password) && !spec.includes("expired"), "a pod spec holds a password");
      }

      // The right credential back; a restart's new instance pulls and runs.
      await registries.addRegistry({ workspace: REF.workspace, host: reg.host, ...user });
      await ctrl.client(RolloutService, t).restart({ ...REF });
      const running = await eventually(
        "a running, ready instance of the private image",
        async () => {
          const ready = (await pods()).find(
            (p) => p.status.phase === "Running" && p.status.containerStatuses?.every((c) => c.ready === true),
          );
          return ready;
        },
        5 * 60_000,
      );
      assert.equal(running.spec.containers[0]?.image, `${reg.host}/shop/hello@${digest}`);
      assert.ok(running.status.containerStatuses?.[0]?.imageID?.endsWith(digest));
    },
  );
});

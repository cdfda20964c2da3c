// Built images pulled by real nodes through ctrl's registry tokens: the distribution registry in
// token mode on the cluster's link address, its realm on ctrl's API port (also on that address,
// which the nodes' containerd reaches), its JWKS from ctrl's key. The hello image is pushed to
// acme/shop as ctrl's build worker pushes (a token ctrl signs for that repository), and acme gets
// its pull identity as a build gives it. A revision of that image in acme runs: the pod pulled
// through the agent's pull Secret, containerd fetching a token from ctrl. The same image deployed
// in globex (with globex's own identity) is refused by the registry: a workspace pulls only its
// own repositories, on the nodes too.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Agent as HttpAgent } from "undici";
import type { Agent } from "../../../src/agent/agent.js";
import { pushOciArchive } from "../../../src/builds/push.js";
import { PULL_SECRET_NAME } from "../../../src/contracts/images.js";
import { RegistryTokens, registryJwks, TOKEN_ISSUER } from "../../../src/ctrl/builds/registry-token.js";
import { ensureBuildPullCredential } from "../../../src/ctrl/domain/pull-secrets.js";
import type { Keyring } from "../../../src/ctrl/secrets/keyring.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { InstanceEventService } from "../../../src/gen/krane/ctrl/v1/events_pb.js";
import { eventually } from "../../support/cluster.js";
import { kubectlJson, realNodesSkip, useRealCluster } from "../../support/real-nodes.js";
import { freePortOn, startTestRegistry, type TestRegistry } from "../../support/registry.js";
import { routingAgent } from "../agent/support.js";
import { randomKeyring, startTestCtrl, tempDir, type TestCtrl } from "../ctrl/support.js";

const skip = await realNodesSkip();
const REGION = "local";
const SERVICE = "krane-build-registry";

interface PodList {
  items: {
    metadata: { name: string; namespace: string };
    spec: { imagePullSecrets?: { name: string }[]; containers: { image: string }[] };
    status: { phase?: string; containerStatuses?: { ready?: boolean; imageID?: string }[] };
  }[];
}

describe("built images on real nodes, pulled with ctrl's registry tokens", { skip }, () => {
  const h = useRealCluster(["untrusted"]);
  const dir = tempDir("krane-pull-token-");
  let ctrl: TestCtrl;
  let agent: Agent;
  let reg: TestRegistry;
  let keyring: Keyring;
  let digest: string;

  before(
    async () => {
      const cluster = await h.ready();
      const plan = cluster.realNodes;
      if (!plan) throw new Error("the cluster has no real nodes");
      const pem = generateKeyPairSync("ec", { namedCurve: "prime256v1" })
        .privateKey.export({ type: "pkcs8", format: "pem" })
        .toString();
      const jwks = join(dir.path, "jwks.json");
      writeFileSync(jwks, JSON.stringify(await registryJwks([pem])));
      const port = await freePortOn(plan.hostIp);
      reg = await startTestRegistry({
        dir: dir.path,
        address: plan.hostIp,
        auth: "token",
        issuer: { realm: `http://${plan.hostIp}:${port}/registry/token`, service: SERVICE, issuer: TOKEN_ISSUER, jwks },
      });
      await cluster.trustRegistry(reg.host, reg.caPem);
      const tokens = await RegistryTokens.fromPem(pem, SERVICE);
      // As ctrl's build worker pushes: a token for the one repository.
      const dispatcher = new HttpAgent({ connect: { ca: reg.caPem } });
      try {
        digest = await pushOciArchive(
          {
            base: `https://${reg.host}`,
            authorization: tokens.bearerFor("krane-ctrl", ["pull", "push"]),
            dispatcher,
          },
          (await h.images()).hello.archive,
          "acme/shop",
          "bld_1",
          "v1",
        );
      } finally {
        await dispatcher.close();
      }
      keyring = randomKeyring();
      ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
        listen: { host: plan.hostIp, port },
        keyring,
        // Deploys name the digest; the realm is plain HTTP here, which ctrl's own resolver refuses.
        images: undefined,
        builds: {
          registry: reg.host,
          tokens,
          ca: [reg.caPem],
          buildkitd: "buildkitd",
          buildctl: "buildctl",
          basesLayout: join(dir.path, "no-bases"),
          stateDir: join(dir.path, "buildkit"),
          slots: 1,
        },
      });
      const t = ctrl.adminToken;
      await ctrl.client(RegionService, t).createRegion({ name: REGION });
      for (const ws of ["acme", "globex"]) {
        const { workspace } = await ctrl.client(WorkspaceService, t).createWorkspace({ slug: ws });
        await ctrl.client(ProjectService, t).createProject({ workspace: ws, slug: "shop" });
        await ctrl.client(EnvironmentService, t).createEnvironment({
          workspace: ws,
          project: "shop",
          slug: "production",
          regions: [{ region: REGION, replicas: 1 }],
        });
        // What the worker does at each build of the workspace.
        await ensureBuildPullCredential(ctrl.store, keyring, workspace!.id, reg.host);
      }
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

  const podsOf = async (workspace: string): Promise<PodList["items"]> =>
    (await kubectlJson<PodList>(h.cluster, ["pods", "-n", `ws-${workspace}`, "-l", "krane.dev/region=local"])).items;

  it(
    "acme's revision of its built image pulls through the pull Secret and runs",
    { timeout: 10 * 60_000 },
    async () => {
      const image = `${reg.host}/acme/shop@${digest}`;
      await ctrl.client(DeploymentService, ctrl.adminToken).createDeployment({
        workspace: "acme",
        project: "shop",
        environment: "production",
        image,
        port: 8080,
        cpuMillicores: 100n,
        memoryMib: 128n,
      });
      const running = await eventually(
        "a running, ready instance of acme's built image",
        async () =>
          (await podsOf("acme")).find(
            (p) => p.status.phase === "Running" && p.status.containerStatuses?.every((c) => c.ready === true),
          ),
        5 * 60_000,
      );
      assert.equal(running.spec.containers[0]?.image, image);
      assert.deepEqual(running.spec.imagePullSecrets, [{ name: PULL_SECRET_NAME }]);
      assert.ok(running.status.containerStatuses?.[0]?.imageID?.endsWith(digest));
    },
  );

  it(
    "globex cannot run acme's image: the registry refuses globex's pull identity",
    { timeout: 10 * 60_000 },
    async () => {
      await ctrl.client(DeploymentService, ctrl.adminToken).createDeployment({
        workspace: "globex",
        project: "shop",
        environment: "production",
        image: `${reg.host}/acme/shop@${digest}`,
        port: 8080,
        cpuMillicores: 100n,
        memoryMib: 128n,
      });
      const event = await eventually(
        "a pull error of globex's instance",
        async () =>
          (
            await ctrl.client(InstanceEventService, ctrl.adminToken).listInstanceEvents({
              workspace: "globex",
              project: "shop",
              environment: "production",
              latest: true,
            })
          ).events.find((e) => /ErrImagePull|ImagePullBackOff/.test(e.reason)),
        5 * 60_000,
      );
      assert.match(event.message, /401|403|unauthorized|forbidden|denied|insufficient_scope/i, event.message);
      const pods = await podsOf("globex");
      assert.ok(pods.length > 0);
      for (const p of pods) assert.notEqual(p.status.phase, "Running");
    },
  );
});

// Builds in the cluster (issue 43, DESIGN §10: work an agent pulls), end to end with the real
// processes: `krane ctrl serve --builds-in cluster` (SQLite, a real `registry` with htpasswd and
// TLS on the nodes' link) and `krane agent --builds 1` on a local cluster with a real untrusted
// node under gVisor. `krane build --source` of a directory with a Dockerfile: ctrl hands the
// build to the environment's region, the agent builds it in a builder pod in krane-builds
// (RuntimeClass gvisor; the RUN step sees gVisor's kernel), pushes it, and ctrl records the digest
// the registry holds; the build's log is kept with it (`krane build logs`). A cancelled build's
// builder pod is deleted (the agent aborts it on the Delete of its desired state).
import assert from "node:assert/strict";
import { release } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createClient } from "@connectrpc/connect";
import type { KubeConfig } from "@kubernetes/client-node";
import { packSourceDir } from "../../../src/builds/source-dir.js";
import { ensureBases, ensureBuilderImage } from "../../../src/cluster/bases.js";
import { ensureBuildkit } from "../../../src/cluster/build.js";
import { BUILDS_NAMESPACE } from "../../../src/contracts/cluster.js";
import { COMPONENT, LABEL_BUILD_ID, LABEL_COMPONENT } from "../../../src/contracts/labels.js";
import { generateToken } from "../../../src/ctrl/domain/tokens.js";
import { RegistryClient } from "../../../src/ctrl/images/registry-client.js";
import {
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { BuildService, type Build } from "../../../src/gen/krane/ctrl/v1/build_pb.js";
import { KubeClient } from "../../../src/kube/client.js";
import { resources } from "../../../src/kube/resources.js";
import { agentKubeConfigFrom } from "../../../src/agent/rbac.js";
import { buildsSkip, runKrane, writeSource } from "../../support/build-tools.js";
import { useCluster } from "../../support/cluster.js";
import { AgentChild, CtrlChild, until, writeKubeconfig } from "../../support/faults/processes.js";
import { realNodesSkip } from "../../support/real-nodes.js";
import { startTestRegistry, type TestRegistry } from "../../support/registry.js";
import { transportFor } from "../ctrl/support.js";
import { tempDir } from "../ctrl/support.js";

const skip = (await realNodesSkip()) || buildsSkip;
const WS = "acme";
const PROJECT = "shop";
const REGION = "eu";

describe("builds in builder pods, pulled by the region's agent", { skip }, () => {
  const h = useCluster(async () => ({
    realNodes: ["untrusted"],
    images: [await ensureBuilderImage((l) => console.log(l))],
  }));
  const dir = tempDir("krane-cluster-build-");
  let registry: TestRegistry;
  let ctrl: CtrlChild;
  let agent: AgentChild;
  let kube: KubeClient;
  const admin = generateToken("user");
  /** Builder pods seen in krane-builds: build id → runtimeClassName. */
  const seen = new Map<string, string>();
  let watching: ReturnType<typeof setInterval> | undefined;

  const builds = () => createClient(BuildService, transportFor(ctrl.url, admin));

  const source = (name: string, files: Record<string, string>): string => writeSource(dir.path, name, files);
  const cli = (args: string[]): ReturnType<typeof runKrane> =>
    runKrane({ url: ctrl.url, token: admin, workspace: WS }, args);

  async function state(id: string): Promise<Build | undefined> {
    return (await builds().getBuild({ workspace: WS, buildId: id })).build;
  }

  before(async () => {
    await h.ready();
    const [bk, bases] = await Promise.all([ensureBuildkit((l) => console.log(l)), ensureBases((l) => console.log(l))]);
    const hostIp = h.cluster.realNodes?.hostIp ?? "";
    registry = await startTestRegistry({ dir: dir.path, address: hostIp });
    const user = registry.users[0];
    // The password only from the environment, as ctrl takes it.
    process.env.KRANE_BUILD_REGISTRY_PASSWORD = user?.password ?? "";
    ctrl = await CtrlChild.create(join(dir.path, "ctrl.db"), dir.path, admin, [
      "--build-registry",
      registry.host,
      "--build-registry-username",
      user?.username ?? "",
      "--registry-ca-file",
      registry.caFile,
      "--builds-in",
      "cluster",
    ]);
    await ctrl.startReady();
    const t = transportFor(ctrl.url, admin);
    await createClient(RegionService, t).createRegion({ name: REGION });
    await createClient(WorkspaceService, t).createWorkspace({ slug: WS });
    await createClient(ProjectService, t).createProject({ workspace: WS, slug: PROJECT });
    await createClient(EnvironmentService, t).createEnvironment({
      workspace: WS,
      project: PROJECT,
      slug: "production",
      regions: [{ region: REGION, replicas: 1 }],
    });
    const { token } = await createClient(RegionService, t).createClusterToken({ region: REGION });
    const kubeconfig = writeKubeconfig(
      (await agentKubeConfigFrom(h.cluster.kubeConfig())) as KubeConfig,
      join(dir.path, "agent.kubeconfig"),
    );
    agent = await AgentChild.create({
      ctrlUrl: ctrl.url,
      token,
      region: REGION,
      kubeconfig,
      dir: dir.path,
      extraArgs: ["--builds", "1", "--build-bases", bases, "--buildctl", bk.buildctl],
    });
    agent.start();
    const connected = await until(() => agent.streamsConnected().then((ok) => ok || undefined), 120_000, 200);
    assert.ok(connected, `the agent did not connect:\n${agent.output.slice(-3000)}`);
    kube = new KubeClient(h.cluster.kubeConfig(), { fieldManager: "cluster-build-test" });
    watching = setInterval(() => {
      void kube.list(resources.pods, { namespace: BUILDS_NAMESPACE }).then(
        ({ items }) => {
          for (const p of items) {
            const labels = p.metadata.labels ?? {};
            if (labels[LABEL_COMPONENT] !== COMPONENT.builder) continue;
            const spec = (p as { spec?: { runtimeClassName?: string } }).spec;
            seen.set(labels[LABEL_BUILD_ID] ?? "", spec?.runtimeClassName ?? "");
          }
        },
        () => {},
      );
    }, 250);
  });
  after(async () => {
    if (watching) clearInterval(watching);
    await agent?.stop();
    await ctrl?.stop();
    kube?.close();
    await registry?.stop();
    dir.remove();
  });

  it("krane build runs in a gVisor builder pod; the digest is in the registry and on the build; its log is kept", async () => {
    const src = source("app", {
      Dockerfile: [
        "FROM krane.local/base/run:12",
        "COPY hello.txt /hello.txt",
        'RUN echo "kernel $(uname -r)" && cat /hello.txt',
        "",
      ].join("\n"),
      "hello.txt": "built by the region's agent\n",
    });
    const res = await cli(["build", `${PROJECT}/production`, "--source", src]);
    const listed = await builds().listBuilds({ workspace: WS, project: PROJECT, environment: "production" });
    const b = listed.builds[0];
    assert.equal(res.status, 0, `${res.stderr}\n${b?.error ?? ""}\nagent:\n${agent.output.slice(-3000)}`);
    assert.ok(b);
    assert.equal(b.state, "succeeded");
    assert.equal(res.stdout.trim(), `${registry.host}/${WS}/${PROJECT}@${b.imageDigest}`);
    assert.equal(seen.get(b.id), "gvisor", `a builder pod of ${b.id} ran in krane-builds under gVisor`);
    // The registry holds the build's tag as the recorded digest.
    const client = new RegistryClient({ ca: [registry.caPem], privateHosts: [registry.host.split(":")[0] ?? ""] });
    try {
      assert.equal(
        await client.manifestDigest(registry.host, `${WS}/${PROJECT}`, b.id, registry.users[0]),
        b.imageDigest,
      );
    } finally {
      await client.close();
    }
    // Its log, kept with the build: the hand-off, the pod, the RUN step's output under gVisor.
    const logs = await cli(["build", "logs", b.id]);
    assert.equal(logs.status, 0, logs.stderr);
    assert.match(logs.stderr, new RegExp(`handed to the builder pods of region ${REGION}`));
    assert.match(logs.stderr, /builder pod krane-builds\/build-bld-[a-z0-9-]+: starting/);
    assert.match(logs.stderr, /built by the region's agent/);
    const kernel = /kernel (\S+)/.exec(logs.stderr)?.[1];
    assert.ok(kernel && kernel !== release(), `the step saw gVisor's kernel (${kernel ?? "none"}), not ${release()}`);
  });

  it("a cancelled build's builder pod is deleted", async () => {
    const src = source("slow", { Dockerfile: "FROM krane.local/base/run:12\nRUN sleep 600\n" });
    const packed = await packSourceDir(src, { maxBytes: 1 << 24, maxArchiveBytes: 1 << 24 });
    await builds().uploadSource({
      workspace: WS,
      project: PROJECT,
      digest: packed.digest,
      size: BigInt(packed.archive.length),
      offset: 0n,
      data: packed.archive,
    });
    const started = await builds().startBuild({
      workspace: WS,
      project: PROJECT,
      environment: "production",
      sourceDigest: packed.digest,
    });
    const id = started.build?.id ?? "";
    const running = await until(
      async () => ((await state(id))?.state === "running" && seen.has(id) ? true : undefined),
      180_000,
      250,
    );
    assert.ok(running, `the build's pod never ran:\n${agent.output.slice(-3000)}`);
    await builds().cancelBuild({ workspace: WS, buildId: id });
    const gone = await until(
      async () =>
        (await kube.list(resources.pods, { namespace: BUILDS_NAMESPACE })).items.some(
          (p) => p.metadata.labels?.[LABEL_BUILD_ID] === id,
        )
          ? undefined
          : true,
      60_000,
      250,
    );
    assert.ok(gone, "the agent deleted the cancelled build's pod");
    assert.equal((await state(id))?.state, "cancelled");
  });
});

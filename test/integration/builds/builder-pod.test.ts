// Source builds in builder pods on a real node (issue 43, DESIGN §10): the agent's builder
// (src/agent/builds) with the agent's own fenced credentials creates a pod in krane-builds that
// runs BuildKit under gVisor (scripts/bases/builder-entry.sh: buildkitd in a user namespace and
// an empty network namespace of its own, the pod's default capabilities only), reaches it through
// the pod's gate with the build's key, builds a Dockerfile on krane's bases (named contexts from
// the agent's side of the session) and pushes the image to a real registry. The isolation proofs
// are builds that fail with their reason: a step that tries the API server, a server on the
// machine (where ctrl listens) or the node's files; a step past the build's memory; a build past
// its time limit (the pod's activeDeadlineSeconds), which says so as a build past it anywhere else
// does, not as BuildKit's client losing its connection.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { release, tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Agent } from "undici";
import { buildInPod } from "../../../src/agent/builds/runner.js";
import { BuildFailed } from "../../../src/builds/buildkit.js";
import { pushOciArchive } from "../../../src/builds/push.js";
import { packSourceDir } from "../../../src/builds/source-dir.js";
import { ensureBases, ensureBuilderImage } from "../../../src/cluster/bases.js";
import { ensureBuildkit } from "../../../src/cluster/build.js";
import { LOCAL_BUILDER_IMAGE } from "../../../src/contracts/builds.js";
import { BUILDS_NAMESPACE } from "../../../src/contracts/cluster.js";
import { KubeClient } from "../../../src/kube/client.js";
import { resources } from "../../../src/kube/resources.js";
import { startTestRegistry, type TestRegistry } from "../../support/registry.js";
import { useCluster } from "../../support/cluster.js";
import { realNodesSkip } from "../../support/real-nodes.js";
import { agentKubeConfig } from "../agent/support.js";

const missing = ["mmdebstrap", "umoci"].filter((t) => spawnSync("sh", ["-c", `command -v ${t}`]).status !== 0);
const skip = (await realNodesSkip()) || (missing.length > 0 ? `builder images need ${missing.join(", ")}` : false);
const LIMITS = { maxBytes: 16 * 1024 * 1024, maxEntries: 10_000 };

describe("source builds in builder pods under gVisor", { skip }, () => {
  // The builder image is built before the cluster starts and imported as the nodes join.
  const h = useCluster(async () => ({
    realNodes: ["untrusted"],
    images: [await ensureBuilderImage((l) => console.log(l))],
  }));
  const dir = mkdtempSync(join(tmpdir(), "krane-builder-pod-"));
  let kube: KubeClient;
  let buildctl = "";
  let bases = "";
  let registry: TestRegistry;
  let machine: Server;
  let n = 0;

  before(async () => {
    await h.ready();
    const [bk, b] = await Promise.all([ensureBuildkit((l) => console.log(l)), ensureBases((l) => console.log(l))]);
    buildctl = bk.buildctl;
    bases = b;
    kube = new KubeClient(await agentKubeConfig(h.cluster));
    const hostIp = h.cluster.realNodes?.hostIp ?? "";
    registry = await startTestRegistry({ dir, address: hostIp });
    // Where ctrl listens for the cluster: a server on the machine's end of the nodes' link.
    machine = createServer((_q, s) => s.end("reached the machine"));
    machine.listen(0, hostIp);
    await once(machine, "listening");
  });
  after(async () => {
    machine?.close();
    await registry?.stop();
    kube?.close();
  });

  async function build(
    files: Record<string, string>,
    limits: { cpuMillicores?: number; memoryMib?: number; deadlineSeconds?: number } = {},
  ): Promise<{ digest: string; log: string[]; output: string; id: string }> {
    const id = `t${++n}-${Date.now().toString(36)}`;
    const src = join(dir, id);
    for (const [p, text] of Object.entries(files)) {
      mkdirSync(join(src, p, ".."), { recursive: true });
      writeFileSync(join(src, p), text);
    }
    const packed = await packSourceDir(src, { maxBytes: LIMITS.maxBytes, maxArchiveBytes: LIMITS.maxBytes });
    const output = join(dir, `${id}.oci.tar`);
    const log: string[] = [];
    const result = await buildInPod({
      kube,
      pod: {
        buildId: id,
        builderImage: LOCAL_BUILDER_IMAGE,
        cpuMillicores: limits.cpuMillicores ?? 1000,
        memoryMib: limits.memoryMib ?? 512,
        deadlineSeconds: limits.deadlineSeconds ?? 300,
      },
      startTimeoutMs: 90_000,
      build: {
        buildctl,
        archive: packed.archive,
        limits: LIMITS,
        basesLayout: bases,
        imageName: `${registry.host}/acme/app:${id}`,
        output,
        log: (l) => log.push(l),
        timeoutMs: 600_000,
      },
    });
    return { digest: result.digest, log, output, id };
  }

  /** A build that must fail; its error. */
  async function failing(files: Record<string, string>, limits?: Parameters<typeof build>[1]): Promise<BuildFailed> {
    try {
      const b = await build(files, limits);
      assert.fail(`the build succeeded (${b.digest}):\n${b.log.slice(-20).join("\n")}`);
    } catch (err) {
      if (!(err instanceof BuildFailed)) throw err;
      return err;
    }
  }

  it("builds a Dockerfile on a base in a gVisor pod, and the agent pushes the image", async () => {
    const b = await build({
      Dockerfile: [
        "FROM krane.local/base/run:12",
        "COPY hello.txt /hello.txt",
        'RUN echo "kernel $(uname -r)" && echo "cpus $(nproc)" && cat /hello.txt',
        "",
      ].join("\n"),
      "hello.txt": "built in a builder pod\n",
    });
    assert.match(b.digest, /^sha256:[0-9a-f]{64}$/);
    const text = b.log.join("\n");
    assert.match(text, /built in a builder pod/, "the RUN step's output streamed back");
    console.log(b.log.filter((l) => /kernel |cpus |builder pod/.test(l)).join("\n"));
    const kernel = /kernel (\S+)/.exec(text)?.[1];
    assert.ok(kernel && kernel !== release(), `the step saw gVisor's kernel (${kernel ?? "none"}), not ${release()}`);
    const user = registry.users[0];
    const dispatcher = new Agent({ connect: { ca: registry.caPem } });
    try {
      const pushed = await pushOciArchive(
        {
          base: `https://${registry.host}`,
          authorization: () =>
            Promise.resolve(
              `Basic ${Buffer.from(`${user?.username ?? ""}:${user?.password ?? ""}`).toString("base64")}`,
            ),
          dispatcher,
        },
        b.output,
        "acme/app",
        b.id,
      );
      assert.equal(pushed, b.digest, "the registry holds the image BuildKit built");
    } finally {
      await dispatcher.close();
    }
    const left = await kube.get(resources.pods, BUILDS_NAMESPACE, `build-${b.id}`);
    assert.ok(left === undefined || left.metadata.deletionTimestamp !== undefined, "the builder pod is deleted");
  });

  it("a step reaches neither the API server, nor the machine where ctrl listens, nor the node's files", async () => {
    const api = new URL(h.cluster.endpoint().server);
    const address = machine.address();
    const port = typeof address === "object" && address ? address.port : 0;
    const targets = [
      ["api-server", api.hostname, api.port || "443"],
      ["machine", h.cluster.realNodes?.hostIp ?? "", String(port)],
    ];
    const probe = targets
      .map(
        ([what, host, p]) =>
          `node -e 'require("net").connect(${p}, "${host}").on("connect", () => { console.log("${what}: REACHED"); process.exit(0); }).on("error", (e) => console.log("${what}: unreachable", e.code)); setTimeout(() => { console.log("${what}: unreachable (timeout)"); process.exit(0); }, 5000).unref()'`,
      )
      .join("; ");
    const err = await failing({
      Dockerfile: [
        "FROM krane.local/base/node:20",
        // Whatever it reached, the step fails: its output says what it tried.
        `RUN ${probe}; ls /var/lib/kubelet /etc/kubernetes 2>&1; exit 1`,
        "",
      ].join("\n"),
    });
    const out = err.lastLines.join("\n");
    assert.match(err.message, /failed at step/);
    for (const [what] of targets) {
      assert.match(out, new RegExp(`${what ?? ""}: unreachable`), `${what ?? ""} unreachable:\n${out}`);
      assert.doesNotMatch(out, new RegExp(`${what ?? ""}: REACHED`));
    }
    // BuildKit may cut a long line of a step's output in two: match the second path's whole line.
    assert.match(out, /cannot access '\/etc\/kubernetes': No such file/, `the node's files are not there:\n${out}`);
  });

  it("a step past the build's memory fails the build, saying so", async () => {
    const err = await failing(
      {
        Dockerfile: [
          "FROM krane.local/base/node:20",
          `RUN node -e 'const a = []; for (let i = 0; i < 64; i++) { a.push(Buffer.alloc(16 << 20, 1)); } console.log("allocated", a.length * 16, "MiB")'`,
          "",
        ].join("\n"),
      },
      { memoryMib: 256 },
    );
    console.log(`memory: ${err.message}\n${err.lastLines.join("\n")}`);
    assert.match(`${err.message}\n${err.lastLines.join("\n")}`, /memory limit|exit code: 137|Killed|out of memory/i);
  });

  it("a build past its time limit fails saying so, as a build past it anywhere else does", async () => {
    // The kubelet stops the pod at its deadline (its start counts): the client's connection breaks.
    const err = await failing(
      { Dockerfile: "FROM krane.local/base/run:12\nRUN echo waiting && sleep 600\n" },
      { deadlineSeconds: 45 },
    );
    console.log(`time limit: ${err.message}`);
    assert.equal(err.message, "the build ran past its time limit of 45 s and was cancelled");
  });
});

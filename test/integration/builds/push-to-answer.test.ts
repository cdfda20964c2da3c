// From a push to an answer, every part real: a signed GitHub push to the local git server's
// repository reaches ctrl's webhook; ctrl's build worker (the local one, the default) fetches that
// commit, builds it with BuildKit on krane's bases and pushes it to the distribution registry in
// token mode, then deploys the digest. A real node's containerd pulls it with a token ctrl issues
// (the agent's pull Secret) and runs it under gVisor; the environment's own sentinel routes to it
// (./world.ts sets this up). Two apps: Node.js without a Dockerfile (its commit's krane.yaml sets
// a config value the app answers) and Go with a Dockerfile of its own. A request through the
// sentinel answers from the pushed commit, and after the next push from that one.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { BuildService } from "../../../src/gen/krane/ctrl/v1/build_pb.js";
import { buildsSkip } from "../../support/build-tools.js";
import { eventually } from "../../support/cluster.js";
import { kubectl, realNodesSkip, useRealCluster } from "../../support/real-nodes.js";
import { tempDir } from "../ctrl/support.js";
import { answer, BuildWorld } from "./world.js";

const skip = buildsSkip || (await realNodesSkip());
const WS = "acme";

/** A Node.js app without a Dockerfile: it answers its mark and its configuration's GREETING. */
function nodeApp(mark: string, greeting: string): Record<string, string> {
  return {
    "package.json": JSON.stringify({ name: "app", scripts: { start: "node server.js" } }),
    "server.js": `require("http").createServer((q, s) => s.end("${mark} " + process.env.GREETING)).listen(process.env.PORT);\n`,
    // A build applies the file's environment part; it names the sentinel, or the sentinel goes.
    "krane.yaml": `project: shop\nenvironments:\n  production:\n    sentinel:\n      replicas: 1\n    config:\n      GREETING: ${greeting}\n`,
  };
}

/** A Go app with a Dockerfile of its own (on krane's Go and run bases): it answers its mark. */
function goApp(mark: string): Record<string, string> {
  return {
    "go.mod": "module example.com/api\n\ngo 1.22\n",
    "main.go": [
      "package main",
      "",
      'import (\n\t"net/http"\n\t"os"\n)',
      "",
      "func main() {",
      '\tport := os.Getenv("PORT")',
      '\tif port == "" {\n\t\tport = "8080"\n\t}',
      `\thttp.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("${mark}")) })`,
      '\tpanic(http.ListenAndServe(":"+port, nil))',
      "}",
      "",
    ].join("\n"),
    Dockerfile: [
      "FROM krane.local/base/go:1.26 AS build",
      "USER 0:0",
      "WORKDIR /src",
      "COPY . .",
      // The compiler's cache in a cache mount: the second commit's build reuses it.
      "RUN --mount=type=cache,target=/cache GOCACHE=/cache CGO_ENABLED=0 go build -o /out/api .",
      "FROM krane.local/base/run:12",
      "COPY --from=build /out/api /api",
      "USER 65532:65532",
      'ENTRYPOINT ["/api"]',
      "",
    ].join("\n"),
  };
}

describe("from a push to an answer through the sentinel, on a real node", { skip }, () => {
  const h = useRealCluster(["untrusted", "sentinel"]);
  const dir = tempDir("krane-push-to-answer-");
  let w: BuildWorld;

  /** Waits until the sentinel at `url` answers 200 with `body` (saying what it answered last, if not). */
  async function answers(url: string, body: string): Promise<void> {
    let last = "";
    try {
      await eventually(
        `"${body}" through the sentinel`,
        async () => {
          const a = await answer(url);
          last = a ? `${a.status} ${a.body}` : "nothing";
          return a?.status === 200 && a.body === body ? true : undefined;
        },
        10 * 60_000,
      );
    } catch (err) {
      const pods = await kubectl(h.cluster, ["get", "pods", "-A", "-o", "wide"]);
      const events = await kubectl(h.cluster, ["get", "events", "-n", `ws-${WS}`]);
      throw new Error(`${String(err)}; it answered "${last}"\n${pods.stdout}\n${events.stdout}`);
    }
  }

  /** Each commit of an app pushed in turn: built, deployed and answering through the sentinel. */
  async function pushEach(project: string, commits: readonly [Record<string, string>, string][], plan: RegExp) {
    const p = await w.project(project);
    let url = "";
    for (const [files, body] of commits) {
      const commit = await w.git.commit(p.repo, "main", files);
      const t0 = performance.now();
      const b = await w.built(await w.push(p, commit));
      assert.equal(b.state, "succeeded", `${b.error}\n${b.failedOutput.join("\n")}`);
      assert.equal(b.commit, commit);
      assert.notEqual(b.deploymentId, "", "the build deployed");
      assert.ok(b.image.startsWith(`${w.registry.host}/${WS}/${project}:`), b.image);
      const { log } = await w.ctrl
        .client(BuildService, w.ctrl.adminToken)
        .getBuild({ workspace: WS, buildId: b.id, logFrom: 0 });
      assert.match(log.join("\n"), plan);
      url ||= await w.sentinelUrl(p.environmentId);
      await answers(url, body);
      console.log(
        `${project}: push → "${body}" through the sentinel in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
      );
    }
  }

  before(
    async () => {
      w = new BuildWorld(await h.ready(), dir.path, WS);
      await w.start((await h.images()).krane.name);
    },
    { timeout: 40 * 60_000 },
  );
  after(async () => {
    await w?.stop();
    dir.remove();
  });

  it("a Node.js app without a Dockerfile: each push's commit answers, with its krane.yaml's config", async () => {
    await pushEach(
      "shop",
      [
        [nodeApp("commit-one", "hello"), "commit-one hello"],
        [nodeApp("commit-two", "again"), "commit-two again"],
      ],
      /build plan: Node\.js/,
    );
  });

  it("a Go app with its own Dockerfile: each push's commit answers", async () => {
    await pushEach(
      "api",
      [
        [goApp("go commit one"), "go commit one"],
        [goApp("go commit two"), "go commit two"],
      ],
      /build plan: the Dockerfile at the root/,
    );
  });
});

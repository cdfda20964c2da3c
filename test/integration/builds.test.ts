// Source builds with real BuildKit (buildkitd and buildctl built from tools/buildkit, runc from
// Debian) on krane's base images (scripts/build-bases.sh): a directory packed as `krane build
// --source` packs it builds into an OCI image — a Node.js app without a Dockerfile through the
// detector, one with a Dockerfile through it — with BuildKit's progress streamed line by line; a
// second build of the same source comes from the cache; and build steps that try to read the
// machine's files or reach a server on the machine (standing in for the API server and ctrl) fail.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { networkInterfaces, tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { BuildFailed, buildImage, startBuildkitd, type Buildkitd } from "../../src/builds/buildkit.js";
import { packSourceDir } from "../../src/builds/source-dir.js";
import { ensureBuildkit } from "../../src/cluster/build.js";
import { ensureBases } from "../../src/cluster/bases.js";
import { buildsSkip } from "../support/build-tools.js";

const skip = buildsSkip;

const dir = mkdtempSync(join(tmpdir(), "krane-builds-"));
const LIMITS = { maxBytes: 64 * 1024 * 1024, maxEntries: 10_000 };

interface Built {
  digest: string;
  log: string[];
  config: { User?: string; Cmd?: string[]; Entrypoint?: string[]; Env?: string[]; WorkingDir?: string };
  /** Each layer's file list. */
  layers: string[][];
  /** The manifest digest recorded in the archive's index. */
  indexDigest: string;
  /** The OCI archive. */
  output: string;
}

/** Reads back an OCI archive buildctl wrote: its index, manifest, config and layers' listings. */
function readImage(archive: string): Omit<Built, "digest" | "log" | "output"> {
  const out = join(dir, `unpacked-${Math.random().toString(36).slice(2)}`);
  mkdirSync(out);
  execFileSync("tar", ["-xf", archive, "-C", out]);
  const blob = (d: string) => join(out, "blobs", ...d.split(":"));
  const index = JSON.parse(readFileSync(join(out, "index.json"), "utf8")) as { manifests: { digest: string }[] };
  const indexDigest = index.manifests[0]?.digest ?? "";
  const manifest = JSON.parse(readFileSync(blob(indexDigest), "utf8")) as {
    config: { digest: string };
    layers: { digest: string }[];
  };
  const config = (JSON.parse(readFileSync(blob(manifest.config.digest), "utf8")) as { config: Built["config"] }).config;
  const layers = manifest.layers.map((l) =>
    execFileSync("tar", ["-tzf", blob(l.digest)], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 })
      .split("\n")
      .filter((x) => x !== ""),
  );
  return { config, layers, indexDigest };
}

describe("source builds with BuildKit", { skip }, () => {
  let buildctl = "";
  let bases = "";
  let daemon: Buildkitd;
  let server: Server;

  before(async () => {
    const bk = await ensureBuildkit((l) => console.log(l));
    buildctl = bk.buildctl;
    bases = await ensureBases((l) => console.log(l));
    daemon = await startBuildkitd({ buildkitd: bk.buildkitd, buildctl, stateDir: join(dir, "state-a") });
    // A server on every address of this machine: what a step must not reach.
    server = createServer((_req, res) => res.end("reached the machine"));
    server.listen(0, "0.0.0.0");
    await once(server, "listening");
  });
  after(async () => {
    server?.close();
    await daemon?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function build(
    name: string,
    files: Record<string, string>,
    opts: { secrets?: Record<string, string>; timeoutMs?: number } = {},
  ): Promise<Built> {
    const src = join(dir, "src", name);
    for (const [p, text] of Object.entries(files)) {
      mkdirSync(join(src, p, ".."), { recursive: true });
      writeFileSync(join(src, p), text);
    }
    const packed = await packSourceDir(src, { maxBytes: LIMITS.maxBytes, maxArchiveBytes: LIMITS.maxBytes });
    const output = join(dir, `${name}.oci.tar`);
    const log: string[] = [];
    const result = await buildImage({
      buildctl,
      socket: daemon.socket,
      archive: packed.archive,
      limits: LIMITS,
      ...opts,
      basesLayout: bases,
      imageName: `krane.local/test/${name}:1`,
      output,
      log: (l) => log.push(l),
    });
    return { digest: result.digest, log, ...readImage(output), output };
  }

  const nodeApp = {
    "package.json": JSON.stringify({ name: "app", scripts: { start: "node server.js" } }),
    "server.js": 'require("http").createServer((q, s) => s.end("hi")).listen(process.env.PORT);\n',
    ".gitignore": "node_modules/\n",
    "node_modules/left-out/index.js": "// ignored by .gitignore\n",
    ".kraneignore": "notes.md\n",
    "notes.md": "left out by .kraneignore\n",
  };

  it("builds a Node.js app without a Dockerfile on the node base, streaming BuildKit's progress", async () => {
    const b = await build("node-plain", nodeApp);
    assert.match(b.digest, /^sha256:[0-9a-f]{64}$/);
    assert.equal(b.indexDigest, b.digest, "the archive holds the image the build reported");
    assert.deepEqual(b.config.Cmd, ["npm", "start"]);
    assert.equal(b.config.User, "65532:65532");
    assert.equal(b.config.WorkingDir, "/app");
    assert.ok(b.config.Env?.includes("PORT=8080"), `env: ${JSON.stringify(b.config.Env)}`);
    const all = b.layers.flat();
    assert.ok(all.includes("app/server.js"), "the app's files are in a layer");
    assert.ok(
      all.some((f) => f.endsWith("usr/local/bin/node")),
      "the node base's layers are under it",
    );
    const app = all.filter((f) => f.startsWith("app/") && !f.endsWith("/")).sort();
    assert.deepEqual(app, ["app/.gitignore", "app/.kraneignore", "app/package.json", "app/server.js"]);
    assert.ok(
      b.log.some((l) => l.startsWith("build plan: Node.js")),
      b.log.join("\n"),
    );
    assert.ok(
      b.log.some((l) => /COPY \. \./.test(l)),
      "the steps' progress reached the log",
    );

    // The same source again: every step comes from this project's cache, and the image is the same.
    const again = await build("node-plain", nodeApp);
    assert.equal(again.digest, b.digest);
    assert.ok(
      again.log.some((l) => / CACHED$/.test(l)),
      again.log.join("\n"),
    );
  });

  it("builds a Node.js app with a Dockerfile, running its RUN steps", async () => {
    const b = await build("node-dockerfile", {
      Dockerfile: [
        "FROM krane.local/base/node:20",
        "WORKDIR /srv",
        "COPY . .",
        `RUN ["node", "-e", "require('fs').writeFileSync('/srv/built.txt', 'built with ' + process.version)"]`,
        "USER 65532:65532",
        'CMD ["node", "server.js"]',
        "",
      ].join("\n"),
      "server.js": nodeApp["server.js"],
    });
    assert.deepEqual(b.config.Cmd, ["node", "server.js"]);
    assert.ok(b.layers.flat().includes("srv/built.txt"), "the RUN step's file is in a layer");
    assert.ok(b.log.some((l) => l.startsWith("build plan: the Dockerfile at the root")));
  });

  it("generated Dockerfiles with build steps build: Go, Node.js with a build script, Python", async () => {
    const go = await build("go-plain", {
      "go.mod": "module example.com/app\n\ngo 1.22\n",
      "main.go":
        'package main\n\nimport (\n\t"fmt"\n\t"net/http"\n)\n\nfunc main() {\n\thttp.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "go") })\n\t_ = http.ListenAndServe(":8080", nil)\n}\n',
    });
    assert.deepEqual(go.config.Entrypoint, ["/app/app"]);
    assert.equal(go.config.User, "65532:65532");
    assert.ok(go.layers.flat().includes("app/app"), "the Go binary is in the image");
    assert.ok(!go.layers.flat().some((f) => f.startsWith("usr/local/go/")), "the toolchain is not");

    // npm itself runs in the node base (its `#!/usr/bin/env node`), as the image's `npm start` will.
    const nodeBuild = await build("node-build", {
      "package.json": JSON.stringify({ name: "a", scripts: { build: "node build.js", start: "node dist/server.js" } }),
      "build.js":
        'require("fs").mkdirSync("dist", { recursive: true }); require("fs").writeFileSync("dist/server.js", "");\n',
    });
    assert.ok(nodeBuild.layers.flat().includes("app/dist/server.js"), "npm run build ran");

    const py = await build("python-plain", { "requirements.txt": "", "main.py": "print('hi')\n" });
    assert.deepEqual(py.config.Cmd, ["python", "main.py"]);
    assert.ok(
      py.layers.flat().some((f) => f.startsWith("opt/venv/bin/")),
      "the venv is in the image",
    );
  });

  /** A Dockerfile whose one RUN step runs `js` in node; the build must fail. */
  async function failing(name: string, js: string, opts: { timeoutMs?: number } = {}): Promise<BuildFailed> {
    const err = await build(
      name,
      { Dockerfile: `FROM krane.local/base/node:20\nRUN ["node", "-e", ${JSON.stringify(js)}]\n` },
      opts,
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof BuildFailed, `the build of ${name} should fail: ${String(err)}`);
    return err;
  }

  it("a step cannot read the machine's files", async () => {
    const secret = join(dir, "node-secret.txt");
    writeFileSync(secret, "the node's secret");
    const err = await failing(
      "read-node",
      `console.log(require('fs').readFileSync(${JSON.stringify(secret)}, 'utf8'))`,
    );
    assert.match(err.message, /^the build failed at step \[1\/2\] RUN \["node", "-e", .*exit code: 1$/);
    assert.match(err.lastLines.join("\n"), /ENOENT/);
    assert.doesNotMatch(err.lastLines.join("\n"), /the node's secret/);
  });

  it("a step cannot reach a server on the machine, by loopback or by its own address", async () => {
    const port = (server.address() as AddressInfo).port;
    const hostIp =
      Object.values(networkInterfaces())
        .flat()
        .find((a) => a && a.family === "IPv4" && !a.internal)?.address ?? "127.0.0.1";
    // Each fetch must fail; a step that reached the server would print its answer and exit 0.
    const js = (url: string) =>
      `fetch(${JSON.stringify(url)}, { signal: AbortSignal.timeout(5000) }).then(r => r.text()).then(t => console.log(t), e => { console.log('unreachable: ' + (e.cause?.code ?? e.name)); process.exit(3) })`;
    for (const [name, url] of [
      ["reach-loopback", `http://127.0.0.1:${port}/`],
      ["reach-host", `http://${hostIp}:${port}/`],
    ] as const) {
      const err = await failing(name, js(url));
      const out = err.lastLines.join("\n");
      assert.match(out, /unreachable: (ECONNREFUSED|ENETUNREACH|EHOSTUNREACH)/, out);
      assert.doesNotMatch(out, /reached the machine/);
    }
  });

  it("a build secret reaches the step that mounts it and no layer, config or history of the image", async () => {
    const value = "s3cret-" + Math.random().toString(36).slice(2);
    const b = await build(
      "secret",
      {
        Dockerfile: [
          "FROM krane.local/base/node:20",
          // The step proves it read the secret by its length, never by its value.
          `RUN --mount=type=secret,id=token,uid=65532 ["node", "-e", "const t = require('fs').readFileSync('/run/secrets/token', 'utf8'); require('fs').writeFileSync('/tmp/secret-length', String(t.length))"]`,
          "",
        ].join("\n"),
      },
      { secrets: { token: value } },
    );
    assert.ok(b.layers.flat().includes("tmp/secret-length"));
    const unpacked = join(dir, "secret-unpacked");
    mkdirSync(unpacked);
    execFileSync("tar", ["-xf", b.output, "-C", unpacked]);
    const blobs = join(unpacked, "blobs", "sha256");
    let length = "";
    for (const f of readdirSync(blobs)) {
      const raw = readFileSync(join(blobs, f));
      const data = raw[0] === 0x1f && raw[1] === 0x8b ? gunzipSync(raw) : raw;
      assert.ok(!data.includes(value), `blob ${f} holds the secret`);
      const at = data.indexOf("secret-length");
      if (at >= 0 && raw[0] === 0x1f)
        length = execFileSync("tar", ["-xzOf", join(blobs, f), "tmp/secret-length"], { encoding: "utf8" });
    }
    assert.equal(length, String(value.length), "the step read the secret");
    await assert.rejects(
      build("bad-secret", { "index.html": "<p>hi</p>" }, { secrets: { "../x": "v" } }),
      /build_secret: "\.\.\/x" is not a secret id/,
    );
  });

  it("a build past its time limit is cancelled and says so; the daemon builds on", async () => {
    const err = await failing("too-long", "setTimeout(() => {}, 120000)", { timeoutMs: 4000 });
    assert.equal(err.message, "the build ran past its time limit of 4 s and was cancelled");
    const next = await build("after-timeout", { "index.html": "<p>hi</p>" });
    assert.match(next.digest, /^sha256:/);
  });
});

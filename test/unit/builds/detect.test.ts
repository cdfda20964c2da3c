// Language detection: a Dockerfile wins, then Go, Python, Node.js and a static site in that
// order; what cannot be built is an error naming the field and saying what to add.
import assert from "node:assert/strict";
import { test } from "node:test";
import { detect, DetectError, normalizePath, type SourceTree } from "../../../src/builds/detect.js";
import { GO_BASE, NODE_BASE, PYTHON_BASE, RUN_BASE } from "../../../src/contracts/builds.js";

function tree(files: Record<string, string>): SourceTree {
  return { paths: Object.keys(files), read: (p) => files[p] };
}

const fromLines = (dockerfile: string | undefined): string[] =>
  (dockerfile ?? "").split("\n").filter((l) => l.startsWith("FROM "));

test("a Dockerfile at the root wins over every language marker", () => {
  const plan = detect(tree({ Dockerfile: "FROM x", "package.json": '{"scripts":{"start":"node ."}}', "go.mod": "" }));
  assert.equal(plan.language, "dockerfile");
  assert.equal(plan.dockerfilePath, "Dockerfile");
  assert.equal(plan.dockerfile, undefined);
  assert.deepEqual(
    plan.bases.map((b) => b.name),
    [NODE_BASE, PYTHON_BASE, GO_BASE, RUN_BASE].map((b) => b.name),
  );
});

test("--dockerfile names a file in the source; a missing or escaping one is an error naming the field", () => {
  const src = tree({ "deploy/web.Dockerfile": "FROM x", "index.html": "" });
  assert.equal(detect(src, { dockerfile: "./deploy/web.Dockerfile" }).dockerfilePath, "deploy/web.Dockerfile");
  for (const [given, says] of [
    ["deploy/missing", "deploy/missing is not in the source"],
    ["../Dockerfile", "is not a path inside the source"],
  ] as const) {
    assert.throws(
      () => detect(src, { dockerfile: given }),
      (err: unknown) => err instanceof DetectError && err.field === "dockerfile" && err.message.includes(says),
    );
  }
});

test("Node.js: npm ci with a lockfile, the build script, npm start on the node base", () => {
  const plan = detect(
    tree({
      "package.json": JSON.stringify({
        scripts: { start: "node server.js", build: "tsc" },
        dependencies: { express: "4" },
      }),
      "package-lock.json": "{}",
      "index.html": "",
    }),
  );
  assert.equal(plan.language, "node");
  assert.deepEqual(fromLines(plan.dockerfile), [`FROM ${NODE_BASE.name}`]);
  assert.match(plan.dockerfile ?? "", /COPY package.json package-lock.json \.\//);
  assert.match(plan.dockerfile ?? "", /npm ci --no-audit --no-fund\n/);
  assert.match(plan.dockerfile ?? "", /RUN npm run build\nRUN npm prune --omit=dev/);
  assert.match(plan.dockerfile ?? "", /USER 65532:65532\nCMD \["npm","start"\]\n$/);
  assert.match(plan.summary, /npm ci \(package-lock.json\), npm run build, npm start/);
});

test("Node.js without dependencies installs nothing; without a start script it says what to add", () => {
  const plan = detect(tree({ "package.json": '{"scripts":{"start":"node a.js"}}', "a.js": "" }));
  assert.doesNotMatch(plan.dockerfile ?? "", /npm (ci|install)/);
  assert.throws(
    () => detect(tree({ "package.json": '{"scripts":{"test":"x"}}' })),
    (err: unknown) => err instanceof DetectError && err.field === "source" && /no "start" script/.test(err.message),
  );
  assert.throws(
    () => detect(tree({ "package.json": "[1]" })),
    (err: unknown) => err instanceof DetectError && /package.json is not a JSON object/.test(err.message),
  );
});

test("Python: requirements.txt and pyproject.toml install into a venv; Procfile web or a main file starts it", () => {
  const a = detect(tree({ "requirements.txt": "flask", "app.py": "" }));
  assert.equal(a.language, "python");
  assert.deepEqual(fromLines(a.dockerfile), [`FROM ${PYTHON_BASE.name}`]);
  assert.match(a.dockerfile ?? "", /pip install -r requirements.txt/);
  assert.match(a.dockerfile ?? "", /CMD \["python","app.py"\]/);
  const b = detect(
    tree({ "pyproject.toml": "", Procfile: "web: gunicorn app:app --bind 0.0.0.0:$PORT\n", "main.py": "" }),
  );
  assert.match(b.dockerfile ?? "", /pip install \.\n/);
  assert.match(b.dockerfile ?? "", /CMD \["\/bin\/sh","-c","gunicorn app:app --bind 0.0.0.0:\$PORT"\]/);
  assert.throws(
    () => detect(tree({ "requirements.txt": "" })),
    (err: unknown) => err instanceof DetectError && /Procfile/.test(err.message),
  );
});

test("Go: the root package or the first cmd/<name>, built static and run on the run base", () => {
  const root = detect(tree({ "go.mod": "module x", "go.sum": "", "main.go": "", "main_test.go": "" }));
  assert.equal(root.language, "go");
  assert.deepEqual(fromLines(root.dockerfile), [`FROM ${GO_BASE.name} AS build`, `FROM ${RUN_BASE.name}`]);
  assert.match(root.dockerfile ?? "", /go mod download/);
  assert.match(root.dockerfile ?? "", /-o \/out\/app \.\n/);
  const cmd = detect(tree({ "go.mod": "module x", "cmd/web/main.go": "", "cmd/api/main.go": "", "x_test.go": "" }));
  assert.match(cmd.dockerfile ?? "", /-o \/out\/app \.\/cmd\/api\n/);
  assert.doesNotMatch(cmd.dockerfile ?? "", /go mod download/);
  assert.throws(
    () => detect(tree({ "go.mod": "module x", "pkg/a.go": "" })),
    (err: unknown) => err instanceof DetectError && /cmd\/<name>/.test(err.message),
  );
});

test("the order between markers: Go, then Python, then Node.js, then a static site", () => {
  const start = '{"scripts":{"start":"x"}}';
  assert.equal(
    detect(tree({ "go.mod": "", "main.go": "", "requirements.txt": "", "main.py": "", "package.json": start }))
      .language,
    "go",
  );
  assert.equal(detect(tree({ "requirements.txt": "", "main.py": "", "package.json": start })).language, "python");
  assert.equal(detect(tree({ "package.json": start, "index.html": "" })).language, "node");
  const site = detect(tree({ "index.html": "<h1>hi</h1>", "about/index.html": "" }));
  assert.equal(site.language, "static");
  assert.match(site.dockerfile ?? "", /CMD \["node","\/usr\/local\/lib\/krane\/static-server.mjs","\/srv\/www"\]/);
});

test("nothing krane knows is an error that lists what it looks for", () => {
  assert.throws(
    () => detect(tree({ "README.md": "", "src/index.html": "" })),
    (err: unknown) =>
      err instanceof DetectError && err.field === "source" && /go.mod, requirements.txt/.test(err.message),
  );
});

test("normalizePath keeps paths inside the root", () => {
  assert.equal(normalizePath("./a//b/./c"), "a/b/c");
  assert.equal(normalizePath("a\\b"), "a/b");
  assert.equal(normalizePath("a/../b"), undefined);
  assert.equal(normalizePath("."), undefined);
});

test("generated build steps run as root of their step container; the image runs as 65532", () => {
  const plans = [
    detect(tree({ "package.json": '{"scripts":{"start":"node .","build":"tsc"},"dependencies":{"a":"1"}}' })),
    detect(tree({ "requirements.txt": "", "main.py": "" })),
    detect(tree({ "go.mod": "module m", "main.go": "package main" })),
  ];
  for (const plan of plans) {
    const lines = (plan.dockerfile ?? "").split("\n");
    for (const [i, l] of lines.entries())
      if (l.startsWith("FROM ") && lines.slice(i + 1).some((x) => x.startsWith("RUN ")))
        assert.equal(lines[i + 1], "USER 0:0", `${plan.language}: ${l}`);
    assert.equal(lines.filter((l) => l.startsWith("USER ")).pop(), "USER 65532:65532", plan.language);
  }
});

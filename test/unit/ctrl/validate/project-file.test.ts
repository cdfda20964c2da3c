// krane.yaml's environments checked by the API's own rules, refusals named by the file's path, and
// the plan's target: what the file leaves out stays as it is, what it does not name is kept unless
// pruned, and a file applied plans no change after (the diff of the target against itself).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DomainError } from "../../../../src/ctrl/errors.js";
import { planTarget, validateEnvironmentFile } from "../../../../src/ctrl/validate/project-file.js";
import {
  EnvironmentFileSchema,
  ProjectFileSchema,
  type EnvironmentFile,
} from "../../../../src/gen/krane/ctrl/v1/project_file_pb.js";
import { decodeYaml } from "../../../../src/project-file/decode.js";
import { changeLine, diffTrees } from "../../../../src/project-file/diff.js";
import { messageTree } from "../../../../src/project-file/tree.js";

const scope = { project: "shop", environment: "production" };

function env(yaml: string): EnvironmentFile {
  const d = decodeYaml(
    ProjectFileSchema,
    `project: shop\nenvironments:\n  production:\n${yaml.replace(/^/gm, "    ")}`,
  );
  assert.ok(d.ok, d.ok ? "" : JSON.stringify(d.problems));
  const e = d.message.environments.production;
  assert.ok(e);
  return e;
}

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof DomainError, String(err));
    return `${err.code}: ${err.message}`;
  }
  assert.fail("expected a refusal");
}

const tree = (f: EnvironmentFile) => messageTree(EnvironmentFileSchema, f as unknown as Record<string, unknown>);
const diff = (a: EnvironmentFile | null, b: EnvironmentFile): string[] =>
  diffTrees(a === null ? null : tree(a), tree(b)).map((c) => `${c.op} ${c.path}`);

const BASE = `regions: { eu: { replicas: 2 } }
deployment: { image: "img:1", port: 3000 }
sentinel: {}
domains: [a.example.com, b.example.com]
config: { LOG_LEVEL: info, MODE: web }
jobs:
  cleanup: { schedule: "0 3 * * *", image: "img:1" }
`;

describe("validateEnvironmentFile", () => {
  it("fills in every default (canonical form)", () => {
    const v = validateEnvironmentFile(env(BASE), scope);
    assert.equal(v.deployment?.protocol, "http1");
    assert.equal(v.deployment?.cpuMillicores, 250n);
    assert.equal(v.sentinel?.replicas, 2);
    assert.equal(v.rollout?.maxSurge, "25%");
    assert.equal(v.jobs.cleanup?.concurrencyPolicy !== "", true);
  });

  it("names a refusal by its path in the file", () => {
    assert.match(
      refusal(() => validateEnvironmentFile(env(BASE.replace("port: 3000", "port: 99999")), scope)),
      /^invalid_argument: deployment\.port: /,
    );
    assert.match(
      refusal(() => validateEnvironmentFile(env(BASE.replace("MODE: web", '"1BAD": x')), scope)),
      /^invalid_argument: config\.1BAD: /,
    );
    assert.match(
      refusal(() => validateEnvironmentFile(env(BASE.replace('"0 3 * * *"', '"nope"')), scope)),
      /^invalid_argument: jobs\.cleanup\.schedule: /,
    );
    assert.match(
      refusal(() => validateEnvironmentFile(env(BASE.replace("b.example.com", "a.example.com")), scope)),
      /^invalid_argument: domains\[1\]: repeats/,
    );
    assert.match(
      refusal(() => validateEnvironmentFile(env(`${BASE}secrets: [LOG_LEVEL]\n`), scope)),
      /^invalid_argument: secrets\[0\]: "LOG_LEVEL" is also in config/,
    );
  });
});

describe("planTarget", () => {
  const current = planTarget(null, new Map(), validateEnvironmentFile(env(BASE), scope), false, scope).file;

  it("plans no change for the file that made the environment", () => {
    const again = planTarget(current, new Map([["eu", 2]]), validateEnvironmentFile(env(BASE), scope), false, scope);
    assert.deepEqual(diff(current, again.file), []);
  });

  it("plans exactly the change made to the file", () => {
    const t = planTarget(
      current,
      new Map(),
      validateEnvironmentFile(env(BASE.replace("LOG_LEVEL: info", "LOG_LEVEL: debug")), scope),
      false,
      scope,
    );
    assert.deepEqual(diff(current, t.file), ["set config.LOG_LEVEL"]);
    const p = planTarget(
      current,
      new Map(),
      validateEnvironmentFile(env(BASE.replace("port: 3000", "port: 3001")), scope),
      false,
      scope,
    );
    assert.deepEqual(diff(current, p.file), ["set deployment.port"]);
  });

  it("keeps what the file no longer names unless pruned", () => {
    const smaller = validateEnvironmentFile(
      env(
        BASE.replace(", b.example.com", "")
          .replace(", MODE: web", "")
          .replace(/jobs:\n.*\n/, ""),
      ),
      scope,
    );
    const kept = planTarget(current, new Map(), smaller, false, scope);
    assert.deepEqual(diff(current, kept.file), []);
    assert.equal(kept.notes.length, 3, kept.notes.join("\n"));
    const pruned = planTarget(current, new Map(), smaller, true, scope);
    assert.deepEqual(diff(current, pruned.file).sort(), ["removed config.MODE", "removed jobs", "set domains"]);
  });

  it("leaves the image and a region's count to the environment when the file does not state them", () => {
    const t = planTarget(
      current,
      new Map([["eu", 5]]),
      validateEnvironmentFile(env(BASE.replace('image: "img:1", ', "").replace("{ replicas: 2 }", "")), scope),
      false,
      scope,
    );
    assert.equal(t.file.deployment?.image, "img:1");
    assert.equal(t.file.regions.eu?.replicas, 2);
    assert.match(
      refusal(() =>
        planTarget(
          null,
          new Map(),
          validateEnvironmentFile(env(BASE.replace('image: "img:1", ', "")), scope),
          false,
          scope,
        ),
      ),
      /^invalid_argument: deployment\.image: is required/,
    );
  });

  it("refuses autoscaling without a sentinel, and replicas in an autoscaled region", () => {
    const auto = `${BASE}autoscale: { min_replicas: 1, max_replicas: 4, concurrency_target: 10 }\n`;
    assert.match(
      refusal(() => planTarget(null, new Map(), validateEnvironmentFile(env(auto), scope), false, scope)),
      /^invalid_argument: regions\.eu\.replicas: the region autoscales/,
    );
    assert.match(
      refusal(() =>
        planTarget(
          null,
          new Map(),
          validateEnvironmentFile(env(auto.replace("sentinel: {}\n", "").replace("{ replicas: 2 }", "")), scope),
          false,
          scope,
        ),
      ),
      /^invalid_argument: autoscale: needs a sentinel/,
    );
  });
});

describe("diffTrees", () => {
  it("walks mappings, takes a key on one side whole, and compares lists whole", () => {
    const changes = diffTrees(
      { a: 1, m: { x: "1", y: "2" }, l: ["p", "q"], gone: { deep: { v: 1 } } },
      { a: 2, m: { x: "1", "y.z": "3" }, l: ["p"], new: true },
    );
    assert.deepEqual(changes.map(changeLine), [
      "~ a: 1 → 2",
      '- m.y: "2"',
      '+ m."y.z": "3"',
      '~ l: ["p","q"] → ["p"]',
      '- gone: {"deep":{"v":1}}',
      "+ new: true",
    ]);
    assert.deepEqual(diffTrees({ a: [1] }, { a: [1] }), []);
    assert.deepEqual(diffTrees(null, { a: 1 }, ["environments", "x"]).map(changeLine), ['+ environments.x: {"a":1}']);
  });
});

// Reading krane.yaml: what it holds becomes the ProjectFile message, and every mistake is refused
// with the file, line and column where it is written — an unknown key with the key meant, a value
// of the wrong type, a secret's value put in the file — and no message at all.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { RolloutStrategy } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { positionOf } from "../../../src/project-file/decode.js";
import { parsePath, splitFieldMessage } from "../../../src/project-file/paths.js";
import { readProjectFile, refusalLine } from "../../../src/project-file/read.js";

const GOOD = `project: shop
environments:
  production:
    regions:
      eu: { replicas: 3 }
      us:
    deployment:
      image: ghcr.io/acme/shop:1.2
      port: 3000
      cpu_millicores: 500
      health_check: { path: /healthz }
    sentinel: {}
    rollout:
      strategy: RECREATE
    domains: [shop.example.com]
    config:
      LOG_LEVEL: info
    secrets: [DATABASE_URL]
    jobs:
      cleanup:
        schedule: "0 3 * * *"
        image: ghcr.io/acme/shop:1.2
`;

function refused(text: string): string[] {
  const r = readProjectFile("krane.yaml", text);
  assert.equal(r.ok, false, "expected the file to be refused");
  return r.ok ? [] : r.problems;
}

describe("reading krane.yaml", () => {
  it("decodes a file into the message, with short enum names and empty mappings as defaults", () => {
    const r = readProjectFile("krane.yaml", GOOD);
    assert.ok(r.ok, r.ok ? "" : r.problems.join("\n"));
    const env = r.file.environments.production;
    assert.ok(env);
    assert.equal(r.file.project, "shop");
    assert.equal(env.regions.eu?.replicas, 3);
    assert.ok(env.regions.us);
    assert.equal(env.regions.us.replicas, undefined);
    assert.equal(env.deployment?.port, 3000);
    assert.equal(env.deployment?.cpuMillicores, 500n);
    assert.equal(env.deployment?.healthCheck?.path, "/healthz");
    assert.ok(env.sentinel);
    assert.equal(env.rollout?.strategy, RolloutStrategy.RECREATE);
    assert.deepEqual(env.domains, ["shop.example.com"]);
    assert.deepEqual(env.config, { LOG_LEVEL: "info" });
    assert.deepEqual(env.secrets, ["DATABASE_URL"]);
    assert.equal(env.jobs.cleanup?.schedule, "0 3 * * *");
  });

  it("refuses an unknown key at its line and column, with the key meant", () => {
    const problems = refused(GOOD.replace("      port: 3000", "      prot: 3000"));
    assert.deepEqual(problems, [
      'krane.yaml:9:7: environments.production.deployment.prot: unknown key "prot" (did you mean "port"?)',
    ]);
    // Another spelling of a key (protobuf JSON's camelCase) is named too.
    assert.match(
      refused(GOOD.replace("cpu_millicores", "cpuMillicores"))[0] ?? "",
      /^krane\.yaml:10:7: .*unknown key "cpuMillicores" \(did you mean "cpu_millicores"\?\)$/,
    );
    // Nothing close: the keys there are listed.
    assert.match(
      refused(`project: p\nflavour: x\n`)[0] ?? "",
      /^krane\.yaml:2:1: flavour: unknown key "flavour" \(expected one of: project, environments\)$/,
    );
  });

  it("refuses a value of the wrong type, naming the type", () => {
    assert.deepEqual(refused(GOOD.replace("port: 3000", "port: three")), [
      "krane.yaml:9:13: environments.production.deployment.port: expected a whole number, got a string",
    ]);
    assert.deepEqual(refused(GOOD.replace("domains: [shop.example.com]", "domains: shop.example.com")), [
      "krane.yaml:15:14: environments.production.domains: expected a list of strings",
    ]);
    // A bare YAML number where text is wanted: quote it.
    assert.deepEqual(refused(GOOD.replace("LOG_LEVEL: info", "LOG_LEVEL: 1.10")), [
      'krane.yaml:17:18: environments.production.config.LOG_LEVEL: expected a string, got a number (quote it: "1.10")',
    ]);
    assert.deepEqual(refused(GOOD.replace("strategy: RECREATE", "strategy: BLUE")), [
      "krane.yaml:14:17: environments.production.rollout.strategy: expected one of ROLLING_UPDATE, RECREATE",
    ]);
    assert.deepEqual(refused(GOOD.replace("replicas: 3", "replicas: 99999999999")), [
      "krane.yaml:5:23: environments.production.regions.eu.replicas: must be between -2147483648 and 2147483647",
    ]);
  });

  it("refuses a secret's value put in the file", () => {
    const asMap = refused(
      GOOD.replace("secrets: [DATABASE_URL]", "secrets:\n      DATABASE_URL: postgres://u:pw@db/shop"),
    );
    assert.equal(asMap.length, 1);
    assert.match(
      asMap[0] ?? "",
      /^krane\.yaml:19:7: environments\.production\.secrets: expected a list of secret names; a secret's value never goes in the file/,
    );
    const asPair = refused(GOOD.replace("secrets: [DATABASE_URL]", "secrets: [DATABASE_URL=postgres://u:pw@db/shop]"));
    assert.match(asPair[0] ?? "", /^krane\.yaml:18:15: environments\.production\.secrets\[0\]: .*`krane secret set`$/);
  });

  it("reports every problem at once, and YAML's own errors with their position", () => {
    const problems = refused(
      GOOD.replace("port: 3000", "port: x").replace("image: ghcr.io/acme/shop:1.2\n      port", "imag: a\n      port"),
    );
    assert.equal(problems.length, 2);
    assert.match(refused("project: a\n  bad: [\n")[0] ?? "", /^krane\.yaml:\d+:\d+: /);
    assert.deepEqual(refused("project: a\nproject: b\n").length, 1);
    assert.deepEqual(refused(""), ["krane.yaml:1:1: the file is empty"]);
    assert.deepEqual(refused("environments: {}\n"), ["krane.yaml:1:1: project: is required (the project's slug)"]);
  });

  it("places ctrl's refusal of a field at the line it is written on", () => {
    const r = readProjectFile("krane.yaml", GOOD);
    assert.ok(r.ok);
    assert.equal(
      refusalLine(
        "krane.yaml",
        r.source,
        "production",
        'regions.us: region "us" is not registered (create it with `krane region create us`)',
      ),
      'krane.yaml:6:7: environments.production.regions.us: region "us" is not registered (create it with `krane region create us`)',
    );
    assert.equal(
      refusalLine("krane.yaml", r.source, "production", "deployment.health_check.path: must start with /"),
      "krane.yaml:11:29: environments.production.deployment.health_check.path: must start with /",
    );
    // A path the file does not spell out points at the deepest part that is written.
    assert.deepEqual(positionOf(r.source, ["environments", "production", "jobs", "nightly"]), { line: 20, col: 7 });
    assert.equal(
      refusalLine("krane.yaml", r.source, "production", "the environment moved"),
      "krane.yaml:4:5: environments.production: the environment moved",
    );
  });
});

describe("field paths", () => {
  it("splits a refusal into its path and problem, quoting keys that are not plain words", () => {
    assert.deepEqual(splitFieldMessage('config."a.b": must be set'), {
      path: ["config", "a.b"],
      problem: "must be set",
    });
    assert.deepEqual(splitFieldMessage("domains[2]: repeats x"), { path: ["domains", 2], problem: "repeats x" });
    assert.equal(splitFieldMessage("environment moved: x"), undefined);
    assert.deepEqual(parsePath('regions."eu.west".replicas'), ["regions", "eu.west", "replicas"]);
    assert.equal(parsePath("a..b"), undefined);
  });
});

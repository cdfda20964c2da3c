// krane.yaml end to end: the real `krane` CLI against a real `krane ctrl serve` (SQLite). A file
// makes an environment; its plan then shows nothing, nor does the plan of what `krane export`
// writes (round trip); a change in the file plans and applies exactly that change; what the file
// no longer names is kept without --prune and removed with it; a change made between a plan and
// its apply refuses the apply with what moved; bad input is refused at file:line:column with
// nothing applied.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { ProjectFileService } from "../../../src/gen/krane/ctrl/v1/apply_pb.js";
import { ProjectFileSchema } from "../../../src/gen/krane/ctrl/v1/project_file_pb.js";
import { decodeYaml } from "../../../src/project-file/decode.js";
import { krane, spawnCtrl, type CliResult, type CtrlProcess } from "./process.js";
import { tempDir, transportFor } from "./support.js";

const FILE = `project: shop
environments:
  prod:
    regions:
      eu: { replicas: 2 }
    deployment:
      image: registry.example.com/shop:1
      port: 3000
    sentinel: {}
    rollout: { strategy: RECREATE }
    domains: [shop.example.com, www.shop.example.com]
    config:
      LOG_LEVEL: info
      MODE: web
    secrets: [DATABASE_URL]
    jobs:
      cleanup: { schedule: "0 3 * * *", image: "registry.example.com/shop:1" }
      report: { schedule: "0 4 * * *", image: "registry.example.com/shop:1" }
`;

describe("krane.yaml: plan, apply, export against krane ctrl serve", () => {
  const dir = tempDir();
  let ctrl: CtrlProcess;
  let env: NodeJS.ProcessEnv;
  let token: string;
  const path = join(dir.path, "krane.yaml");

  const run = (args: string[]): CliResult => krane(args, env);
  const ok = (args: string[]): string => {
    const r = run(args);
    assert.equal(r.status, 0, `krane ${args.join(" ")}: ${r.stdout}${r.stderr}`);
    return r.stdout;
  };
  const plan = (file: string, ...more: string[]): CliResult => run(["plan", "-f", file, ...more]);
  const exported = (): string => ok(["export", "shop"]);

  before(async () => {
    ctrl = await spawnCtrl(["--database", join(dir.path, "ctrl.db")]);
    token = readFileSync(join(dir.path, "admin-token"), "utf8").trim();
    env = { KRANE_CTRL_URL: ctrl.url, KRANE_TOKEN: token };
    ok(["region", "create", "eu"]);
    ok(["region", "create", "us"]);
    ok(["workspace", "create", "acme"]);
    ok(["project", "create", "shop"]);
  });
  after(async () => {
    assert.equal(await ctrl.stop(), 0);
    dir.remove();
  });

  it("makes an environment from the file; its plan and the exported file's then show no change", () => {
    writeFileSync(path, FILE);
    const first = plan(path);
    assert.equal(first.status, 2, first.stderr);
    assert.match(first.stdout, /^prod \(new environment\): \d+ changes$/m);
    assert.match(first.stdout, /# secret DATABASE_URL is named but has no value yet/);
    const applied = ok(["apply", "-f", path]);
    assert.match(applied, /^prod: applied \d+ changes \(revision 1\)$/m);

    const again = plan(path);
    assert.equal(again.status, 0, again.stdout + again.stderr);
    assert.match(again.stdout, /^prod: no changes$/m);
    // A repeat of the apply changes nothing.
    assert.match(ok(["apply", "-f", path]), /^prod: no changes$/m);

    const text = exported();
    const back = decodeYaml(ProjectFileSchema, text);
    assert.ok(back.ok, text);
    assert.equal(back.message.environments.prod?.deployment?.image, "registry.example.com/shop:1");
    assert.equal(back.message.environments.prod?.regions.eu?.replicas, 2);
    const out = join(dir.path, "exported.yaml");
    ok(["export", "shop", "-f", out]);
    const round = plan(out);
    assert.equal(round.status, 0, round.stdout + round.stderr);
    assert.match(round.stdout, /^prod: no changes$/m);
  });

  it("plans and applies exactly the change made to the file", () => {
    writeFileSync(path, FILE.replace("LOG_LEVEL: info", "LOG_LEVEL: debug").replace("port: 3000", "port: 3001"));
    const p = plan(path);
    assert.equal(p.status, 2);
    assert.deepEqual(
      p.stdout.split("\n").filter((l) => l.startsWith("  ~") || l.startsWith("  +") || l.startsWith("  -")),
      ["  ~ deployment.port: 3000 → 3001", '  ~ config.LOG_LEVEL: "info" → "debug"'],
    );
    assert.match(ok(["apply", "-f", path]), /^prod: applied 2 changes \(revision 2\)$/m);
    assert.equal(plan(path).status, 0);
    assert.match(ok(["config", "list", "shop/prod"]), /LOG_LEVEL\s*│\s*debug/);
  });

  it("keeps what the file no longer names unless --prune, and prunes only that", () => {
    const smaller = FILE.replace("LOG_LEVEL: info", "LOG_LEVEL: debug")
      .replace("port: 3000", "port: 3001")
      .replace(", www.shop.example.com", "")
      .replace("      MODE: web\n", "")
      .replace(/ {6}report: .*\n/, "");
    writeFileSync(path, smaller);
    const kept = plan(path);
    assert.equal(kept.status, 0, kept.stdout);
    assert.match(kept.stdout, /# kept, not in the file \(--prune removes it\): domains www\.shop\.example\.com/);
    const before = exported();
    assert.match(ok(["apply", "-f", path]), /^prod: no changes$/m);
    assert.equal(exported(), before, "nothing removed without --prune");

    const pruning = plan(path, "--prune");
    assert.equal(pruning.status, 2);
    assert.deepEqual(
      pruning.stdout
        .split("\n")
        .filter((l) => /^ {2}[~+-] /.test(l))
        .map((l) => l.replace(/: .*/, ""))
        .sort(),
      ["  - config.MODE", "  - jobs.report", "  ~ domains"],
    );
    ok(["apply", "-f", path, "--prune"]);
    const after = decodeYaml(ProjectFileSchema, exported());
    assert.ok(after.ok);
    const prod = after.message.environments.prod;
    assert.deepEqual(prod?.domains, ["shop.example.com"]);
    assert.deepEqual(Object.keys(prod?.config ?? {}), ["LOG_LEVEL"]);
    assert.deepEqual(Object.keys(prod?.jobs ?? {}), ["cleanup"]);
    assert.equal(plan(path, "--prune").status, 0);
  });

  it("refuses an apply when the environment changed since its plan, with what moved", async () => {
    const client = createClient(ProjectFileService, transportFor(ctrl.url, token));
    const current = decodeYaml(ProjectFileSchema, readFileSync(path, "utf8"));
    assert.ok(current.ok);
    const desired = current.message.environments.prod;
    assert.ok(desired);
    desired.config.LOG_LEVEL = "warn";
    const ref = { workspace: "acme", project: "shop", environment: "prod" };
    const p = await client.planEnvironment({ ...ref, desired });
    assert.deepEqual(
      p.changes.map((c) => c.field),
      ["config.LOG_LEVEL"],
    );
    ok(["config", "set", "shop/prod", "FEATURE=on"]);
    const refused = await client.applyEnvironment({ ...ref, desired, plannedFrom: p.current }).then(
      () => assert.fail("the apply went through"),
      (err: unknown) => err,
    );
    assert.ok(refused instanceof ConnectError);
    assert.equal(refused.code, Code.FailedPrecondition);
    assert.match(refused.rawMessage, /changed since the plan.*\+ config\.FEATURE: "on"/);
    assert.match(ok(["config", "list", "shop/prod"]), /LOG_LEVEL\s*│\s*debug/, "nothing applied");
  });

  it("round-trips every part of an environment, and plans a change to each part as exactly that change", () => {
    const staging = `project: shop
environments:
  staging:
    regions:
      eu:
      us: { replicas: 1, autoscale_off: true }
    deployment:
      image: registry.example.com/shop:1
      command: [node]
      args: [server.js]
      protocol: h2c
      env: { NODE_ENV: production }
      cpu_millicores: 500
      memory_mib: 512
      health_check: { path: /healthz }
    sentinel: { replicas: 1 }
    autoscale: { min_replicas: 1, max_replicas: 4, concurrency_target: 20, scale_down_window_seconds: 120 }
    rollout:
      max_surge: "1"
      progressive:
        canary: { steps: [{ set_weight: 20 }, { pause: { seconds: 60 } }] }
    endpoints:
      public: { path_routing: true }
      organization: {}
    config: { LOG_LEVEL: info }
    external_secrets: { API_KEY: kv/shop/api-key }
    jobs:
      nightly: { schedule: "0 2 * * *", image: registry.example.com/shop:1, suspend: true }
`;
    const stagingPath = join(dir.path, "staging.yaml");
    writeFileSync(stagingPath, staging);
    ok(["apply", "-f", stagingPath]);
    const again = plan(stagingPath);
    assert.equal(again.status, 0, again.stdout + again.stderr);
    const out = join(dir.path, "all.yaml");
    ok(["export", "shop", "-f", out]);
    const round = plan(out);
    assert.equal(round.status, 0, round.stdout + round.stderr);
    assert.match(readFileSync(out, "utf8"), /external_secrets:\n\s+API_KEY: kv\/shop\/api-key/);

    // The paths each edit changes (a path-routed endpoint's default prefix goes with it).
    const edits: [string, string, string][] = [
      ["us: { replicas: 1, autoscale_off: true }", "us: { replicas: 2, autoscale_off: true }", "regions.us.replicas"],
      ["protocol: h2c", "protocol: grpc", "deployment.protocol"],
      ["memory_mib: 512", "memory_mib: 1024", "deployment.memory_mib"],
      ["health_check: { path: /healthz }", "health_check: { path: /ready }", "deployment.health_check.path"],
      ["sentinel: { replicas: 1 }", "sentinel: { replicas: 3 }", "sentinel.replicas"],
      ["max_replicas: 4", "max_replicas: 6", "autoscale.max_replicas"],
      ['max_surge: "1"', 'max_surge: "2"', "rollout.max_surge"],
      ["set_weight: 20", "set_weight: 30", "rollout.progressive.canary.steps"],
      ["public: { path_routing: true }", "public: {}", "endpoints.public.path_routing,endpoints.public.path_prefix"],
      ["API_KEY: kv/shop/api-key", "API_KEY: kv/shop/other", "external_secrets.API_KEY"],
      ["suspend: true", "suspend: false", "jobs.nightly.suspend"],
    ];
    for (const [from, to, field] of edits) {
      assert.ok(staging.includes(from), from);
      writeFileSync(stagingPath, staging.replace(from, to));
      const p = plan(stagingPath);
      assert.equal(p.status, 2, `${field}: ${p.stdout}${p.stderr}`);
      const changed = p.stdout
        .split("\n")
        .filter((l) => /^ {2}[~+-] /.test(l))
        .map((l) => l.slice(4).replace(/: .*/, ""));
      assert.equal(changed.join(","), field, `${to}: ${p.stdout}`);
    }
    // One of them applied: exactly that, and a new revision for a revision setting.
    writeFileSync(stagingPath, staging.replace("memory_mib: 512", "memory_mib: 1024"));
    assert.match(ok(["apply", "-f", stagingPath]), /^staging: applied 1 change \(revision 2\)$/m);
    assert.equal(plan(stagingPath).status, 0);
  });

  it("refuses bad input at file:line:column and applies nothing", () => {
    const before = exported();
    writeFileSync(path, FILE.replace("      eu: { replicas: 2 }", "      eu: { replicas: 2 }\n      mars: {}"));
    const region = run(["apply", "-f", path]);
    assert.equal(region.status, 1);
    assert.match(
      region.stderr,
      /krane\.yaml:6:\d+: environments\.prod\.regions\.mars: region "mars" is not registered/,
    );
    assert.match(region.stderr, /nothing applied/);
    writeFileSync(path, FILE.replace("sentinel: {}", "sentinal: {}"));
    const key = run(["apply", "-f", path]);
    assert.equal(key.status, 1);
    assert.match(
      key.stderr,
      /krane\.yaml:9:5: environments\.prod\.sentinal: unknown key "sentinal" \(did you mean "sentinel"\?\)/,
    );
    writeFileSync(path, FILE.replace("secrets: [DATABASE_URL]", "secrets: [DATABASE_URL=postgres://x]"));
    assert.equal(run(["apply", "-f", path]).status, 1);
    assert.equal(exported(), before, "nothing applied");
  });
});

// `krane api-token`, `krane cluster-token revoke` and `krane env update` as real processes
// against a real `krane ctrl serve` process (SQLite).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { ClusterService } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { krane, kraneAsync, spawnCtrl, type CtrlProcess } from "./process.js";
import { tempDir, transportFor } from "./support.js";

describe("krane api-token, cluster-token revoke and env update against krane ctrl serve", () => {
  const dir = tempDir();
  let ctrl: CtrlProcess;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    ctrl = await spawnCtrl(["--database", join(dir.path, "ctrl.db")]);
    env = { KRANE_CTRL_URL: ctrl.url, KRANE_TOKEN: readFileSync(join(dir.path, "admin-token"), "utf8").trim() };
  });
  after(async () => {
    assert.equal(await ctrl.stop(), 0, "ctrl exits cleanly on SIGTERM");
    dir.remove();
  });

  const ok = (args: string[], as: NodeJS.ProcessEnv = env): string => {
    const r = krane(args, as);
    assert.equal(r.status, 0, `krane ${args.join(" ")}: ${r.stderr}`);
    return r.stdout;
  };
  const fails = (args: string[], stderr: RegExp, as: NodeJS.ProcessEnv = env): void => {
    const r = krane(args, as);
    assert.notEqual(r.status, 0, `krane ${args.join(" ")} should fail`);
    assert.match(r.stderr, stderr);
  };

  it("creates, lists and revokes API tokens; a revoked token stops working; the last one stays", () => {
    const token = ok(["api-token", "create", "ci-deploy"]).trim();
    assert.match(token, /^krane_user_/);
    const asCi = { ...env, KRANE_TOKEN: token };
    // The table marks the token in use.
    assert.match(ok(["api-token", "list"], asCi), /tok_\w+.*ci-deploy.*\*/);
    const listed = JSON.parse(ok(["api-token", "list", "-o", "json"])) as {
      apiTokens: { id: string; name: string; current: boolean }[];
    };
    assert.deepEqual(
      listed.apiTokens.map((t) => [t.name, t.current]),
      [
        ["admin", true],
        ["ci-deploy", false],
      ],
    );
    const ci = listed.apiTokens.find((t) => t.name === "ci-deploy");
    const admin = listed.apiTokens.find((t) => t.name === "admin");
    assert.ok(ci && admin);

    fails(["api-token", "create", "Bad_Name"], /invalid_argument: name: /);
    fails(["api-token", "create", "ci-deploy"], /already_exists: /);
    assert.match(ok(["api-token", "revoke", ci.id]), new RegExp(`revoked ${ci.id} \\(ci-deploy\\)`));
    fails(["workspace", "list"], /unauthenticated/, asCi);
    fails(["api-token", "revoke", admin.id], /failed_precondition: .*last installation token/);
    fails(["api-token", "revoke", "nope"], /invalid_argument: token_id: /);
    ok(["workspace", "list"]);
    const json = JSON.parse(ok(["api-token", "create", "ops", "-o", "json"])) as {
      apiToken: { name: string };
      token: string;
    };
    assert.equal(json.apiToken.name, "ops");
    assert.match(json.token, /^krane_user_/);
  });

  it("revokes a cluster's agent token: the agent is refused at once and the cluster is shown as revoked", async () => {
    ok(["region", "create", "eu"]);
    const token = ok(["cluster-token", "create", "eu"]).trim();
    const agent = createClient(ClusterService, transportFor(ctrl.url, token));
    await agent.heartbeat({ region: "eu", agentId: "a1" });
    assert.match(ok(["cluster-token", "revoke", "eu"]), /revoked the agent token of cluster default in region eu/);
    await assert.rejects(agent.heartbeat({ region: "eu" }), (e) => ConnectError.from(e).code === Code.Unauthenticated);
    assert.match(ok(["region", "clusters", "eu"]), /eu.*default.*revoked.*a1/);
    const clusters = JSON.parse(ok(["region", "clusters", "-o", "json"])) as {
      clusters: { name: string; tokenRevoked: boolean }[];
    };
    assert.deepEqual(
      clusters.clusters.map((c) => [c.name, c.tokenRevoked]),
      [["default", true]],
    );
    fails(["cluster-token", "revoke", "eu", "--cluster", "other"], /not_found: cluster "other" in region "eu"/);
    const json = JSON.parse(ok(["cluster-token", "revoke", "eu", "-o", "json"])) as {
      name: string;
      tokenRevoked: boolean;
    };
    assert.deepEqual([json.name, json.tokenRevoked], ["default", true]);
  });

  it("updates an environment: only what is given changes; bad input changes nothing", () => {
    ok(["region", "create", "us"]);
    ok(["workspace", "create", "acme"]);
    ok(["project", "create", "shop"]);
    ok(["env", "create", "shop/prod", "--region", "eu=2", "--sentinel-image", "registry.example.com/sentinel:1"]);
    const get = (): {
      regions: { region: string; replicas: number }[];
      sentinel?: { image: string; replicas: number };
      rollout: { strategy: string; paused: boolean; maxSurge: string };
    } => JSON.parse(ok(["env", "get", "shop/prod", "-o", "json"])) as ReturnType<typeof get>;

    const updated = JSON.parse(
      ok([
        "env",
        "update",
        "shop/prod",
        "--sentinel-image",
        "registry.example.com/sentinel:2",
        "--sentinel-replicas",
        "2",
        "--region",
        "eu=3",
        "--region",
        "us=1",
        "--strategy",
        "Recreate",
        "--paused",
        "-o",
        "json",
      ]),
    ) as ReturnType<typeof get>;
    assert.deepEqual(updated.sentinel && [updated.sentinel.image, updated.sentinel.replicas], [
      "registry.example.com/sentinel:2",
      2,
    ]);
    assert.deepEqual(updated.regions, [
      { region: "eu", replicas: 3 },
      { region: "us", replicas: 1 },
    ]);
    assert.deepEqual(
      [updated.rollout.strategy, updated.rollout.paused, updated.rollout.maxSurge],
      ["ROLLOUT_STRATEGY_RECREATE", true, "25%"],
    );

    const table = ok(["env", "update", "shop/prod", "--no-paused", "--remove-region", "us", "--no-sentinel"]);
    assert.match(table, /prod.*eu=3 .*- .*env_/s);
    assert.match(table, /Recreate.*no/s);
    const after = get();
    assert.equal(after.sentinel, undefined);
    assert.deepEqual(after.regions, [{ region: "eu", replicas: 3 }]);
    assert.equal(after.rollout.paused, false);

    fails(["env", "update", "shop/prod"], /nothing to change/);
    fails(["env", "update", "shop/prod", "--region", "eu"], /--region: expected KEY=VALUE/);
    fails(
      ["env", "update", "shop/prod", "--no-sentinel", "--sentinel-image", "registry.example.com/sentinel:3"],
      /--no-sentinel cannot be combined/,
    );
    fails(
      ["env", "update", "shop/prod", "--strategy", "Sometimes"],
      /--strategy: expected RollingUpdate, Recreate, canary or blue-green/,
    );
    fails(
      ["env", "update", "shop/prod", "--strategy", "RollingUpdate", "--max-surge", "0", "--max-unavailable", "0"],
      /invalid_argument: rollout\.max_unavailable: /,
    );
    fails(["env", "update", "shop/prod", "--sentinel-replicas", "101"], /invalid_argument: sentinel\.replicas: /);
    fails(
      ["env", "update", "shop/prod", "--region", "eu=9", "--remove-region", "mars"],
      /failed_precondition: remove_regions\[0\]: /,
    );
    fails(["env", "update", "shop/staging", "--paused"], /not_found: environment "staging"/);
    assert.deepEqual(get(), after);

    // Naming no image gives the environment krane's own sentinel back.
    const own = JSON.parse(ok(["env", "update", "shop/prod", "--sentinel-replicas", "3", "-o", "json"])) as ReturnType<
      typeof get
    >;
    assert.deepEqual(own.sentinel && [own.sentinel.image, own.sentinel.replicas], ["", 3]);
  });

  it("sets, shows and removes an autoscaling policy; bad ones are refused naming the flag or field", () => {
    ok(["env", "create", "shop/auto", "--region", "eu=2"]);
    const table = ok(["env", "update", "shop/auto", "--autoscale", "min=1,max=20,concurrency=50,cpu=80%,down=2m"]);
    assert.match(table, /AUTOSCALE.*\(environment\).*min 1, max 20, concurrency 50, cpu 80%/s);
    const zero = JSON.parse(
      ok(["env", "update", "shop/auto", "--scale-to-zero", "idle=5m,held=200", "-o", "json"]),
    ) as {
      autoscale?: {
        minReplicas?: number;
        maxReplicas: number;
        scaleDownWindowSeconds: number;
        scaleToZero?: { idleSeconds: number; maxHeldRequests: number };
      };
    };
    assert.equal(zero.autoscale?.minReplicas ?? 0, 0, "scale-to-zero brings min to 0");
    assert.equal(zero.autoscale?.maxReplicas, 20);
    assert.equal(zero.autoscale?.scaleDownWindowSeconds, 120);
    assert.deepEqual(zero.autoscale?.scaleToZero, { idleSeconds: 300, maxHeldRequests: 200, heldTimeoutSeconds: 30 });

    fails(["env", "update", "shop/auto", "--autoscale", "min=1,mx=3"], /--autoscale: unknown key "mx"/);
    fails(["env", "update", "shop/auto", "--autoscale", "min=0"], /--autoscale: min=0 needs --scale-to-zero/);
    fails(
      ["env", "update", "shop/auto", "--no-autoscale", "--scale-to-zero", "idle=5m"],
      /--no-autoscale cannot be combined/,
    );
    fails(
      ["env", "update", "shop/auto", "--autoscale", "min=30"],
      /invalid_argument: autoscale\.min_replicas: must not be above max_replicas \(20\)/,
    );
    fails(["env", "update", "shop/auto", "--autoscale", "max=5000"], /invalid_argument: autoscale\.max_replicas: /);
    fails(["env", "update", "shop/auto", "--autoscale", "concurrency=0"], /invalid_argument: autoscale\.concurrency: /);
    fails(
      ["env", "update", "shop/auto", "--autoscale", "min=2"],
      /invalid_argument: autoscale\.scale_to_zero: cannot be combined with min_replicas 2/,
    );

    // A region's own policy, and back to the environment's.
    const own = ok(["env", "update", "shop/auto", "--autoscale-region", "eu", "--autoscale", "max=7"]);
    assert.match(own, /eu[\s│]+min 0, max 7, concurrency 50/);
    fails(["env", "update", "shop/auto", "--autoscale-region", "eu"], /--autoscale-region needs --autoscale/);
    fails(["env", "update", "shop/auto", "--inherit-autoscale"], /--inherit-autoscale needs --autoscale-region/);
    // The count is the autoscaler's: a person sets the bounds.
    fails(["scale", "shop/auto", "--replicas", "3"], /failed_precondition: .*autoscales in region "eu"/);
    // `krane status`: each region's count, policy and the reason (no agent runs here).
    assert.match(
      ok(["status", "shop/auto"]),
      /AUTOSCALE[\s│]+REPLICAS[\s│]+POLICY[\s│]+DECIDED[\s│]+REASON.*eu[\s│]+2[\s│]+min 0, max 7.*never[\s│]+no decision from the region's agent yet/s,
    );
    assert.doesNotMatch(
      ok(["env", "update", "shop/auto", "--autoscale-region", "eu", "--inherit-autoscale"]),
      /\beu[\s│]+min 0, max 7/,
    );

    const off = JSON.parse(ok(["env", "update", "shop/auto", "--no-autoscale", "-o", "json"])) as {
      autoscale?: unknown;
      regions: unknown;
    };
    assert.equal(off.autoscale, undefined);
    assert.deepEqual(off.regions, [{ region: "eu", replicas: 2 }]);
  });

  it("scale-to-zero or autoscaling turned on alone keeps each region's count as the max", () => {
    interface Env {
      regions: { region: string; replicas: number }[];
      autoscale?: { minReplicas?: number; maxReplicas: number };
      regionAutoscale?: { region: string; policy?: { maxReplicas: number } }[];
    }
    const update = (...args: string[]): Env =>
      JSON.parse(ok(["env", "update", "shop/idle", ...args, "-o", "json"])) as Env;
    ok(["env", "create", "shop/idle", "--region", "eu=3", "--region", "us=1"]);
    // The README's example: the regions keep their counts; the largest is the max.
    const zero = update("--scale-to-zero", "idle=5m");
    assert.equal(zero.autoscale?.minReplicas ?? 0, 0);
    assert.equal(zero.autoscale?.maxReplicas, 3);
    assert.deepEqual(zero.regions, [
      { region: "eu", replicas: 3 },
      { region: "us", replicas: 1 },
    ]);
    // A stored policy keeps its max.
    assert.equal(update("--autoscale", "concurrency=20").autoscale?.maxReplicas, 3);
    update("--no-autoscale");
    // Autoscaling without scale-to-zero; a max given is the max.
    const auto = update("--autoscale", "concurrency=20");
    assert.deepEqual([auto.autoscale?.minReplicas, auto.autoscale?.maxReplicas], [1, 3]);
    assert.equal(update("--autoscale", "max=2").autoscale?.maxReplicas, 2);
    update("--no-autoscale");
    // A region's own policy: that region's count.
    const own = update("--autoscale-region", "us", "--autoscale", "concurrency=20");
    assert.deepEqual(
      own.regionAutoscale?.map((r) => [r.region, r.policy?.maxReplicas]),
      [["us", 1]],
    );
    assert.match(
      ok(["env", "update", "--help"]).replace(/\s+/g, " "),
      /--scale-to-zero .* min becomes 0, and a new policy's max is the region's count now/,
    );
  });

  it("env delete --wait follows the deletion to its end, also when it ends between two looks", async () => {
    ok(["env", "create", "shop/gone", "--region", "eu=1"]);
    // No agent runs eu, so the deletion waits for it; while the command waits, an operator
    // forces the region and the deletion ends between two of its looks: the environment is then
    // gone (not_found), which is the end it waited for, not an error.
    const waiting = kraneAsync(["env", "delete", "shop/gone", "--yes", "--wait", "--timeout", "60"], env);
    await new Promise((r) => setTimeout(r, 2_500));
    ok(["env", "delete", "shop/gone", "--yes", "--force"]);
    const r = await waiting;
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^environment \S+ deleted$/m);
    fails(["env", "get", "shop/gone"], /not found/);
  });

  // Last: the workspaces it makes would take away the other tests' default workspace.
  it("a workspace token: created with --workspace, listed with its scope, its workspace the default", () => {
    ok(["workspace", "create", "tenant-a"]);
    ok(["workspace", "create", "tenant-b"]);
    ok(["project", "create", "shop", "--workspace", "tenant-a"]);
    const token = ok(["api-token", "create", "ta-ci", "--workspace", "tenant-a"]).trim();
    const asTenant = { ...env, KRANE_TOKEN: token };
    assert.match(ok(["api-token", "list"]), /ta-ci\s*│\s*workspace tenant-a\s/);
    assert.match(ok(["api-token", "list"]), /admin\s*│\s*installation\s/);
    // Two workspaces exist, but the token's own is the only one it sees: commands need no --workspace.
    assert.match(ok(["project", "list"], asTenant), /shop/);
    assert.deepEqual(
      (
        JSON.parse(ok(["workspace", "list", "-o", "json"], asTenant)) as { workspaces: { slug: string }[] }
      ).workspaces.map((w) => w.slug),
      ["tenant-a"],
    );
    fails(["project", "list", "--workspace", "tenant-b"], /not_found: workspace "tenant-b" not found/, asTenant);
    fails(["region", "list"], /permission_denied: .*installation API token/, asTenant);
    // It makes tokens of its own workspace only; KRANE_WORKSPACE does not choose a token's scope.
    const made = JSON.parse(
      ok(["api-token", "create", "ta-deploy", "-o", "json"], { ...asTenant, KRANE_WORKSPACE: "tenant-b" }),
    ) as { apiToken: { workspace: string } };
    assert.equal(made.apiToken.workspace, "tenant-a");
    fails(["api-token", "create", "x", "--workspace", "tenant-b"], /not_found: workspace "tenant-b"/, asTenant);
    assert.deepEqual(
      (JSON.parse(ok(["api-token", "list", "-o", "json"], asTenant)) as { apiTokens: { name: string }[] }).apiTokens
        .map((t) => t.name)
        .sort(),
      ["ta-ci", "ta-deploy"],
    );
    // Its workspace's audit log names the scope each token acted with, and a workspace token's owner
    // (made with --workspace by the installation: a service account of its own name).
    const audit = ok(["audit", "--method", "CreateApiToken"], asTenant);
    assert.match(audit, /ta-ci \(tok_\w+, workspace, service account ta-ci\)/);
    assert.match(audit, /admin \(tok_\w+, installation\)/);
  });
});

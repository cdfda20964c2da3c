// The real `krane` CLI against a real `krane ctrl serve` process (SQLite).
import assert from "node:assert/strict";
import { existsSync, readFileSync, statSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { join } from "node:path";
import { renderEnvironmentStatus } from "../../../src/cli/status-view.js";
import type { GetEnvironmentStatusResponseJson } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import type { InstanceEventJson } from "../../../src/gen/krane/ctrl/v1/events_pb.js";
import type { RolloutStatusJson } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { krane, spawnCtrl, type CtrlProcess } from "./process.js";
import { tempDir } from "./support.js";

describe("krane CLI against krane ctrl serve", () => {
  const dir = tempDir();
  let ctrl: CtrlProcess;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    // No admin token given: ctrl bootstraps one into a 0600 file next to the database.
    ctrl = await spawnCtrl(["--database", join(dir.path, "ctrl.db")]);
    const tokenFile = join(dir.path, "admin-token");
    assert.ok(existsSync(tokenFile));
    assert.equal(statSync(tokenFile).mode & 0o777, 0o600);
    env = { KRANE_CTRL_URL: ctrl.url, KRANE_TOKEN: readFileSync(tokenFile, "utf8").trim() };
  });
  after(async () => {
    assert.equal(await ctrl.stop(), 0, "ctrl exits cleanly on SIGTERM");
    dir.remove();
  });

  it("creates, deploys, lists and shows status, in tables and JSON", () => {
    const ok = (args: string[]): string => {
      const r = krane(args, env);
      assert.equal(r.status, 0, `krane ${args.join(" ")}: ${r.stderr}`);
      return r.stdout;
    };
    ok(["region", "create", "eu-west"]);
    ok(["workspace", "create", "acme"]);
    assert.match(ok(["workspace", "list"]), /acme.*ws-acme/);
    ok(["project", "create", "shop"]);
    const envOut = ok(["env", "create", "shop/prod", "--region", "eu-west=2", "--strategy", "Recreate", "-o", "json"]);
    const envJson = JSON.parse(envOut) as {
      slug: string;
      regions: { region: string; replicas: number }[];
      rollout: { strategy: string };
    };
    assert.equal(envJson.slug, "prod");
    assert.deepEqual(envJson.regions, [{ region: "eu-west", replicas: 2 }]);
    assert.equal(envJson.rollout.strategy, "ROLLOUT_STRATEGY_RECREATE");

    const token = ok(["cluster-token", "create", "eu-west"]).trim();
    assert.match(token, /^krane_agent_/);

    const dep = JSON.parse(
      ok([
        "deploy",
        "shop/prod",
        "--image",
        "registry.example.com/shop:2",
        "--replicas",
        "3",
        "--env",
        "A=1",
        "--env",
        "B=x=y",
        "--port",
        "3000",
        "--arg",
        "serve",
        "-o",
        "json",
      ]),
    ) as {
      id: string;
      revision: string;
      port: number;
      env: { name: string; value: string }[];
      regions: { region: string; replicas: number }[];
    };
    assert.match(dep.id, /^dep_/);
    assert.equal(dep.revision, "1");
    assert.equal(dep.port, 3000);
    assert.deepEqual(dep.env, [
      { name: "A", value: "1" },
      { name: "B", value: "x=y" },
    ]);
    assert.deepEqual(dep.regions, [{ region: "eu-west", replicas: 3 }]);

    const table = ok(["deployments", "list", "shop/prod"]);
    assert.match(table, new RegExp(`${dep.id}.*registry\\.example\\.com/shop:2.*eu-west=3`));
    const listed = JSON.parse(ok(["deployments", "list", "-o", "json"])) as { deployments: { id: string }[] };
    assert.deepEqual(
      listed.deployments.map((d) => d.id),
      [dep.id],
    );
    assert.match(ok(["deployments", "get", dep.id]), /3000.*250m.*256Mi/s);

    const status = JSON.parse(ok(["status", "shop/prod", "-o", "json"])) as {
      deployments: { deployment: { id: string }; regions: { region: string; desiredReplicas: number }[] }[];
      clusters: { region: string }[];
      rollout: { regions: { region: string; replicas: number; targetDeploymentId: string }[] };
    };
    assert.deepEqual(
      status.rollout.regions.map((r) => [r.region, r.replicas, r.targetDeploymentId]),
      [["eu-west", 3, dep.id]],
    );
    assert.equal(status.deployments[0]?.deployment.id, dep.id);
    assert.deepEqual(
      status.deployments[0]?.regions.map((r) => [r.region, r.desiredReplicas]),
      [["eu-west", 3]],
    );
    assert.equal(status.clusters[0]?.region, "eu-west");
    const statusText = ok(["status", "shop/prod"]);
    assert.match(statusText, new RegExp(`DEPLOYMENT.*REGION.*${dep.id}.*eu-west`, "s"));
    // The table is read with the light JSON client, `-o json` with the Connect client (every field,
    // defaults included): both render to the same table, but for how long ago things happened.
    const full = JSON.parse(ok(["status", "shop/prod", "-o", "json"])) as GetEnvironmentStatusResponseJson & {
      rollout?: RolloutStatusJson;
      lastInstanceEvents: InstanceEventJson[];
    };
    const noAgo = (text: string) => text.replace(/\d+[sm] ago/g, "… ago");
    assert.equal(
      noAgo(statusText),
      noAgo(`${renderEnvironmentStatus(full, Date.now(), full.rollout, full.lastInstanceEvents)}\n`),
    );
    // The rollout's event list is the last thing printed, and its last line ends too.
    assert.match(statusText, /\n {2}\d{4}-\d{2}-\d{2}T\S+ (Normal|Warning) [^\n]+\n$/);

    ok(["deployments", "delete", dep.id]);
    assert.deepEqual(
      (JSON.parse(ok(["deployments", "list", "-o", "json"])) as { deployments: unknown[] }).deployments,
      [],
    );
  });

  it("deploy --image changes only the image: every other setting is carried over unless given", () => {
    const ok = (args: string[]): string => {
      const r = krane(args, env);
      assert.equal(r.status, 0, `krane ${args.join(" ")}: ${r.stderr}`);
      return r.stdout;
    };
    interface Dep {
      revision: string;
      image: string;
      port: number;
      protocol: string;
      cpuMillicores: string;
      memoryMib: string;
      command?: string[];
      args?: string[];
      buildId?: string;
      env?: { name: string; value: string }[];
      healthCheck?: { path: string };
    }
    const deploy = (...args: string[]): Dep =>
      JSON.parse(ok(["deploy", "hello/production", ...args, "-o", "json"])) as Dep;
    const settings = (d: Dep) => ({
      port: d.port,
      protocol: d.protocol,
      cpu: d.cpuMillicores,
      memory: d.memoryMib,
      command: d.command ?? [],
      args: d.args ?? [],
      env: (d.env ?? []).map((e) => `${e.name}=${e.value}`),
      health: d.healthCheck?.path,
    });
    ok(["project", "create", "hello"]);
    ok(["env", "create", "hello/production", "--region", "eu-west=3"]);
    const v1 = deploy(
      "--image",
      "krane.local/hello:v1",
      "--health-path",
      "/healthz",
      "--env",
      "GREETING=hi",
      "--env",
      "MODE=prod",
      "--cpu",
      "500",
      "--memory",
      "512",
      "--port",
      "3000",
      "--protocol",
      "h2c",
      "--command",
      "node",
      "--arg",
      "server.js",
      "--build-id",
      "b-1",
    );
    const v1Settings = {
      port: 3000,
      protocol: "h2c",
      cpu: "500",
      memory: "512",
      command: ["node"],
      args: ["server.js"],
      env: ["GREETING=hi", "MODE=prod"],
      health: "/healthz",
    };
    assert.deepEqual(settings(v1), v1Settings);
    // The README's own example: only the image changes (the build id belongs to the image).
    const v2 = deploy("--image", "krane.local/hello:v2");
    assert.equal(v2.image, "krane.local/hello:v2");
    assert.deepEqual(settings(v2), v1Settings);
    assert.equal(v2.buildId ?? "", "");
    // Given settings win; --env adds or replaces by name, --env-unset drops.
    const v3 = deploy(
      "--image",
      "krane.local/hello:v3",
      "--env",
      "MODE=canary",
      "--env-unset",
      "GREETING",
      "--cpu",
      "750",
    );
    assert.deepEqual(settings(v3), { ...v1Settings, cpu: "750", env: ["MODE=canary"] });
    // After a rollback, the revision gone back to is the one carried from (as `rollout restart` copies it).
    ok(["rollout", "undo", "hello/production", "--to-revision", "2"]);
    const v4 = deploy("--image", "krane.local/hello:v4");
    assert.deepEqual(settings(v4), v1Settings);
    // --no-inherit starts from the defaults.
    const fresh = deploy("--image", "krane.local/hello:v5", "--no-inherit");
    assert.deepEqual(settings(fresh), {
      port: 8080,
      protocol: "http1",
      cpu: "250",
      memory: "256",
      command: [],
      args: [],
      env: [],
      health: undefined,
    });
    const both = krane(["deploy", "hello/production", "--image", "x:1", "--no-inherit", "--env-unset", "A"], env);
    assert.equal(both.status, 1);
    assert.match(both.stderr, /--env-unset .* --no-inherit/);
    assert.match(
      krane(["deploy", "--help"], env).stdout,
      /Carried over from the environment's current revision[\s\S]*--no-inherit/,
    );
  });

  it("deploy's table says what its replica count is (desired now) and where the rollout goes", () => {
    const ok = (args: string[]): string => {
      const r = krane(args, env);
      assert.equal(r.status, 0, `krane ${args.join(" ")}: ${r.stderr}`);
      return r.stdout;
    };
    // hello/production (above) runs 3 replicas in eu-west; a new revision starts below that.
    const table = ok(["deploy", "hello/production", "--image", "krane.local/hello:v6", "--health-path", "/ready"]);
    assert.doesNotMatch(table, /REGIONS/);
    assert.match(table, /DESIRED NOW/);
    assert.match(table, /HEALTH[\s\S]*GET \/ready/);
    assert.match(table, /revision 6 rolls out to eu-west=3 replicas \(desired now: (eu-west=\d|none yet)\)/);
  });

  it("fails with the server's message and a non-zero exit", () => {
    const bad = krane(["deploy", "shop/prod", "--image", "Not A Valid Image"], env);
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr, /invalid_argument: image: /);
    const missing = krane(["env", "get", "shop/staging"], env);
    assert.notEqual(missing.status, 0);
    assert.match(missing.stderr, /not_found: environment "staging"/);
    const unauth = krane(["workspace", "list"], { ...env, KRANE_TOKEN: "krane_user_wrong" });
    assert.notEqual(unauth.status, 0);
    assert.match(unauth.stderr, /unauthenticated/);
    // `krane status` reads with its own JSON client: the same errors, the same way.
    const noEnv = krane(["status", "shop/staging"], env);
    assert.equal(noEnv.status, 1);
    assert.match(noEnv.stderr, /^krane: not_found: environment "staging" in project "shop" not found$/m);
    const statusUnauth = krane(["status", "shop/prod"], { ...env, KRANE_TOKEN: "krane_user_wrong" });
    assert.equal(statusUnauth.status, 1);
    assert.match(statusUnauth.stderr, /^krane: unauthenticated: /m);
    const badTarget = krane(["status", "shop"], env);
    assert.equal(badTarget.status, 1);
    assert.match(badTarget.stderr, /expected <project>\/<env>, got "shop"/);
  });

  it("exposes an environment: endpoints and domains, bad input refused naming the field", () => {
    const ok = (args: string[]): string => {
      const r = krane(args, env);
      assert.equal(r.status, 0, `krane ${args.join(" ")}: ${r.stderr}`);
      return r.stdout;
    };
    const pub = JSON.parse(
      ok([
        "endpoint",
        "set",
        "shop/prod",
        "--visibility",
        "public",
        "--jwks-url",
        "https://idp.example.com/jwks.json",
        "--operation",
        "GET /orders/{id}=orders:read",
        "-o",
        "json",
      ]),
    ) as {
      visibility: string;
      url: string;
      auth?: { operations: { method: string; path: string; scopes: string[] }[]; defaultAction: string };
    };
    assert.equal(pub.visibility, "public");
    assert.match(pub.url, /prod-shop-acme\./);
    assert.deepEqual(pub.auth?.operations, [{ method: "GET", path: "/orders/{id}", scopes: ["orders:read"] }]);
    ok(["endpoint", "set", "shop/prod", "--visibility", "organization", "--path-routing"]);
    const list = ok(["endpoint", "list", "shop/prod"]);
    assert.match(list, /public.*jwt/);
    assert.match(list, /organization.*\/shop\/prod/);

    const dom = JSON.parse(ok(["domain", "add", "shop/prod", "www.shop.example", "-o", "json"])) as {
      hostname: string;
      state: string;
      txtName: string;
      txtValue: string;
    };
    assert.equal(dom.hostname, "www.shop.example");
    assert.equal(dom.txtName, "_krane-challenge.www.shop.example");
    assert.ok(dom.txtValue.length > 20);
    assert.match(ok(["domain", "list", "shop/prod"]), /www\.shop\.example/);

    const refuse = (args: string[], message: RegExp): void => {
      const r = krane(args, env);
      assert.notEqual(r.status, 0, `krane ${args.join(" ")} succeeded`);
      assert.match(r.stderr, message);
    };
    refuse(["domain", "add", "shop/prod", "*.shop.example"], /invalid_argument: hostname: /);
    refuse(["domain", "add", "shop/prod", "bücher.example"], /invalid_argument: hostname: .*xn--bcher-kva\.example/);
    // Adding it again to the same environment is a retry (the same token); another environment's claim is refused.
    assert.equal(
      (JSON.parse(ok(["domain", "add", "shop/prod", "www.shop.example", "-o", "json"])) as { txtValue: string })
        .txtValue,
      dom.txtValue,
    );
    ok(["env", "create", "shop/staging", "--region", "eu-west=1"]);
    refuse(
      ["domain", "add", "shop/staging", "www.shop.example"],
      /already_exists: .*www\.shop\.example.*claimed by another environment/,
    );
    refuse(["endpoint", "set", "shop/prod", "--visibility", "everyone"], /invalid_argument: visibility: /);
    refuse(
      ["endpoint", "set", "shop/prod", "--jwks-url", "https://idp.example.com/jwks", "--operation", "GET /x=bad scope"],
      /scope/,
    );

    ok(["domain", "remove", "shop/prod", "www.shop.example"]);
    ok(["endpoint", "delete", "shop/prod", "--visibility", "organization"]);
    const after = JSON.parse(ok(["endpoint", "list", "shop/prod", "-o", "json"])) as {
      endpoints: { visibility: string }[];
    };
    assert.deepEqual(
      after.endpoints.map((e) => e.visibility),
      ["public"],
    );
    assert.equal(
      (JSON.parse(ok(["domain", "list", "shop/prod", "-o", "json"])) as { domains?: unknown[] }).domains?.length ?? 0,
      0,
    );
  });
});

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

// Exposure in ctrl over the real API (Connect over HTTP/2, SQLite): endpoints with generated
// hostnames and path prefixes, bad input refused naming the field with nothing applied, custom
// domains verified through a real DNS server on loopback (dns2) by the background loop and on
// request, one environment per domain, the gateway objects and the sentinels' auth section in
// each region's desired state, and their removal.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { fromBinary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import {
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { ApplyGatewaySchema, ApplySentinelSchema } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { DomainService, EndpointService } from "../../../src/gen/krane/ctrl/v1/exposure_pb.js";
import { eventually } from "../../support/cluster.js";
import { startTestDns, type TestDns } from "../../support/dns.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const JWKS = "https://idp.example.com/.well-known/jwks.json";

describe("exposure in ctrl", () => {
  const dir = tempDir();
  let ctrl: TestCtrl;
  let dns: TestDns;
  const ref = { workspace: "acme", project: "shop", environment: "production" };

  before(async () => {
    dns = await startTestDns();
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      exposure: { publicApex: "apps.example.net", organizationApex: "apps.internal.example.net" },
      domains: { dnsServers: [dns.server], sweepIntervalMs: 100, policy: { pendingFirstMs: 100, pendingMaxMs: 200 } },
    });
    const t = ctrl.adminToken;
    await ctrl.client(RegionService, t).createRegion({ name: "eu" });
    await ctrl.client(RegionService, t).createRegion({ name: "us" });
    await ctrl.client(WorkspaceService, t).createWorkspace({ slug: "acme" });
    await ctrl.client(ProjectService, t).createProject({ workspace: "acme", slug: "shop" });
    const sentinel = { image: "ghcr.io/krane/sentinel:1", replicas: 1, cpuMillicores: 100n, memoryMib: 64n };
    await ctrl.client(EnvironmentService, t).createEnvironment({
      ...ref,
      slug: "production",
      regions: [
        { region: "eu", replicas: 1 },
        { region: "us", replicas: 1 },
      ],
      sentinel,
    });
    await ctrl
      .client(EnvironmentService, t)
      .createEnvironment({ ...ref, slug: "staging", regions: [{ region: "eu", replicas: 1 }], sentinel });
  });
  after(async () => {
    await ctrl.close();
    await dns.close();
    dir.remove();
  });

  const endpoints = () => ctrl.client(EndpointService, ctrl.adminToken);
  const domains = () => ctrl.client(DomainService, ctrl.adminToken);

  async function desiredGateway(region: string, envId: string) {
    const row = await ctrl.store.db
      .selectFrom("desired_objects")
      .select("payload")
      .where("kind", "=", "gateway")
      .where("region", "=", region)
      .where("object_id", "=", envId)
      .executeTakeFirst();
    return row ? fromBinary(ApplyGatewaySchema, row.payload) : undefined;
  }
  async function desiredSentinels(envId: string) {
    const rows = await ctrl.store.db
      .selectFrom("desired_objects")
      .select("payload")
      .where("kind", "=", "sentinel")
      .execute();
    return rows.map((r) => fromBinary(ApplySentinelSchema, r.payload)).filter((s) => s.environmentId === envId);
  }
  async function gatewayRows(): Promise<number> {
    const r = await ctrl.store.db
      .selectFrom("desired_objects")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("kind", "=", "gateway")
      .executeTakeFirstOrThrow();
    return Number(r.n);
  }

  it("refuses bad input naming the field, and applies nothing", async () => {
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ visibility: "everyone" }, /^visibility:/],
      [{ visibility: "public", pathPrefix: "/x" }, /^path_routing:/],
      [{ visibility: "public", pathRouting: true, pathPrefix: "/a/../b" }, /^path_prefix:/],
      [{ visibility: "public", pathRouting: true, pathPrefix: "x" }, /^path_prefix:/],
      [{ visibility: "public", auth: { jwksUrl: "http://idp.example.com/jwks" } }, /^auth\.jwks_url: must be https/],
      [{ visibility: "public", auth: { jwksUrl: "not a url" } }, /^auth\.jwks_url/],
      [
        {
          visibility: "public",
          auth: { jwksUrl: JWKS, operations: [{ method: "GET", path: "/x", scopes: ["has space"] }] },
        },
        /^auth\.operations\[0\]\.scopes\[0\]/,
      ],
      [
        { visibility: "public", auth: { jwksUrl: JWKS, operations: [{ method: "FETCH", path: "/x", scopes: [] }] } },
        /^auth\.operations\[0\]\.method/,
      ],
      [
        { visibility: "public", auth: { jwksUrl: JWKS, operations: [{ method: "GET", path: "/x/{", scopes: [] }] } },
        /^auth\.operations\[0\]\.path/,
      ],
      [{ visibility: "public", auth: { jwksUrl: JWKS, defaultAction: "maybe" } }, /^auth\.default_action/],
    ];
    for (const [req, msg] of bad)
      await expectCode(endpoints().setEndpoint({ ...ref, ...req }), Code.InvalidArgument, msg);
    for (const [hostname, msg] of [
      ["*.example.com", /^hostname: must not be a wildcard/],
      ["bücher.example", /^hostname: must be ASCII: give the internationalized name as xn--bcher-kva\.example/],
      ["under_score.example.com", /^hostname: label "under_score"/],
      ["localhost", /^hostname: must be a fully qualified hostname/],
      ["10.0.0.1", /^hostname: must be a hostname, not an IP address/],
      ["shop.apps.example.net", /^hostname: is under the platform's own domain/],
    ] as const) {
      await expectCode(domains().addDomain({ ...ref, hostname }), Code.InvalidArgument, msg);
    }
    assert.equal(await gatewayRows(), 0, "nothing applied");
    assert.equal((await endpoints().listEndpoints(ref)).endpoints.length, 0);
  });

  it("an endpoint becomes a gateway object in every region, with the sentinels' auth section", async () => {
    const { endpoint } = await endpoints().setEndpoint({
      ...ref,
      visibility: "public",
      auth: {
        jwksUrl: JWKS,
        issuer: "https://idp.example.com",
        audiences: ["shop"],
        operations: [{ method: "get", path: "/books/{id}", scopes: ["books:read"] }],
      },
    });
    assert.ok(endpoint);
    assert.equal(endpoint.hostname, "production-shop-acme.apps.example.net");
    assert.equal(endpoint.url, "https://production-shop-acme.apps.example.net/");
    assert.equal(endpoint.auth?.defaultAction, "deny");
    // Setting the same again is idempotent.
    const again = await endpoints().setEndpoint({
      ...ref,
      visibility: "public",
      auth: {
        jwksUrl: JWKS,
        issuer: "https://idp.example.com",
        audiences: ["shop"],
        operations: [{ method: "GET", path: "/books/{id}", scopes: ["books:read"] }],
      },
    });
    assert.equal(again.endpoint?.id, endpoint.id);
    for (const region of ["eu", "us"]) {
      const g = await desiredGateway(region, endpoint.environmentId);
      assert.ok(g, region);
      assert.equal(g.region, region);
      assert.deepEqual(
        g.routes.map((r) => [r.name, r.visibility, r.hostnames, r.pathPrefix]),
        [["public", "public", ["production-shop-acme.apps.example.net"], "/"]],
      );
      assert.equal(g.routes[0]?.auth?.jwt?.jwksUrl, JWKS);
    }
    const sentinels = await desiredSentinels(endpoint.environmentId);
    assert.equal(sentinels.length, 2);
    for (const s of sentinels) {
      assert.equal(s.routing?.auth?.unmatchedHosts, "deny");
      assert.deepEqual(
        s.routing?.auth?.rules.map((r) => r.hosts),
        [["production-shop-acme.apps.example.net"]],
      );
      assert.deepEqual(
        s.routing?.auth?.rules[0]?.operations.map((o) => [o.method, o.path, o.scopes]),
        [["GET", "/books/{id}", ["books:read"]]],
      );
    }
  });

  it("path routing on the workspace's shared host, with overlapping prefixes refused", async () => {
    const { endpoint } = await endpoints().setEndpoint({ ...ref, visibility: "organization", pathRouting: true });
    assert.equal(endpoint?.hostname, "acme.apps.internal.example.net");
    assert.equal(endpoint?.pathPrefix, "/shop/production");
    await expectCode(
      endpoints().setEndpoint({
        ...ref,
        environment: "staging",
        visibility: "organization",
        pathRouting: true,
        pathPrefix: "/shop",
      }),
      Code.InvalidArgument,
      /^path_prefix: \/shop overlaps \/shop\/production/,
    );
    const staging = await endpoints().setEndpoint({
      ...ref,
      environment: "staging",
      visibility: "organization",
      pathRouting: true,
    });
    assert.equal(staging.endpoint?.pathPrefix, "/shop/staging");
    await endpoints().deleteEndpoint({ ...ref, environment: "staging", visibility: "organization" });
  });

  it("a custom domain routes only once its TXT record is verified; a second claim is refused", async () => {
    const { domain } = await domains().addDomain({ ...ref, hostname: "WWW.Shop-Example.com." });
    assert.ok(domain);
    assert.equal(domain.hostname, "www.shop-example.com");
    assert.equal(domain.state, "pending");
    assert.equal(domain.txtName, "_krane-challenge.www.shop-example.com");
    await expectCode(
      domains().addDomain({ ...ref, environment: "staging", hostname: "www.shop-example.com" }),
      Code.AlreadyExists,
      /claimed by another environment/,
    );
    // The loop checks on its own; without the record it stays pending with a clear error.
    const pending = await eventually("a failed check", async () => {
      const d = (await domains().listDomains(ref)).domains[0];
      return d && d.lastCheckedAtUnixMs > 0n ? d : undefined;
    });
    assert.equal(pending.state, "pending");
    assert.match(pending.lastError, /no TXT record at _krane-challenge\.www\.shop-example\.com/);
    let g = await desiredGateway("eu", domain.environmentId);
    assert.deepEqual(
      g?.routes.map((r) => r.name).filter((n) => n.startsWith("domain-")),
      [],
      "not routed before verification",
    );

    dns.txt.set("_krane-challenge.www.shop-example.com", ["unrelated", domain.txtValue]);
    const verified = await eventually("verified by the loop", async () => {
      const d = (await domains().listDomains(ref)).domains[0];
      return d?.state === "verified" ? d : undefined;
    });
    assert.equal(verified.lastError, "");
    g = await desiredGateway("eu", domain.environmentId);
    const route = g?.routes.find((r) => r.hostnames.includes("www.shop-example.com"));
    assert.ok(route, "routed after verification");
    assert.equal(route.certificate, true);
    assert.equal(route.auth?.jwt?.jwksUrl, JWKS, "a domain takes the public endpoint's authentication");
    const status = await ctrl.client(StatusService, ctrl.adminToken).getEnvironmentStatus(ref);
    assert.deepEqual(
      status.domains.map((d) => [d.domain?.hostname, d.domain?.state, d.regions.map((r) => [r.region, r.readiness])]),
      [
        [
          "www.shop-example.com",
          "verified",
          [
            ["eu", "unknown"],
            ["us", "unknown"],
          ],
        ],
      ],
    );
    assert.deepEqual(
      status.endpoints.map((e) => e.endpoint?.visibility),
      ["organization", "public"],
    );
  });

  it("verify on request, and removal takes the routes out of every region", async () => {
    await domains().addDomain({ ...ref, hostname: "api.shop-example.com" });
    const checked = await domains().verifyDomain({ ...ref, hostname: "api.shop-example.com" });
    assert.equal(checked.domain?.state, "pending");
    assert.ok((checked.domain?.lastCheckedAtUnixMs ?? 0n) > 0n);
    await domains().removeDomain({ ...ref, hostname: "api.shop-example.com" });
    await domains().removeDomain({ ...ref, hostname: "www.shop-example.com" });
    await endpoints().deleteEndpoint({ ...ref, visibility: "organization" });
    const envId = (await endpoints().listEndpoints(ref)).endpoints[0]?.environmentId ?? "";
    const g = await desiredGateway("us", envId);
    assert.deepEqual(
      g?.routes.map((r) => r.name),
      ["public"],
    );
    await endpoints().deleteEndpoint({ ...ref, visibility: "public" });
    assert.equal(await gatewayRows(), 0, "nothing exposed: the gateway objects are deleted in every region");
    const deletes = await ctrl.store.db
      .selectFrom("outbox")
      .select(["region"])
      .where("kind", "=", "gateway")
      .where("op", "=", "delete")
      .where("object_id", "=", envId)
      .execute();
    assert.deepEqual(deletes.map((d) => d.region).sort(), ["eu", "us"]);
    for (const s of await desiredSentinels(envId))
      assert.equal(s.routing?.auth, undefined, "no auth left in the sentinels' policy");
    await expectCode(endpoints().deleteEndpoint({ ...ref, visibility: "public" }), Code.NotFound);
  });
});

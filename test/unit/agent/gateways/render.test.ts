// The gateway kind's pure parts: rendering (HTTPRoutes with PathPrefix and rewrite, the
// ReferenceGrants, Certificates; never an Envoy Gateway SecurityPolicy), validation, and the status
// read from route and certificate conditions.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { ApplyGatewaySchema, type ApplyGateway } from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import {
  certificateHostnames,
  certificateSecretName,
  httpsGatewayName,
  MAX_LISTENERS,
  renderRoutes,
  renderStatic,
} from "../../../../src/agent/gateways/render.js";
import { gatewayFingerprint, observeGateway } from "../../../../src/agent/gateways/status.js";
import { validateApplyGateway } from "../../../../src/agent/gateways/validate.js";
import type { GatewaySettings } from "../../../../src/agent/gateways/settings.js";
import type { KubeObject } from "../../../../src/kube/object.js";

const settings: GatewaySettings = {
  public: { namespace: "platform", name: "external", sectionName: "" },
  organization: { namespace: "platform", name: "internal", sectionName: "http" },
  certificateIssuer: { kind: "ClusterIssuer", name: "le" },
  removeSecurityPolicies: true,
};

function gateway(extra: Partial<Omit<ApplyGateway, "$typeName">> = {}): ApplyGateway {
  return create(ApplyGatewaySchema, {
    workspaceId: "ws_1",
    projectId: "prj_1",
    environmentId: "env_1",
    gatewayId: "env_1",
    region: "eu",
    k8sNamespace: "ws-acme",
    k8sName: "gw-shop-production-abc123",
    routes: [
      {
        name: "public",
        visibility: "public",
        hostnames: ["p.apps.example"],
        pathPrefix: "/",
        auth: {
          hosts: ["p.apps.example"],
          jwt: { jwksUrl: "https://idp.example/jwks", issuer: "https://idp.example", audiences: [] },
          operations: [
            { method: "GET", path: "/books/{id}", scopes: ["books:read"] },
            { method: "*", path: "/admin", scopes: ["admin"] },
          ],
          defaultAction: "allow",
        },
      },
      {
        name: "organization",
        visibility: "organization",
        hostnames: ["acme.internal.example"],
        pathPrefix: "/shop/production",
        auth: { hosts: ["acme.internal.example"], defaultAction: "allow" },
      },
      {
        name: "domain-0123456789",
        visibility: "public",
        hostnames: ["www.shop.example"],
        pathPrefix: "/",
        certificate: true,
      },
    ],
    ...extra,
  } as never);
}

describe("rendering", () => {
  it("an HTTPRoute per route on its visibility's Gateway, PathPrefix only, rewritten under a prefix", () => {
    const g = gateway();
    const objs = renderRoutes(g, "eu", settings, "snt-shop-production-x");
    assert.deepEqual(
      objs.map((o) => `${o.kind}/${o.metadata.namespace}/${o.metadata.name}`),
      [
        "HTTPRoute/ws-acme/gw-shop-production-abc123-public",
        "HTTPRoute/ws-acme/gw-shop-production-abc123-organization",
        "HTTPRoute/ws-acme/gw-shop-production-abc123-domain-0123456789",
        "ReferenceGrant/sentinel/gw-shop-production-abc123-to-sentinel",
      ],
    );
    const org = objs[1] as KubeObject;
    assert.deepEqual(org.spec, {
      parentRefs: [
        {
          group: "gateway.networking.k8s.io",
          kind: "Gateway",
          namespace: "platform",
          name: "internal",
          sectionName: "http",
        },
      ],
      hostnames: ["acme.internal.example"],
      rules: [
        {
          matches: [{ path: { type: "PathPrefix", value: "/shop/production" } }],
          backendRefs: [
            { group: "", kind: "Service", namespace: "sentinel", name: "snt-shop-production-x", port: 8040, weight: 1 },
          ],
          filters: [
            { type: "URLRewrite", urlRewrite: { path: { type: "ReplacePrefixMatch", replacePrefixMatch: "/" } } },
          ],
        },
        // gRPC calls: the sentinel Service's h2c port, a rule per content-type (one match each).
        ...["application/grpc", "application/grpc+proto"].map((value) => ({
          matches: [
            {
              path: { type: "PathPrefix", value: "/shop/production" },
              headers: [{ type: "Exact", name: "content-type", value }],
            },
          ],
          backendRefs: [
            { group: "", kind: "Service", namespace: "sentinel", name: "snt-shop-production-x", port: 8042, weight: 1 },
          ],
          filters: [
            { type: "URLRewrite", urlRewrite: { path: { type: "ReplacePrefixMatch", replacePrefixMatch: "/" } } },
          ],
        })),
      ],
    });
    assert.equal(JSON.stringify(objs).includes("RegularExpression"), false, "never a regular expression match");
    for (const o of objs) assert.equal(o.metadata.labels?.["krane.dev/gateway-id"], "env_1");
  });

  it("no sentinel Service or no Gateway for a visibility: those routes are not rendered", () => {
    assert.deepEqual(renderRoutes(gateway(), "eu", settings, undefined), []);
    const onlyPublic = renderRoutes(gateway(), "eu", { public: settings.public }, "snt");
    assert.deepEqual(
      onlyPublic.filter((o) => o.kind === "HTTPRoute").map((o) => o.metadata.name?.split("-").pop()),
      ["public", "0123456789"],
    );
  });

  it("certificates for custom domains (all hostnames on request) and a grant for the Gateways' namespace", () => {
    const g = gateway();
    assert.deepEqual(certificateHostnames(g, settings), ["www.shop.example"]);
    assert.deepEqual(certificateHostnames(g, { ...settings, endpointCertificates: true }), [
      "acme.internal.example",
      "p.apps.example",
      "www.shop.example",
    ]);
    assert.deepEqual(certificateHostnames(g, { public: settings.public }), [], "no issuer, no certificates");
    const objs = renderStatic(g, "eu", settings);
    const kinds = objs.map((o) => o.kind);
    assert.deepEqual(kinds, ["Certificate", "ReferenceGrant"]);
    const grant = objs[1] as KubeObject;
    assert.deepEqual((grant.spec as { from: unknown }).from, [
      { group: "gateway.networking.k8s.io", kind: "Gateway", namespace: "platform" },
    ]);
  });

  it("with HTTPS: the environment's Gateway, a TLS listener per public hostname with a Certificate, routes attached to it", () => {
    const g = gateway();
    const https: GatewaySettings = { ...settings, https: { className: "edge", port: 443 } };
    const gw = renderStatic(g, "eu", https).find((o) => o.kind === "Gateway");
    assert.ok(gw, "a Gateway is rendered");
    assert.equal(gw.metadata.namespace, "ws-acme", "next to the Secrets: no grant needed");
    assert.equal(gw.metadata.name, httpsGatewayName(g));
    const spec = gw.spec as { gatewayClassName: string; listeners: Record<string, unknown>[] };
    assert.equal(spec.gatewayClassName, "edge");
    assert.deepEqual(spec.listeners, [
      {
        name: spec.listeners[0]?.name,
        hostname: "www.shop.example",
        port: 443,
        protocol: "HTTPS",
        tls: {
          mode: "Terminate",
          certificateRefs: [{ group: "", kind: "Secret", name: certificateSecretName(g, "www.shop.example") }],
        },
        allowedRoutes: { namespaces: { from: "Same" } },
      },
    ]);
    const parents = (name: string, s: GatewaySettings) =>
      (
        renderRoutes(g, "eu", s, "snt").find((o) => o.metadata.name?.endsWith(name))?.spec as {
          parentRefs: { name: string }[];
        }
      ).parentRefs.map((p) => p.name);
    assert.deepEqual(parents("0123456789", https), ["external", httpsGatewayName(g)]);
    assert.deepEqual(parents("public", https), ["external"], "no certificate, no HTTPS listener");
    assert.deepEqual(parents("0123456789", settings), ["external"], "without --https-gateway-class: none");
    // --endpoint-certificates: the generated public hostname too, never an organization one (the
    // environment's Gateway is public: an internal name must not be served there).
    const all = renderStatic(g, "eu", { ...https, endpointCertificates: true }).find((o) => o.kind === "Gateway");
    const hosts = (all?.spec as { listeners: { hostname: string }[] }).listeners.map((l) => l.hostname);
    assert.deepEqual(hosts, ["p.apps.example", "www.shop.example"]);
    assert.equal(new Set((all?.spec as { listeners: { name: string }[] }).listeners.map((l) => l.name)).size, 2);
    // Gateway API's 64-listener limit: the first 64 hostnames get a listener.
    const many = gateway({
      routes: Array.from({ length: 70 }, (_, i) => ({
        name: `domain-${i}`,
        visibility: "public",
        hostnames: [`d${String(i).padStart(2, "0")}.shop.example`],
        pathPrefix: "/",
        certificate: true,
      })) as never,
    });
    const capped = renderStatic(many, "eu", https).find((o) => o.kind === "Gateway");
    assert.equal((capped?.spec as { listeners: unknown[] }).listeners.length, MAX_LISTENERS);
  });

  it("no SecurityPolicy or other authorization object, whatever the routes' JWT rules: the sentinel enforces", () => {
    const g = gateway();
    assert.ok(
      g.routes.some((r) => r.auth?.jwt),
      "the fixture has a route with JWT operations",
    );
    const objs = [...renderStatic(g, "eu", settings), ...renderRoutes(g, "eu", settings, "snt")];
    assert.deepEqual([...new Set(objs.map((o) => o.kind))].sort(), ["Certificate", "HTTPRoute", "ReferenceGrant"]);
    // Every route leads to the sentinel Service, so no request reaches an instance unchecked.
    for (const r of objs.filter((o) => o.kind === "HTTPRoute")) {
      const rules = (r.spec as { rules: { backendRefs: { name: string; namespace: string }[] }[] }).rules;
      // (one rule for plain HTTP and one per gRPC content-type, all onto the sentinel Service)
      const backends = rules.flatMap((x) => x.backendRefs.map((b) => `${b.namespace}/${b.name}`));
      assert.ok(backends.length > 0);
      assert.deepEqual([...new Set(backends)], ["sentinel/snt"]);
    }
  });
});

describe("validation", () => {
  it("refuses what the API server or the Gateway would, before anything is applied", () => {
    assert.equal(validateApplyGateway(gateway(), "eu"), undefined);
    const bad: [Partial<Omit<ApplyGateway, "$typeName">>, RegExp][] = [
      [{ region: "us" }, /sent to region eu/],
      [{ k8sNamespace: "Bad_NS" }, /k8s_namespace/],
      [{ routes: [] }, /at least one/],
    ];
    for (const [x, re] of bad) assert.match(validateApplyGateway(gateway(x), "eu") ?? "", re);
    const g = gateway();
    (g.routes[0] as { hostnames: string[] }).hostnames = ["*.example.com"];
    assert.match(validateApplyGateway(g, "eu") ?? "", /not a lowercase RFC 1123 hostname/);
    const h = gateway();
    (h.routes[1] as { pathPrefix: string }).pathPrefix = "/a/../b";
    assert.match(validateApplyGateway(h, "eu") ?? "", /not a path prefix/);
  });
});

describe("status", () => {
  const g = gateway();
  const route = (name: string, generation: number, conditions: unknown[]): KubeObject => ({
    metadata: { name, namespace: "ws-acme", generation },
    status: { parents: [{ parentRef: { name: "external", namespace: "platform" }, conditions }] },
  });

  it("reads Accepted/ResolvedRefs per route for its Gateway, stale generations as pending, certificates' Ready", () => {
    const routes = new Map<string, KubeObject>([
      [
        "gw-shop-production-abc123-public",
        route("gw-shop-production-abc123-public", 2, [
          { type: "Accepted", status: "True", reason: "Accepted", observedGeneration: 2 },
          {
            type: "ResolvedRefs",
            status: "False",
            reason: "RefNotPermitted",
            message: "no grant",
            observedGeneration: 2,
          },
        ]),
      ],
      [
        "gw-shop-production-abc123-domain-0123456789",
        route("gw-shop-production-abc123-domain-0123456789", 3, [
          { type: "Accepted", status: "True", reason: "Accepted", observedGeneration: 2 },
        ]),
      ],
    ]);
    const observed = observeGateway(g, settings, "snt", {
      route: (_ns, n) => routes.get(n),
      certificate: () => ({
        metadata: { generation: 1 },
        status: { conditions: [{ type: "Ready", status: "False", reason: "Pending", message: "issuing" }] },
      }),
      gateway: () => undefined,
    });
    const [pub, org, dom] = observed;
    assert.equal(pub?.accepted?.status, "True");
    assert.deepEqual(
      [pub?.resolvedRefs?.status, pub?.resolvedRefs?.reason, pub?.resolvedRefs?.message],
      ["False", "RefNotPermitted", "no grant"],
    );
    assert.equal(org?.accepted?.status, "", "the internal Gateway wrote nothing yet");
    assert.equal(org?.gateway, "platform/internal");
    assert.deepEqual(
      [dom?.accepted?.status, dom?.accepted?.reason],
      ["Unknown", "Pending"],
      "observed an older generation",
    );
    assert.deepEqual(
      dom?.certificates.map((c) => [c.hostname, c.ready?.status, c.ready?.reason]),
      [["www.shop.example", "False", "Pending"]],
    );
    assert.equal(
      gatewayFingerprint(observed),
      gatewayFingerprint(
        observeGateway(g, settings, "snt", {
          route: (_ns, n) => routes.get(n),
          certificate: () => ({
            metadata: { generation: 1 },
            status: { conditions: [{ type: "Ready", status: "False", reason: "Pending", message: "issuing" }] },
          }),
          gateway: () => undefined,
        }),
      ),
    );
    const none = observeGateway(g, { public: settings.public }, undefined, {
      route: () => undefined,
      certificate: () => undefined,
      gateway: () => undefined,
    });
    assert.match(none[0]?.problem ?? "", /no sentinel Service/);
    assert.match(none[1]?.problem ?? "", /no organization Gateway is configured/);
    assert.equal(dom?.certificates[0]?.listener, undefined, "without --https-gateway-class no listener is reported");
  });

  it("reports each certificate's HTTPS listener as the environment's Gateway programmed it", () => {
    const https: GatewaySettings = { ...settings, https: { className: "edge", port: 443 } };
    const listeners = (gw: KubeObject | undefined) =>
      observeGateway(g, https, "snt", {
        route: () => undefined,
        certificate: () => undefined,
        gateway: (ns, name) => (ns === "ws-acme" && name === httpsGatewayName(g) ? gw : undefined),
      })
        .flatMap((r) => r.certificates)
        .map((c) => [c.hostname, c.listener?.status, c.listener?.reason]);
    const host = "www.shop.example";
    const name = (rendered: KubeObject | undefined) =>
      (rendered?.spec as { listeners: { name: string; hostname: string }[] }).listeners.find((l) => l.hostname === host)
        ?.name;
    const listener = name(renderStatic(g, "eu", https).find((o) => o.kind === "Gateway"));
    assert.ok(listener, "the rendered Gateway has the hostname's listener");
    const gw = (generation: number, conditions: unknown[]): KubeObject => ({
      metadata: { name: httpsGatewayName(g), namespace: "ws-acme", generation },
      status: { listeners: [{ name: listener, conditions }] },
    });
    assert.deepEqual(listeners(undefined), [[host, "", ""]], "no Gateway status yet: not reported");
    const programmed = [
      { type: "Accepted", status: "True", reason: "Accepted", observedGeneration: 2 },
      { type: "ResolvedRefs", status: "True", reason: "ResolvedRefs", observedGeneration: 2 },
      { type: "Programmed", status: "True", reason: "Programmed", observedGeneration: 2 },
    ];
    assert.deepEqual(listeners(gw(2, programmed)), [[host, "True", "Programmed"]]);
    assert.deepEqual(listeners(gw(3, programmed)), [[host, "Unknown", "Pending"]], "an older generation");
    // Why a listener cannot serve comes before Programmed: the certificate's Secret is not there yet.
    const noSecret = [
      { type: "Accepted", status: "True", reason: "Accepted", observedGeneration: 2 },
      { type: "ResolvedRefs", status: "False", reason: "InvalidCertificateRef", observedGeneration: 2 },
      { type: "Programmed", status: "False", reason: "Invalid", observedGeneration: 2 },
    ];
    assert.deepEqual(listeners(gw(2, noSecret)), [[host, "False", "InvalidCertificateRef"]]);
    // Past Gateway API's listener limit a hostname has a Certificate but no listener, and says so.
    const many = gateway({
      routes: Array.from({ length: MAX_LISTENERS + 1 }, (_, i) => ({
        name: `domain-${i}`,
        visibility: "public",
        hostnames: [`d${String(i).padStart(2, "0")}.shop.example`],
        pathPrefix: "/",
        certificate: true,
      })) as never,
    });
    const last = observeGateway(many, https, "snt", {
      route: () => undefined,
      certificate: () => undefined,
      gateway: () => undefined,
    }).at(-1)?.certificates[0];
    assert.deepEqual(
      [last?.hostname, last?.listener?.status, last?.listener?.reason],
      ["d64.shop.example", "False", "NoListener"],
    );
  });
});

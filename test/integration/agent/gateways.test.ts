// The gateway kind end to end: the real ctrl (SQLite) with a real DNS server on loopback, a real
// API server with the Gateway API, cert-manager and Envoy Gateway CRDs and the agent's fence,
// and an agent running as its least-privilege ServiceAccount with Gateways configured. Endpoints
// and a verified custom domain become HTTPRoutes to the sentinel Service (with the
// ReferenceGrant that allows it) and a Certificate the CRD accepts; a SecurityPolicy an earlier
// krane rendered on Envoy Gateway is deleted (the sentinel enforces, none is rendered now); a Gateway
// that refuses a route (written here as its controller would) and a Certificate that cert-manager's
// real controllers issue from the local CA ClusterIssuer reach ctrl's status; a resync with nothing changed writes nothing; drift is repaired;
// deleting the endpoint, the domain and finally everything leaves no object behind.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Registry } from "prom-client";
import { eventually, useCluster } from "../../support/cluster.js";
import { startTestDns, type TestDns } from "../../support/dns.js";
import {
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { DomainService, EndpointService } from "../../../src/gen/krane/ctrl/v1/exposure_pb.js";
import { resourcePath, resources, type ResourceType } from "../../../src/kube/resources.js";
import type { KubeClient } from "../../../src/kube/client.js";
import { isRecord, type KubeObject } from "../../../src/kube/object.js";
import { Agent } from "../../../src/agent/agent.js";
import { silentLogger } from "../../../src/base/log.js";
import { parseRoutingPolicy, POLICY_KEY } from "../../../src/contracts/routing.js";
import { LABEL_GATEWAY_ID } from "../../../src/contracts/labels.js";
import { LOCAL_CA_ISSUER } from "../../../src/cluster/certificates.js";
import { adminKube, agentKubeConfig, kubeWrites } from "./support.js";
import { startTestCtrl, tempDir, type TestCtrl } from "../ctrl/support.js";

// cert-manager's controllers with the local CA ClusterIssuer (no Gateway runs: route status is written here).
const handle = useCluster({ tls: true });
const REGION = "local";
const ref = { workspace: "acme", project: "shop", environment: "production" };
const dir = tempDir();
let ctrl: TestCtrl;
let dns: TestDns;
let admin: KubeClient;
let agent: Agent;
let envId = "";

before(
  async () => {
    const cluster = await handle.ready();
    admin = adminKube(cluster);
    dns = await startTestDns();
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      exposure: { publicApex: "apps.example.net", organizationApex: "internal.example.net" },
      domains: { dnsServers: [dns.server], sweepIntervalMs: 100, policy: { pendingFirstMs: 100, pendingMaxMs: 200 } },
    });
    const t = ctrl.adminToken;
    await ctrl.client(RegionService, t).createRegion({ name: REGION });
    await ctrl.client(WorkspaceService, t).createWorkspace({ slug: "acme" });
    await ctrl.client(ProjectService, t).createProject({ workspace: "acme", slug: "shop" });
    const env = await ctrl.client(EnvironmentService, t).createEnvironment({
      ...ref,
      slug: "production",
      regions: [{ region: REGION, replicas: 0 }],
      sentinel: { image: "ghcr.io/krane/sentinel:1", replicas: 1, cpuMillicores: 100n, memoryMib: 64n },
    });
    envId = env.environment?.id ?? "";
    agent = new Agent({
      ctrlUrl: ctrl.url,
      token: await ctrl.agentToken(REGION),
      region: REGION,
      kubeconfig: await agentKubeConfig(cluster),
      log: silentLogger,
      registry: new Registry(),
      opsPort: -1,
      resyncPeriodMs: 1_500,
      callTimeoutMs: 3_000,
      heartbeatMs: 1_000,
      runtime: { reconnect: { baseMs: 100, capMs: 1_000, minMs: 50 }, retry: { baseMs: 100, capMs: 1_000, minMs: 50 } },
      gateway: {
        public: { namespace: "platform", name: "external", sectionName: "" },
        organization: { namespace: "platform", name: "internal", sectionName: "http" },
        certificateIssuer: { kind: "ClusterIssuer", name: LOCAL_CA_ISSUER },
        removeSecurityPolicies: true,
      },
    });
    await agent.start();
  },
  { timeout: 15 * 60_000 },
);

after(async () => {
  await agent?.stop();
  await ctrl?.close();
  await dns?.close();
  dir.remove();
});

const NS = "ws-acme";
const spec = (o: KubeObject | undefined): Record<string, unknown> => (o && isRecord(o.spec) ? o.spec : {});
const labelled = async (r: ResourceType, namespace?: string): Promise<KubeObject[]> =>
  (await admin.list(r, { labelSelector: `${LABEL_GATEWAY_ID}=${envId}`, namespace })).items;

async function writeStatus(r: ResourceType, ns: string, name: string, status: unknown): Promise<void> {
  const obj = await admin.get(r, ns, name);
  assert.ok(obj, `${r.kind} ${ns}/${name}`);
  await admin.raw("PUT", `${resourcePath(r, ns, name)}/status`, { ...obj, status });
}

const statusOf = () => ctrl.client(StatusService, ctrl.adminToken).getEnvironmentStatus(ref);

test("endpoints and a verified domain become routes, a certificate and a policy; status, drift, resync and deletion", async () => {
  const endpoints = ctrl.client(EndpointService, ctrl.adminToken);
  const domains = ctrl.client(DomainService, ctrl.adminToken);
  await endpoints.setEndpoint({
    ...ref,
    visibility: "public",
    auth: {
      jwksUrl: "https://idp.example.com/jwks.json",
      issuer: "https://idp.example.com",
      operations: [{ method: "GET", path: "/books/{id}", scopes: ["books:read"] }],
    },
  });
  await endpoints.setEndpoint({ ...ref, visibility: "organization", pathRouting: true });

  // The sentinel Service exists (sentinel kind), then the routes lead to it.
  const svc = await eventually(
    "the sentinel Service",
    async () =>
      (
        await admin.list(resources.services, {
          namespace: "sentinel",
          labelSelector: `krane.dev/environment-id=${envId}`,
        })
      ).items[0],
    60_000,
  );
  const routes = await eventually(
    "two HTTPRoutes",
    async () => {
      const items = await labelled(resources.httpRoutes, NS);
      return items.length === 2 ? items : undefined;
    },
    60_000,
  );
  const pub = routes.find((r) => r.metadata.name?.endsWith("-public"));
  const org = routes.find((r) => r.metadata.name?.endsWith("-organization"));
  assert.ok(pub && org);
  assert.deepEqual(spec(pub).hostnames, ["production-shop-acme.apps.example.net"]);
  assert.deepEqual((spec(pub).parentRefs as unknown[])[0], {
    group: "gateway.networking.k8s.io",
    kind: "Gateway",
    namespace: "platform",
    name: "external",
  });
  const pubRule = (spec(pub).rules as Record<string, unknown>[])[0];
  assert.deepEqual(pubRule?.backendRefs, [
    { group: "", kind: "Service", namespace: "sentinel", name: svc.metadata.name, port: 8040, weight: 1 },
  ]);
  assert.deepEqual(spec(org).hostnames, ["acme.internal.example.net"]);
  const orgRule = (spec(org).rules as Record<string, unknown>[])[0];
  assert.deepEqual(orgRule?.matches, [{ path: { type: "PathPrefix", value: "/shop/production" } }]);
  assert.deepEqual(orgRule?.filters, [
    { type: "URLRewrite", urlRewrite: { path: { type: "ReplacePrefixMatch", replacePrefixMatch: "/" } } },
  ]);
  const grant = await eventually(
    "the ReferenceGrant in sentinel",
    async () => (await labelled(resources.referenceGrants, "sentinel"))[0],
  );
  assert.deepEqual(spec(grant), {
    from: [{ group: "gateway.networking.k8s.io", kind: "HTTPRoute", namespace: NS }],
    to: [{ group: "", kind: "Service", name: svc.metadata.name }],
  });
  // A SecurityPolicy as earlier krane versions rendered on Envoy Gateway (accepted by the real
  // CRD): krane renders none now (the sentinel enforces), and the agent deletes those it finds.
  await admin.apply(resources.securityPolicies, {
    apiVersion: "gateway.envoyproxy.io/v1alpha1",
    kind: "SecurityPolicy",
    metadata: { name: pub.metadata.name, namespace: NS, labels: { ...pub.metadata.labels } },
    spec: {
      targetRefs: [{ group: "gateway.networking.k8s.io", kind: "HTTPRoute", name: pub.metadata.name }],
      jwt: {
        optional: false,
        providers: [{ name: "krane", remoteJWKS: { uri: "https://idp.example.com/jwks.json" } }],
      },
      authorization: {
        defaultAction: "Deny",
        rules: [{ action: "Allow", principal: { jwt: { provider: "krane", scopes: ["books:read"] } } }],
      },
    },
  });
  await eventually(
    "the earlier krane's SecurityPolicy deleted",
    async () => ((await labelled(resources.securityPolicies, NS)).length === 0 ? true : undefined),
    30_000,
  );
  // The sentinel's routing policy carries the auth section.
  const cm = await eventually("the policy ConfigMap with auth", async () => {
    const items = (
      await admin.list(resources.configMaps, {
        namespace: "sentinel",
        labelSelector: `krane.dev/environment-id=${envId}`,
      })
    ).items;
    const text = items[0]?.data && isRecord(items[0].data) ? items[0].data[POLICY_KEY] : undefined;
    return typeof text === "string" && parseRoutingPolicy(text).auth ? parseRoutingPolicy(text) : undefined;
  });
  assert.deepEqual(cm.auth?.rules.find((r) => r.jwt)?.hosts, ["production-shop-acme.apps.example.net"]);

  // No Gateway controller has looked yet: pending, with the reason.
  const pending = await eventually("the public endpoint pending in status", async () => {
    const e = (await statusOf()).endpoints.find((x) => x.endpoint?.visibility === "public")?.regions[0];
    return e?.readiness === "pending" ? e : undefined;
  });
  assert.match(pending.message, /waiting for Gateway platform\/external/);

  // The Gateway refuses the organization route: a clear status, and no retry storm.
  await writeStatus(resources.httpRoutes, NS, org.metadata.name ?? "", {
    parents: [
      {
        parentRef: {
          group: "gateway.networking.k8s.io",
          kind: "Gateway",
          namespace: "platform",
          name: "internal",
          sectionName: "http",
        },
        controllerName: "example.com/gateway-controller",
        conditions: [
          {
            type: "Accepted",
            status: "False",
            reason: "NotAllowedByListeners",
            message: "no listener allows routes from ws-acme",
            observedGeneration: org.metadata.generation,
            lastTransitionTime: new Date().toISOString(),
          },
          {
            type: "ResolvedRefs",
            status: "True",
            reason: "ResolvedRefs",
            message: "",
            observedGeneration: org.metadata.generation,
            lastTransitionTime: new Date().toISOString(),
          },
        ],
      },
    ],
  });
  const rejected = await eventually("the organization endpoint rejected in status", async () => {
    const e = (await statusOf()).endpoints.find((x) => x.endpoint?.visibility === "organization")?.regions[0];
    return e?.readiness === "rejected" ? e : undefined;
  });
  assert.match(rejected.message, /Accepted=False NotAllowedByListeners: no listener allows routes from ws-acme/);

  // A custom domain: routed only once verified, with a Certificate from the configured issuer.
  const { domain } = await domains.addDomain({ ...ref, hostname: "www.shop-example.com" });
  await sleep(500);
  assert.equal((await labelled(resources.httpRoutes, NS)).length, 2, "not routed while pending");
  dns.txt.set("_krane-challenge.www.shop-example.com", [domain?.txtValue ?? ""]);
  const domRoute = await eventually(
    "the domain's HTTPRoute",
    async () =>
      (await labelled(resources.httpRoutes, NS)).find((r) =>
        (spec(r).hostnames as string[]).includes("www.shop-example.com"),
      ),
    30_000,
  );
  const cert = await eventually(
    "the domain's Certificate",
    async () => (await labelled(resources.certificates, NS))[0],
  );
  assert.deepEqual(spec(cert).dnsNames, ["www.shop-example.com"]);
  assert.deepEqual(spec(cert).issuerRef, { group: "cert-manager.io", kind: "ClusterIssuer", name: LOCAL_CA_ISSUER });
  await writeStatus(resources.httpRoutes, NS, domRoute.metadata.name ?? "", {
    parents: [
      {
        parentRef: { group: "gateway.networking.k8s.io", kind: "Gateway", namespace: "platform", name: "external" },
        controllerName: "example.com/gateway-controller",
        conditions: ["Accepted", "ResolvedRefs"].map((type) => ({
          type,
          status: "True",
          reason: type,
          message: "",
          observedGeneration: domRoute.metadata.generation,
          lastTransitionTime: new Date().toISOString(),
        })),
      },
    ],
  });
  // cert-manager issues it: the domain is ready once the Certificate's Ready condition (written by
  // cert-manager) reaches ctrl, and its Secret holds a certificate for exactly that name.
  await eventually(
    "the domain ready",
    async () => ((await statusOf()).domains[0]?.regions[0]?.readiness === "ready" ? true : undefined),
    60_000,
  );
  const secret = await admin.get(resources.secrets, NS, String(spec(cert).secretName));
  const pem = Buffer.from(String((secret?.data as Record<string, string> | undefined)?.["tls.crt"] ?? ""), "base64");
  const issued = new X509Certificate(pem);
  assert.equal(issued.subjectAltName, "DNS:www.shop-example.com");
  assert.match(issued.issuer, /krane local CA/);

  // A resync with nothing changed writes nothing.
  const rt = agent.runtime("gateways");
  assert.ok(rt);
  await rt.idle();
  const writes = await kubeWrites(agent);
  const passes = rt.resyncCount;
  await eventually("two resyncs", async () => (rt.resyncCount >= passes + 2 ? true : undefined), 30_000);
  assert.equal(await kubeWrites(agent), writes, "no Kubernetes write on resync");

  // Drift: an HTTPRoute deleted behind krane's back comes back.
  await admin.delete(resources.httpRoutes, NS, pub.metadata.name ?? "");
  await eventually(
    "the public route repaired",
    async () =>
      (await admin.get(resources.httpRoutes, NS, pub.metadata.name ?? ""))?.metadata.uid !== pub.metadata.uid
        ? true
        : undefined,
    30_000,
  );

  // Deleting the endpoint and the domain removes what they rendered.
  await endpoints.deleteEndpoint({ ...ref, visibility: "organization" });
  await domains.removeDomain({ ...ref, hostname: "www.shop-example.com" });
  await eventually(
    "only the public route left, no certificate",
    async () => {
      const left = await labelled(resources.httpRoutes, NS);
      return left.length === 1 &&
        left[0]?.metadata.name === pub.metadata.name &&
        (await labelled(resources.certificates, NS)).length === 0
        ? true
        : undefined;
    },
    30_000,
  );
  await endpoints.deleteEndpoint({ ...ref, visibility: "public" });
  await eventually(
    "nothing left",
    async () => {
      const counts = await Promise.all([
        labelled(resources.httpRoutes),
        labelled(resources.referenceGrants),
        labelled(resources.certificates),
        labelled(resources.securityPolicies),
      ]);
      return counts.every((c) => c.length === 0) ? true : undefined;
    },
    30_000,
  );
  await eventually("the gateway report gone", async () =>
    (await statusOf()).endpoints.length === 0 ? true : undefined,
  );
});

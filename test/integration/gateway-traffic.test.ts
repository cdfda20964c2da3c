// Traffic through a real Gateway: the local cluster runs Traefik (built from Go modules) serving
// the platform's public and internal Gateways, pod stand-ins (a real `krane sentinel` for
// sentinel pods, a small HTTP server for user pods), the real ctrl with a DNS server on loopback,
// and an agent (the agent's RBAC, behind the fence) configured with those Gateways. Requests
// with a Host header go Gateway → sentinel → instance: a public hostname, an organization-only
// endpoint that the external Gateway does not serve, a path prefix rewritten away, JWT checked
// at the sentinel, a custom domain that routes only after its TXT record verifies, and an
// endpoint whose deletion takes its route away.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { request as httpRequest, createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { readdir, readFile } from "node:fs/promises";
import { kubeRequest } from "../../src/cluster/kube-http.js";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { eventually, useCluster } from "../support/cluster.js";
import { startTestDns, type TestDns } from "../support/dns.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";
import { DomainService, EndpointService } from "../../src/gen/krane/ctrl/v1/exposure_pb.js";
import { Agent } from "../../src/agent/agent.js";
import { parseGatewayRef } from "../../src/agent/config.js";
import { applySentinelRbac } from "../../src/sentinel/rbac.js";
import { routingAgent } from "./agent/support.js";
import { startTestCtrl, tempDir, type TestCtrl } from "./ctrl/support.js";

const handle = useCluster({ standins: true, gateway: true });
const REGION = "local";
const ref = { workspace: "acme", project: "shop", environment: "production" };
const PUBLIC_HOST = "production-shop-acme.apps.test";
const dir = tempDir();
let ctrl: TestCtrl;
let dns: TestDns;
let agent: Agent;
let jwks: Server;
let jwksUrl = "";
let key: Awaited<ReturnType<typeof generateKeyPair>>;

interface Answer {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

/**
 * Traefik's own placeholder while it has not (re)loaded a route's backend: an empty 500 without
 * krane's error header. Traefik rebuilds its whole configuration on every route event, and for a
 * moment after a change can answer this; every answer of krane's sentinel names its cause.
 */
function isGatewayReloading(a: Answer): boolean {
  return a.status === 500 && a.body === "" && a.headers["x-krane-sentinel-error"] === undefined;
}

/** Gateway reloads seen (and waited out) during the test. */
let reloads = 0;

/** One request through a Gateway; Traefik's reload placeholder is waited out (at most 20 s), anything else is the answer. */
async function get(port: number, host: string, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const a = await getOnce(port, host, path, headers);
    if (!isGatewayReloading(a) || Date.now() > deadline) return a;
    reloads++;
    await new Promise((r) => setTimeout(r, 200));
  }
}

function getOnce(port: number, host: string, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: "127.0.0.1", port, path, method: "GET", headers: { host, ...headers }, timeout: 10_000 },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      },
    );
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end();
  });
}

before(
  async () => {
    const cluster = await handle.ready();
    const gws = cluster.gateways;
    assert.ok(gws, "the cluster runs Gateways");
    await applySentinelRbac(cluster.kubeConfig());
    key = await generateKeyPair("ES256");
    const jwk = { ...(await exportJWK(key.publicKey)), kid: "k1", alg: "ES256", use: "sig" };
    jwks = createServer((_req, res) =>
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys: [jwk] })),
    );
    await new Promise<void>((r) => jwks.listen(0, "127.0.0.1", r));
    jwksUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json`;
    dns = await startTestDns();
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      exposure: { publicApex: "apps.test", organizationApex: "internal.test", scheme: "http" },
      domains: { dnsServers: [dns.server], sweepIntervalMs: 100, policy: { pendingFirstMs: 100, pendingMaxMs: 200 } },
    });
    const t = ctrl.adminToken;
    await ctrl.client(RegionService, t).createRegion({ name: REGION });
    await ctrl.client(WorkspaceService, t).createWorkspace({ slug: "acme" });
    await ctrl.client(ProjectService, t).createProject({ workspace: "acme", slug: "shop" });
    await ctrl.client(EnvironmentService, t).createEnvironment({
      ...ref,
      slug: "production",
      regions: [{ region: REGION, replicas: 2 }],
      // krane's own sentinel (no image): the stand-ins run a real `krane sentinel` with its token.
      sentinel: { image: "", replicas: 1, cpuMillicores: 100n, memoryMib: 128n },
    });
    agent = await routingAgent(cluster, ctrl, REGION, {
      resyncPeriodMs: 5_000,
      gateway: { public: parseGatewayRef(gws.public.ref), organization: parseGatewayRef(gws.organization.ref) },
    });
    await agent.start();
    await ctrl.client(DeploymentService, t).createDeployment({ ...ref, image: "ghcr.io/acme/shop:1", port: 8080 });
  },
  { timeout: 30 * 60_000 },
);

after(async () => {
  await agent?.stop();
  await ctrl?.close();
  await dns?.close();
  await new Promise<void>((r) => (jwks ? jwks.close(() => r()) : r()));
  dir.remove();
});

/** What a failed wait prints: the routes and their status, and the end of Traefik's log. */
async function diagnostics(): Promise<string> {
  const c = handle.cluster;
  const routes = await kubeRequest(c.endpoint(), "GET", "/apis/gateway.networking.k8s.io/v1/httproutes");
  const logs = join(c.dir, "logs");
  const tail = async (f: string, n = 3000): Promise<string> =>
    `${f} (end): ${(await readFile(join(logs, f), "utf8").catch(() => "")).slice(-n)}`;
  const sentinels = (await readdir(logs).catch(() => [] as string[])).filter((f) => f.startsWith("sentinel-"));
  const traefik = (await readFile(join(logs, "traefik.log"), "utf8").catch(() => ""))
    .split("\n")
    .filter((l) => !/Unable to load HTTPRoute backend/.test(l));
  const traefikErrors = traefik
    .filter((l) => /ERR|WRN|500|caused by/i.test(l))
    .slice(-30)
    .join("\n");
  return [
    `HTTPRoutes: ${routes.body.slice(0, 3000)}`,
    `traefik errors: ${traefikErrors}`,
    `traefik log (end): ${traefik.slice(-20).join("\n")}`,
    await tail("pod-standin.log"),
    ...(await Promise.all(sentinels.map((f) => tail(f)))),
  ].join("\n");
}

test(
  "public host → Gateway → sentinel → instance; organization-only and path prefix; JWT; custom domain; deletion",
  { timeout: 10 * 60_000 },
  async () => {
    const gws = handle.cluster.gateways;
    assert.ok(gws);
    const endpoints = ctrl.client(EndpointService, ctrl.adminToken);
    await endpoints.setEndpoint({ ...ref, visibility: "public" });
    await endpoints.setEndpoint({ ...ref, visibility: "organization", pathRouting: true });

    let lastAnswer: Answer | undefined;
    const hello = await eventually(
      "the public host answered by an instance through the Gateway",
      async () => {
        const a = (lastAnswer = await get(gws.public.port, PUBLIC_HOST, "/hello?x=1"));
        return a.status === 200 ? a : undefined;
      },
      180_000,
    ).catch(async (err: unknown) => {
      throw new Error(`${String(err)}\nlast answer: ${JSON.stringify(lastAnswer)}\n${await diagnostics()}`);
    });
    const who = JSON.parse(hello.body) as { path: string; host: string; image: string; forwardedFor: string | null };
    assert.equal(who.path, "/hello?x=1");
    assert.equal(who.host, PUBLIC_HOST, "the Host reaches the instance unchanged");
    assert.equal(who.image, "ghcr.io/acme/shop:1");

    // The organization endpoint: served by the internal Gateway under its prefix (rewritten away) …
    const internal = await eventually(
      "the organization endpoint through the internal Gateway",
      async () => {
        const a = await get(gws.organization.port, "acme.internal.test", "/shop/production/orders/7");
        return a.status === 200 ? a : undefined;
      },
      60_000,
    );
    assert.equal((JSON.parse(internal.body) as { path: string }).path, "/orders/7");
    // … and not by the external one, nor its public host by the internal one.
    assert.equal((await get(gws.public.port, "acme.internal.test", "/shop/production/orders/7")).status, 404);
    assert.equal((await get(gws.organization.port, PUBLIC_HOST, "/hello")).status, 404);

    // Status: the Gateway accepted both routes.
    await eventually(
      "both endpoints ready in status",
      async () => {
        const s = await ctrl.client(StatusService, ctrl.adminToken).getEnvironmentStatus(ref);
        return s.endpoints.length === 2 && s.endpoints.every((e) => e.regions[0]?.readiness === "ready")
          ? true
          : undefined;
      },
      60_000,
    );

    // JWT at the edge: /secret needs a token with scope "read"; everything else stays open.
    await endpoints.setEndpoint({
      ...ref,
      visibility: "public",
      auth: {
        jwksUrl,
        operations: [{ method: "GET", path: "/secret/{id}", scopes: ["read"] }],
        defaultAction: "allow",
      },
    });
    const sign = (scope: string) =>
      new SignJWT({ scope })
        .setProtectedHeader({ alg: "ES256", kid: "k1" })
        .setExpirationTime("5m")
        .sign(key.privateKey);
    await eventually(
      "tokens required for /secret",
      async () => ((await get(gws.public.port, PUBLIC_HOST, "/secret/1")).status === 401 ? true : undefined),
      60_000,
    );
    const denied = await get(gws.public.port, PUBLIC_HOST, "/secret/1", {
      authorization: `Bearer ${await sign("write")}`,
    });
    if (denied.status !== 403) assert.fail(`expected 403, got ${JSON.stringify(denied)}\n${await diagnostics()}`);
    assert.match(String(denied.headers["www-authenticate"]), /insufficient_scope/);
    const allowed = await get(gws.public.port, PUBLIC_HOST, "/secret/1", {
      authorization: `Bearer ${await sign("read")}`,
    });
    if (allowed.status !== 200) assert.fail(`expected 200, got ${JSON.stringify(allowed)}\n${await diagnostics()}`);
    assert.equal((await get(gws.public.port, PUBLIC_HOST, "/open")).status, 200);
    // A run of requests, each with a fresh token (a signature check each) or none, all answered.
    const odd: Answer[] = [];
    for (let i = 0; i < 20; i++) {
      const a =
        i % 2 === 0
          ? await get(gws.public.port, PUBLIC_HOST, `/secret/${i}`, {
              authorization: `Bearer ${await sign("read other")}`,
            })
          : await get(gws.public.port, PUBLIC_HOST, `/open/${i}`);
      if (a.status !== 200) odd.push(a);
    }
    assert.deepEqual(odd, []);

    // A custom domain routes only after verification.
    const domains = ctrl.client(DomainService, ctrl.adminToken);
    const { domain } = await domains.addDomain({ ...ref, hostname: "www.shop.test" });
    assert.equal((await get(gws.public.port, "www.shop.test", "/")).status, 404, "not routed while pending");
    dns.txt.set("_krane-challenge.www.shop.test", [domain?.txtValue ?? ""]);
    const viaDomain = await eventually(
      "the verified domain routed",
      async () => {
        const a = await get(gws.public.port, "www.shop.test", "/from-domain");
        return a.status === 200 ? a : undefined;
      },
      60_000,
    );
    assert.equal((JSON.parse(viaDomain.body) as { host: string }).host, "www.shop.test");
    assert.equal(
      (await get(gws.public.port, "www.shop.test", "/secret/1")).status,
      401,
      "the domain takes the public endpoint's authentication",
    );

    // Deleting the public endpoint takes its route away (the organization one stays).
    await endpoints.deleteEndpoint({ ...ref, visibility: "public" });
    await eventually(
      "the public host no longer routed",
      async () => ((await get(gws.public.port, PUBLIC_HOST, "/hello")).status === 404 ? true : undefined),
      60_000,
    );
    const stays = await get(gws.organization.port, "acme.internal.test", "/shop/production/x");
    if (stays.status !== 200)
      assert.fail(
        `the organization endpoint after the public one went: ${JSON.stringify(stays)}\n${await diagnostics()}`,
      );
    console.log(`Traefik reload placeholders waited out: ${reloads}`);
  },
);

// Exposure figures (`npm run bench -- gateway`), in one run on this machine:
//  - endpoint change committed (the API answered) → the HTTPRoute applied in the API server, as
//    a watch sees it: p50/p99 over repeated changes of an endpoint's path prefix, with the API
//    time beside it (target p99 ≤ 100 ms + API time). The real ctrl (SQLite), a real agent with
//    the agent's RBAC and Gateways configured, the local API server with the fence;
//  - one `krane sentinel` process, wrk 64 connections for 10 s: throughput with JWT validation
//    off and on (the same client token on every request, as a client reuses its token; the
//    first request verifies it, later ones hit the verified-token cache), against the same
//    upstream (target on/off ≥ 0.7); and jose's verification rate for distinct tokens in one
//    process, which is what a stream of never-seen tokens costs;
//  - gRPC unary calls/s and latency through the sentinel vs direct to the instance (./grpc.ts);
//  - HTTPS through the Gateway (Traefik, a certificate from cert-manager), JWT off and on with
//    distinct tokens per client and per request (./gateway-https.ts).
// Needs Debian's wrk for the throughput figures (../tools.ts installs it as root, or names the
// apt-get line).
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer, request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Registry } from "prom-client";
import { createLocalJWKSet, exportJWK, generateKeyPair, jwtVerify, SignJWT } from "jose";
import { startCluster } from "../../src/cluster/index.js";
import { KubeClient } from "../../src/kube/client.js";
import { isRecord } from "../../src/kube/object.js";
import { resources } from "../../src/kube/resources.js";
import { SENTINEL_NAMESPACE } from "../../src/contracts/cluster.js";
import {
  LABEL_COMPONENT,
  LABEL_DEPLOYMENT_ID,
  LABEL_ENVIRONMENT_ID,
  LABEL_MANAGED_BY,
  LABEL_REGION,
  MANAGED_BY,
} from "../../src/contracts/labels.js";
import {
  formatRoutingPolicy,
  POLICY_KEY,
  ROUTING_COMPONENT,
  type EdgeAuthPolicy,
} from "../../src/contracts/routing.js";
import { applySentinelRbac, sentinelKubeConfigFrom } from "../../src/sentinel/rbac.js";
import { Agent } from "../../src/agent/agent.js";
import { agentKubeConfigFrom } from "../../src/agent/rbac.js";
import { silentLogger } from "../../src/base/log.js";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import {
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";
import { EndpointService } from "../../src/gen/krane/ctrl/v1/exposure_pb.js";
import { grpcUnary } from "./grpc.js";
import { httpsThroughGateway } from "./gateway-https.js";
import { percentileOf, until, freePort, ROOT, spawnBenchSentinel } from "../support.js";
import { ensureTools, WRK } from "../tools.js";
import { startTestCtrl } from "../../test/integration/ctrl/support.js";

const ENV = "env_bench_gw";
const REGION = "bench";
const HOST = "bench.apps.example";
const CHANGES = Number(process.env.KRANE_BENCH_GATEWAY_CHANGES ?? 40);
const SECONDS = Number(process.env.KRANE_BENCH_GATEWAY_SECONDS ?? 10);

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** `until` with this bench's defaults. */
const waitFor = <T>(what: string, check: () => Promise<T | undefined | false>, timeoutMs = 60_000): Promise<T> =>
  until(what, check, timeoutMs, 20, true);

function wrk(url: string, seconds: number, headers: string[]): { rps: number; p99: string } {
  const args = [
    "-t2",
    "-c64",
    `-d${seconds}s`,
    "--latency",
    "-H",
    `Host: ${HOST}`,
    ...headers.flatMap((h) => ["-H", h]),
    url,
  ];
  const out = spawnSync("wrk", args, { encoding: "utf8" });
  if (out.status !== 0) throw new Error(`wrk failed: ${out.stderr}`);
  const errors = /Non-2xx or 3xx responses: (\d+)/.exec(out.stdout);
  if (errors) throw new Error(`wrk saw ${errors[1]} non-2xx answers`);
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out.stdout)?.[1] ?? NaN),
    p99: /^\s*99%\s+(\S+)/m.exec(out.stdout)?.[1] ?? "?",
  };
}

function routingLabels(deploymentId?: string): Record<string, string> {
  return {
    [LABEL_MANAGED_BY]: MANAGED_BY,
    [LABEL_COMPONENT]: ROUTING_COMPONENT,
    [LABEL_ENVIRONMENT_ID]: ENV,
    [LABEL_REGION]: REGION,
    ...(deploymentId ? { [LABEL_DEPLOYMENT_ID]: deploymentId } : {}),
  };
}

export async function benchGateway(): Promise<void> {
  ensureTools("gateway", [WRK]);
  const cluster = await startCluster({ name: "bench-gateway" });
  const kube = new KubeClient(cluster.kubeConfig(), { qps: 200, burst: 400 });
  const dir = mkdtempSync(join(tmpdir(), "krane-bench-gateway-"));
  const children: ChildProcess[] = [];
  try {
    await propagation(cluster, kube, dir);
    await jwtThroughput(cluster, kube, dir, children);
    await verifyRate();
    await grpcUnary(cluster, kube, dir, children);
  } finally {
    for (const c of children) c.kill("SIGKILL");
    kube.close();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  await httpsThroughGateway();
}

/** Endpoint change committed → HTTPRoute applied. */
async function propagation(
  cluster: Awaited<ReturnType<typeof startCluster>>,
  kube: KubeClient,
  dir: string,
): Promise<void> {
  const ctrl = await startTestCtrl(join(dir, "ctrl.db"), {
    opsListen: null,
    exposure: { publicApex: "apps.example", organizationApex: "internal.example" },
  });
  const token = ctrl.adminToken;
  const transport = createConnectTransport({
    baseUrl: ctrl.url,
    httpVersion: "2",
    interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${token}`), next(req))],
  });
  const ref = { workspace: "acme", project: "shop", environment: "production" };
  await createClient(RegionService, transport).createRegion({ name: REGION });
  await createClient(WorkspaceService, transport).createWorkspace({ slug: "acme" });
  await createClient(ProjectService, transport).createProject({ workspace: "acme", slug: "shop" });
  await createClient(EnvironmentService, transport).createEnvironment({
    ...ref,
    slug: "production",
    regions: [{ region: REGION, replicas: 0 }],
    sentinel: { image: "ghcr.io/krane/sentinel:1", replicas: 1, cpuMillicores: 100n, memoryMib: 64n },
  });
  const agent = new Agent({
    ctrlUrl: ctrl.url,
    token: await ctrl.agentToken(REGION),
    region: REGION,
    kubeconfig: await agentKubeConfigFrom(cluster.kubeConfig()),
    log: silentLogger,
    registry: new Registry(),
    opsPort: -1,
    gateway: {
      public: { namespace: "platform", name: "external", sectionName: "" },
      organization: { namespace: "platform", name: "internal", sectionName: "" },
    },
  });
  await agent.start();
  const endpoints = createClient(EndpointService, transport);
  const seen = new Map<string, number>();
  const stop = new AbortController();
  const watching = kube
    .watch(
      resources.httpRoutes,
      { namespace: "ws-acme" },
      (_type, obj) => {
        if (!isRecord(obj) || !isRecord(obj.spec) || !Array.isArray(obj.spec.rules)) return;
        const rule = obj.spec.rules[0];
        const m =
          isRecord(rule) && Array.isArray(rule.matches) && isRecord(rule.matches[0]) && isRecord(rule.matches[0].path)
            ? rule.matches[0].path.value
            : undefined;
        if (typeof m === "string" && !seen.has(m)) seen.set(m, performance.now());
      },
      stop.signal,
    )
    .catch(() => undefined);
  try {
    await endpoints.setEndpoint({ ...ref, visibility: "organization", pathRouting: true, pathPrefix: "/warm/up" });
    await waitFor("the first HTTPRoute", async () => seen.has("/warm/up"));
    const api: number[] = [];
    const applied: number[] = [];
    for (let i = 0; i < CHANGES; i++) {
      const prefix = `/v/${i}`;
      const t0 = performance.now();
      await endpoints.setEndpoint({ ...ref, visibility: "organization", pathRouting: true, pathPrefix: prefix });
      const t1 = performance.now();
      await waitFor(`route ${prefix}`, async () => seen.has(prefix), 30_000);
      api.push(t1 - t0);
      applied.push((seen.get(prefix) ?? t1) - t1);
      await sleep(50);
    }
    const fmt = (v: number[]): string =>
      `p50 ${percentileOf(v, 50).toFixed(1)} ms  p99 ${percentileOf(v, 99).toFixed(1)} ms  max ${Math.max(...v).toFixed(1)} ms`;
    console.log(`gateway: SetEndpoint API time                         ${fmt(api)} (${CHANGES} changes)`);
    console.log(
      `gateway: change committed → HTTPRoute applied         ${fmt(applied)} (target p99 ≤ 100 ms + API time)`,
    );
  } finally {
    stop.abort();
    await watching;
    await agent.stop();
    await ctrl.close();
  }
}

/** Throughput of one sentinel with JWT validation off and on. */
async function jwtThroughput(
  cluster: Awaited<ReturnType<typeof startCluster>>,
  kube: KubeClient,
  dir: string,
  children: ChildProcess[],
): Promise<void> {
  const net = cluster.podNetwork;
  if (!net) throw new Error("no pod network");
  await applySentinelRbac(cluster.kubeConfig());
  const [appPort, sentinelPort, opsPort] = [await freePort(), await freePort(), await freePort()];
  const podIp = `10.${net.slot}.9.1`;
  const upstream = spawn(
    process.execPath,
    [
      "--import",
      import.meta.resolve("tsx"),
      join(ROOT, "bench/sentinel/sentinel-upstream.ts"),
      `127.${net.slot}.9.1:${appPort}`,
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  children.push(upstream);
  await new Promise<void>((r) => upstream.stdout?.once("data", () => r()));
  await kube.create(resources.namespaces, { metadata: { name: SENTINEL_NAMESPACE } });
  await kube.apply(resources.endpointSlices, {
    metadata: { name: "bench-gw-v1", namespace: SENTINEL_NAMESPACE, labels: routingLabels("v1") },
    addressType: "IPv4",
    ports: [{ name: "http", port: appPort, protocol: "TCP" }],
    endpoints: [{ addresses: [podIp], conditions: { ready: true } }],
  });
  const key = await generateKeyPair("ES256");
  const jwk = { ...(await exportJWK(key.publicKey)), kid: "k1", alg: "ES256" };
  const jwks = createHttpServer((_q, s) =>
    s.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys: [jwk] })),
  );
  await new Promise<void>((r) => jwks.listen(0, "127.0.0.1", r));
  const jwksUrl = `http://127.0.0.1:${(jwks.address() as { port: number }).port}/jwks`;
  const policy = async (version: number, auth?: EdgeAuthPolicy): Promise<void> => {
    await kube.apply(resources.configMaps, {
      metadata: { name: "bench-gw-routes", namespace: SENTINEL_NAMESPACE, labels: routingLabels() },
      data: {
        [POLICY_KEY]: formatRoutingPolicy({
          version,
          environmentId: ENV,
          mode: "instances",
          revisions: [],
          ...(auth ? { auth } : {}),
        }),
      },
    });
  };
  try {
    await policy(1);
    const kc = await sentinelKubeConfigFrom(cluster.kubeConfig());
    const kubeconfig = join(dir, "sentinel.kubeconfig");
    writeFileSync(kubeconfig, kc.exportConfig(), { mode: 0o600 });
    const sentinel = spawnBenchSentinel({
      environmentId: ENV,
      region: REGION,
      port: sentinelPort,
      opsPort,
      kubeconfig,
      podNetwork: net,
    });
    children.push(sentinel);
    await waitFor("the sentinel ready", async () => (await fetch(`http://127.0.0.1:${opsPort}/readyz`)).ok);
    const url = `http://127.0.0.1:${sentinelPort}/books/1`;
    wrk(url, 2, []);
    const off = wrk(url, SECONDS, []);
    const tok = await new SignJWT({ scope: "read" })
      .setProtectedHeader({ alg: "ES256", kid: "k1" })
      .setExpirationTime("1h")
      .sign(key.privateKey);
    await policy(2, {
      rules: [
        {
          hosts: [HOST],
          jwt: { jwksUrl, issuer: "", audiences: [] },
          operations: [{ method: "GET", path: "/books/{id}", scopes: ["read"] }],
          defaultAction: "deny",
        },
      ],
      unmatchedHosts: "deny",
    });
    // fetch cannot set Host: node:http can.
    const statusWithHost = (authorization?: string): Promise<string> =>
      new Promise((resolve, reject) => {
        const req = httpRequest(
          {
            host: "127.0.0.1",
            port: sentinelPort,
            path: "/books/1",
            headers: { host: HOST, ...(authorization ? { authorization } : {}) },
          },
          (res) => {
            let body = "";
            res.on("data", (c: Buffer) => (body += c.toString()));
            res.on("end", () => resolve(`${res.statusCode ?? 0} ${body.trim()}`));
          },
        );
        req.on("error", reject);
        req.end();
      });
    await waitFor("tokens required", async () => (await statusWithHost()).startsWith("401"));
    const first = await statusWithHost(`Bearer ${tok}`);
    if (!first.startsWith("200")) throw new Error(`a request with a valid token was answered ${first}`);
    wrk(url, 2, [`Authorization: Bearer ${tok}`]);
    const on = wrk(url, SECONDS, [`Authorization: Bearer ${tok}`]);
    console.log(`gateway: sentinel, wrk 64 conns, JWT off  ${off.rps.toFixed(0).padStart(7)} req/s  p99 ${off.p99}`);
    console.log(`gateway: sentinel, wrk 64 conns, JWT on   ${on.rps.toFixed(0).padStart(7)} req/s  p99 ${on.p99}`);
    console.log(`gateway: throughput JWT on / off = ${(on.rps / off.rps).toFixed(2)} (target ≥ 0.7)`);
  } finally {
    jwks.close();
  }
}

/** jose's verification rate for tokens never seen before (no cache), in one process. */
async function verifyRate(): Promise<void> {
  const key = await generateKeyPair("ES256");
  const jwks = createLocalJWKSet({ keys: [{ ...(await exportJWK(key.publicKey)), kid: "k1", alg: "ES256" }] });
  const tokens = await Promise.all(
    Array.from({ length: 2000 }, (_, i) =>
      new SignJWT({ scope: "read", n: i })
        .setProtectedHeader({ alg: "ES256", kid: "k1" })
        .setExpirationTime("1h")
        .sign(key.privateKey),
    ),
  );
  const t0 = performance.now();
  for (const t of tokens) await jwtVerify(t, jwks, { algorithms: ["ES256"], requiredClaims: ["exp"] });
  const s = (performance.now() - t0) / 1000;
  console.log(
    `gateway: jose ES256 verification of distinct tokens: ${(tokens.length / s).toFixed(0)} tokens/s in one process`,
  );
}

// HTTPS through the Gateway with JWT off and on (part of `npm run bench -- gateway`): the local
// cluster with Traefik (HTTPS entry point), cert-manager's controllers and its CA, pod stand-ins
// (a real `krane sentinel` process for the sentinel pod, a small HTTP server for the instance),
// the real ctrl and agent. The agent serves the endpoint's generated hostname over HTTPS on the
// environment's Gateway with a certificate cert-manager issued; wrk (64 keep-alive connections)
// goes client → Traefik (TLS) → sentinel → instance:
//  - JWT off: the endpoint without auth;
//  - JWT on, 1,000 clients: each request carries one of 1,000 distinct tokens in turn (each
//    client reuses its own token, so after its first request the sentinel's verified-token cache
//    answers);
//  - JWT on, a new token every request: every request carries a token never seen before (a
//    signature check each; 60,000 tokens signed beforehand, counted if wrk used them all up).
// wrk takes its TLS server name from the URL, and its URL host must resolve on this machine: it
// connects to 127.0.0.1 and sends the hostname in the Host header; Traefik routes by the Host
// header and, for a server name it has no listener for, presents its default certificate. The
// handshake is once per keep-alive connection, so the figures are the per-request path.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { request as httpsRequest } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Registry } from "prom-client";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { startCluster } from "../../src/cluster/index.js";
import { podAddressMap } from "../../src/cluster/pod-network.js";
import { applySentinelRbac } from "../../src/sentinel/rbac.js";
import { Agent } from "../../src/agent/agent.js";
import { parseGatewayRef, parseIssuer } from "../../src/agent/config.js";
import { agentKubeConfigFrom } from "../../src/agent/rbac.js";
import { silentLogger } from "../../src/base/log.js";
import {
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";
import { EndpointService } from "../../src/gen/krane/ctrl/v1/exposure_pb.js";
import { until } from "../support.js";
import { startTestCtrl, type TestCtrl } from "../../test/integration/ctrl/support.js";

const SECONDS = Number(process.env.KRANE_BENCH_GATEWAY_SECONDS ?? 10);
const CLIENTS = 1_000;
const FRESH_TOKENS = 60_000;
const HOST = "production-shop-acme.apps.bench";

interface WrkResult {
  rps: number;
  p50: string;
  p99: string;
  requests: number;
}

/** wrk over HTTPS; `tokens`: a file of tokens, one per line, sent in turn (as a bearer token). */
function wrk(port: number, dir: string, seconds: number, tokens?: string): WrkResult {
  const script = join(dir, "tokens.lua");
  writeFileSync(
    script,
    tokens === undefined
      ? `wrk.headers["Host"] = "${HOST}"\n`
      : [
          `wrk.headers["Host"] = "${HOST}"`,
          "local tokens = {}",
          `for line in io.lines("${tokens}") do tokens[#tokens + 1] = line end`,
          "local n = 0",
          "local threads = 0",
          "function setup(thread) thread:set('first', threads); threads = threads + 1 end",
          "function request()",
          "  n = n + 1",
          "  local i = ((first or 0) + n * 2) % #tokens + 1",
          `  return wrk.format("GET", "/books/" .. n, { ["Host"] = "${HOST}", ["Authorization"] = "Bearer " .. tokens[i] })`,
          "end",
        ].join("\n"),
  );
  const out = spawnSync(
    "wrk",
    ["-t2", "-c64", `-d${seconds}s`, "--latency", "-s", script, `https://127.0.0.1:${port}/books/1`],
    { encoding: "utf8" },
  );
  if (out.status !== 0) throw new Error(`wrk failed: ${out.stderr}`);
  const errors = /Non-2xx or 3xx responses: (\d+)/.exec(out.stdout);
  if (errors) throw new Error(`wrk saw ${errors[1]} non-2xx answers:\n${out.stdout}`);
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out.stdout)?.[1] ?? NaN),
    p50: /^\s*50%\s+(\S+)/m.exec(out.stdout)?.[1] ?? "?",
    p99: /^\s*99%\s+(\S+)/m.exec(out.stdout)?.[1] ?? "?",
    requests: Number(/(\d+) requests in/.exec(out.stdout)?.[1] ?? NaN),
  };
}

/** One HTTPS request with the hostname as TLS server name, trusting only the local CA. */
function status(port: number, ca: string, authorization?: string): Promise<number> {
  return new Promise((resolve) => {
    const req = httpsRequest(
      {
        host: "127.0.0.1",
        port,
        path: "/books/1",
        servername: HOST,
        ca,
        agent: false,
        headers: { host: HOST, ...(authorization ? { authorization } : {}) },
        timeout: 5_000,
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(0));
    req.end();
  });
}

export async function httpsThroughGateway(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "krane-bench-https-"));
  const cluster = await startCluster({ name: "bench-https", standins: true, gateway: true, tls: true });
  let agent: Agent | undefined;
  let ctrl: TestCtrl | undefined;
  const key = await generateKeyPair("ES256");
  const jwk = { ...(await exportJWK(key.publicKey)), kid: "k1", alg: "ES256" };
  const jwks = createHttpServer((_q, s) =>
    s.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys: [jwk] })),
  );
  await new Promise<void>((r) => jwks.listen(0, "127.0.0.1", r));
  try {
    const gws = cluster.gateways;
    const certs = cluster.certificates;
    if (!gws?.https || !certs) throw new Error("the bench cluster runs no HTTPS Gateway");
    const port = gws.https.port;
    await applySentinelRbac(cluster.kubeConfig());
    ctrl = await startTestCtrl(join(dir, "ctrl.db"), {
      opsListen: null,
      exposure: { publicApex: "apps.bench", scheme: "https" },
    });
    const token = ctrl.adminToken;
    const t = createConnectTransport({
      baseUrl: ctrl.url,
      httpVersion: "2",
      interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${token}`), next(req))],
    });
    const base = { workspace: "acme", project: "shop", environment: "production" };
    await createClient(RegionService, t).createRegion({ name: "local" });
    await createClient(WorkspaceService, t).createWorkspace({ slug: "acme" });
    await createClient(ProjectService, t).createProject({ workspace: "acme", slug: "shop" });
    await createClient(EnvironmentService, t).createEnvironment({
      ...base,
      slug: base.environment,
      regions: [{ region: "local", replicas: 1 }],
      sentinel: { image: "", replicas: 1, cpuMillicores: 1000n, memoryMib: 256n },
    });
    agent = new Agent({
      ctrlUrl: ctrl.url,
      token: await ctrl.agentToken("local"),
      region: "local",
      kubeconfig: await agentKubeConfigFrom(cluster.kubeConfig()),
      log: silentLogger,
      registry: new Registry(),
      opsPort: -1,
      podAddressMap: cluster.podNetwork ? podAddressMap(cluster.podNetwork) : undefined,
      gateway: {
        public: parseGatewayRef(gws.public.ref),
        organization: parseGatewayRef(gws.organization.ref),
        certificateIssuer: parseIssuer(certs.issuer),
        endpointCertificates: true,
        https: gws.https,
      },
    });
    await agent.start();
    const endpoints = createClient(EndpointService, t);
    await endpoints.setEndpoint({ ...base, visibility: "public" });
    await createClient(DeploymentService, t).createDeployment({ ...base, image: "ghcr.io/acme/shop:1", port: 8080 });
    await until("the hostname served over HTTPS", async () => (await status(port, certs.caPem)) === 200, 300_000, 200);

    wrk(port, dir, 2);
    const off = wrk(port, dir, SECONDS);

    const jwksUrl = `http://127.0.0.1:${(jwks.address() as { port: number }).port}/jwks`;
    await endpoints.setEndpoint({
      ...base,
      visibility: "public",
      auth: { jwksUrl, operations: [{ method: "GET", path: "/books/{id}", scopes: ["read"] }], defaultAction: "deny" },
    });
    await until("tokens required", async () => (await status(port, certs.caPem)) === 401, 120_000, 200);
    const sign = (n: number): Promise<string> =>
      new SignJWT({ scope: "read", sub: `client-${n}` })
        .setProtectedHeader({ alg: "ES256", kid: "k1" })
        .setExpirationTime("2h")
        .sign(key.privateKey);
    const write = async (file: string, count: number): Promise<string> => {
      const lines: string[] = [];
      for (let i = 0; i < count; i++) lines.push(await sign(i));
      writeFileSync(join(dir, file), `${lines.join("\n")}\n`);
      return join(dir, file);
    };
    const clients = await write("clients.txt", CLIENTS);
    const fresh = await write("fresh.txt", FRESH_TOKENS);
    const first = await status(port, certs.caPem, `Bearer ${await sign(-1)}`);
    if (first !== 200) throw new Error(`a request with a valid token was answered ${first}`);
    wrk(port, dir, 2, clients);
    const perClient = wrk(port, dir, SECONDS, clients);
    const everyRequest = wrk(port, dir, SECONDS, fresh);

    const line = (what: string, r: WrkResult): string =>
      `gateway: HTTPS via Traefik, wrk 64 conns, ${what.padEnd(32)} ${r.rps.toFixed(0).padStart(6)} req/s  p50 ${r.p50}  p99 ${r.p99}`;
    console.log(line("JWT off", off));
    console.log(line(`JWT on, ${CLIENTS} clients' tokens`, perClient));
    console.log(line("JWT on, a new token per request", everyRequest));
    if (everyRequest.requests > FRESH_TOKENS)
      console.log(
        `gateway: (the new-token run made ${everyRequest.requests} requests: the last ${everyRequest.requests - FRESH_TOKENS} reused a token)`,
      );
    console.log(
      `gateway: HTTPS throughput JWT on / off = ${(perClient.rps / off.rps).toFixed(2)} (${CLIENTS} clients), ${(everyRequest.rps / off.rps).toFixed(2)} (a new token per request)`,
    );
  } finally {
    jwks.close();
    await agent?.stop();
    await ctrl?.close();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

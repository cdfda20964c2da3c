// HTTPS end to end through a real Gateway: the local cluster runs cert-manager's own controllers
// (built from its Go module) with a CA ClusterIssuer, and Traefik (the Gateway API implementation)
// with an HTTPS entry point. The agent, given the issuer, --endpoint-certificates and
// --https-gateway-class, asks cert-manager for a Certificate per public hostname and attaches
// each Secret to an HTTPS listener of the environment's own Gateway; nobody edits a Gateway. A
// client that trusts only the local CA gets each hostname's certificate by SNI (a verified custom
// domain and a generated endpoint hostname), an unknown name gets none it trusts, a renewal
// swaps the served certificate while requests keep succeeding, and removing the domain takes its
// listener away.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { request as httpsRequest } from "node:https";
import type { TLSSocket } from "node:tls";
import { join } from "node:path";
import { readFile } from "node:fs/promises";
import { kubeRequest } from "../../src/cluster/kube-http.js";
import { toJson } from "@bufbuild/protobuf";
import { renderEnvironmentStatus } from "../../src/cli/status-view.js";
import { eventually, useCluster } from "../support/cluster.js";
import { startTestDns, type TestDns } from "../support/dns.js";
import {
  GetEnvironmentStatusResponseSchema,
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  StatusService,
  WorkspaceService,
} from "../../src/gen/krane/ctrl/v1/api_pb.js";
import { DomainService, EndpointService } from "../../src/gen/krane/ctrl/v1/exposure_pb.js";
import { Agent } from "../../src/agent/agent.js";
import { parseGatewayRef, parseIssuer } from "../../src/agent/config.js";
import { applySentinelRbac } from "../../src/sentinel/rbac.js";
import { routingAgent } from "./agent/support.js";
import { startTestCtrl, tempDir, type TestCtrl } from "./ctrl/support.js";

const handle = useCluster({ standins: true, gateway: true, tls: true });
const REGION = "local";
const ref = { workspace: "acme", project: "shop", environment: "production" };
const PUBLIC_HOST = "production-shop-acme.apps.test";
const DOMAIN = "www.shop.test";
const NS = "ws-acme";
const dir = tempDir();
let ctrl: TestCtrl;
let dns: TestDns;
let agent: Agent;
let caPem = "";
let httpsPort = 0;

interface Answer {
  status: number;
  body: string;
  /** The certificate the server presented. */
  cert: X509Certificate;
}

/** One HTTPS request on a fresh connection (a full handshake each), trusting only the local CA (or only Node's public roots). */
function get(servername: string, path: string, trust: "local-ca" | "public-roots" = "local-ca"): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: "127.0.0.1",
        port: httpsPort,
        path,
        servername,
        ...(trust === "local-ca" ? { ca: caPem } : {}),
        agent: false,
        headers: { host: servername },
        timeout: 10_000,
      },
      (res) => {
        const raw = (res.socket as TLSSocket).getPeerX509Certificate();
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => {
          if (!raw) reject(new Error("no peer certificate"));
          else resolve({ status: res.statusCode ?? 0, body, cert: raw });
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end();
  });
}

/** The answer, or the error's text (a refused certificate, a reset …). */
async function attempt(
  servername: string,
  path: string,
  trust: "local-ca" | "public-roots" = "local-ca",
): Promise<Answer | string> {
  try {
    return await get(servername, path, trust);
  } catch (err) {
    return err instanceof Error ? `${(err as NodeJS.ErrnoException).code ?? ""} ${err.message}` : String(err);
  }
}

before(
  async () => {
    const cluster = await handle.ready();
    const gws = cluster.gateways;
    const certs = cluster.certificates;
    assert.ok(gws?.https && certs, "the cluster runs Gateways with HTTPS and cert-manager");
    caPem = certs.caPem;
    httpsPort = gws.https.port;
    await applySentinelRbac(cluster.kubeConfig());
    dns = await startTestDns();
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      exposure: { publicApex: "apps.test", organizationApex: "internal.test", scheme: "https" },
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
      sentinel: { image: "", replicas: 1, cpuMillicores: 100n, memoryMib: 128n },
    });
    agent = await routingAgent(cluster, ctrl, REGION, {
      resyncPeriodMs: 5_000,
      gateway: {
        public: parseGatewayRef(gws.public.ref),
        organization: parseGatewayRef(gws.organization.ref),
        certificateIssuer: parseIssuer(certs.issuer),
        endpointCertificates: true,
        https: gws.https,
      },
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
  dir.remove();
});

/** What a failed wait prints: the Gateways and Certificates, and the end of Traefik's and cert-manager's logs. */
async function diagnostics(): Promise<string> {
  const c = handle.cluster;
  const gateways = await kubeRequest(
    c.endpoint(),
    "GET",
    `/apis/gateway.networking.k8s.io/v1/namespaces/${NS}/gateways`,
  );
  const certs = await kubeRequest(c.endpoint(), "GET", `/apis/cert-manager.io/v1/namespaces/${NS}/certificates`);
  const tail = async (f: string, n = 3000): Promise<string> =>
    `${f} (end): ${(await readFile(join(c.dir, "logs", f), "utf8").catch(() => "")).slice(-n)}`;
  return [
    `Gateways: ${gateways.body.slice(0, 4000)}`,
    `Certificates: ${certs.body.slice(0, 4000)}`,
    await tail("traefik.log"),
    await tail("cert-manager.log"),
  ].join("\n");
}

async function served(host: string, what: string): Promise<Answer> {
  let last: Answer | string = "";
  return eventually(
    what,
    async () => {
      last = await attempt(host, "/hello");
      return typeof last !== "string" && last.status === 200 ? last : undefined;
    },
    180_000,
  ).catch(async (err: unknown) => {
    throw new Error(`${String(err)}\nlast answer: ${JSON.stringify(last)}\n${await diagnostics()}`);
  });
}

/** Marks the Certificate for renewal as `cmctl renew` does (its Issuing condition, in status). */
async function renew(name: string): Promise<void> {
  const ep = handle.cluster.endpoint();
  const path = `/apis/cert-manager.io/v1/namespaces/${NS}/certificates/${name}`;
  const cert = JSON.parse((await kubeRequest(ep, "GET", path)).body) as {
    status?: { conditions?: Record<string, unknown>[] };
  };
  const conditions = [
    ...(cert.status?.conditions ?? []).filter((c) => c.type !== "Issuing"),
    {
      type: "Issuing",
      status: "True",
      reason: "ManuallyTriggered",
      message: "renewal asked for by the test",
      lastTransitionTime: new Date().toISOString(),
    },
  ];
  const res = await kubeRequest(ep, "PUT", `${path}/status`, { ...cert, status: { ...cert.status, conditions } });
  assert.equal(res.status, 200, res.body);
}

test(
  "HTTPS by SNI with certificates from cert-manager: a verified domain, a generated hostname, a renewal without a failed request",
  { timeout: 15 * 60_000 },
  async () => {
    const endpoints = ctrl.client(EndpointService, ctrl.adminToken);
    await endpoints.setEndpoint({ ...ref, visibility: "public" });

    // The generated hostname (--endpoint-certificates): its own certificate, from the local CA.
    const viaEndpoint = await served(PUBLIC_HOST, "the generated hostname served over HTTPS");
    assert.equal(viaEndpoint.cert.subjectAltName, `DNS:${PUBLIC_HOST}`);
    assert.match(viaEndpoint.cert.issuer, /krane local CA/);
    assert.equal((JSON.parse(viaEndpoint.body) as { host: string }).host, PUBLIC_HOST);

    // A custom domain: no certificate, no listener while unverified; once verified, its own.
    const domains = ctrl.client(DomainService, ctrl.adminToken);
    const { domain } = await domains.addDomain({ ...ref, hostname: DOMAIN });
    const pending = await attempt(DOMAIN, "/");
    assert.equal(typeof pending, "string", `no certificate the CA signed for ${DOMAIN} while pending`);
    dns.txt.set(`_krane-challenge.${DOMAIN}`, [domain?.txtValue ?? ""]);
    const viaDomain = await served(DOMAIN, "the verified domain served over HTTPS");
    assert.equal(viaDomain.cert.subjectAltName, `DNS:${DOMAIN}`, "SNI picks the domain's certificate");
    assert.equal((JSON.parse(viaDomain.body) as { host: string }).host, DOMAIN);
    assert.notEqual(viaDomain.cert.serialNumber, viaEndpoint.cert.serialNumber);

    // A client that trusts the public roots only refuses it; a name nobody asked for gets no
    // certificate the local CA signed.
    const untrusted = await attempt(DOMAIN, "/", "public-roots");
    assert.equal(typeof untrusted, "string");
    assert.match(String(untrusted), /certificate/i);
    const unknown = await attempt("nobody.shop.test", "/");
    assert.equal(typeof unknown, "string", `an unknown name: ${JSON.stringify(unknown)}`);

    // ctrl's status: the domain is ready (its certificate issued by cert-manager, its HTTPS
    // listener programmed by Traefik), and `krane status` shows the listener.
    const ready = await eventually(
      "the domain ready in status",
      async () => {
        const s = await ctrl.client(StatusService, ctrl.adminToken).getEnvironmentStatus(ref);
        return s.domains[0]?.regions[0]?.readiness === "ready" ? s : undefined;
      },
      60_000,
    );
    const domainRegion = ready.domains[0]?.regions[0];
    assert.deepEqual(
      domainRegion?.route?.certificates.map((c) => [
        c.hostname,
        c.ready?.status,
        c.listener?.status,
        c.listener?.reason,
      ]),
      [[DOMAIN, "True", "True", "Programmed"]],
    );
    const row = renderEnvironmentStatus(toJson(GetEnvironmentStatusResponseSchema, ready))
      .split("\n")
      .find((l) => l.includes(DOMAIN) && l.includes("domain"));
    assert.match(row ?? "", /\bready\s*│\s*programmed\b/, `the domain's row in krane status: ${row}`);

    // A renewal: requests on fresh connections from four clients all along; the served
    // certificate changes and none of them fails.
    const certName = await eventually("the domain's Certificate", async () => {
      const list = JSON.parse(
        (await kubeRequest(handle.cluster.endpoint(), "GET", `/apis/cert-manager.io/v1/namespaces/${NS}/certificates`))
          .body,
      ) as { items: { metadata: { name: string }; spec: { dnsNames: string[] } }[] };
      return list.items.find((c) => c.spec.dnsNames.includes(DOMAIN))?.metadata.name;
    });
    const before = viaDomain.cert.serialNumber;
    const failures: string[] = [];
    const serials = new Map<string, number>();
    let requests = 0;
    let renewedAt = 0;
    let stop = false;
    const client = async (): Promise<void> => {
      while (!stop) {
        const a = await attempt(DOMAIN, `/during-renewal/${requests++}`);
        if (typeof a === "string") failures.push(a);
        else if (a.status !== 200) failures.push(`HTTP ${a.status}: ${a.body.slice(0, 200)}`);
        else {
          serials.set(a.cert.serialNumber, (serials.get(a.cert.serialNumber) ?? 0) + 1);
          if (a.cert.serialNumber !== before && renewedAt === 0) renewedAt = requests;
        }
      }
    };
    const clients = [client(), client(), client(), client()];
    await renew(certName);
    try {
      await eventually("the renewed certificate served", async () => (renewedAt > 0 ? true : undefined), 120_000);
      // Keep going a while after the switch: the old certificate must not come back, nothing fails.
      const until = requests + 100;
      await eventually("100 more requests", async () => (requests >= until ? true : undefined), 120_000);
    } finally {
      stop = true;
      await Promise.all(clients);
    }
    console.log(
      `renewal: ${requests} requests, ${failures.length} failed; served serials ${JSON.stringify(Object.fromEntries(serials))}`,
    );
    assert.deepEqual(failures, [], "no request failed during the renewal");
    assert.equal(serials.size, 2, "the old certificate, then the renewed one");
    const after = await get(DOMAIN, "/after");
    assert.notEqual(after.cert.serialNumber, before);
    assert.equal(after.cert.subjectAltName, `DNS:${DOMAIN}`);

    // Removing the domain takes its listener (and certificate) away; the endpoint stays served.
    await domains.removeDomain({ ...ref, hostname: DOMAIN });
    await eventually(
      "the domain no longer served over HTTPS",
      async () => (typeof (await attempt(DOMAIN, "/")) === "string" ? true : undefined),
      60_000,
    );
    assert.equal((await get(PUBLIC_HOST, "/still")).status, 200);
  },
);

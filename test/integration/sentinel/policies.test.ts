// Edge policies through a real sentinel (`krane sentinel` in a pod stand-in on the real local
// cluster) reading its routing document from the cluster as the agent writes it: each kind lets
// through what it allows (the instance answers) and refuses what it refuses (the sentinel answers,
// naming the policy, and no instance does), a forwarding header counts only from a trusted proxy,
// each decision is counted by policy, a rate limit answers 429 with Retry-After and the RateLimit
// headers, and a refused document leaves the last good list in force.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import type { Pool } from "undici";
import { SENTINEL_NAMESPACE } from "../../../src/contracts/cluster.js";
import { parseEdgePolicies } from "../../../src/contracts/edge-policy.js";
import { formatRoutingPolicy, POLICY_KEY } from "../../../src/contracts/routing.js";
import type { KubeClient } from "../../../src/kube/client.js";
import { resources } from "../../../src/kube/resources.js";
import { eventually, useCluster } from "../../support/cluster.js";
import {
  createAppPod,
  createSentinelPod,
  hit,
  kubeFor,
  metricValue,
  proxyClient,
  RoutingWriter,
  routingLabels,
  sentinelMetrics,
  sentinelStatus,
  type PodRef,
  prepareAppNamespace,
} from "./support.js";

const h = useCluster({ standins: true });
const ENV = "env_policies";
let kube: KubeClient;
let routes: RoutingWriter;
let sentinel: PodRef;
let pool: Pool;

async function publish(version: number, policies: unknown, raw?: string): Promise<void> {
  const text =
    raw ??
    formatRoutingPolicy({
      version,
      environmentId: ENV,
      mode: "instances",
      revisions: [],
      policies: parseEdgePolicies("policies", policies),
    });
  await kube.apply(resources.configMaps, {
    metadata: { name: routes.sliceName("policy"), namespace: SENTINEL_NAMESPACE, labels: routingLabels(ENV) },
    data: { [POLICY_KEY]: text },
  });
}

async function serving(version: number): Promise<void> {
  await eventually(`the sentinel to serve routing version ${version}`, async () =>
    (await sentinelStatus(sentinel)).routingVersion === version ? true : undefined,
  );
}

async function send(
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<{
  status: number;
  cause: string | undefined;
  pod: string | undefined;
  headers: Record<string, unknown>;
}> {
  const res = await pool.request({
    method: method as "GET",
    path,
    headers: { host: "shop.example.com", ...headers },
    ...(body !== undefined ? { body } : {}),
    headersTimeout: 15_000,
    bodyTimeout: 15_000,
  });
  const text = await res.body.text();
  let pod: string | undefined;
  try {
    pod = (JSON.parse(text) as { pod?: string }).pod;
  } catch {
    pod = undefined;
  }
  const cause = res.headers["x-krane-sentinel-error"];
  return {
    status: res.statusCode,
    cause: typeof cause === "string" ? cause : undefined,
    pod,
    headers: res.headers,
  };
}

before(
  async () => {
    const cluster = await h.ready();
    kube = kubeFor(cluster);
    await prepareAppNamespace(cluster, kube);
    const app = await createAppPod(cluster, kube, "policies-1", "dep-p");
    routes = new RoutingWriter(kube, ENV);
    await publish(1, []);
    await routes.slice("dep-p", [{ ip: app.ip, pod: app.name }]);
    sentinel = await createSentinelPod(cluster, kube, "snt-policies", ENV);
    pool = proxyClient(sentinel, 4);
  },
  { timeout: 10 * 60_000 },
);

after(async () => {
  await pool?.close();
  kube?.close();
});

test("ip: allow and deny lists, and a forwarding header believed only from a trusted proxy", async () => {
  await serving(1);
  assert.equal((await hit(pool, "/")).answer?.pod, "policies-1", "no policy: the instance answers");

  // The test's peer (a loopback or pod-network address, below 192.0.0.0) is a trusted proxy here,
  // so the header names the client; 192.0.0.0 and up (the client and the spoofer) are not.
  await publish(2, [
    { name: "office", kind: "ip", allow: ["192.0.2.0/24"], trustedProxies: ["0.0.0.0/1", "128.0.0.0/2", "::/0"] },
  ]);
  await serving(2);
  const outside = await send("GET", "/");
  assert.deepEqual([outside.status, outside.cause, outside.pod], [403, "policy-ip", undefined]);
  const inside = await send("GET", "/", { "x-forwarded-for": "192.0.2.9" });
  assert.deepEqual([inside.status, inside.pod], [200, "policies-1"]);
  // What the client wrote left of the proxy's own entry proves nothing.
  assert.equal((await send("GET", "/", { "x-forwarded-for": "192.0.2.9, 198.51.100.1" })).status, 403);

  // The peer is not in the trusted range: its header is ignored, so spoofing gets nothing.
  await publish(3, [{ name: "office", kind: "ip", allow: ["192.0.2.0/24"], trustedProxies: ["10.99.0.0/16"] }]);
  await serving(3);
  const spoofed = await send("GET", "/", { "x-forwarded-for": "192.0.2.9" });
  assert.deepEqual([spoofed.status, spoofed.cause], [403, "policy-ip"]);

  // A deny list for the peer's family (IPv4 and IPv4-mapped IPv6 alike).
  await publish(4, [{ name: "block-v4", kind: "ip", deny: ["0.0.0.0/0"] }]);
  await serving(4);
  assert.equal((await send("GET", "/")).status, 403);
  const m = await sentinelMetrics(sentinel);
  assert.ok(metricValue(m, "krane_sentinel_policy_decisions_total", { policy: "office", decision: "deny" }) >= 3);
  assert.ok(metricValue(m, "krane_sentinel_policy_decisions_total", { policy: "office", decision: "allow" }) >= 1);
  assert.ok(metricValue(m, "krane_sentinel_policy_decisions_total", { policy: "block-v4", decision: "deny" }) >= 1);
});

test("limits: methods, path prefixes, header and body sizes; a refused document keeps the last good list", async () => {
  await publish(5, [
    {
      name: "api",
      kind: "limits",
      methods: ["GET", "POST"],
      pathPrefixes: ["/api"],
      maxHeaderBytes: 2048,
      maxBodyBytes: 8,
    },
  ]);
  await serving(5);
  assert.deepEqual(
    [(await send("GET", "/api/books")).pod, (await send("POST", "/api/books", {}, "1234")).pod],
    ["policies-1", "policies-1"],
  );
  const refused = [
    await send("DELETE", "/api/books"),
    await send("GET", "/admin"),
    await send("GET", "/apix"),
    await send("GET", "/api/../admin"),
    await send("GET", "/api/books", { "x-big": "a".repeat(4096) }),
    await send("POST", "/api/books", {}, "123456789"),
  ];
  assert.deepEqual(
    refused.map((r) => [r.status, r.cause, r.pod]),
    [
      [405, "policy-method", undefined],
      [404, "policy-path", undefined],
      [404, "policy-path", undefined],
      [400, "policy-path", undefined],
      [431, "policy-headers", undefined],
      [413, "policy-body", undefined],
    ],
  );

  // A newer document the sentinel refuses (a CIDR with host bits) changes nothing.
  const good = JSON.parse(
    formatRoutingPolicy({
      version: 6,
      environmentId: ENV,
      mode: "instances",
      revisions: [],
      policies: parseEdgePolicies("p", [{ name: "office", kind: "ip", deny: ["10.0.0.0/8"] }]),
    }),
  ) as { policies: { deny: string[] }[] };
  (good.policies[0] as { deny: string[] }).deny = ["10.0.0.1/8"];
  await publish(6, undefined, JSON.stringify(good));
  await eventually("the sentinel to refuse the bad document", async () =>
    (await sentinelStatus(sentinel)).policyError?.includes("policies[0].deny[0]") ? true : undefined,
  );
  assert.equal((await sentinelStatus(sentinel)).routingVersion, 5);
  assert.equal((await send("DELETE", "/api/books")).status, 405, "version 5's limits still hold");
});

test("ratelimit: past the limit, 429 with Retry-After and the RateLimit headers; each key its own budget", async () => {
  await publish(7, [
    { name: "per-tenant", kind: "ratelimit", key: "header", header: "x-tenant", limit: 3, windowSeconds: 3600 },
  ]);
  await serving(7);
  const acme = { "x-tenant": "acme" };
  const passed = [await send("GET", "/", acme), await send("GET", "/", acme), await send("GET", "/", acme)];
  assert.deepEqual(
    passed.map((r) => [r.status, r.pod]),
    [
      [200, "policies-1"],
      [200, "policies-1"],
      [200, "policies-1"],
    ],
  );
  const over = await send("GET", "/", acme);
  assert.deepEqual([over.status, over.cause, over.pod], [429, "policy-ratelimit", undefined]);
  const retry = Number(over.headers["retry-after"]);
  assert.ok(
    Number.isInteger(retry) && retry >= 1 && retry <= 3600,
    `Retry-After ${String(over.headers["retry-after"])}`,
  );
  assert.equal(over.headers["ratelimit-policy"], '"per-tenant";q=3;w=3600');
  assert.equal(over.headers.ratelimit, `"per-tenant";r=0;t=${retry}`);
  assert.equal((await send("GET", "/", { "x-tenant": "globex" })).pod, "policies-1", "another key's budget");
  const m = await sentinelMetrics(sentinel);
  assert.equal(metricValue(m, "krane_sentinel_policy_decisions_total", { policy: "per-tenant", decision: "deny" }), 1);
  assert.equal(metricValue(m, "krane_sentinel_policy_decisions_total", { policy: "per-tenant", decision: "allow" }), 4);
});

// Edge policies on the sentinel's request path (src/sentinel/policies.ts, request-path.ts): a
// refused request is answered at admission (no instance picked, nothing in flight), each decision
// counted by policy and decision, and the list carried through the routing document.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Registry } from "prom-client";
import { silentLogger } from "../../../src/base/log.js";
import { parseEdgePolicies } from "../../../src/contracts/edge-policy.js";
import { formatRoutingPolicy, parseRoutingPolicy } from "../../../src/contracts/routing.js";
import { Balancer } from "../../../src/sentinel/balancer.js";
import { createSentinelMetrics } from "../../../src/sentinel/metrics.js";
import { EdgePolicies } from "../../../src/sentinel/policies.js";
import { RequestPath, type RequestHead } from "../../../src/sentinel/request-path.js";

const LIST = parseEdgePolicies("policies", [
  { name: "office", kind: "ip", allow: ["192.0.2.0/24"] },
  { name: "api", kind: "limits", methods: ["GET"], maxBodyBytes: 4 },
]);

function setup() {
  const balancer = new Balancer();
  balancer.setTable({
    version: 1,
    mode: "instances",
    revisions: [
      {
        deploymentId: "d1",
        weight: null,
        endpoints: [
          {
            key: "10.0.0.1:8080",
            address: "10.0.0.1",
            port: 8080,
            dialHost: "10.0.0.1",
            deploymentId: "d1",
            pod: "p",
            protocol: "http1" as const,
          },
        ],
      },
    ],
  });
  const registry = new Registry();
  const metrics = createSentinelMetrics(() => [], registry, false);
  const policies = new EdgePolicies(metrics.policyDecisions);
  policies.set(LIST);
  const path = new RequestPath({
    balancer,
    metrics,
    log: silentLogger,
    hasTable: () => true,
    isReady: () => true,
    policies,
  });
  return { path, registry, policies };
}

function head(over: Partial<RequestHead> = {}): RequestHead {
  return {
    method: "GET",
    target: "/p",
    host: "shop.example.com",
    hostRequired: true,
    rawHeaders: ["host", "shop.example.com"],
    clientAddress: "192.0.2.5",
    hasBody: false,
    requestId: undefined,
    preview: undefined,
    authorization: undefined,
    ...over,
  };
}

async function decisions(registry: Registry): Promise<Record<string, number>> {
  const m = await registry.getSingleMetric("krane_sentinel_policy_decisions_total")?.get();
  return Object.fromEntries((m?.values ?? []).map((v) => [`${v.labels.policy}/${v.labels.decision}`, v.value]));
}

test("a request every policy passes goes on to an instance; a refused one is answered at admission", async () => {
  const { path, registry } = setup();
  const ok = path.begin(head());
  assert.equal(ok.refused, undefined);
  assert.ok(ok.next());
  ok.finish("2xx");

  const outside = path.begin(head({ clientAddress: "198.51.100.1" }));
  assert.equal(outside.refused?.status, 403);
  assert.equal(outside.refused?.headers["x-krane-sentinel-error"], "policy-ip");
  assert.ok(outside.finished, "a refusal is finished: nothing in flight, no instance");
  assert.equal(outside.instance, undefined);

  const post = path.begin(head({ method: "POST", hasBody: true, rawHeaders: ["host", "x", "content-length", "1"] }));
  assert.equal(post.refused?.status, 405);
  assert.equal(post.refused?.closeConnection, true, "an unread body is not read: the connection closes");
  assert.equal(path.inFlight, 0);

  assert.deepEqual(await decisions(registry), {
    "office/allow": 2,
    "office/deny": 1,
    "api/allow": 1,
    "api/deny": 1,
  });
});

test("no list: nothing is checked or counted", async () => {
  const { path, registry, policies } = setup();
  policies.set(undefined);
  assert.equal(path.begin(head({ clientAddress: "198.51.100.1" })).refused, undefined);
  assert.deepEqual(await decisions(registry), {});
});

test("the list travels in the routing document and back, in order", () => {
  const doc = formatRoutingPolicy({
    version: 7,
    environmentId: "env_1",
    mode: "instances",
    revisions: [],
    policies: LIST,
  });
  const back = parseRoutingPolicy(doc);
  assert.deepEqual(back.policies, LIST);
  assert.equal(parseRoutingPolicy(formatRoutingPolicy({ ...back, policies: [] })).policies, undefined);
  // A document with a bad policy is refused as a whole (the sentinel keeps its last good one).
  const bad = JSON.parse(doc) as { policies: { allow: string[] }[] };
  (bad.policies[0] as { allow: string[] }).allow = ["10.0.0.1/8"];
  assert.throws(() => parseRoutingPolicy(JSON.stringify(bad)), /policies\[0\]\.allow\[0\]/);
});

test("a rate limit answers 429 with Retry-After and the RateLimit headers; a new version keeps its counts", async () => {
  const { path, registry, policies } = setup();
  let now = 5_000;
  const clocked = new EdgePolicies(
    createSentinelMetrics(() => [], new Registry(), false).policyDecisions,
    "me",
    () => now,
  );
  const limit = parseEdgePolicies("policies", [
    { name: "per-ip", kind: "ratelimit", key: "address", limit: 2, windowSeconds: 60 },
  ]);
  clocked.set(limit);
  const r = (peer: string) => ({ method: "GET", path: "/", peer, rawHeaders: [], hasBody: false });
  assert.equal(clocked.check(r("192.0.2.1")), undefined);
  assert.equal(clocked.check(r("192.0.2.1")), undefined);
  const refused = clocked.check(r("::ffff:192.0.2.1"));
  assert.deepEqual(refused?.headers, {
    "ratelimit-policy": '"per-ip";q=2;w=60',
    ratelimit: '"per-ip";r=0;t=55',
    "retry-after": "55",
  });
  assert.equal(clocked.check(r("192.0.2.2")), undefined, "another address has its own budget");
  // A new routing version carrying the same policy keeps the counts; a changed one starts anew.
  clocked.set([...parseEdgePolicies("policies", [{ name: "office", kind: "ip", deny: ["203.0.113.0/24"] }]), ...limit]);
  assert.equal(clocked.check(r("192.0.2.1"))?.status, 429);
  clocked.set(
    parseEdgePolicies("policies", [{ name: "per-ip", kind: "ratelimit", key: "address", limit: 3, windowSeconds: 60 }]),
  );
  assert.equal(clocked.check(r("192.0.2.1")), undefined);
  now = 60_000;
  assert.equal(clocked.check(r("192.0.2.2")), undefined, "the next window starts empty");

  // Through the request path: the sentinel's own 429, nothing in flight.
  policies.set(
    parseEdgePolicies("policies", [
      { name: "tiny", kind: "ratelimit", key: "header", header: "x-tenant", limit: 1, windowSeconds: 3600 },
    ]),
  );
  const h = head({ rawHeaders: ["host", "shop.example.com", "x-tenant", "acme"] });
  const first = path.begin(h);
  assert.equal(first.refused, undefined);
  first.finish("2xx");
  const second = path.begin(h);
  assert.equal(second.refused?.status, 429);
  assert.equal(second.refused?.headers["x-krane-sentinel-error"], "policy-ratelimit");
  assert.match(second.refused?.headers["retry-after"] ?? "", /^\d+$/);
  assert.equal(path.begin(head({ rawHeaders: ["host", "x", "x-tenant", "other"] })).refused, undefined);
  assert.equal(path.inFlight, 1);
  assert.deepEqual((await decisions(registry))["tiny/deny"], 1);
});

test("a rate limit by JWT subject waits for authentication and counts the verified subject", () => {
  const policies = new EdgePolicies(createSentinelMetrics(() => [], new Registry(), false).policyDecisions);
  policies.set(
    parseEdgePolicies("policies", [{ name: "per-user", kind: "ratelimit", key: "jwt", limit: 1, windowSeconds: 60 }]),
  );
  const r = { method: "GET", path: "/", peer: "192.0.2.1", rawHeaders: [], hasBody: false };
  assert.equal(policies.check(r), undefined, "not at admission");
  assert.equal(policies.check(r), undefined);
  assert.ok(policies.afterAuth);
  assert.equal(policies.checkAuthenticated(r, "iss\u0000alice"), undefined);
  assert.equal(policies.checkAuthenticated(r, "iss\u0000alice")?.status, 429);
  assert.equal(policies.checkAuthenticated(r, "iss\u0000bob"), undefined, "each subject its own budget");
  // Without a verified token, requests share one budget.
  assert.equal(policies.checkAuthenticated(r, undefined), undefined);
  assert.equal(policies.checkAuthenticated(r, undefined)?.status, 429);
});

test("a rate limit by address counts each address alike whether its key was remembered or parsed again", () => {
  const p = new EdgePolicies(createSentinelMetrics(() => [], new Registry(), false).policyDecisions, "me", () => 1_000);
  p.set(
    parseEdgePolicies("policies", [{ name: "per-ip", kind: "ratelimit", key: "address", limit: 2, windowSeconds: 60 }]),
  );
  const r = (peer: string) => ({ method: "GET", path: "/", peer, rawHeaders: [], hasBody: false });
  assert.equal(p.check(r("192.0.2.1")), undefined);
  // More peers than are remembered: the first address's key is forgotten, then parsed anew.
  for (let i = 0; i < 10_001; i++)
    assert.equal(p.check(r(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`)), undefined);
  assert.equal(p.check(r("::ffff:192.0.2.1")), undefined, "the same address, written as IPv6");
  assert.equal(p.check(r("192.0.2.1"))?.status, 429, "its third request in the window");
});

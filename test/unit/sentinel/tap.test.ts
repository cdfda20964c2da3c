// The live request view's tap (src/sentinel/tap.ts) and the request path's records: nothing is
// kept while nobody asks; once asked, each finished request is one record with its status,
// revision, instance, the refusing policy and the API key's name; at most REQUESTS_PER_SECOND a
// second (the rest counted); query values never kept.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Registry } from "prom-client";
import { silentLogger } from "../../../src/base/log.js";
import { hashApiKey } from "../../../src/contracts/api-keys.js";
import { parseEdgePolicies } from "../../../src/contracts/edge-policy.js";
import { requestViewPath, type SentinelRequestRecord } from "../../../src/contracts/request-view.js";
import { Balancer } from "../../../src/sentinel/balancer.js";
import { createSentinelMetrics } from "../../../src/sentinel/metrics.js";
import { EdgePolicies } from "../../../src/sentinel/policies.js";
import { RequestPath, type RequestHead } from "../../../src/sentinel/request-path.js";
import { RequestTap } from "../../../src/sentinel/tap.js";

function record(timeMs: number): Omit<SentinelRequestRecord, "seq"> {
  return {
    timeMs,
    method: "GET",
    path: "/",
    status: 200,
    latencyMs: 1,
    deploymentId: "",
    instance: "",
    policy: "",
    client: "",
    key: "",
  };
}

test("nothing is kept before anyone asks, nor after they stopped asking", async () => {
  const tap = new RequestTap({ idleMs: 30 });
  tap.record(record(1_000));
  assert.equal(tap.active, false);
  assert.deepEqual(tap.read(0).records, [], "what passed before the first ask is not there");
  tap.record(record(1_001));
  assert.equal(tap.read(0).records.length, 1);
  await new Promise((r) => setTimeout(r, 60));
  assert.equal(tap.active, false, "idle: recording stops");
  tap.record(record(1_002));
  assert.equal(tap.read(0).records.length, 0, "and the records kept are dropped");
  tap.close();
});

test("at most perSecond records a second; the rest are counted as skipped; after= gives only newer ones", () => {
  const tap = new RequestTap({ perSecond: 3 });
  tap.read(0);
  for (let i = 0; i < 10; i++) tap.record(record(5_000 + i));
  tap.record(record(6_000));
  const first = tap.read(0);
  assert.deepEqual(
    first.records.map((r) => r.timeMs),
    [5_000, 5_001, 5_002, 6_000],
  );
  assert.equal(first.skipped, 7);
  tap.record(record(6_001));
  assert.deepEqual(
    tap.read(first.seq).records.map((r) => r.timeMs),
    [6_001],
  );
  tap.close();
});

test("requestViewPath keeps parameter names and hides every value, and bounds the length", () => {
  assert.equal(requestViewPath("/a/b"), "/a/b");
  assert.equal(requestViewPath("/a?key=secret&page=2"), "/a?key=…&page=…");
  assert.equal(requestViewPath("/a?sk_live_123"), "/a?…", "a bare part may be the secret itself");
  assert.equal(requestViewPath("/a?"), "/a?");
  const long = requestViewPath(`/${"x".repeat(1_000)}`);
  assert.equal(long.length, 256);
  assert.ok(long.endsWith("…"));
});

test("the request path records each finished request: served, refused by a policy, with the key's name", () => {
  const balancer = new Balancer();
  balancer.setTable({
    version: 1,
    mode: "instances",
    revisions: [
      {
        deploymentId: "dep_a",
        weight: null,
        endpoints: [
          {
            key: "10.0.0.1:8080",
            address: "10.0.0.1",
            port: 8080,
            dialHost: "10.0.0.1",
            deploymentId: "dep_a",
            pod: "shop-1",
            protocol: "http1" as const,
          },
        ],
      },
    ],
  });
  const metrics = createSentinelMetrics(() => [], new Registry(), false);
  const policies = new EdgePolicies(metrics.policyDecisions);
  policies.set(
    parseEdgePolicies("policies", [
      { name: "keys", kind: "apikey" },
      { name: "read-only", kind: "limits", methods: ["GET"] },
    ]),
  );
  policies.setKeys([
    {
      id: "k1",
      hash: hashApiKey("the-key"),
      name: "ci",
      expiresAt: null,
      limit: null,
      windowSeconds: null,
      metadata: {},
    },
  ]);
  const tap = new RequestTap();
  const path = new RequestPath({
    balancer,
    metrics,
    log: silentLogger,
    hasTable: () => true,
    isReady: () => true,
    policies,
    tap,
  });
  const head = (method: string, target: string): RequestHead => ({
    method,
    target,
    host: "shop.example.com",
    hostRequired: true,
    rawHeaders: ["host", "shop.example.com", "x-api-key", "the-key", "authorization", "Bearer t0ken"],
    clientAddress: "192.0.2.7",
    hasBody: false,
    requestId: undefined,
    preview: undefined,
    authorization: "Bearer t0ken",
  });
  // Nobody watches: a request leaves nothing.
  const unseen = path.begin(head("GET", "/x"));
  unseen.next();
  unseen.finish("2xx", 200);
  tap.read(0);
  const served = path.begin(head("GET", "/books?token=abc"));
  assert.equal(served.refused, undefined);
  served.next();
  served.finish("2xx", 200);
  const refused = path.begin(head("DELETE", "/books"));
  assert.equal(refused.refused?.status, 405);
  const [a, b, ...rest] = tap.read(0).records;
  assert.deepEqual(rest, []);
  assert.deepEqual(
    { ...a, latencyMs: 0, timeMs: 0 },
    {
      seq: 1,
      timeMs: 0,
      method: "GET",
      path: "/books?token=…",
      status: 200,
      latencyMs: 0,
      deploymentId: "dep_a",
      instance: "shop-1",
      policy: "",
      client: "192.0.2.7",
      key: "ci",
    },
  );
  assert.deepEqual(
    { ...b, latencyMs: 0, timeMs: 0 },
    {
      seq: 2,
      timeMs: 0,
      method: "DELETE",
      path: "/books",
      status: 405,
      latencyMs: 0,
      deploymentId: "",
      instance: "",
      policy: "read-only",
      client: "192.0.2.7",
      key: "ci",
    },
  );
  assert.ok(!JSON.stringify([a, b]).includes("t0ken") && !JSON.stringify([a, b]).includes("the-key"));
  tap.close();
});

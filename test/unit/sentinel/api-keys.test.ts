// API keys at the sentinel (src/contracts/api-keys.ts, src/sentinel/policies.ts): keys made with
// 256 random bits, carried only as SHA-256 in the routing document; an "apikey" policy refuses a
// missing, unknown, expired or revoked key (401) and one past its own limit (429), forwards the
// key's name and metadata to the app, and drops a client's own copy of that header.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Registry } from "prom-client";
import { hashApiKey, newApiKey, parseApiKeys, type CarriedApiKey } from "../../../src/contracts/api-keys.js";
import { parseEdgePolicies, PolicyFieldError, type EdgeRequest } from "../../../src/contracts/edge-policy.js";
import { formatRoutingPolicy, parseRoutingPolicy } from "../../../src/contracts/routing.js";
import { createSentinelMetrics } from "../../../src/sentinel/metrics.js";
import { EdgePolicies, withPolicyHeaders } from "../../../src/sentinel/policies.js";

const POLICY = parseEdgePolicies("policies", [{ name: "keys", kind: "apikey" }]);

function carried(key: string, over: Partial<CarriedApiKey> = {}): CarriedApiKey {
  return {
    id: "k1",
    hash: hashApiKey(key),
    name: "ci",
    expiresAt: null,
    limit: null,
    windowSeconds: null,
    metadata: { team: "billing" },
    ...over,
  };
}

function req(key: string | undefined, extra: string[] = []): EdgeRequest {
  return {
    method: "GET",
    path: "/",
    peer: "192.0.2.1",
    rawHeaders: [...(key === undefined ? [] : ["X-Api-Key", key]), ...extra],
    hasBody: false,
    forward: [],
  };
}

function setup(now = () => 1_000) {
  const p = new EdgePolicies(createSentinelMetrics(() => [], new Registry(), false).policyDecisions, "me", now);
  p.set(POLICY);
  return p;
}

test("keys are 256 random bits behind a prefix; only their SHA-256 travels", () => {
  const a = newApiKey();
  assert.match(a, /^krane_[A-Za-z0-9_-]{43}$/);
  assert.notEqual(a, newApiKey());
  assert.match(hashApiKey(a), /^[0-9a-f]{64}$/);
  const doc = formatRoutingPolicy({
    version: 1,
    environmentId: "env_1",
    mode: "instances",
    revisions: [],
    policies: POLICY,
    apiKeys: [carried(a)],
  });
  assert.ok(!doc.includes(a) && !doc.includes(a.slice(6)), "the document holds no key in plain text");
  assert.deepEqual(parseRoutingPolicy(doc).apiKeys, [carried(a)]);
});

test("a key is required, and only a listed, unexpired one passes; its name and metadata reach the app", () => {
  const key = newApiKey();
  let now = 1_000;
  const p = setup(() => now);
  p.setKeys([carried(key, { expiresAt: 5_000 })]);
  assert.equal(p.check(req(undefined))?.status, 401);
  assert.equal(p.check(req(newApiKey()))?.status, 401, "a key of another environment is not in this list");
  assert.equal(p.check(req(key.toUpperCase()))?.status, 401);
  const ok = req(key);
  assert.equal(p.check(ok), undefined);
  assert.deepEqual(ok.forward, ["x-krane-api-key", '{"id":"k1","name":"ci","metadata":{"team":"billing"}}']);
  now = 5_000;
  assert.match(p.check(req(key))?.message ?? "", /expired/);
});

test("a revoked key (gone from the list) is refused at once; a key's own limit answers 429", () => {
  const key = newApiKey();
  const other = newApiKey();
  const p = setup();
  p.setKeys([carried(key), carried(other, { id: "k2", limit: 2, windowSeconds: 60 })]);
  assert.equal(p.check(req(key)), undefined);
  p.setKeys([carried(other, { id: "k2", limit: 2, windowSeconds: 60 })]);
  assert.equal(p.check(req(key))?.status, 401);
  assert.equal(p.check(req(other)), undefined);
  assert.equal(p.check(req(other)), undefined);
  const over = p.check(req(other));
  assert.equal(over?.status, 429);
  assert.equal(over?.headers?.["ratelimit-policy"], '"key-k2";q=2;w=60');
  // A new version of the same keys keeps the key's count.
  p.setKeys([carried(other, { id: "k2", limit: 2, windowSeconds: 60 })]);
  assert.equal(p.check(req(other))?.status, 429);
});

test("a client's own copy of the forwarded header never reaches the app", () => {
  const key = newApiKey();
  const p = setup();
  p.setKeys([carried(key)]);
  const r = req(key, ["X-Krane-Api-Key", '{"id":"admin"}']);
  assert.equal(p.check(r), undefined);
  const sent = withPolicyHeaders(r.rawHeaders, p, r.forward);
  const forwarded = sent.filter((_, i) => i % 2 === 0 && sent[i]?.toLowerCase() === "x-krane-api-key");
  assert.equal(forwarded.length, 1);
  assert.equal(sent[sent.length - 1], '{"id":"k1","name":"ci","metadata":{"team":"billing"}}');
});

test("a bad carried key names its field", () => {
  const field = (v: unknown): string => {
    try {
      parseApiKeys("apiKeys", v);
    } catch (err) {
      assert.ok(err instanceof PolicyFieldError);
      return err.field;
    }
    return "";
  };
  const k = carried(newApiKey());
  assert.equal(field([{ ...k, hash: "abc" }]), "apiKeys[0].hash");
  assert.equal(field([{ ...k, limit: 0, windowSeconds: 60 }]), "apiKeys[0].limit");
  assert.equal(field([{ ...k, limit: 5 }]), "apiKeys[0].limit");
  assert.equal(field([{ ...k, metadata: { team: "é" } }]), "apiKeys[0].metadata.team");
  assert.equal(field([k, { ...k, hash: hashApiKey("x") }]), "apiKeys[1].id");
  assert.equal(field([k, { ...k, id: "k9" }]), "apiKeys[1].hash");
  assert.throws(
    () => parseEdgePolicies("p", [{ name: "a", kind: "apikey", header: "x-same", forwardHeader: "x-same" }]),
    (err: unknown) => err instanceof PolicyFieldError && err.field === "p[0].forwardHeader",
  );
});

test("a rate limit per API key counts by the key the apikey policy before it verified", () => {
  const [a, b] = [newApiKey(), newApiKey()];
  const p = new EdgePolicies(createSentinelMetrics(() => [], new Registry(), false).policyDecisions, "me", () => 1_000);
  p.set(
    parseEdgePolicies("policies", [
      { name: "keys", kind: "apikey" },
      { name: "per-key", kind: "ratelimit", key: "apikey", limit: 2, windowSeconds: 60 },
    ]),
  );
  p.setKeys([carried(a), carried(b, { id: "k2" })]);
  const status = (key: string) => p.check(req(key))?.status ?? 200;
  assert.deepEqual([status(a), status(a), status(a)], [200, 200, 429], "a's budget: 2");
  assert.deepEqual([status(b), status(b)], [200, 200], "b has its own budget");
  assert.equal(p.check(req(a))?.policy, "per-key");
  // Without an apikey policy before it, a limit per key is refused naming the field.
  assert.throws(
    () =>
      parseEdgePolicies("policies", [
        { name: "per-key", kind: "ratelimit", key: "apikey", limit: 2, windowSeconds: 60 },
        { name: "keys", kind: "apikey" },
      ]),
    (err: unknown) => err instanceof PolicyFieldError && err.field === "policies[0].key",
  );
});

// API keys in ctrl (src/ctrl/validate/api-keys.ts, domain/api-keys.ts, api/edge-policies.ts) and
// their way to the sentinel: a request's bad field named, the carried list (no revoked or expired
// key, digests only) read back by the agent's parser into the routing document, the "apikey"
// policy kind through the API's message, and the CLI's flags.
import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { hashApiKey, newApiKey } from "../../../src/contracts/api-keys.js";
import { parseRoutingPolicy, formatRoutingPolicy } from "../../../src/contracts/routing.js";
import { edgePolicyMsg, policyFromMsg } from "../../../src/ctrl/api/edge-policies.js";
import type { ApiKeyRow } from "../../../src/ctrl/db/schema.js";
import { carriedJson, carriedKeys } from "../../../src/ctrl/domain/api-keys.js";
import { DomainError } from "../../../src/ctrl/errors.js";
import { validateCreateApiKey, validateRevokeApiKey } from "../../../src/ctrl/validate/api-keys.js";
import { EdgePolicySchema } from "../../../src/gen/krane/ctrl/v1/exposure_pb.js";
import { apiKeysOf } from "../../../src/agent/sentinels/routing.js";
import { expiryOf, metadataOf } from "../../../src/cli/key.js";

const NOW = 1_800_000_000_000;
const REF = { workspace: "acme", project: "shop", environment: "production" };
const req = {
  ...REF,
  name: "mobile app",
  expiresAtUnixMs: 0n,
  rateLimit: 0n,
  rateWindowSeconds: 0n,
  metadata: {} as Record<string, string>,
};

function field(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof DomainError, String(err));
    return `${err.code} ${err.field ?? ""}`;
  }
  assert.fail("no error");
}

test("CreateApiKey: the input checked by the carried form's rules, each problem naming the request's field", () => {
  assert.deepEqual(validateCreateApiKey({ ...req, metadata: { plan: "pro" } }, NOW), {
    ref: REF,
    name: "mobile app",
    expiresAt: null,
    limit: null,
    windowSeconds: null,
    metadata: { plan: "pro" },
  });
  const ok = validateCreateApiKey(
    { ...req, expiresAtUnixMs: BigInt(NOW + 1000), rateLimit: 10n, rateWindowSeconds: 60n },
    NOW,
  );
  assert.deepEqual([ok.expiresAt, ok.limit, ok.windowSeconds], [NOW + 1000, 10, 60]);
  const bad: [Partial<typeof req>, string][] = [
    [{ name: "" }, "invalid_argument name"],
    [{ name: "a\nb" }, "invalid_argument name"],
    [{ expiresAtUnixMs: BigInt(NOW) }, "invalid_argument expires_at_unix_ms"],
    [{ expiresAtUnixMs: -5n }, "invalid_argument expires_at_unix_ms"],
    [{ rateLimit: 10n }, "invalid_argument rate_window_seconds"],
    [{ rateWindowSeconds: 10n }, "invalid_argument rate_limit"],
    [{ rateLimit: -1n, rateWindowSeconds: 10n }, "invalid_argument rate_limit"],
    [{ rateLimit: 5n, rateWindowSeconds: 86_401n }, "invalid_argument rate_window_seconds"],
    [{ metadata: { plan: "é" } }, "invalid_argument metadata.plan"],
    [{ metadata: { big: "x".repeat(2000) } }, "invalid_argument metadata"],
    [{ workspace: "" }, "invalid_argument workspace"],
  ];
  for (const [change, want] of bad)
    assert.equal(
      field(() => validateCreateApiKey({ ...req, ...change }, NOW)),
      want,
    );
  assert.equal(
    field(() => validateRevokeApiKey({ ...REF, keyId: "tok_1" })),
    "invalid_argument key_id",
  );
  assert.equal(validateRevokeApiKey({ ...REF, keyId: "key_0123456789abcdefghij" }).keyId, "key_0123456789abcdefghij");
});

function row(id: string, o: Partial<ApiKeyRow> = {}): ApiKeyRow {
  return {
    id,
    workspace_id: "ws_1",
    environment_id: "env_1",
    name: id,
    digest: hashApiKey(`secret-${id}`),
    hint: "abcd",
    expires_at: null,
    rate_limit: null,
    rate_window_seconds: null,
    metadata: "{}",
    created_by: "ada@example.com",
    created_at: NOW - 10_000,
    revoked_at: null,
    ...o,
  };
}

test("the carried list: neither revoked nor expired keys, oldest first, digests only; the agent reads it into the document", () => {
  const rows = [
    row("key_b", { created_at: NOW - 5, rate_limit: 3, rate_window_seconds: 60, metadata: '{"plan":"pro"}' }),
    row("key_a"),
    row("key_revoked", { revoked_at: NOW - 1 }),
    row("key_expired", { expires_at: NOW }),
    row("key_later", { expires_at: NOW + 1 }),
  ];
  const keys = carriedKeys(rows, NOW);
  assert.deepEqual(
    keys.map((k) => k.id),
    ["key_a", "key_later", "key_b"],
  );
  assert.deepEqual(keys[2], {
    id: "key_b",
    hash: hashApiKey("secret-key_b"),
    name: "key_b",
    expiresAt: null,
    limit: 3,
    windowSeconds: 60,
    metadata: { plan: "pro" },
  });
  assert.equal(carriedJson([]), null);
  const json = carriedJson(keys) ?? "";
  assert.ok(!json.includes("secret-"), "no key in plain text");
  // The agent's parser (the routing document's rules) accepts what ctrl carries.
  const carried = apiKeysOf(json);
  assert.deepEqual(carried, keys);
  assert.equal(apiKeysOf(""), undefined);
  assert.throws(() => apiKeysOf('[{"id":"key_x","hash":"nothex"}]'), /routing\.apiKeys\[0\]\.hash/);
  const doc = parseRoutingPolicy(
    formatRoutingPolicy({
      version: 7,
      environmentId: "env_1",
      mode: "instances",
      revisions: [],
      policies: [{ kind: "apikey", name: "keys", header: "", forwardHeader: "" }],
      apiKeys: carried,
    }),
  );
  assert.deepEqual(doc.apiKeys, keys);
  // A made key is "krane_" and 32 random bytes; only its digest is stored.
  const k = newApiKey();
  assert.match(k, /^krane_[A-Za-z0-9_-]{43}$/);
});

test("the apikey policy kind through the API's message, both ways", () => {
  const p = policyFromMsg(
    create(EdgePolicySchema, { name: "keys", kind: { case: "apiKey", value: { header: "x-key", forwardHeader: "" } } }),
  );
  assert.deepEqual(p, { kind: "apikey", name: "keys", header: "x-key", forwardHeader: "" });
  const m = edgePolicyMsg(p);
  assert.equal(m.kind.case, "apiKey");
  assert.deepEqual(policyFromMsg(m), p);
  assert.match(m.summary, /x-key/);
  assert.throws(
    () =>
      policyFromMsg(
        create(EdgePolicySchema, {
          name: "keys",
          kind: { case: "apiKey", value: { header: "x-api-key", forwardHeader: "x-api-key" } },
        }),
      ),
    (err: unknown) => err instanceof DomainError && err.field === "policy.api_key.forward_header",
  );
});

test("krane key create's flags: --expires as a duration or a date, --meta pairs", () => {
  assert.equal(expiryOf("30d", NOW), BigInt(NOW + 30 * 86_400_000));
  assert.equal(expiryOf("12h", NOW), BigInt(NOW + 12 * 3_600_000));
  assert.equal(expiryOf("2027-01-31T00:00:00Z", NOW), BigInt(Date.parse("2027-01-31T00:00:00Z")));
  assert.throws(() => expiryOf("soon", NOW), /--expires/);
  assert.deepEqual(metadataOf(["plan=pro", "team=a=b"]), { plan: "pro", team: "a=b" });
  assert.deepEqual(metadataOf(undefined), {});
  assert.throws(() => metadataOf(["plan"]), /--meta/);
  assert.throws(() => metadataOf(["a=1", "a=2"]), /twice/);
});

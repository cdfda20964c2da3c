// The pure parts of pagination and idempotency: page tokens round-trip for their caller and
// request only, and any single-bit change is refused; page sizes; answers sealed for one caller
// and key open for that caller and key only; idempotency key syntax; request digests.
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { create } from "@bufbuild/protobuf";
import { CreateDeploymentRequestSchema } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { DomainError } from "../../../src/ctrl/errors.js";
import { decodePageToken, encodePageToken, keys, pageSize } from "../../../src/ctrl/api/page-token.js";
import { openAnswer, parseIdempotencyKey, requestDigest, sealAnswer } from "../../../src/ctrl/server/idempotency.js";

const deploymentKey = keys.tuple("number", "number", "string");
const keyArb = fc.tuple(fc.nat({ max: 2 ** 45 }), fc.nat({ max: 2 ** 31 }), fc.string({ maxLength: 40 }));

function refusedField(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return err instanceof DomainError && err.code === "invalid_argument" ? err.field : `unexpected: ${String(err)}`;
  }
  return undefined;
}

test("a page token gives its key back to the same caller for the same request", () => {
  fc.assert(
    fc.property(fc.string({ minLength: 1 }), fc.string(), keyArb, (secret, scope, key) => {
      const token = encodePageToken(secret, scope, key);
      assert.match(token, /^[A-Za-z0-9_-]+$/, "URL-safe");
      assert.deepEqual(decodePageToken(secret, scope, token, deploymentKey), key);
    }),
  );
});

test("a page token is refused for another caller, another request, or with any bit changed", () => {
  fc.assert(
    fc.property(
      fc.string({ minLength: 1 }),
      fc.string(),
      keyArb,
      fc.nat(),
      fc.integer({ min: 0, max: 5 }),
      (secret, scope, key, pos, bit) => {
        const token = encodePageToken(secret, scope, key);
        assert.equal(
          refusedField(() => decodePageToken(`${secret}x`, scope, token, deploymentKey)),
          "page_token",
        );
        assert.equal(
          refusedField(() => decodePageToken(secret, `${scope}x`, token, deploymentKey)),
          "page_token",
        );
        const raw = Buffer.from(token, "base64url");
        const i = pos % raw.length;
        raw[i] = (raw[i] ?? 0) ^ (1 << bit);
        assert.equal(
          refusedField(() => decodePageToken(secret, scope, raw.toString("base64url"), deploymentKey)),
          "page_token",
        );
      },
    ),
  );
  // A key of the wrong shape (a token of another list) is refused too.
  const other = encodePageToken("s", "scope", "just-a-slug");
  assert.equal(
    refusedField(() => decodePageToken("s", "scope", other, deploymentKey)),
    "page_token",
  );
  assert.equal(
    refusedField(() => decodePageToken("s", "scope", "x".repeat(5000), deploymentKey)),
    "page_token",
  );
});

test("page sizes: 0 is 100, above 1000 is 1000, negative is refused", () => {
  assert.equal(pageSize(0), 100);
  assert.equal(pageSize(1), 1);
  assert.equal(pageSize(1000), 1000);
  assert.equal(pageSize(2 ** 31 - 1), 1000);
  assert.equal(
    refusedField(() => pageSize(-1)),
    "page_size",
  );
});

test("a sealed answer opens for its caller and key only", () => {
  fc.assert(
    fc.property(
      fc.string({ minLength: 1 }),
      fc.uint8Array({ maxLength: 512 }),
      fc.string({ minLength: 1, maxLength: 20 }),
      (secret, answer, key) => {
        const id = { scope: "user:tok_a", method: "DeploymentService/CreateDeployment", key };
        const sealed = sealAnswer(secret, id, answer);
        assert.deepEqual(openAnswer(secret, id, sealed), Buffer.from(answer));
        assert.equal(openAnswer(`${secret}!`, id, sealed), undefined);
        assert.equal(openAnswer(secret, { ...id, key: `${key}!` }, sealed), undefined);
        assert.equal(openAnswer(secret, { ...id, method: "DeploymentService/DeleteDeployment" }, sealed), undefined);
      },
    ),
  );
});

test("idempotency keys: 1 to 255 of letters, digits and -_.:", () => {
  for (const ok of ["a", "3f2c9a1e-8d7b-4c1a-9e55-1b2c3d4e5f60", "cli:run-1:2", "k".repeat(255)])
    assert.equal(parseIdempotencyKey(ok), ok);
  for (const bad of ["", "k".repeat(256), "with space", "ünï", "a/b", "a\nb"])
    assert.throws(() => parseIdempotencyKey(bad), /Idempotency-Key header/);
});

test("the request digest tells requests apart and ignores nothing", () => {
  const a = create(CreateDeploymentRequestSchema, {
    workspace: "acme",
    project: "web",
    environment: "prod",
    image: "img:1",
  });
  const same = create(CreateDeploymentRequestSchema, {
    workspace: "acme",
    project: "web",
    environment: "prod",
    image: "img:1",
  });
  const other = create(CreateDeploymentRequestSchema, {
    workspace: "acme",
    project: "web",
    environment: "prod",
    image: "img:1",
    replicas: 0,
  });
  assert.equal(requestDigest(CreateDeploymentRequestSchema, a), requestDigest(CreateDeploymentRequestSchema, same));
  assert.notEqual(
    requestDigest(CreateDeploymentRequestSchema, a),
    requestDigest(CreateDeploymentRequestSchema, other),
    "an explicit 0 is another request",
  );
});

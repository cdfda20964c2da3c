// The one AES-256-GCM seal: a value opens with its key and additional data only, and not once
// altered; what secrets at rest, idempotent answers and page tokens are built on.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import fc from "fast-check";
import { NONCE_BYTES, openGcm, sealGcm, TAG_BYTES } from "../../../src/base/seal.js";

test("a sealed value opens with its key and additional data, and with nothing else", () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 256 }), fc.string({ maxLength: 20 }), (plain, aad) => {
      const key = randomBytes(32);
      const sealed = sealGcm(key, plain, aad);
      assert.equal(sealed.length, NONCE_BYTES + plain.length + TAG_BYTES);
      assert.deepEqual(openGcm(key, sealed, aad), Buffer.from(plain));
      assert.equal(openGcm(randomBytes(32), sealed, aad), undefined, "another key");
      assert.equal(openGcm(key, sealed, `${aad}x`), undefined, "other additional data");
      const altered = Buffer.from(sealed);
      altered[NONCE_BYTES] = (altered[NONCE_BYTES] ?? 0) ^ 1;
      if (plain.length > 0) assert.equal(openGcm(key, altered, aad), undefined, "an altered byte");
      assert.equal(openGcm(key, sealed.subarray(0, NONCE_BYTES + TAG_BYTES - 1), aad), undefined, "too short");
    }),
  );
});

test("two seals of one value differ (random nonces)", () => {
  const key = randomBytes(32);
  assert.notDeepEqual(sealGcm(key, Buffer.from("x")), sealGcm(key, Buffer.from("x")));
});

// AES-256-GCM sealing, the one implementation behind every sealed value krane keeps or hands out
// (secrets at rest, idempotent answers, page tokens): a random 12-byte nonce, the ciphertext and
// the 16-byte tag, with optional additional data bound to the value (where it may be used: a
// value sealed for one row does not open for another). Random nonces: at 2^32 seals per key the
// risk of a repeated nonce stays below 2^-32.
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";

export const NONCE_BYTES = 12;
export const TAG_BYTES = 16;
export const KEY_BYTES = 32;

/** nonce | ciphertext | tag of `plain` under `key` (32 bytes), bound to `aad`. */
export function sealGcm(key: Uint8Array, plain: Uint8Array, aad = ""): Buffer {
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv("aes-256-gcm", key, nonce);
  if (aad !== "") cipher.setAAD(Buffer.from(aad, "utf8"));
  const body = Buffer.concat([cipher.update(plain), cipher.final()]);
  return Buffer.concat([nonce, body, cipher.getAuthTag()]);
}

/** The plaintext of a value sealGcm made, or undefined when it does not open (key, aad, or altered). */
export function openGcm(key: Uint8Array, sealed: Uint8Array, aad = ""): Buffer | undefined {
  if (sealed.length < NONCE_BYTES + TAG_BYTES) return undefined;
  const buf = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, buf.subarray(0, NONCE_BYTES));
    if (aad !== "") decipher.setAAD(Buffer.from(aad, "utf8"));
    decipher.setAuthTag(buf.subarray(buf.length - TAG_BYTES));
    return Buffer.concat([decipher.update(buf.subarray(NONCE_BYTES, buf.length - TAG_BYTES)), decipher.final()]);
  } catch {
    return undefined;
  }
}

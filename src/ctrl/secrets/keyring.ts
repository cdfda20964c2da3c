// Envelope encryption of secrets at rest (AES-256-GCM, node:crypto).
//
//   master key (per installation; a file or KRANE_MASTER_KEY, never in the database)
//     └─ wraps each environment's data key (random 256 bits, stored wrapped in data_keys)
//          └─ encrypts that environment's secret values (environment_secrets, deployments.secrets,
//             release_objects.sealed)
//
// Rotating the master key rewraps the data keys (a few rows), never the values. A keyring holds
// the current master key and any previous ones: it decrypts with whichever wrapped a data key
// (found by its key id) and wraps only with the current one, so replicas can run through a
// rotation. Every ciphertext carries its purpose as associated data (the environment, revision
// or object it belongs to), so a ciphertext copied to another row does not decrypt there.
//
// Format of a sealed value: 1 byte version (1) | 12 bytes nonce | ciphertext | 16 bytes tag.
// Nonces are random: at 2^32 encryptions per key the collision risk stays below 2^-32.
import { createHash, randomBytes } from "node:crypto";
import { KEY_BYTES, NONCE_BYTES, openGcm, sealGcm, TAG_BYTES } from "../../base/seal.js";

export { KEY_BYTES };

const VERSION = 1;

export class KeyringError extends Error {}

/** A master key's id: a hash of it (never the key), stored next to what it wrapped. */
export function masterKeyId(key: Uint8Array): string {
  return createHash("sha256").update("krane master key id\u0000").update(key).digest("hex").slice(0, 16);
}

export function seal(key: Uint8Array, plaintext: Uint8Array, aad: string): Uint8Array {
  if (key.length !== KEY_BYTES) throw new KeyringError("keys are 32 bytes");
  return Buffer.concat([Buffer.from([VERSION]), sealGcm(key, plaintext, aad)]);
}

export function open(key: Uint8Array, sealed: Uint8Array, aad: string): Buffer {
  if (key.length !== KEY_BYTES) throw new KeyringError("keys are 32 bytes");
  if (sealed.length < 1 + NONCE_BYTES + TAG_BYTES || sealed[0] !== VERSION)
    throw new KeyringError("not a sealed value of a known format");
  const plain = openGcm(key, sealed.subarray(1), aad);
  // Never say more: the value, the key and the plaintext stay out of messages.
  if (plain === undefined)
    throw new KeyringError("a sealed value did not decrypt (wrong key, or it was altered or moved)");
  return plain;
}

/** Parses a master key: 32 bytes as base64 (44 characters) or hex (64 characters). */
export function parseMasterKey(text: string, where: string): Buffer {
  const t = text.trim();
  let key: Buffer | undefined;
  if (/^[0-9a-fA-F]{64}$/.test(t)) key = Buffer.from(t, "hex");
  else if (/^[A-Za-z0-9+/_-]{43}=?$/.test(t)) key = Buffer.from(t.replace(/-/g, "+").replace(/_/g, "/"), "base64");
  if (key === undefined || key.length !== KEY_BYTES)
    throw new KeyringError(
      `${where}: a master key is 32 random bytes as base64 or hex (e.g. \`openssl rand -base64 32\`)`,
    );
  return key;
}

export function generateMasterKey(): string {
  return randomBytes(KEY_BYTES).toString("base64");
}

/** The master keys ctrl knows: the current one wraps, any of them unwraps. */
export class Keyring {
  readonly currentId: string;
  readonly #current: Buffer;
  readonly #byId = new Map<string, Buffer>();

  constructor(current: Uint8Array, previous: readonly Uint8Array[] = []) {
    this.#current = Buffer.from(current);
    if (this.#current.length !== KEY_BYTES) throw new KeyringError("master keys are 32 bytes");
    this.currentId = masterKeyId(this.#current);
    this.#byId.set(this.currentId, this.#current);
    for (const p of previous) {
      if (p.length !== KEY_BYTES) throw new KeyringError("master keys are 32 bytes");
      const id = masterKeyId(p);
      if (!this.#byId.has(id)) this.#byId.set(id, Buffer.from(p));
    }
  }

  knows(masterKeyId: string): boolean {
    return this.#byId.has(masterKeyId);
  }

  /** A new random data key, and its wrapped form under the current master key. */
  newDataKey(owner: string): { key: Buffer; wrapped: Uint8Array; masterKeyId: string } {
    const key = randomBytes(KEY_BYTES);
    return { key, wrapped: seal(this.#current, key, `data key ${owner}`), masterKeyId: this.currentId };
  }

  unwrap(wrapped: Uint8Array, wrappedBy: string, owner: string): Buffer {
    const master = this.#byId.get(wrappedBy);
    if (!master)
      throw new KeyringError(
        `the data key of ${owner} is wrapped by master key ${wrappedBy}, which this ctrl was not given (--master-key-file / --previous-master-key-file)`,
      );
    return open(master, wrapped, `data key ${owner}`);
  }

  /** The data key rewrapped under the current master key. */
  rewrap(wrapped: Uint8Array, wrappedBy: string, owner: string): Uint8Array {
    return seal(this.#current, this.unwrap(wrapped, wrappedBy, owner), `data key ${owner}`);
  }
}

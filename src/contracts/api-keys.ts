// API keys an environment's "apikey" policy requires (./edge-policy.ts). A key is shown once when
// made; only its SHA-256 travels and is kept: the key is 256 random bits, so a fast hash is as
// safe as a slow one (nothing to guess) and the sentinel can check one per request without a call
// anywhere. The sentinel's routing document carries the environment's keys hashed (`apiKeys`), so
// every sentinel of a routing version knows the same keys and a revoked key (gone from the list)
// is refused as soon as each sentinel reads the new version.
//
// Pure: making and hashing keys, and parsing the carried list (each bad field named).
import { hash, randomBytes } from "node:crypto";
import { PolicyFieldError } from "./edge-policy.js";

export const API_KEY_PREFIX = "krane_";
/** Keys one environment carries at most (the routing document is a ConfigMap: ≤ 1 MiB). */
export const MAX_API_KEYS = 5000;
export const MAX_KEY_METADATA_BYTES = 1024;
const HASH_RE = /^[0-9a-f]{64}$/;
const ID_RE = /^[A-Za-z0-9_-]{1,64}$/;
const NAME_RE = /^[\x20-\x7e]{1,100}$/;

export interface CarriedApiKey {
  readonly id: string;
  /** SHA-256 of the key, lowercase hex. */
  readonly hash: string;
  readonly name: string;
  /** Epoch ms; null: never. */
  readonly expiresAt: number | null;
  /** The key's own rate limit (null: none). */
  readonly limit: number | null;
  readonly windowSeconds: number | null;
  /** Flat string metadata forwarded to the app (printable ASCII, at most 1 KiB as JSON). */
  readonly metadata: Readonly<Record<string, string>>;
}

/** A new key: "krane_" and 32 random bytes in base64url. */
export function newApiKey(): string {
  return `${API_KEY_PREFIX}${randomBytes(32).toString("base64url")}`;
}

/** The key's SHA-256, lowercase hex (one-shot: a third of createHash's time, once per request at the sentinel). */
export function hashApiKey(key: string): string {
  return hash("sha256", key, "hex");
}

function fail(field: string, problem: string): never {
  throw new PolicyFieldError(field, problem);
}

function count(field: string, v: unknown, max: number): number | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1 || v > max) fail(field, `must be an integer 1–${max}`);
  return v;
}

export function parseApiKey(f: string, v: unknown): CarriedApiKey {
  if (typeof v !== "object" || v === null || Array.isArray(v)) fail(f, "must be an object");
  const o = v as Record<string, unknown>;
  if (typeof o.id !== "string" || !ID_RE.test(o.id)) fail(`${f}.id`, "must be 1–64 letters, digits, _ or -");
  if (typeof o.hash !== "string" || !HASH_RE.test(o.hash)) fail(`${f}.hash`, "must be a SHA-256 in lowercase hex");
  if (typeof o.name !== "string" || !NAME_RE.test(o.name)) fail(`${f}.name`, "must be 1–100 printable characters");
  const expiresAt = o.expiresAt ?? null;
  if (expiresAt !== null && (typeof expiresAt !== "number" || !Number.isSafeInteger(expiresAt) || expiresAt < 0))
    fail(`${f}.expiresAt`, "must be a time in epoch milliseconds");
  const limit = count(`${f}.limit`, o.limit, 1_000_000_000);
  const windowSeconds = count(`${f}.windowSeconds`, o.windowSeconds, 86_400);
  if ((limit === null) !== (windowSeconds === null)) fail(`${f}.limit`, "and windowSeconds go together");
  const m = o.metadata ?? {};
  if (typeof m !== "object" || m === null || Array.isArray(m)) fail(`${f}.metadata`, "must be an object");
  const metadata: Record<string, string> = {};
  for (const [k, x] of Object.entries(m as Record<string, unknown>)) {
    if (!NAME_RE.test(k) || typeof x !== "string" || !/^[\x20-\x7e]*$/.test(x))
      fail(`${f}.metadata.${k}`, "must be a printable ASCII string");
    metadata[k] = x;
  }
  if (Buffer.byteLength(JSON.stringify(metadata)) > MAX_KEY_METADATA_BYTES)
    fail(`${f}.metadata`, `is over ${MAX_KEY_METADATA_BYTES} bytes`);
  return { id: o.id, hash: o.hash, name: o.name, expiresAt, limit, windowSeconds, metadata };
}

/** The carried list (ids and hashes unique, at most MAX_API_KEYS). */
export function parseApiKeys(field: string, v: unknown): CarriedApiKey[] {
  if (!Array.isArray(v)) fail(field, "must be a list");
  if (v.length > MAX_API_KEYS) fail(field, `has more than ${MAX_API_KEYS} keys`);
  const ids = new Set<string>();
  const hashes = new Set<string>();
  return v.map((x: unknown, i) => {
    const k = parseApiKey(`${field}[${i}]`, x);
    if (ids.has(k.id)) fail(`${field}[${i}].id`, `repeats ${k.id}`);
    if (hashes.has(k.hash)) fail(`${field}[${i}].hash`, "repeats another key's");
    ids.add(k.id);
    hashes.add(k.hash);
    return k;
  });
}

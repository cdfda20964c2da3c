// Validation of ApiKeyService requests: a key's name, expiry, own rate limit and metadata, by the
// rules the sentinel's document holds them to (src/contracts/api-keys.ts), each problem named by
// the request's field. Pure.
import { parseApiKey } from "../../contracts/api-keys.js";
import { PolicyFieldError } from "../../contracts/edge-policy.js";
import type { CreateApiKeyRequest } from "../../gen/krane/ctrl/v1/keys_pb.js";
import { invalidArgument } from "../errors.js";
import { validateEnvironmentRef } from "./api.js";
import type { EnvironmentRef } from "./types.js";

export interface ApiKeyInput {
  readonly ref: EnvironmentRef;
  readonly name: string;
  /** Epoch ms; null: never. */
  readonly expiresAt: number | null;
  readonly limit: number | null;
  readonly windowSeconds: number | null;
  readonly metadata: Readonly<Record<string, string>>;
}

/** The carried form's field names as the request's. */
const FIELDS: Record<string, string> = {
  name: "name",
  expiresAt: "expires_at_unix_ms",
  limit: "rate_limit",
  windowSeconds: "rate_window_seconds",
  metadata: "metadata",
};

/** An int64 field: 0 is unset; out of a safe integer's range, a value the parser refuses. */
function optional(v: bigint): number | null {
  if (v === 0n) return null;
  return v > BigInt(Number.MAX_SAFE_INTEGER) || v < 0n ? -1 : Number(v);
}

export function validateCreateApiKey(req: Omit<CreateApiKeyRequest, "$typeName">, now: number): ApiKeyInput {
  const ref = validateEnvironmentRef(req);
  const expiresAt = optional(req.expiresAtUnixMs);
  if ((req.rateLimit === 0n) !== (req.rateWindowSeconds === 0n))
    throw invalidArgument(
      req.rateLimit === 0n ? "rate_limit" : "rate_window_seconds",
      "goes with the other: set both or neither",
    );
  let k;
  try {
    // The id and digest stand in: ctrl makes both.
    k = parseApiKey("", {
      id: "key",
      hash: "0".repeat(64),
      name: req.name,
      expiresAt,
      limit: optional(req.rateLimit),
      windowSeconds: optional(req.rateWindowSeconds),
      metadata: req.metadata,
    });
  } catch (err) {
    if (!(err instanceof PolicyFieldError)) throw err;
    const [first = "", ...rest] = err.field.replace(/^\./, "").split(".");
    throw invalidArgument([FIELDS[first] ?? first, ...rest].join("."), err.problem);
  }
  if (k.expiresAt !== null && k.expiresAt <= now) throw invalidArgument("expires_at_unix_ms", "must be in the future");
  return {
    ref,
    name: k.name,
    expiresAt: k.expiresAt,
    limit: k.limit,
    windowSeconds: k.windowSeconds,
    metadata: k.metadata,
  };
}

export function validateRevokeApiKey(req: { workspace: string; project: string; environment: string; keyId: string }): {
  ref: EnvironmentRef;
  keyId: string;
} {
  const ref = validateEnvironmentRef(req);
  if (!/^key_[0-9a-z]{20}$/.test(req.keyId)) throw invalidArgument("key_id", "must be a key's id (key_…)");
  return { ref, keyId: req.keyId };
}

// Pagination of the public API's List methods (AIP-158): page sizes, and page tokens that are
// opaque to callers. A token holds the key of the page's last row (the domain's keyset: see
// ../read/page.ts) and a digest of the request it belongs to (method and filters), encrypted
// and authenticated with AES-256-GCM under a key derived from the caller's own bearer token (or
// dashboard session). So a token cannot be read or forged, is worthless to any other caller, and
// needs no state on any ctrl replica (every replica derives the same key); it never authorizes
// anything either, since each page request is authenticated and checked like the first.
import { createHash, createHmac } from "node:crypto";
import { NONCE_BYTES, openGcm, sealGcm, TAG_BYTES } from "../../base/seal.js";
import type { HandlerContext } from "@connectrpc/connect";
import { callerSecretKey } from "../auth/principal.js";
import type { Page, PageQuery } from "../read/page.js";
import { invalidArgument } from "../errors.js";

export const DEFAULT_PAGE_SIZE = 100;
export const MAX_PAGE_SIZE = 1000;

/** What every List request carries. */
export interface PageRequest {
  readonly pageSize: number;
  readonly pageToken: string;
}

/** page_size: 0 means the default, more than the maximum is coerced down, negative is refused. */
export function pageSize(value: number): number {
  if (!Number.isInteger(value) || value < 0) throw invalidArgument("page_size", "must not be negative");
  if (value === 0) return DEFAULT_PAGE_SIZE;
  return Math.min(value, MAX_PAGE_SIZE);
}

/** Far above any real key, so a hostile token cannot make ctrl parse megabytes. */
const MAX_TOKEN_CHARS = 2048;

function tokenKey(secret: string): Buffer {
  return createHmac("sha256", secret).update("krane page token v1").digest();
}

function scopeDigest(scope: string): string {
  return createHash("sha256").update(scope).digest("base64url").slice(0, 16);
}

/**
 * The caller's secret that keys its page tokens: its bearer token or its dashboard session's id
 * (../auth/principal.ts), neither of which ctrl stores.
 */
export function callerSecret(ctx: Pick<HandlerContext, "requestHeader" | "values">): string {
  const secret = ctx.values.get(callerSecretKey);
  return secret !== "" ? secret : (ctx.requestHeader.get("authorization") ?? "");
}

export function encodePageToken(secret: string, scope: string, key: unknown): string {
  const plain = Buffer.from(JSON.stringify({ s: scopeDigest(scope), k: key }));
  return sealGcm(tokenKey(secret), plain).toString("base64url");
}

/**
 * The key a page token holds; invalid_argument naming page_token when it was not issued to this
 * caller for this request, was altered, or holds a key `parse` refuses.
 */
export function decodePageToken<K>(
  secret: string,
  scope: string,
  token: string,
  parse: (key: unknown) => K | undefined,
): K {
  const refuse = (why: string): Error => invalidArgument("page_token", why);
  if (token.length > MAX_TOKEN_CHARS || !/^[A-Za-z0-9_-]+$/.test(token)) throw refuse("is not a page token");
  const raw = Buffer.from(token, "base64url");
  if (raw.length < NONCE_BYTES + TAG_BYTES + 1) throw refuse("is not a page token");
  const plain = openGcm(tokenKey(secret), raw);
  if (plain === undefined)
    throw refuse("is not a page token this caller was given (altered, or issued to another token)");
  let body: unknown;
  try {
    body = JSON.parse(plain.toString("utf8"));
  } catch {
    throw refuse("is not a page token");
  }
  const b = typeof body === "object" && body !== null ? (body as { s?: unknown; k?: unknown }) : {};
  if (b.s !== scopeDigest(scope))
    throw refuse("belongs to another request: keep the same method and filters across pages");
  const key = parse(b.k);
  if (key === undefined) throw refuse("is not a page token");
  return key;
}

/** Key parsers: tuples of strings and numbers, as the domain's keys are. */
export const keys = {
  string: (k: unknown): string | undefined => (typeof k === "string" ? k : undefined),
  tuple<T extends readonly ("string" | "number")[]>(
    ...types: T
  ): (k: unknown) => { readonly [I in keyof T]: T[I] extends "string" ? string : number } | undefined {
    return (k) => {
      if (!Array.isArray(k) || k.length !== types.length) return undefined;
      for (let i = 0; i < types.length; i++) {
        const v: unknown = k[i];
        if (types[i] === "string" ? typeof v !== "string" : typeof v !== "number" || !Number.isSafeInteger(v))
          return undefined;
      }
      return k as { readonly [I in keyof T]: T[I] extends "string" ? string : number };
    };
  },
};

/**
 * One page of a list: reads the page the request asks for and answers its items with the token
 * of the next page ("" on the last). `scope` names the method and every filter of the request.
 */
export async function listPage<T, K>(
  ctx: Pick<HandlerContext, "requestHeader" | "values">,
  req: PageRequest,
  scope: string,
  parse: (key: unknown) => K | undefined,
  read: (q: PageQuery<K>) => Promise<Page<T>>,
  keyOf: (item: T) => K,
): Promise<{ items: T[]; nextPageToken: string }> {
  const secret = callerSecret(ctx);
  const limit = pageSize(req.pageSize);
  const after = req.pageToken === "" ? undefined : decodePageToken(secret, scope, req.pageToken, parse);
  const page = await read({ limit, after });
  const last = page.items[page.items.length - 1];
  return {
    items: page.items,
    nextPageToken: page.more && last !== undefined ? encodePageToken(secret, scope, keyOf(last)) : "",
  };
}

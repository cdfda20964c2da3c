// The environment's edge policies at the sentinel (the routing document's `policies`,
// src/contracts/edge-policy.ts): compiled once per document, checked in order at admission before
// an instance is picked, so a refused request never reaches the app. Rate limits keyed by a JWT's
// subject are checked once authentication has verified the token (checkAuthenticated); their
// counters (./rate-limit.ts) outlive a new routing version that carries the same policy. An
// "apikey" policy looks the key's SHA-256 up in the document's keys (no call anywhere), refuses a
// missing, unknown or expired key (401) or one past its own rate limit (429), and tells the app
// which key it was in a header a client's own copy of is dropped; a rate limit per "apikey" after
// it counts by that key. Every
// decision of every policy is counted in krane_sentinel_policy_decisions_total{policy,decision}.
import { createHash } from "node:crypto";
import { hostname } from "node:os";
import type { Counter } from "prom-client";
import { hashApiKey, type CarriedApiKey } from "../contracts/api-keys.js";
import {
  CidrSet,
  clientAddress,
  compileEdgePolicy,
  DEFAULT_API_KEY_FORWARD_HEADER,
  DEFAULT_API_KEY_HEADER,
  DEFAULT_CLIENT_HEADER,
  edgePolicyJson,
  headerValue,
  type ApiKeyPolicy,
  type CompiledPolicy,
  type EdgePolicy,
  type EdgeRequest,
  type RateLimitPolicy,
  type Refusal,
} from "../contracts/edge-policy.js";
import { REQUEST_ID_HEADER } from "../contracts/headers.js";
import { ERROR_HEADER } from "./errors.js";
import { rateLimitHeaders, RateLimiter } from "./rate-limit.js";

interface Entry {
  readonly policy: CompiledPolicy;
  readonly afterAuth: boolean;
  readonly allowed: { inc(): void };
  readonly denied: { inc(): void };
}

/** A refusal as the sentinel's own answer (the shape of request-path.ts's OwnAnswer). */
export function refusalAnswer(
  r: Refusal,
  requestId: string,
  closeConnection: boolean,
): { status: number; headers: Record<string, string>; body: string; closeConnection: boolean } {
  const body = `${r.message}\n`;
  return {
    status: r.status,
    headers: {
      ...r.headers,
      "content-type": "text/plain; charset=utf-8",
      "content-length": String(Buffer.byteLength(body)),
      "cache-control": "no-store",
      [ERROR_HEADER]: r.cause,
      [REQUEST_ID_HEADER]: requestId,
    },
    body,
    closeConnection,
  };
}

/**
 * The client's headers as the app gets them: those a policy sets for the app (a client's own
 * copies dropped) and what the passing policies added.
 */
export function withPolicyHeaders(
  raw: readonly string[],
  policies: EdgePolicies | undefined,
  forward: readonly string[] | undefined,
): readonly string[] {
  const owned = policies?.owned;
  if (owned === undefined || owned.size === 0) return raw;
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2)
    if (!owned.has((raw[i] ?? "").toLowerCase())) out.push(raw[i] ?? "", raw[i + 1] ?? "");
  if (forward) out.push(...forward);
  return out;
}

/** The API key an "apikey" policy verified for a request (by id), for rate limits per key. */
export type VerifiedKeys = WeakMap<EdgeRequest, string>;

/** Keys longer than this are counted under their hash: bounded memory and exchange messages. */
export const MAX_PLAIN_KEY = 128;

function bounded(key: string): string {
  return key.length <= MAX_PLAIN_KEY ? key : `#${createHash("sha256").update(key).digest("base64url")}`;
}

/** Socket peers' counting keys remembered per rate limit (parsing an address is its main cost). */
const PEER_KEYS = 10_000;

/** The key a request is counted under; "" when it has none (those requests share one budget). */
function keyFor(
  p: RateLimitPolicy,
  trusted: CidrSet,
  r: EdgeRequest,
  verified: VerifiedKeys | undefined,
  peers: Map<string, string>,
): string {
  if (p.key === "header") return bounded(headerValue(r.rawHeaders, p.header) ?? "");
  if (p.key === "jwt") return bounded(r.subject ?? "");
  if (p.key === "apikey") return verified?.get(r) ?? "";
  // Without trusted proxies the key depends on the socket's peer alone.
  if (trusted.size === 0) {
    let k = peers.get(r.peer);
    if (k === undefined) {
      k = addressKey(r.peer, undefined, trusted);
      if (peers.size >= PEER_KEYS) peers.clear();
      peers.set(r.peer, k);
    }
    return k;
  }
  return addressKey(r.peer, headerValue(r.rawHeaders, p.clientHeader || DEFAULT_CLIENT_HEADER), trusted);
}

function addressKey(peer: string, header: string | undefined, trusted: CidrSet): string {
  const a = clientAddress(peer, header, trusted);
  return a === undefined ? "" : `${a.v6 ? 6 : 4}:${a.value.toString(16)}`;
}

/** A rate limit ready to decide, counting in `limiter`; `now` is the clock (ms). */
export function compileRateLimit(
  p: RateLimitPolicy,
  limiter: RateLimiter,
  now: () => number,
  verified?: VerifiedKeys,
): CompiledPolicy {
  const trusted = CidrSet.of(p.trustedProxies);
  const peers = new Map<string, string>();
  return {
    name: p.name,
    kind: p.kind,
    decide(r) {
      const d = limiter.take(keyFor(p, trusted, r, verified, peers), now());
      if (d.admitted) return undefined;
      return {
        policy: p.name,
        status: 429,
        cause: "policy-ratelimit",
        message: `refused by policy ${p.name}: more than ${p.limit} requests in ${p.windowSeconds} s`,
        headers: rateLimitHeaders(p.name, p.limit, p.windowSeconds, d),
      };
    },
  };
}

/**
 * An "apikey" policy against the keys `keys()` holds (by hash); per-key limits count in `limiters`.
 * A key let through is noted in `verified` for the rate limits per API key after it.
 */
export function compileApiKey(
  p: ApiKeyPolicy,
  keys: () => ReadonlyMap<string, CarriedApiKey>,
  limiterOf: (k: CarriedApiKey & { limit: number; windowSeconds: number }) => RateLimiter,
  now: () => number,
  verified?: VerifiedKeys,
): CompiledPolicy {
  const header = p.header || DEFAULT_API_KEY_HEADER;
  const forward = p.forwardHeader || DEFAULT_API_KEY_FORWARD_HEADER;
  // What the app is told of each key, made once per key rather than per request.
  const told = new WeakMap<CarriedApiKey, string>();
  const refuse = (why: string): Refusal => ({
    policy: p.name,
    status: 401,
    cause: "policy-apikey",
    message: `refused by policy ${p.name}: ${why}`,
    headers: { "www-authenticate": `ApiKey header="${header}"` },
  });
  return {
    name: p.name,
    kind: p.kind,
    decide(r) {
      const presented = headerValue(r.rawHeaders, header);
      if (presented === undefined || presented === "") return refuse(`an API key is required in ${header}`);
      const k = keys().get(hashApiKey(presented.trim()));
      if (k === undefined) return refuse("the API key is not valid");
      const t = now();
      if (k.expiresAt !== null && k.expiresAt <= t) return refuse("the API key has expired");
      r.keyName = k.name;
      if (k.limit !== null && k.windowSeconds !== null) {
        const d = limiterOf({ ...k, limit: k.limit, windowSeconds: k.windowSeconds }).take(k.id, t);
        if (!d.admitted)
          return {
            policy: p.name,
            status: 429,
            cause: "policy-ratelimit",
            message: `refused by policy ${p.name}: the API key ${k.name} sent more than ${k.limit} requests in ${k.windowSeconds} s`,
            headers: rateLimitHeaders(`key-${k.id}`, k.limit, k.windowSeconds, d),
          };
      }
      let tell = told.get(k);
      if (tell === undefined) {
        tell = JSON.stringify({ id: k.id, name: k.name, metadata: k.metadata });
        told.set(k, tell);
      }
      r.forward?.push(forward, tell);
      verified?.set(r, k.id);
      return undefined;
    },
  };
}

export class EdgePolicies {
  readonly #decisions: Counter<"policy" | "decision">;
  readonly #self: string;
  readonly #now: () => number;
  #list: readonly Entry[] = [];
  #afterAuth = false;
  #source: readonly EdgePolicy[] | undefined;
  /** Rate limiters by their policy's stored form: a new version carrying it keeps its counts. */
  #limiters = new Map<string, RateLimiter>();
  /** The environment's API keys by hash, and each key's own limiter by id and limit. */
  #keys: ReadonlyMap<string, CarriedApiKey> = new Map();
  #keySource: readonly CarriedApiKey[] | undefined;
  #keyLimiters = new Map<string, RateLimiter>();
  /** Which key each request in flight was let through with (for limits per API key). */
  readonly #verified: VerifiedKeys = new WeakMap();
  /** Headers a client may not set because a policy sets them for the app (lowercase). */
  #owned: ReadonlySet<string> = new Set();

  constructor(decisions: Counter<"policy" | "decision">, self = hostname(), now: () => number = Date.now) {
    this.#decisions = decisions;
    this.#self = self;
    this.#now = now;
  }

  get active(): boolean {
    return this.#list.length > 0;
  }

  /** The document's list (undefined: none). Recompiled only when the list object changed. */
  set(list: readonly EdgePolicy[] | undefined): void {
    if (list === this.#source) return;
    this.#source = list;
    const limiters = new Map<string, RateLimiter>();
    // Which key let a request through is noted only when a rate limit per API key reads it.
    const perKey = (list ?? []).some((p) => p.kind === "ratelimit" && p.key === "apikey");
    const verified = perKey ? this.#verified : undefined;
    this.#list = (list ?? []).map((p) => {
      let policy: CompiledPolicy;
      if (p.kind === "ratelimit") {
        const id = JSON.stringify(edgePolicyJson(p));
        const limiter = this.#limiters.get(id) ?? new RateLimiter(p.limit, p.windowSeconds * 1000, this.#self);
        limiters.set(id, limiter);
        policy = compileRateLimit(p, limiter, this.#now, verified);
      } else if (p.kind === "apikey") {
        policy = compileApiKey(
          p,
          () => this.#keys,
          (k) => this.#keyLimiter(k),
          this.#now,
          verified,
        );
      } else policy = compileEdgePolicy(p);
      return {
        policy,
        afterAuth: p.kind === "ratelimit" && p.key === "jwt",
        allowed: this.#decisions.labels({ policy: p.name, decision: "allow" }),
        denied: this.#decisions.labels({ policy: p.name, decision: "deny" }),
      };
    });
    this.#limiters = limiters;
    this.#afterAuth = this.#list.some((e) => e.afterAuth);
    this.#owned = new Set(
      (list ?? []).flatMap((p) => (p.kind === "apikey" ? [p.forwardHeader || DEFAULT_API_KEY_FORWARD_HEADER] : [])),
    );
  }

  /** The document's API keys (undefined: none). A revoked key is one no longer listed. */
  setKeys(keys: readonly CarriedApiKey[] | undefined): void {
    if (keys === this.#keySource) return;
    this.#keySource = keys;
    this.#keys = new Map((keys ?? []).map((k) => [k.hash, k]));
    const ids = new Set((keys ?? []).map((k) => k.id));
    for (const id of this.#keyLimiters.keys()) if (!ids.has(id.slice(0, id.indexOf(" ")))) this.#keyLimiters.delete(id);
  }

  #keyLimiter(k: { id: string; limit: number; windowSeconds: number }): RateLimiter {
    const id = `${k.id} ${k.limit}/${k.windowSeconds}`;
    let l = this.#keyLimiters.get(id);
    if (!l) {
      l = new RateLimiter(k.limit, k.windowSeconds * 1000, this.#self);
      this.#keyLimiters.set(id, l);
    }
    return l;
  }

  /**
   * Every limiter with an id all replicas derive alike from the same document (the exchange's,
   * ./peers.ts): a policy's by the hash of its stored form, a key's by the hash of its id and limit.
   */
  *limiters(): Iterable<readonly [string, RateLimiter]> {
    const hash = (id: string): string => createHash("sha256").update(id).digest("base64url");
    for (const [id, l] of this.#limiters) yield [`p:${hash(id)}`, l];
    for (const [id, l] of this.#keyLimiters) yield [`k:${hash(id)}`, l];
  }

  /** Headers the policies set for the app: a client's own copies are dropped (lowercase names). */
  get owned(): ReadonlySet<string> {
    return this.#owned;
  }

  #run(r: EdgeRequest, afterAuth: boolean): Refusal | undefined {
    for (const e of this.#list) {
      if (e.afterAuth !== afterAuth) continue;
      const refusal = e.policy.decide(r);
      if (refusal) {
        e.denied.inc();
        return refusal;
      }
      e.allowed.inc();
    }
    return undefined;
  }

  /** At admission: the first refusal, each decision counted; undefined when every policy passes. */
  check(r: EdgeRequest): Refusal | undefined {
    return this.#run(r, false);
  }

  /** Whether any policy waits for authentication (a rate limit by JWT subject). */
  get afterAuth(): boolean {
    return this.#afterAuth;
  }

  /** Once authentication passed: the policies that need its verified subject (undefined: none). */
  checkAuthenticated(r: EdgeRequest, subject: string | undefined): Refusal | undefined {
    if (!this.#afterAuth) return undefined;
    return this.#run(subject === undefined ? r : { ...r, subject }, true);
  }
}

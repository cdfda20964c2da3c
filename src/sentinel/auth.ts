// API authentication at the edge (the routing policy's auth section, src/contracts/routing.ts):
// the sentinel checks bearer tokens before a request reaches an instance, so it works behind any
// Gateway implementation.
//
//  - A rule is chosen by the request's Host (port stripped, case-insensitive); a host no rule
//    names gets `unmatchedHosts`.
//  - The path is normalised for matching the way applications read it (percent-decoded segments,
//    repeated and trailing slashes ignored); a path whose decoded segments hold "/", "\" or dot
//    segments is refused (400) rather than guessed at. HEAD matches GET operations.
//  - The most specific operation matching method and path wins (literal segments beat {params},
//    longer templates beat shorter ones, an exact method beats "*"), never the order written.
//    It needs a valid token carrying all of its scopes; a request matching no operation gets the
//    rule's default action (allow, or 403).
//  - Tokens: jose's jwtVerify (signature, exp required, nbf, issuer and audience when set, the
//    asymmetric algorithms only), against keys from the rule's JWKS URL through JwksCache:
//    refreshed every `cacheMaxAgeMs`, refetched early (at most once per `cooldownMs`) when a
//    token names a key it does not have, so keys rotated at the issuer are accepted within the
//    cooldown, and kept past their age while the JWKS URL fails (up to `maxStaleMs`) so an
//    identity provider outage does not take every API down. Scopes come from `scope` (space-
//    separated) and `scp` (list or string).
//  - A verified token is remembered (by rule and token, at most `verifiedMax`, the oldest going
//    first) until it expires or for `verifiedTtlMs`, whichever is sooner, so a client's repeated
//    calls cost one signature check — and only while the key set that verified it is current:
//    each entry holds the generation of its JWKS (a fetch that changes the set starts a new one),
//    and once the set is due for its refresh the next request refetches it and verifies again.
//    So a key withdrawn from the JWKS stops its tokens within the refresh interval. An unreachable
//    JWKS URL is tried at most once per cooldown, whatever the traffic.
// Answers: 401 with `WWW-Authenticate: Bearer` (missing, malformed, expired, bad signature, wrong
// issuer or audience), 403 (insufficient scope, or denied by default), 400 (ambiguous path).
import {
  createLocalJWKSet,
  errors as joseErrors,
  jwtVerify,
  type JSONWebKeySet,
  type JWTPayload,
  type JWTVerifyGetKey,
} from "jose";
import type { AuthOperationSpec, EdgeAuthPolicy, EdgeAuthRuleSpec } from "../contracts/routing.js";

export type AuthDecision =
  | {
      readonly type: "pass";
      /** The verified token's issuer and subject ("iss\u0000sub"), for rate limits by subject. */
      readonly subject?: string;
    }
  | {
      readonly type: "deny";
      readonly status: 400 | 401 | 403;
      readonly error: string;
      readonly description: string;
      readonly scope?: string;
    };

const PASS: AuthDecision = { type: "pass" };

const ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"];

// ---------------------------------------------------------------- pure matching

interface CompiledOperation {
  readonly method: string;
  /** Per segment: a literal, or null for a {param}. */
  readonly segments: readonly (string | null)[];
  readonly scopes: readonly string[];
  readonly spec: AuthOperationSpec;
}

export function compileOperation(op: AuthOperationSpec): CompiledOperation {
  const segments = op.path
    .split("/")
    .filter((s) => s !== "")
    .map((s) => (s.startsWith("{") && s.endsWith("}") ? null : (safeDecode(s) ?? s)));
  return { method: op.method, segments, scopes: op.scopes, spec: op };
}

function safeDecode(s: string): string | undefined {
  try {
    return decodeURIComponent(s);
  } catch {
    return undefined;
  }
}

/**
 * The request path as segments for matching (query dropped, percent-decoded, empty segments
 * dropped), or undefined when it cannot be read unambiguously.
 */
export function pathSegments(rawPath: string): string[] | undefined {
  const q = rawPath.search(/[?#]/);
  const path = q === -1 ? rawPath : rawPath.slice(0, q);
  const out: string[] = [];
  for (const raw of path.split("/")) {
    if (raw === "") continue;
    const s = safeDecode(raw);
    if (s === undefined || s === "." || s === ".." || s.includes("/") || s.includes("\\") || s.includes("\u0000"))
      return undefined;
    out.push(s);
  }
  return out;
}

/** Orders operations from most to least specific (literal before param, per segment; longer; exact method). */
export function compareSpecificity(a: CompiledOperation, b: CompiledOperation): number {
  const n = Math.min(a.segments.length, b.segments.length);
  for (let i = 0; i < n; i++) {
    const la = a.segments[i] !== null;
    const lb = b.segments[i] !== null;
    if (la !== lb) return la ? -1 : 1;
  }
  if (a.segments.length !== b.segments.length) return b.segments.length - a.segments.length;
  if ((a.method === "*") !== (b.method === "*")) return a.method === "*" ? 1 : -1;
  return 0;
}

function methodMatches(opMethod: string, method: string): boolean {
  return opMethod === "*" || opMethod === method || (method === "HEAD" && opMethod === "GET");
}

function pathMatches(op: CompiledOperation, segments: readonly string[]): boolean {
  if (op.segments.length !== segments.length) return false;
  for (let i = 0; i < segments.length; i++) {
    const want = op.segments[i];
    if (want !== null && want !== segments[i]) return false;
  }
  return true;
}

/** The operation a request matches (operations sorted most specific first), or undefined. */
export function matchOperation(
  sorted: readonly CompiledOperation[],
  method: string,
  segments: readonly string[],
): CompiledOperation | undefined {
  // An explicit HEAD operation beats the GET one a HEAD request would otherwise fall back to.
  let fallback: CompiledOperation | undefined;
  for (const op of sorted) {
    if (!pathMatches(op, segments)) continue;
    if (op.method === method || op.method === "*") return op;
    if (fallback === undefined && methodMatches(op.method, method)) fallback = op;
  }
  return fallback;
}

/** The scopes a token grants: `scope` (space-separated, RFC 8693) and `scp` (list or string). */
export function scopesOf(claims: JWTPayload): Set<string> {
  const out = new Set<string>();
  const add = (v: unknown): void => {
    if (typeof v === "string") {
      for (const s of v.split(" ")) if (s !== "") out.add(s);
    } else if (Array.isArray(v)) {
      for (const s of v) if (typeof s === "string" && s !== "") out.add(s);
    }
  };
  add(claims.scope);
  add(claims.scp);
  return out;
}

/** "example.com:8443" / "[::1]:80" → "example.com" / "::1", lowercased. */
export function hostOnly(host: string): string {
  const h = host.trim().toLowerCase();
  if (h.startsWith("[")) {
    const end = h.indexOf("]");
    return end === -1 ? h : h.slice(1, end);
  }
  const colon = h.lastIndexOf(":");
  return colon === -1 ? h : h.slice(0, colon);
}

export function bearerToken(authorization: string | undefined): string | undefined {
  if (authorization === undefined) return undefined;
  const m = /^Bearer[ \t]+([A-Za-z0-9\-._~+/]+=*)[ \t]*$/i.exec(authorization);
  return m?.[1];
}

// ---------------------------------------------------------------- JWKS

export interface JwksOptions {
  readonly cacheMaxAgeMs?: number;
  readonly cooldownMs?: number;
  readonly maxStaleMs?: number;
  readonly timeoutMs?: number;
  readonly maxBytes?: number;
  readonly now?: () => number;
  readonly fetch?: typeof fetch;
}

/** A key found for a token, and the generation of the key set it came from. */
export interface FoundKey {
  readonly key: Awaited<ReturnType<JWTVerifyGetKey>>;
  readonly generation: number;
}

/** The keys of one JWKS URL, cached (see the header: refresh, early refetch, stale on error). */
export class JwksCache {
  readonly url: string;
  readonly #o: Required<Omit<JwksOptions, "fetch" | "now">> & { fetch: typeof fetch; now: () => number };
  #keys: JWTVerifyGetKey | undefined;
  /** The fetched key set, canonical, to tell a changed set from the same one fetched again. */
  #document = "";
  #generation = 0;
  #fetchedAt = -Infinity;
  #attemptedAt = -Infinity;
  #lastError: unknown;
  #refreshing: Promise<void> | undefined;
  /** Fetches done (for tests and metrics). */
  fetches = 0;

  constructor(url: string, o: JwksOptions = {}) {
    this.url = url;
    this.#o = {
      cacheMaxAgeMs: o.cacheMaxAgeMs ?? 600_000,
      cooldownMs: o.cooldownMs ?? 30_000,
      maxStaleMs: o.maxStaleMs ?? 24 * 3600_000,
      timeoutMs: o.timeoutMs ?? 5_000,
      maxBytes: o.maxBytes ?? 1024 * 1024,
      now: o.now ?? Date.now,
      fetch: o.fetch ?? fetch,
    };
  }

  async #fetch(): Promise<void> {
    this.#attemptedAt = this.#o.now();
    this.fetches++;
    const res = await this.#o.fetch(this.url, {
      redirect: "manual",
      signal: AbortSignal.timeout(this.#o.timeoutMs),
      headers: { accept: "application/json" },
    });
    if (res.status !== 200) {
      await res.body?.cancel();
      throw new Error(`JWKS ${this.url} answered ${res.status}`);
    }
    const text = await res.text();
    if (text.length > this.#o.maxBytes) throw new Error(`JWKS ${this.url} is larger than ${this.#o.maxBytes} bytes`);
    const doc = JSON.parse(text) as JSONWebKeySet;
    const keys = createLocalJWKSet(doc);
    const canonical = JSON.stringify(doc.keys);
    this.#keys = keys;
    if (canonical !== this.#document) {
      this.#document = canonical;
      this.#generation++;
    }
    this.#fetchedAt = this.#o.now();
  }

  #refresh(): Promise<void> {
    this.#refreshing ??= this.#fetch()
      .then(() => (this.#lastError = undefined))
      .catch((err: unknown) => {
        this.#lastError = err;
        throw err;
      })
      .finally(() => (this.#refreshing = undefined));
    return this.#refreshing;
  }

  /**
   * Whether the keys must be fetched before they are used: none yet, or older than the refresh
   * interval — unless the last attempt failed within the cooldown (an unreachable JWKS URL is
   * tried at most once per cooldown, however many requests come).
   */
  #due(now: number): boolean {
    if (this.#keys !== undefined && now - this.#fetchedAt <= this.#o.cacheMaxAgeMs) return false;
    return this.#lastError === undefined || now - this.#attemptedAt >= this.#o.cooldownMs;
  }

  /**
   * Whether something verified against key set `generation` still stands without looking at the
   * keys again: the set is the current one and not due for a refresh.
   */
  current(generation: number): boolean {
    return generation === this.#generation && !this.#due(this.#o.now());
  }

  /** The key for a token, with its key set's generation: fresh keys, or stale ones while the URL fails. */
  async find(header: Parameters<JWTVerifyGetKey>[0], token: Parameters<JWTVerifyGetKey>[1]): Promise<FoundKey> {
    const now = this.#o.now();
    if (this.#due(now)) {
      try {
        await this.#refresh();
      } catch (err) {
        if (this.#keys === undefined || now - this.#fetchedAt > this.#o.maxStaleMs) throw err;
      }
    } else if (this.#keys === undefined || now - this.#fetchedAt > this.#o.maxStaleMs) {
      // Failing, within the cooldown after the last attempt, and nothing usable: the last error.
      throw this.#lastError;
    }
    const keys = this.#keys as JWTVerifyGetKey;
    const generation = this.#generation;
    try {
      return { key: await keys(header, token), generation };
    } catch (err) {
      // A key we do not know yet: the issuer may have rotated; look again, at most once per cooldown.
      if (!(err instanceof joseErrors.JWKSNoMatchingKey) || this.#o.now() - this.#attemptedAt < this.#o.cooldownMs)
        throw err;
      await this.#refresh();
      const again = this.#generation;
      return { key: await (this.#keys as JWTVerifyGetKey)(header, token), generation: again };
    }
  }

  /** jose's key lookup (the generation dropped). */
  readonly getKey: JWTVerifyGetKey = async (header, token) => (await this.find(header, token)).key;
}

// ---------------------------------------------------------------- the gate

interface CompiledRule {
  readonly id: string;
  readonly spec: EdgeAuthRuleSpec;
  readonly operations: readonly CompiledOperation[];
  readonly jwks: JwksCache | undefined;
}

export interface EdgeAuthOptions extends JwksOptions {
  /** How long a verified token is remembered at most. */
  readonly verifiedTtlMs?: number;
  readonly verifiedMax?: number;
  readonly clockToleranceSec?: number;
}

function deny(status: 400 | 401 | 403, error: string, description: string, scope?: string): AuthDecision {
  return scope === undefined
    ? { type: "deny", status, error, description }
    : { type: "deny", status, error, description, scope };
}

function describe(err: unknown): string {
  if (err instanceof joseErrors.JWTExpired) return "the token has expired";
  if (err instanceof joseErrors.JWTClaimValidationFailed) return `the token's ${err.claim} claim is not accepted`;
  if (err instanceof joseErrors.JWSSignatureVerificationFailed) return "the token's signature does not verify";
  if (err instanceof joseErrors.JWKSNoMatchingKey) return "the token is signed with a key the issuer does not publish";
  if (err instanceof joseErrors.JOSEAlgNotAllowed) return "the token's algorithm is not accepted";
  if (err instanceof joseErrors.JWSInvalid || err instanceof joseErrors.JWTInvalid) return "the token is malformed";
  return "the token could not be verified";
}

export class EdgeAuth {
  readonly #o: EdgeAuthOptions;
  #policy: EdgeAuthPolicy | undefined;
  #byHost = new Map<string, CompiledRule>();
  /** JWKS caches by URL, kept across policy changes. */
  readonly #jwks = new Map<string, JwksCache>();
  /** Verified tokens by rule and token, with the generation of the key set that verified them. */
  readonly #verified = new Map<string, { claims: JWTPayload; until: number; generation: number }>();

  constructor(o: EdgeAuthOptions = {}) {
    this.#o = o;
  }

  get active(): boolean {
    return this.#policy !== undefined;
  }

  /** Installs the policy of a new routing table (undefined: no authentication). */
  setPolicy(p: EdgeAuthPolicy | undefined): void {
    if (JSON.stringify(p) === JSON.stringify(this.#policy)) return;
    this.#policy = p;
    this.#byHost = new Map();
    this.#verified.clear();
    const used = new Set<string>();
    for (const [i, spec] of (p?.rules ?? []).entries()) {
      let jwks: JwksCache | undefined;
      if (spec.jwt) {
        used.add(spec.jwt.jwksUrl);
        jwks = this.#jwks.get(spec.jwt.jwksUrl);
        if (!jwks) this.#jwks.set(spec.jwt.jwksUrl, (jwks = new JwksCache(spec.jwt.jwksUrl, this.#o)));
      }
      const operations = spec.operations.map(compileOperation).sort(compareSpecificity);
      const rule = { id: String(i), spec, operations, jwks };
      for (const h of spec.hosts) this.#byHost.set(h, rule);
    }
    for (const url of [...this.#jwks.keys()]) if (!used.has(url)) this.#jwks.delete(url);
  }

  /** The decision for a request; synchronous when no token has to be verified. */
  check(
    method: string,
    host: string,
    path: string,
    authorization: string | undefined,
  ): AuthDecision | Promise<AuthDecision> {
    const p = this.#policy;
    if (!p) return PASS;
    const rule = this.#byHost.get(hostOnly(host));
    if (!rule)
      return p.unmatchedHosts === "allow"
        ? PASS
        : deny(403, "host_not_exposed", "this host is not an address of the environment");
    if (!rule.spec.jwt) return PASS;
    const segments = pathSegments(path);
    if (segments === undefined) return deny(400, "invalid_request", "the path cannot be read unambiguously");
    const op = matchOperation(rule.operations, method.toUpperCase(), segments);
    if (!op)
      return rule.spec.defaultAction === "allow"
        ? PASS
        : deny(403, "access_denied", "no operation of this API matches the request");
    const token = bearerToken(authorization);
    if (token === undefined) return deny(401, "", "a bearer token is required");
    const key = `${rule.id}\u0000${token}`;
    const cached = this.#verified.get(key);
    if (cached) {
      // Only while the key set that verified it is current: a key withdrawn from the JWKS ends
      // its tokens at the next refresh, not when their cache entries age out.
      if (cached.until > Date.now() && rule.jwks?.current(cached.generation))
        return this.#scopesDecision(op, cached.claims);
      this.#verified.delete(key);
    }
    return this.#verify(rule, op, token);
  }

  /** How many verified tokens are remembered (bounded by `verifiedMax`). */
  get verifiedCount(): number {
    return this.#verified.size;
  }

  #scopesDecision(op: CompiledOperation, claims: JWTPayload): AuthDecision {
    const have = scopesOf(claims);
    const missing = op.scopes.filter((s) => !have.has(s));
    if (missing.length === 0)
      return typeof claims.sub === "string"
        ? { type: "pass", subject: `${claims.iss ?? ""}\u0000${claims.sub}` }
        : PASS;
    return deny(
      403,
      "insufficient_scope",
      `the token lacks the scope${missing.length > 1 ? "s" : ""} ${missing.join(" ")}`,
      op.scopes.join(" "),
    );
  }

  async #verify(rule: CompiledRule, op: CompiledOperation, token: string): Promise<AuthDecision> {
    const jwt = rule.spec.jwt;
    const jwks = rule.jwks;
    if (!jwt || !jwks) return PASS;
    let claims: JWTPayload;
    let generation = -1;
    const getKey: JWTVerifyGetKey = async (header, t) => {
      const found = await jwks.find(header, t);
      generation = found.generation;
      return found.key;
    };
    try {
      ({ payload: claims } = await jwtVerify(token, getKey, {
        algorithms: ALGORITHMS,
        requiredClaims: ["exp"],
        clockTolerance: this.#o.clockToleranceSec ?? 30,
        ...(jwt.issuer !== "" ? { issuer: jwt.issuer } : {}),
        ...(jwt.audiences.length > 0 ? { audience: [...jwt.audiences] } : {}),
      }));
    } catch (err) {
      return deny(401, "invalid_token", describe(err));
    }
    const now = Date.now();
    const until = Math.min(
      typeof claims.exp === "number" ? claims.exp * 1000 : now,
      now + (this.#o.verifiedTtlMs ?? 60_000),
    );
    if (this.#verified.size >= (this.#o.verifiedMax ?? 10_000)) {
      const oldest = this.#verified.keys().next();
      if (!oldest.done) this.#verified.delete(oldest.value);
    }
    this.#verified.set(`${rule.id}\u0000${token}`, { claims, until, generation });
    return this.#scopesDecision(op, claims);
  }
}

/** The headers and body of a refusal. */
export function authAnswer(d: Extract<AuthDecision, { type: "deny" }>): {
  status: number;
  headers: Record<string, string>;
  body: string;
} {
  const headers: Record<string, string> = { "content-type": "text/plain; charset=utf-8", "cache-control": "no-store" };
  if (d.status === 401 || d.error === "insufficient_scope") {
    const parts = ['realm="krane"'];
    if (d.error !== "") parts.push(`error="${d.error}"`, `error_description="${d.description.replace(/["\\]/g, "")}"`);
    if (d.scope !== undefined) parts.push(`scope="${d.scope.replace(/["\\]/g, "")}"`);
    headers["www-authenticate"] = `Bearer ${parts.join(", ")}`;
  }
  const body = `krane sentinel: ${d.description}\n`;
  headers["content-length"] = String(Buffer.byteLength(body));
  return { status: d.status, headers, body };
}

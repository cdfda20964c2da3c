// An environment's edge policies: an ordered list ctrl keeps (environments.edge_policies), carried
// in the sentinel's routing policy document (`policies`, ./routing.ts) so every sentinel of the
// environment applies the list of the same routing version, and enforced by the sentinel before an
// instance is picked (src/sentinel/policies.ts). Every policy of the list must let a request pass;
// the first that refuses answers it, and the instance never sees it.
//
//  - "ip": allow and deny lists of CIDRs (IPv4 and IPv6) for the client's address: the peer's,
//    or, only when the peer is in `trustedProxies`, the one its forwarding header names (the
//    rightmost address of that header not itself a trusted proxy).
//  - "limits": request body and header sizes, methods and path prefixes allowed.
//  - "ratelimit": at most `limit` requests per `windowSeconds` per key: the client's address (as
//    "ip" finds it), a header's value, or the verified JWT's issuer and subject. Stateful, so the
//    sentinel compiles it itself (src/sentinel/rate-limit.ts); a JWT-keyed limit is counted only
//    once the token is verified, so a forged token cannot spend another subject's allowance. A
//    limit per "apikey" counts by the key an "apikey" policy earlier in the list verified.
//  - "apikey": a request must carry one of the environment's API keys (./api-keys.ts) in a header;
//    the key's name and metadata reach the app in another header, which a client cannot set.
//
// Pure: parsing (each bad field named), CIDR matching and the decisions.
import { isIPv4, isIPv6 } from "node:net";

export const EDGE_POLICY_KINDS = ["ip", "limits", "ratelimit", "apikey"] as const;
export type EdgePolicyKind = (typeof EDGE_POLICY_KINDS)[number];

export interface IpPolicy {
  readonly kind: "ip";
  readonly name: string;
  /** CIDRs; empty: every address not denied. */
  readonly allow: readonly string[];
  readonly deny: readonly string[];
  /** Peers whose forwarding header is believed (empty: the header is never read). */
  readonly trustedProxies: readonly string[];
  /** Lowercase header name; "" is x-forwarded-for. */
  readonly clientHeader: string;
}

export interface LimitsPolicy {
  readonly kind: "limits";
  readonly name: string;
  /** null: no limit. A body of unknown length (chunked) is refused 411 when set. */
  readonly maxBodyBytes: number | null;
  readonly maxHeaderBytes: number | null;
  /** Uppercase methods; empty: any. */
  readonly methods: readonly string[];
  /** Path prefixes, matched segment by segment; empty: any path. */
  readonly pathPrefixes: readonly string[];
}

export const RATE_LIMIT_KEYS = ["address", "header", "jwt", "apikey"] as const;
export type RateLimitKey = (typeof RATE_LIMIT_KEYS)[number];
export const MAX_RATE_LIMIT = 1_000_000_000;
export const MAX_RATE_WINDOW_SECONDS = 86_400;

export interface RateLimitPolicy {
  readonly kind: "ratelimit";
  readonly name: string;
  /** What a budget is per. Requests without one (no header, no verified token) share one budget. */
  readonly key: RateLimitKey;
  /** key "header": the lowercase header whose value is the key; "" otherwise. */
  readonly header: string;
  readonly limit: number;
  readonly windowSeconds: number;
  /** key "address": as in an "ip" policy. */
  readonly trustedProxies: readonly string[];
  readonly clientHeader: string;
}

export const DEFAULT_API_KEY_HEADER = "x-api-key";
export const DEFAULT_API_KEY_FORWARD_HEADER = "x-krane-api-key";

export interface ApiKeyPolicy {
  readonly kind: "apikey";
  readonly name: string;
  /** Lowercase header carrying the key; "" is x-api-key. */
  readonly header: string;
  /** Lowercase header the app gets the key's id, name and metadata in (JSON); "" is x-krane-api-key. */
  readonly forwardHeader: string;
}

export type EdgePolicy = IpPolicy | LimitsPolicy | RateLimitPolicy | ApiKeyPolicy;
export type StatelessPolicy = IpPolicy | LimitsPolicy;

/** Whether a policy decides from the request alone (rate limits and API keys keep state). */
export function isStateless(p: EdgePolicy): p is StatelessPolicy {
  return p.kind === "ip" || p.kind === "limits";
}
export const MAX_EDGE_POLICIES = 32;
export const MAX_POLICY_ENTRIES = 1000;
export const POLICY_NAME_RE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const METHOD_RE = /^[A-Z][A-Z0-9-]{0,31}$/;
const HEADER_RE = /^[a-z0-9!#$%&'*+.^_`|~-]{1,64}$/;
const PREFIX_RE = /^\/([A-Za-z0-9._~!$&'()*+,;=:@%-]+\/?)*$/;
export const DEFAULT_CLIENT_HEADER = "x-forwarded-for";

/** Bad input: the field (dotted path) and what is wrong with it. */
export class PolicyFieldError extends Error {
  constructor(
    readonly field: string,
    readonly problem: string,
  ) {
    super(`${field} ${problem}`);
  }
}

function fail(field: string, problem: string): never {
  throw new PolicyFieldError(field, problem);
}

// ---------------------------------------------------------------- addresses and CIDRs

/** An address as a number in its family (IPv4 in 32 bits, IPv6 in 128). */
export interface Address {
  readonly v6: boolean;
  readonly value: bigint;
}

function v4Value(s: string): bigint {
  return s.split(".").reduce((acc, o) => (acc << 8n) | BigInt(Number(o)), 0n);
}

/** Parses an IPv4 or IPv6 address; an IPv4-mapped IPv6 address (::ffff:a.b.c.d) is its IPv4 one. */
export function parseAddress(raw: string): Address | undefined {
  const s = raw.startsWith("[") && raw.endsWith("]") ? raw.slice(1, -1) : raw;
  if (isIPv4(s)) return { v6: false, value: v4Value(s) };
  if (!isIPv6(s) || s.includes("%")) return undefined;
  let text = s;
  const lastColon = text.lastIndexOf(":");
  const tail = text.slice(lastColon + 1);
  if (tail.includes(".")) {
    const v = v4Value(tail);
    text = `${text.slice(0, lastColon + 1)}${(v >> 16n).toString(16)}:${(v & 0xffffn).toString(16)}`;
  }
  const [head = "", rest] = text.split("::");
  const left = head === "" ? [] : head.split(":");
  const right = rest === undefined || rest === "" ? [] : rest.split(":");
  const groups =
    rest === undefined ? left : [...left, ...new Array<string>(8 - left.length - right.length).fill("0"), ...right];
  const value = groups.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n);
  if (value >> 32n === 0xffffn) return { v6: false, value: value & 0xffffffffn };
  return { v6: true, value };
}

export interface Cidr {
  readonly v6: boolean;
  readonly net: bigint;
  readonly bits: number;
}

/** "10.0.0.0/8", "2001:db8::/32", or a single address (/32, /128). Host bits must be zero. */
export function parseCidr(raw: string): Cidr | string {
  const slash = raw.indexOf("/");
  const addrText = slash < 0 ? raw : raw.slice(0, slash);
  const s = addrText;
  if (!isIPv4(s) && !isIPv6(s)) return "is not an IPv4 or IPv6 address or CIDR";
  const v6 = isIPv6(s);
  const width = v6 ? 128 : 32;
  let bits = width;
  if (slash >= 0) {
    const b = raw.slice(slash + 1);
    if (!/^\d{1,3}$/.test(b) || Number(b) > width) return `has a prefix length that is not 0–${width}`;
    bits = Number(b);
  }
  // The text's own family: an IPv4-mapped literal in a CIDR stays IPv6.
  const value = v6 ? ipv6Value(s) : v4Value(s);
  const hostMask = (1n << BigInt(width - bits)) - 1n;
  if ((value & hostMask) !== 0n) return "has bits set past its prefix length (write the network address)";
  return { v6, net: value, bits };
}

function ipv6Value(s: string): bigint {
  const a = parseAddress(s);
  if (!a) return 0n;
  return a.v6 ? a.value : a.value | (0xffffn << 32n);
}

export function cidrContains(c: Cidr, a: Address): boolean {
  if (c.v6 !== a.v6) return false;
  const width = c.v6 ? 128 : 32;
  return a.value >> BigInt(width - c.bits) === c.net >> BigInt(width - c.bits);
}

/** A list of CIDRs matched against addresses. */
export class CidrSet {
  readonly #cidrs: readonly Cidr[];
  constructor(cidrs: readonly Cidr[]) {
    this.#cidrs = cidrs;
  }
  static of(texts: readonly string[]): CidrSet {
    return new CidrSet(texts.map((t) => parseCidr(t)).filter((c): c is Cidr => typeof c !== "string"));
  }
  get size(): number {
    return this.#cidrs.length;
  }
  has(a: Address): boolean {
    for (const c of this.#cidrs) if (cidrContains(c, a)) return true;
    return false;
  }
}

/**
 * The client's address: the peer's, unless the peer is a trusted proxy and sent the header; then
 * the rightmost address of the header that is not itself a trusted proxy (each proxy appends the
 * address it saw, so entries left of it were written by the client and prove nothing). When every
 * entry is a trusted proxy, the leftmost of them; an entry that is not an address stops the walk
 * at the last trusted hop.
 */
export function clientAddress(peer: string, header: string | undefined, trusted: CidrSet): Address | undefined {
  const p = parseAddress(peer);
  if (p === undefined || header === undefined || trusted.size === 0 || !trusted.has(p)) return p;
  let last = p;
  const hops = header.split(",");
  for (let i = hops.length - 1; i >= 0; i--) {
    const a = parseAddress((hops[i] ?? "").trim());
    if (a === undefined) return last;
    if (!trusted.has(a)) return a;
    last = a;
  }
  return last;
}

// ---------------------------------------------------------------- parsing

function obj(field: string, v: unknown): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) fail(field, "must be an object");
  return v as Record<string, unknown>;
}

function list(field: string, v: unknown, each: (field: string, x: unknown) => string): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) fail(field, "must be a list");
  if (v.length > MAX_POLICY_ENTRIES) fail(field, `has more than ${MAX_POLICY_ENTRIES} entries`);
  const out = v.map((x: unknown, i) => each(`${field}[${i}]`, x));
  const seen = new Set<string>();
  out.forEach((x, i) => {
    if (seen.has(x)) fail(`${field}[${i}]`, `repeats ${x}`);
    seen.add(x);
  });
  return out;
}

function cidrText(field: string, x: unknown): string {
  if (typeof x !== "string") fail(field, "must be a CIDR");
  const c = parseCidr(x);
  if (typeof c === "string") fail(field, c);
  return x;
}

function limit(field: string, v: unknown, max: number): number | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1 || v > max)
    fail(field, `must be an integer 1–${max} (absent: no limit)`);
  return v;
}

function parseIp(p: string, o: Record<string, unknown>, name: string): IpPolicy {
  const allow = list(`${p}.allow`, o.allow, cidrText);
  const deny = list(`${p}.deny`, o.deny, cidrText);
  const trustedProxies = list(`${p}.trustedProxies`, o.trustedProxies, cidrText);
  if (allow.length === 0 && deny.length === 0) fail(`${p}.allow`, "and deny are both empty: the policy does nothing");
  const h = o.clientHeader ?? "";
  if (typeof h !== "string" || (h !== "" && !HEADER_RE.test(h)))
    fail(`${p}.clientHeader`, "must be a lowercase header name");
  if (h !== "" && trustedProxies.length === 0) fail(`${p}.clientHeader`, "needs trustedProxies");
  const policy: IpPolicy = { kind: "ip", name, allow, deny, trustedProxies, clientHeader: h };
  const everyone = lockedOutFamilies(policy);
  if (everyone.length === 2) fail(p, "refuses every address (IPv4 and IPv6): it would lock out everything");
  return policy;
}

/** The families ("IPv4", "IPv6") in which an IP policy refuses every address. */
function lockedOutFamilies(p: IpPolicy): string[] {
  const deny = p.deny.map((t) => parseCidr(t)).filter((c): c is Cidr => typeof c !== "string");
  const allow = p.allow.map((t) => parseCidr(t)).filter((c): c is Cidr => typeof c !== "string");
  const out: string[] = [];
  for (const v6 of [false, true]) {
    const denyAll = deny.some((c) => c.v6 === v6 && c.bits === 0);
    // With an allow list, every allowed range of the family also denied leaves nobody.
    const allowedLeft = allow.some(
      (a) =>
        a.v6 === v6 &&
        !deny.some((d) => d.v6 === a.v6 && d.bits <= a.bits && cidrContains(d, { v6: a.v6, value: a.net })),
    );
    if (denyAll || (allow.length > 0 && !allowedLeft)) out.push(v6 ? "IPv6" : "IPv4");
  }
  return out;
}

function parseLimits(p: string, o: Record<string, unknown>, name: string): LimitsPolicy {
  const maxBodyBytes = limit(`${p}.maxBodyBytes`, o.maxBodyBytes, 1 << 40);
  const maxHeaderBytes = limit(`${p}.maxHeaderBytes`, o.maxHeaderBytes, 1 << 20);
  const methods = list(`${p}.methods`, o.methods, (f, x) => {
    if (typeof x !== "string" || !METHOD_RE.test(x)) fail(f, "must be an uppercase method such as GET");
    return x;
  });
  const pathPrefixes = list(`${p}.pathPrefixes`, o.pathPrefixes, (f, x) => {
    if (typeof x !== "string" || !PREFIX_RE.test(x) || /(^|\/)\.\.?(\/|$)/.test(x))
      fail(f, "must be an absolute path such as /api (no query, no . or .. segments)");
    return x;
  });
  if (maxBodyBytes === null && maxHeaderBytes === null && methods.length === 0 && pathPrefixes.length === 0)
    fail(p, "sets no limit: give maxBodyBytes, maxHeaderBytes, methods or pathPrefixes");
  return { kind: "limits", name, maxBodyBytes, maxHeaderBytes, methods, pathPrefixes };
}

function parseRateLimit(p: string, o: Record<string, unknown>, name: string): RateLimitPolicy {
  const key = o.key;
  if (typeof key !== "string" || !(RATE_LIMIT_KEYS as readonly string[]).includes(key))
    fail(`${p}.key`, `must be one of ${RATE_LIMIT_KEYS.join(", ")}`);
  const header = o.header ?? "";
  if (typeof header !== "string" || (header !== "" && !HEADER_RE.test(header)))
    fail(`${p}.header`, "must be a lowercase header name");
  if (key === "header" && header === "") fail(`${p}.header`, "is required when the key is header");
  if (key !== "header" && header !== "") fail(`${p}.header`, "is only for the key header");
  const count = (field: string, v: unknown, max: number): number => {
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1 || v > max)
      fail(field, `must be an integer 1–${max}`);
    return v;
  };
  const lim = count(`${p}.limit`, o.limit, MAX_RATE_LIMIT);
  const win = count(`${p}.windowSeconds`, o.windowSeconds, MAX_RATE_WINDOW_SECONDS);
  const trustedProxies = list(`${p}.trustedProxies`, o.trustedProxies, cidrText);
  const h = o.clientHeader ?? "";
  if (typeof h !== "string" || (h !== "" && !HEADER_RE.test(h)))
    fail(`${p}.clientHeader`, "must be a lowercase header name");
  if (key !== "address" && (trustedProxies.length > 0 || h !== ""))
    fail(`${p}.trustedProxies`, "and clientHeader are only for the key address");
  if (h !== "" && trustedProxies.length === 0) fail(`${p}.clientHeader`, "needs trustedProxies");
  return {
    kind: "ratelimit",
    name,
    key: key as RateLimitKey,
    header,
    limit: lim,
    windowSeconds: win,
    trustedProxies,
    clientHeader: h,
  };
}

function parseApiKeyPolicy(p: string, o: Record<string, unknown>, name: string): ApiKeyPolicy {
  const text = (field: string, v: unknown): string => {
    const h = v ?? "";
    if (typeof h !== "string" || (h !== "" && !HEADER_RE.test(h)))
      fail(`${p}.${field}`, "must be a lowercase header name");
    return h;
  };
  const header = text("header", o.header);
  const forwardHeader = text("forwardHeader", o.forwardHeader);
  if ((header || DEFAULT_API_KEY_HEADER) === (forwardHeader || DEFAULT_API_KEY_FORWARD_HEADER))
    fail(`${p}.forwardHeader`, "must differ from header");
  return { kind: "apikey", name, header, forwardHeader };
}

/** One policy; `p` is its field path ("policies[2]"). */
export function parseEdgePolicy(p: string, v: unknown): EdgePolicy {
  const o = obj(p, v);
  const name = o.name;
  if (typeof name !== "string" || !POLICY_NAME_RE.test(name))
    fail(`${p}.name`, "must be 1–63 lowercase letters, digits and dashes");
  switch (o.kind) {
    case "ip":
      return parseIp(p, o, name);
    case "limits":
      return parseLimits(p, o, name);
    case "ratelimit":
      return parseRateLimit(p, o, name);
    case "apikey":
      return parseApiKeyPolicy(p, o, name);
    default:
      return fail(`${p}.kind`, `must be one of ${EDGE_POLICY_KINDS.join(", ")}`);
  }
}

/** The list (names unique, at most MAX_EDGE_POLICIES). */
export function parseEdgePolicies(field: string, v: unknown): EdgePolicy[] {
  if (!Array.isArray(v)) fail(field, "must be a list");
  if (v.length > MAX_EDGE_POLICIES) fail(field, `has more than ${MAX_EDGE_POLICIES} policies`);
  const seen = new Set<string>();
  let keyed = false;
  return v.map((x: unknown, i) => {
    const policy = parseEdgePolicy(`${field}[${i}]`, x);
    if (seen.has(policy.name)) fail(`${field}[${i}].name`, `repeats ${policy.name}`);
    seen.add(policy.name);
    // A limit per API key counts the key a policy before it verified: without one, nothing would.
    if (policy.kind === "ratelimit" && policy.key === "apikey" && !keyed)
      fail(`${field}[${i}].key`, "apikey needs an apikey policy before it in the list");
    keyed ||= policy.kind === "apikey";
    return policy;
  });
}

/** The stored and carried form: only the fields of its kind, in a fixed order. */
export function edgePolicyJson(p: EdgePolicy): Record<string, unknown> {
  if (p.kind === "apikey") return { name: p.name, kind: p.kind, header: p.header, forwardHeader: p.forwardHeader };
  if (p.kind === "ratelimit")
    return {
      name: p.name,
      kind: p.kind,
      key: p.key,
      header: p.header,
      limit: p.limit,
      windowSeconds: p.windowSeconds,
      trustedProxies: p.trustedProxies,
      clientHeader: p.clientHeader,
    };
  return p.kind === "ip"
    ? {
        name: p.name,
        kind: p.kind,
        allow: p.allow,
        deny: p.deny,
        trustedProxies: p.trustedProxies,
        clientHeader: p.clientHeader,
      }
    : {
        name: p.name,
        kind: p.kind,
        maxBodyBytes: p.maxBodyBytes,
        maxHeaderBytes: p.maxHeaderBytes,
        methods: p.methods,
        pathPrefixes: p.pathPrefixes,
      };
}

export function formatEdgePolicies(list: readonly EdgePolicy[]): string {
  return JSON.stringify(list.map(edgePolicyJson));
}

/** A one-line summary for `krane policy list` and `krane status`. */
export function describeEdgePolicy(p: EdgePolicy): string {
  if (p.kind === "apikey")
    return `an API key in ${p.header || DEFAULT_API_KEY_HEADER}, forwarded as ${p.forwardHeader || DEFAULT_API_KEY_FORWARD_HEADER}`;
  if (p.kind === "ratelimit") {
    const per =
      p.key === "header"
        ? `header ${p.header}`
        : p.key === "jwt"
          ? "JWT subject"
          : p.key === "apikey"
            ? "API key"
            : p.trustedProxies.length > 0
              ? `client address (from ${p.clientHeader || DEFAULT_CLIENT_HEADER} via ${p.trustedProxies.join(",")})`
              : "client address";
    return `${p.limit} requests per ${p.windowSeconds} s per ${per}`;
  }
  if (p.kind === "ip") {
    const parts = [
      p.allow.length > 0 ? `allow ${p.allow.join(",")}` : "",
      p.deny.length > 0 ? `deny ${p.deny.join(",")}` : "",
      p.trustedProxies.length > 0
        ? `client from ${p.clientHeader || DEFAULT_CLIENT_HEADER} via ${p.trustedProxies.join(",")}`
        : "",
    ];
    return parts.filter((s) => s !== "").join("; ");
  }
  const parts = [
    p.maxBodyBytes !== null ? `body ≤ ${p.maxBodyBytes} B` : "",
    p.maxHeaderBytes !== null ? `headers ≤ ${p.maxHeaderBytes} B` : "",
    p.methods.length > 0 ? `methods ${p.methods.join(",")}` : "",
    p.pathPrefixes.length > 0 ? `paths ${p.pathPrefixes.join(",")}` : "",
  ];
  return parts.filter((s) => s !== "").join("; ");
}

// ---------------------------------------------------------------- decisions

/** What the policies see of a request. */
export interface EdgeRequest {
  readonly method: string;
  /** Origin-form path, query included. */
  readonly path: string;
  /** The peer's address as the socket gave it. */
  readonly peer: string;
  /** Flat [name, value, …] as received. */
  readonly rawHeaders: readonly string[];
  readonly hasBody: boolean;
  /** The verified JWT's issuer and subject, once authentication passed (rate limits by "jwt"). */
  readonly subject?: string;
  /** Headers (flat name, value) a passing policy adds for the app ("apikey"'s forwarded key). */
  readonly forward?: string[];
  /** Set by an "apikey" policy: the verified key's name (the live request view shows it). */
  keyName?: string;
}

export interface Refusal {
  readonly policy: string;
  readonly status: number;
  /** Short cause for the x-krane-error header and logs. */
  readonly cause: string;
  readonly message: string;
  readonly headers?: Readonly<Record<string, string>>;
}

/** A policy ready to decide: undefined lets the request pass. */
export interface CompiledPolicy {
  readonly name: string;
  readonly kind: EdgePolicyKind;
  decide(r: EdgeRequest): Refusal | undefined;
}

/** A header's value in flat raw headers (repeats joined with commas), or undefined. */
export function headerValue(raw: readonly string[], lower: string): string | undefined {
  let out: string | undefined;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if ((raw[i] ?? "").toLowerCase() === lower)
      out = out === undefined ? (raw[i + 1] ?? "") : `${out},${raw[i + 1] ?? ""}`;
  }
  return out;
}

function compileIp(p: IpPolicy): CompiledPolicy {
  const allow = CidrSet.of(p.allow);
  const deny = CidrSet.of(p.deny);
  const trusted = CidrSet.of(p.trustedProxies);
  const h = p.clientHeader || DEFAULT_CLIENT_HEADER;
  const refuse = (why: string): Refusal => ({
    policy: p.name,
    status: 403,
    cause: "policy-ip",
    message: `refused by policy ${p.name}: ${why}`,
  });
  return {
    name: p.name,
    kind: p.kind,
    decide(r) {
      const a = clientAddress(r.peer, trusted.size > 0 ? headerValue(r.rawHeaders, h) : undefined, trusted);
      if (a === undefined) return refuse("the client address is unknown");
      if (deny.has(a)) return refuse("the client address is denied");
      if (allow.size > 0 && !allow.has(a)) return refuse("the client address is not allowed");
      return undefined;
    },
  };
}

/** Whether a path is under a prefix, segment-wise ("/api" covers "/api" and "/api/x", not "/apix"). */
export function underPrefix(path: string, prefix: string): boolean {
  const base = prefix.endsWith("/") && prefix.length > 1 ? prefix.slice(0, -1) : prefix;
  if (base === "/") return true;
  return path === base || path.startsWith(`${base}/`);
}

/**
 * The path's segments decoded: undefined when a segment decodes to "." or "..", holds an encoded
 * "/" or does not decode; such a path could reach the app as another path than the one allowed.
 */
export function safePath(path: string): string | undefined {
  const q = path.indexOf("?");
  const p = q < 0 ? path : path.slice(0, q);
  const out: string[] = [];
  for (const seg of p.split("/")) {
    let d: string;
    try {
      d = decodeURIComponent(seg);
    } catch {
      return undefined;
    }
    if (d === "." || d === ".." || d.includes("/") || d.includes("\\")) return undefined;
    out.push(d);
  }
  return out.join("/");
}

function compileLimits(p: LimitsPolicy): CompiledPolicy {
  const methods = new Set(p.methods);
  const allowHeader = p.methods.join(", ");
  const refuse = (status: number, cause: string, why: string, headers?: Record<string, string>): Refusal => ({
    policy: p.name,
    status,
    cause,
    message: `refused by policy ${p.name}: ${why}`,
    ...(headers ? { headers } : {}),
  });
  return {
    name: p.name,
    kind: p.kind,
    decide(r) {
      if (methods.size > 0 && !methods.has(r.method))
        return refuse(405, "policy-method", `method ${r.method} is not allowed`, { allow: allowHeader });
      if (p.pathPrefixes.length > 0) {
        const path = safePath(r.path);
        if (path === undefined) return refuse(400, "policy-path", "the path has dot or encoded-slash segments");
        if (!p.pathPrefixes.some((x) => underPrefix(path, x)))
          return refuse(404, "policy-path", "the path is not allowed");
      }
      if (p.maxHeaderBytes !== null) {
        let n = 0;
        for (const s of r.rawHeaders) n += s.length + 2;
        if (n > p.maxHeaderBytes) return refuse(431, "policy-headers", `headers exceed ${p.maxHeaderBytes} bytes`);
      }
      if (p.maxBodyBytes !== null && r.hasBody) {
        const cl = headerValue(r.rawHeaders, "content-length");
        if (cl === undefined || !/^\d+$/.test(cl))
          return refuse(411, "policy-body", "a body of unknown length (send Content-Length)");
        if (Number(cl) > p.maxBodyBytes) return refuse(413, "policy-body", `the body exceeds ${p.maxBodyBytes} bytes`);
      }
      return undefined;
    },
  };
}

/** A stateless policy ready to decide (rate limits keep counters: src/sentinel/rate-limit.ts). */
export function compileEdgePolicy(p: StatelessPolicy): CompiledPolicy {
  return p.kind === "ip" ? compileIp(p) : compileLimits(p);
}

/** The first refusal of the list, with how many policies let the request pass before it. */
export function decideAll(
  list: readonly CompiledPolicy[],
  r: EdgeRequest,
): { passed: number; refusal: Refusal | undefined } {
  for (let i = 0; i < list.length; i++) {
    const refusal = list[i]?.decide(r);
    if (refusal) return { passed: i, refusal };
  }
  return { passed: list.length, refusal: undefined };
}

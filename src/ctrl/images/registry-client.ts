// A client of the OCI distribution API for one question: which digest does this tag (or digest)
// of this repository name right now. HEAD /v2/<repository>/manifests/<reference> with the
// manifest and index media types in Accept, answered by Docker-Content-Digest (GET and a hash of
// the body when a registry leaves it out).
//
// Authentication follows the registry's challenge (WWW-Authenticate on a 401), as Docker does:
//  - Basic: the request again with the credential (distribution's htpasswd, Harbor, …);
//  - Bearer realm=…,service=…,scope=…: a token from the realm (with the credential as Basic, or
//    anonymously without one; Docker Hub, GHCR, GitLab, ECR's public side), then the request
//    again with it.
// Everything goes over HTTPS (the token realm too), so a credential never travels in the clear.
// Errors say what the registry answered (401, 403, not found) or why it could not be asked; they
// never carry the credential or the token.
//
// A tenant names the image, so the host is the tenant's choice: ctrl connects only to public
// addresses (checked on each connection's own DNS answer, so a name that resolves differently
// later gains nothing), unless the installation names the host in `privateHosts` (an in-cluster
// registry, a registry on this machine). Otherwise an image name would let a tenant probe ctrl's
// network (the API server, a metadata endpoint) through the error it gets back.
import { createHash } from "node:crypto";
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from "node:dns";
import { BlockList, isIP } from "node:net";
import { rootCertificates } from "node:tls";
import { Agent, fetch, type Response } from "undici";

/**
 * Addresses ctrl does not ask on a tenant's behalf: loopback, private, link-local, CGNAT,
 * unspecified (an IPv4-mapped IPv6 address is checked against the IPv4 ranges by BlockList).
 */
const NOT_PUBLIC = new BlockList();
for (const [net, bits] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.168.0.0", 16],
] as const)
  NOT_PUBLIC.addSubnet(net, bits, "ipv4");
for (const [net, bits] of [
  ["::", 128],
  ["::1", 128],
  ["fc00::", 7],
  ["fe80::", 10],
] as const)
  NOT_PUBLIC.addSubnet(net, bits, "ipv6");

/** Whether ctrl may connect to `address` for a host the installation did not allow. Pure. */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  return !NOT_PUBLIC.check(address, family === 6 ? "ipv6" : "ipv4");
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** dns.lookup keeping only public addresses; none left is an error naming what the name resolved to. */
function publicLookup(hostname: string, options: LookupOptions, callback: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, []);
    const open = addresses.filter((a) => isPublicAddress(a.address));
    const first = open[0];
    if (first === undefined) {
      const e: NodeJS.ErrnoException = new Error(notPublic(hostname, addresses.map((a) => a.address).join(", ")));
      e.code = "ENOTPUBLIC";
      return callback(e, []);
    }
    if (options.all) callback(null, open);
    else callback(null, first.address, first.family);
  });
}

function notPublic(host: string, addresses: string): string {
  return `${host} is at ${addresses}, not a public address; ctrl asks a registry there only if the installation allows its host (--registry-private-hosts)`;
}

/** The media types asked for: the image index / manifest list first, as a multi-platform pull would. */
export const MANIFEST_TYPES = [
  "application/vnd.oci.image.index.v1+json",
  "application/vnd.docker.distribution.manifest.list.v2+json",
  "application/vnd.oci.image.manifest.v1+json",
  "application/vnd.docker.distribution.manifest.v2+json",
] as const;

const MAX_MANIFEST_BYTES = 4 << 20;
const MAX_TOKEN_BYTES = 1 << 20;

export interface RegistryCredential {
  readonly username: string;
  readonly password: string;
}

/** Why a registry could not say: what it answered, or that it could not be asked. */
export type RegistryFailure = "unauthorized" | "forbidden" | "not_found" | "unreachable" | "bad_answer";

export class RegistryError extends Error {
  constructor(
    readonly reason: RegistryFailure,
    /** The registry's HTTP status, when it answered. */
    readonly status: number | undefined,
    message: string,
  ) {
    super(message);
    this.name = "RegistryError";
  }
}

export interface RegistryClientOptions {
  /** Extra CAs (PEM) to trust besides Node's, for registries behind a private CA. */
  readonly ca?: readonly string[];
  /** Each request's deadline (default 10 s). */
  readonly timeoutMs?: number;
  /** Host names (no port) that may be at loopback or private addresses (default: none). */
  readonly privateHosts?: readonly string[];
}

/** A WWW-Authenticate challenge: its scheme and parameters. */
export interface Challenge {
  readonly scheme: string;
  readonly params: Readonly<Record<string, string>>;
}

/** Parses a WWW-Authenticate header's first challenge (`Bearer realm="…",service="…"`). Pure. */
export function parseChallenge(header: string | null): Challenge | undefined {
  if (header === null) return undefined;
  const m = /^\s*([A-Za-z][A-Za-z0-9_-]*)\s*(.*)$/s.exec(header);
  if (!m) return undefined;
  const params: Record<string, string> = {};
  const re = /([A-Za-z][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))\s*,?\s*/g;
  for (let p = re.exec(m[2] ?? ""); p !== null; p = re.exec(m[2] ?? "")) {
    params[(p[1] ?? "").toLowerCase()] = p[2] !== undefined ? p[2].replace(/\\(.)/g, "$1") : (p[3] ?? "");
  }
  return { scheme: (m[1] ?? "").toLowerCase(), params };
}

function basic(c: RegistryCredential): string {
  return `Basic ${Buffer.from(`${c.username}:${c.password}`, "utf8").toString("base64")}`;
}

/** Why a request never got an answer, in a few words (the cause's code and message). */
function causeOf(err: unknown): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e.name === "TimeoutError" || e.name === "AbortError") return "no answer in time";
  const c = e.cause;
  if (c?.code && c.message) return c.message.includes(c.code) ? c.message : `${c.code}: ${c.message}`;
  return c?.message ?? e.message ?? String(err);
}

export class RegistryClient {
  /** For hosts the installation allowed to be private, and for every other host. */
  readonly #allowed: Agent;
  readonly #public: Agent;
  readonly #privateHosts: ReadonlySet<string>;
  readonly #timeoutMs: number;

  constructor(o: RegistryClientOptions = {}) {
    // Node's own roots plus the extra CAs (given `ca`, TLS trusts only what it lists).
    const ca = o.ca && o.ca.length > 0 ? { ca: [...rootCertificates, ...o.ca] } : {};
    this.#allowed = new Agent({ connect: ca, maxResponseSize: MAX_MANIFEST_BYTES });
    this.#public = new Agent({ connect: { ...ca, lookup: publicLookup }, maxResponseSize: MAX_MANIFEST_BYTES });
    this.#privateHosts = new Set((o.privateHosts ?? []).map((h) => h.toLowerCase()));
    this.#timeoutMs = o.timeoutMs ?? 10_000;
  }

  async close(): Promise<void> {
    await Promise.all([this.#allowed.close(), this.#public.close()]);
  }

  async #send(method: "HEAD" | "GET", url: string, authorization: string | undefined): Promise<Response> {
    // An address given as such is not looked up, so it is checked here; a name, on each connection.
    const host = new URL(url).hostname.replace(/^\[(.*)\]$/, "$1").toLowerCase();
    const allowed = this.#privateHosts.has(host);
    if (!allowed && isIP(host) !== 0 && !isPublicAddress(host))
      throw new RegistryError("unreachable", undefined, notPublic(host, host));
    try {
      return await fetch(url, {
        method,
        headers: {
          Accept: method === "HEAD" || url.includes("/manifests/") ? MANIFEST_TYPES.join(", ") : "application/json",
          ...(authorization ? { Authorization: authorization } : {}),
        },
        // A redirect could carry the credential elsewhere; registries answer manifests directly.
        redirect: "manual",
        dispatcher: allowed ? this.#allowed : this.#public,
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
    } catch (err) {
      throw new RegistryError("unreachable", undefined, causeOf(err));
    }
  }

  /** A Bearer token for `scope` from the challenge's realm (Basic with the credential when there is one). */
  async #token(challenge: Challenge, scope: string, credential: RegistryCredential | undefined): Promise<string> {
    const realm = challenge.params.realm ?? "";
    let url: URL;
    try {
      url = new URL(realm);
    } catch {
      throw new RegistryError("bad_answer", 401, `its token realm "${realm}" is not a URL`);
    }
    // HTTPS only, with or without a credential: a registry must not point ctrl at plain-HTTP
    // addresses of its choosing (a cloud metadata endpoint, an internal service).
    if (url.protocol !== "https:")
      throw new RegistryError(
        "bad_answer",
        401,
        `its token realm ${url.origin} is not HTTPS; ctrl asks no token there`,
      );
    if (challenge.params.service) url.searchParams.set("service", challenge.params.service);
    url.searchParams.set("scope", challenge.params.scope ?? scope);
    const res = await this.#send("GET", url.toString(), credential ? basic(credential) : undefined);
    const text = await res.text();
    if (res.status === 401)
      throw new RegistryError("unauthorized", 401, `its token service refused the credential (401)`);
    if (res.status === 403) throw new RegistryError("forbidden", 403, `its token service refused access (403)`);
    if (res.status !== 200 || text.length > MAX_TOKEN_BYTES)
      throw new RegistryError("bad_answer", res.status, `its token service answered HTTP ${res.status}`);
    let token: unknown;
    try {
      const body = JSON.parse(text) as { token?: unknown; access_token?: unknown };
      token = body.token ?? body.access_token;
    } catch {
      token = undefined;
    }
    if (typeof token !== "string" || token === "")
      throw new RegistryError("bad_answer", 200, "its token service answered without a token");
    return token;
  }

  /** The manifest request, authenticated as the registry's challenge asks. */
  async #manifest(
    method: "HEAD" | "GET",
    url: string,
    scope: string,
    credential: RegistryCredential | undefined,
  ): Promise<Response> {
    const first = await this.#send(method, url, undefined);
    if (first.status !== 401) return first;
    await first.body?.cancel();
    const challenge = parseChallenge(first.headers.get("www-authenticate"));
    if (challenge?.scheme === "basic") {
      if (!credential) return first;
      return this.#send(method, url, basic(credential));
    }
    if (challenge?.scheme === "bearer") {
      const token = await this.#token(challenge, scope, credential);
      return this.#send(method, url, `Bearer ${token}`);
    }
    return first;
  }

  /**
   * The digest of the manifest (or index) that `reference` — a tag or a digest — names in
   * `repository` of the registry at `apiHost`.
   */
  async manifestDigest(
    apiHost: string,
    repository: string,
    reference: string,
    credential: RegistryCredential | undefined,
  ): Promise<string> {
    const url = `https://${apiHost}/v2/${repository}/manifests/${reference}`;
    const scope = `repository:${repository}:pull`;
    let res = await this.#manifest("HEAD", url, scope, credential);
    let digest = res.headers.get("docker-content-digest");
    // Some registries answer HEAD without the digest (or not at all): GET, and hash what came.
    if (res.status === 200 && digest === null) {
      res = await this.#manifest("GET", url, scope, credential);
      if (res.status === 200) {
        const body = Buffer.from(await res.arrayBuffer());
        digest = `sha256:${createHash("sha256").update(body).digest("hex")}`;
      }
    }
    await res.body?.cancel().catch(() => {});
    switch (res.status) {
      case 200:
        break;
      case 401:
        throw new RegistryError(
          "unauthorized",
          401,
          credential ? "it refused the credential (401 unauthorized)" : "it asks for credentials (401 unauthorized)",
        );
      case 403:
        throw new RegistryError("forbidden", 403, "it refused access to the repository (403 forbidden)");
      case 404:
        throw new RegistryError("not_found", 404, "it has no such manifest (404 not found)");
      default:
        throw new RegistryError("bad_answer", res.status, `it answered HTTP ${res.status}`);
    }
    if (digest === null || !/^sha(256|512):[0-9a-f]{64,128}$/.test(digest))
      throw new RegistryError("bad_answer", 200, "it answered without a usable digest");
    if (reference.includes(":") && reference !== digest)
      throw new RegistryError("bad_answer", 200, `it answered ${digest} for ${reference}`);
    return digest;
  }
}

// ctrl as the build registry's token issuer: the Docker registry token flow that the
// distribution registry runs with `auth: token` (a Bearer challenge naming ctrl's realm, a JWT
// signed ES256 by a key whose public half is in the registry's JWKS). What a token grants is
// decided here, purely:
//  - a workspace's pull identity gets `pull` on repositories under `<workspace slug>/` only;
//    any other repository, any other action (push, delete, `*`), any other resource type and
//    any malformed scope is simply left out, so the registry refuses that request (401/403);
//  - ctrl's build worker mints its own token in memory for the one repository it pushes.
// Tokens live five minutes: a leaked one is worth little, and containerd asks again per pull.
import { createPrivateKey, createPublicKey, randomBytes, type KeyObject } from "node:crypto";
import { calculateJwkThumbprint, exportJWK, SignJWT, type JWK } from "jose";

export type RegistryAction = "pull" | "push";

/** One entry of a token's `access` claim. */
export interface RegistryAccess {
  readonly type: "repository";
  readonly name: string;
  readonly actions: RegistryAction[];
}

/** A repository name as the distribution registry accepts it (its reference grammar). */
const REPOSITORY = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$/;
const MAX_NAME = 255;
const ACTIONS: readonly RegistryAction[] = ["pull", "push"];

/** `repository:NAME:ACTIONS` → its parts; undefined when it is not one (another type, a bad name). Pure. */
export function parseScope(scope: string): { name: string; actions: string[] } | undefined {
  const m = /^repository:([^:]+):([a-z*,]*)$/.exec(scope);
  if (!m) return undefined;
  const name = m[1] ?? "";
  if (name.length > MAX_NAME || !REPOSITORY.test(name)) return undefined;
  return { name, actions: (m[2] ?? "").split(",").filter((a) => a !== "") };
}

/**
 * What a token for these requested scopes (the `scope` parameters; one may hold several,
 * space-separated) grants: for each well-formed repository scope whose name starts with
 * `prefix`, the requested actions among `allowed`; nothing else. Pure.
 */
export function grantAccess(
  requested: readonly string[],
  prefix: string,
  allowed: readonly RegistryAction[],
): RegistryAccess[] {
  const byName = new Map<string, Set<RegistryAction>>();
  for (const scope of requested.flatMap((s) => s.split(/\s+/)).filter((s) => s !== "")) {
    const parsed = parseScope(scope);
    if (!parsed || prefix === "" || !parsed.name.startsWith(prefix)) continue;
    const granted = ACTIONS.filter((a) => allowed.includes(a) && parsed.actions.includes(a));
    if (granted.length === 0) continue;
    const set = byName.get(parsed.name) ?? new Set();
    for (const a of granted) set.add(a);
    byName.set(parsed.name, set);
  }
  return [...byName].map(([name, set]) => ({
    type: "repository",
    name,
    actions: ACTIONS.filter((a) => set.has(a)),
  }));
}

/** The repositories of a workspace: `<slug>/…`. */
export function workspacePrefix(workspaceSlug: string): string {
  return `${workspaceSlug}/`;
}

/** The issuer ctrl's tokens name (the registry's auth.token.issuer), and their lifetime. */
export const TOKEN_ISSUER = "krane";
const TOKEN_SECONDS = 300;
/** The registry's auth.token.service unless the installation names another. */
export const DEFAULT_TOKEN_SERVICE = "krane-build-registry";
/** The subject of the tokens ctrl signs for its own pushes. */
export const CTRL_PUSH_SUBJECT = "krane-ctrl";

/** A signed token, its lifetime in seconds and when it was issued (as the token realm answers). */
export type SignedToken = { readonly token: string; readonly expiresIn: number; readonly issuedAt: string };

/** Signs registry tokens with ctrl's key (ES256). */
export class RegistryTokens {
  readonly service: string;
  readonly #key: KeyObject;
  readonly #kid: string;

  private constructor(service: string, key: KeyObject, kid: string) {
    this.service = service;
    this.#key = key;
    this.#kid = kid;
  }

  /** From the key file's text (an EC P-256 private key, PEM); errors name the setting. */
  static async fromPem(pem: string, service: string): Promise<RegistryTokens> {
    const key = privateKeyOf(pem);
    const jwk = await publicJwk(key);
    return new RegistryTokens(service, key, jwk.kid ?? "");
  }

  /**
   * The Authorization header for a request on a repository (src/builds/push.ts asks per
   * request): a fresh token for that repository alone, so a long push never outlives one.
   */
  bearerFor(subject: string, actions: RegistryAction[]): (repository: string) => Promise<string> {
    return async (name) => `Bearer ${(await this.sign(subject, [{ type: "repository", name, actions }])).token}`;
  }

  /** A token for `subject` granting `access` (audience: the service), valid five minutes. */
  async sign(subject: string, access: readonly RegistryAccess[], now = Date.now()): Promise<SignedToken> {
    const iat = Math.floor(now / 1000);
    const token = await new SignJWT({ access: access.map((a) => ({ ...a, actions: [...a.actions] })) })
      .setProtectedHeader({ alg: "ES256", typ: "JWT", kid: this.#kid })
      .setIssuer(TOKEN_ISSUER)
      .setSubject(subject)
      .setAudience(this.service)
      .setIssuedAt(iat)
      // A little slack for clocks a few seconds apart.
      .setNotBefore(iat - 10)
      .setExpirationTime(iat + TOKEN_SECONDS)
      .setJti(randomBytes(12).toString("hex"))
      .sign(this.#key);
    return { token, expiresIn: TOKEN_SECONDS, issuedAt: new Date(iat * 1000).toISOString() };
  }
}

function privateKeyOf(pem: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch {
    throw new Error("build registry token key: not a private key in PEM");
  }
  if (key.asymmetricKeyType !== "ec" || key.asymmetricKeyDetails?.namedCurve !== "prime256v1")
    throw new Error("build registry token key: must be an EC P-256 key (openssl ecparam -name prime256v1 -genkey)");
  return key;
}

/** The public half as a JWK, its `kid` the RFC 7638 thumbprint (what the tokens' header names). */
async function publicJwk(key: KeyObject): Promise<JWK> {
  const jwk = await exportJWK(createPublicKey(key));
  return { ...jwk, kid: await calculateJwkThumbprint(jwk), alg: "ES256", use: "sig" };
}

/**
 * The JWKS the registry's auth.token.jwks file holds: the public keys of these key files (PEM);
 * during a rotation both the new and the old key, so tokens of either verify.
 */
export async function registryJwks(pems: readonly string[]): Promise<{ keys: JWK[] }> {
  return { keys: await Promise.all(pems.map((p) => publicJwk(privateKeyOf(p)))) };
}

// A real OpenID provider for tests: the `oidc-provider` package (OpenID certified) on a loopback
// port, with accounts of the test's choosing, its dev login page (any password), and keys the
// test holds so it can rotate them (restart() on the same port and issuer) — nothing of the
// protocol is written here. `signIn` is the person's browser: it follows the provider's pages
// with a cookie jar, logs in as an account, consents, and answers the redirect URI the provider sends it
// to. `tamper` rewrites the ID token of the provider's next token answers (re-signed with a key
// of the test's): how the tests make a token the provider would not (expired, another audience,
// another nonce, a key it never published).
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { decodeJwt, decodeProtectedHeader, exportJWK, generateKeyPair, SignJWT, type JWK, type JWTPayload } from "jose";
import Provider, { type Configuration } from "oidc-provider";

export interface TestAccount {
  sub: string;
  email: string;
  email_verified: boolean;
  name: string;
  groups?: string[];
}

export interface SigningKey {
  /** The private JWK (with kid and alg). */
  jwk: JWK;
  privateKey: Awaited<ReturnType<typeof generateKeyPair>>["privateKey"];
}

export async function newSigningKey(kid: string): Promise<SigningKey> {
  const { privateKey } = await generateKeyPair("RS256", { extractable: true });
  const jwk = { ...(await exportJWK(privateKey)), kid, alg: "RS256", use: "sig" };
  return { jwk, privateKey };
}

export const CLIENT_ID = "krane-test";
export const CLIENT_SECRET = "krane-test-secret-0123456789abcdef";
/** ctrl's public URL behind a proxy, as the provider knows it (its redirect URI's origin). */
export const PUBLIC_URL = "https://krane.example.test";

export class TestProvider {
  private server: Server | null = null;
  /** Rewrites the ID token of token answers while set. */
  tamper: ((idToken: string) => Promise<string>) | null = null;

  private constructor(
    readonly port: number,
    readonly accounts: Map<string, TestAccount>,
    private keys: SigningKey[],
  ) {}

  get issuer(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The key that signs now (the first). */
  get signingKey(): SigningKey {
    const k = this.keys[0];
    if (!k) throw new Error("no key");
    return k;
  }

  static async start(accounts: TestAccount[], keys: SigningKey[], port = 0): Promise<TestProvider> {
    const p = new TestProvider(port, new Map(accounts.map((a) => [a.sub, a])), keys);
    await p.listen(port);
    return p;
  }

  /** Restarts on the same port and issuer with these keys (the first signs, all are published). */
  async restart(keys: SigningKey[]): Promise<void> {
    await this.stop();
    // Let this process's clients (the test's browser, the code under test) see their kept-alive
    // connections closed before they call again.
    await new Promise((resolve) => setTimeout(resolve, 50));
    this.keys = keys;
    await this.listen(this.port);
  }

  private async listen(port: number): Promise<void> {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => resolve());
    });
    (this as { port: number }).port = (server.address() as AddressInfo).port;
    const accounts = this.accounts;
    const config: Configuration = {
      clients: [
        {
          client_id: CLIENT_ID,
          client_secret: CLIENT_SECRET,
          application_type: "native",
          // The CLI's loopback listener and ctrl's own (the dashboard's sign-in): a native
          // client's loopback URIs match on any port; and ctrl's behind a TLS-terminating proxy
          // at its public URL (test/integration/ctrl/public-url.test.ts).
          redirect_uris: [
            "http://127.0.0.1/callback",
            "http://127.0.0.1/auth/oidc/callback",
            `${PUBLIC_URL}/auth/oidc/callback`,
          ],
          grant_types: ["authorization_code", "refresh_token"],
          response_types: ["code"],
        },
      ],
      jwks: { keys: this.keys.map((k) => k.jwk) },
      claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name", "groups"] },
      // Claims in the ID token itself, as many providers put them.
      conformIdTokenClaims: false,
      pkce: { required: () => true },
      findAccount: (_ctx, sub) => {
        const a = accounts.get(sub);
        if (!a) return undefined;
        return { accountId: sub, claims: () => ({ ...a }) };
      },
    };
    const provider = new Provider(this.issuer, config);
    provider.use(async (ctx, next) => {
      await next();
      const tamper = this.tamper;
      const body = ctx.body as { id_token?: unknown } | undefined;
      if (tamper && ctx.path === "/token" && body && typeof body.id_token === "string")
        ctx.body = { ...body, id_token: await tamper(body.id_token) };
    });
    server.on("request", provider.callback());
    this.server = server;
  }

  /** Makes the next ID tokens with these claims changed, signed with `key` (default: the provider's). */
  rewrite(change: (claims: JWTPayload) => JWTPayload, key: SigningKey = this.signingKey): void {
    this.tamper = async (idToken) => {
      const header = decodeProtectedHeader(idToken);
      return new SignJWT(change(decodeJwt(idToken)))
        .setProtectedHeader({ ...header, alg: "RS256", kid: key.jwk.kid })
        .sign(key.privateKey);
    };
  }

  async stop(): Promise<void> {
    const s = this.server;
    this.server = null;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  /**
   * The person's browser: opens the authorization URL, logs in as `sub` on the provider's page,
   * and answers the URL the provider finally redirects to (the redirect URI with code and state),
   * without requesting it.
   */
  async signIn(authorizationUrl: string, sub: string): Promise<string> {
    const jar = new Map<string, string>();
    const cookies = () => [...jar].map(([k, v]) => `${k}=${v}`).join("; ");
    const remember = (res: Response) => {
      for (const c of res.headers.getSetCookie()) {
        const [pair] = c.split(";");
        const i = pair?.indexOf("=") ?? -1;
        if (pair && i > 0) jar.set(pair.slice(0, i), pair.slice(i + 1));
      }
    };
    let url = authorizationUrl;
    let form: URLSearchParams | null = null;
    for (let hop = 0; hop < 20; hop++) {
      if (!url.startsWith(this.issuer)) return url;
      const res: Response = await fetch(url, {
        method: form ? "POST" : "GET",
        redirect: "manual",
        headers: { cookie: cookies(), ...(form ? { "content-type": "application/x-www-form-urlencoded" } : {}) },
        body: form ?? undefined,
      });
      remember(res);
      form = null;
      const location = res.headers.get("location");
      if (location !== null) {
        url = new URL(location, url).href;
        continue;
      }
      const html = await res.text();
      if (res.status === 200 && html.includes('name="prompt" value="login"')) {
        form = new URLSearchParams({ prompt: "login", login: sub, password: "any" });
        continue;
      }
      if (res.status === 200 && html.includes('name="prompt" value="consent"')) {
        form = new URLSearchParams({ prompt: "consent" });
        continue;
      }
      throw new Error(
        `the provider answered ${res.status} at ${url}: ${html.slice(Math.max(0, html.indexOf("<body")), html.indexOf("<body") + 1500)}`,
      );
    }
    throw new Error("too many redirects at the provider");
  }
}

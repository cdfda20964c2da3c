// The build registry's token realm on ctrl's API port: `GET /registry/token?service=…&scope=…`
// with a workspace's pull identity as Basic credentials (what the agent's pull Secret holds, so
// what containerd sends) answers a token that grants pull on that workspace's repositories and
// nothing else (./registry-token.ts decides). Wrong or absent credentials get 401 and no token.
//
// Why the API port: nodes already reach it (the agents stream from it), it is the one that
// speaks TLS (--tls-cert), so the Basic credential never crosses the network in the clear, and it
// answers HTTP/1.1 as containerd's token fetch speaks. The webhook port is plain HTTP, optional,
// and meant to face the repository hosts, not the nodes.
//
// containerd tries the OAuth2 form (POST) first when it has credentials and falls back to GET on
// a 405, so only GET is served.
import { createHash, timingSafeEqual } from "node:crypto";
import type * as http from "node:http";
import type * as http2 from "node:http2";
import type { Store } from "../db/store.js";
import { buildPullWorkspace, registryCredential } from "../domain/registries.js";
import { findWorkspace } from "../domain/tenancy.js";
import type { Keyring } from "../secrets/keyring.js";
import { grantAccess, workspacePrefix, type RegistryTokens } from "./registry-token.js";

type NodeRequest = http.IncomingMessage | http2.Http2ServerRequest;
type NodeResponse = http.ServerResponse | http2.Http2ServerResponse;

/** The realm's path on the API port. */
export const REGISTRY_TOKEN_PATH = "/registry/token";

export interface TokenEndpointDeps {
  readonly store: Store;
  readonly keyring: Keyring | undefined;
  /** The build registry, host:port (the host of the pull identities' credentials). */
  readonly registry: string;
  readonly tokens: RegistryTokens;
  readonly onError: (err: unknown) => void;
}

function same(a: string, b: string): boolean {
  const h = (s: string): Buffer => createHash("sha256").update(s, "utf8").digest();
  return timingSafeEqual(h(a), h(b));
}

/** The Basic credentials of a request; undefined when there are none or they are not Basic. */
function basicCredentials(header: string | undefined): { username: string; password: string } | undefined {
  const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? "");
  if (!m) return undefined;
  const text = Buffer.from(m[1] ?? "", "base64").toString("utf8");
  const colon = text.indexOf(":");
  if (colon <= 0) return undefined;
  return { username: text.slice(0, colon), password: text.slice(colon + 1) };
}

function answer(res: NodeResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store", ...headers });
  res.end(JSON.stringify(body));
}

function refuse(res: NodeResponse, message: string): void {
  answer(
    res,
    401,
    { errors: [{ code: "UNAUTHORIZED", message }] },
    { "www-authenticate": 'Basic realm="krane build registry"' },
  );
}

/** The workspace (id, slug) whose pull identity these credentials are; undefined: none. */
async function identify(
  d: TokenEndpointDeps,
  c: { username: string; password: string },
): Promise<{ slug: string } | undefined> {
  const workspaceId = buildPullWorkspace(c.username);
  if (workspaceId === undefined) return undefined;
  const stored = await registryCredential(d.store.db, d.keyring, workspaceId, d.registry);
  if (!stored || !same(stored.username, c.username) || !same(stored.password, c.password)) return undefined;
  try {
    return await findWorkspace(d.store.db, workspaceId);
  } catch {
    return undefined;
  }
}

export function registryTokenHandler(d: TokenEndpointDeps): (req: NodeRequest, res: NodeResponse) => void {
  return (req, res) => {
    void (async () => {
      if (req.method !== "GET") return answer(res, 405, { message: "GET only" }, { allow: "GET" });
      const url = new URL(req.url ?? "/", "http://ctrl");
      const credentials = basicCredentials(req.headers.authorization);
      if (!credentials) return refuse(res, "a workspace's pull credentials (Basic) are required");
      const workspace = await identify(d, credentials);
      if (!workspace) return refuse(res, "not a pull identity of this build registry");
      // A token for another service would be refused by the registry anyway: grant it nothing.
      const access =
        url.searchParams.get("service") === d.tokens.service
          ? grantAccess(url.searchParams.getAll("scope"), workspacePrefix(workspace.slug), ["pull"])
          : [];
      const t = await d.tokens.sign(credentials.username, access);
      answer(res, 200, { token: t.token, access_token: t.token, expires_in: t.expiresIn, issued_at: t.issuedAt });
    })().catch((err: unknown) => {
      d.onError(err);
      if (!res.headersSent) answer(res, 500, { message: "the token could not be issued" });
    });
  };
}

// The web dashboard's HTTP side, on ctrl's API port next to the RPCs: the built page and its
// assets at `/`, sign-in/sign-out at `/dashboard/session`, and members' sign-in through the
// OpenID provider at `/auth/oidc/…` (./sign-in.ts for the CLI, ./provider-sign-in.ts for the
// page). Everything else the page does is a call of the public API (Connect over HTTP/1.1 or
// HTTP/2) carrying the session cookie; there is no backend-for-frontend.
//
//   POST   /dashboard/session  {"token": "krane_user_…"}  → the session cookie (HttpOnly, SameSite=Strict)
//   GET    /dashboard/session                              → who the cookie's session is, or 401
//   DELETE /dashboard/session                              → sign-out: the session is deleted
//   GET    /auth/oidc/dashboard?workspace=…                → the sign-in through the provider
//
// GET answers {"name", "workspace", "role", "member"} (POST the first two): the token's name (a
// member's own after a sign-in through the provider), the workspace its token is bound to
// ({"id", "slug"}) or null for an installation token — what the page may show (a workspace
// session reaches nothing outside that workspace: ../auth/scope.ts) — the role it acts with
// (null: an installation token, which may do everything) and the member ({"email"}) or null.
// Its 401 says whether the provider's sign-in is offered: {"message", "oidc": {"issuer"} | null}.
//
// The token travels only in that POST's body: never in a URL, never back to the page, never in
// web storage (the page keeps nothing of it).
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import type { Store } from "../db/store.js";
import { findMember } from "../domain/members.js";
import { createSession, deleteSession } from "../domain/sessions.js";
import type { RoleName } from "../../contracts/roles.js";
import { findUserTokenByHash, hashToken } from "../domain/tokens.js";
import { crossSiteRefusal, readCookie, sessionCookie } from "../auth/browser.js";
import {
  header,
  json,
  ownOrigin,
  PAGE_HEADERS,
  readBody,
  refusedByLimit,
  type Request,
  type Response,
} from "./answers.js";
import { SignInLimiter, type LimitPolicy } from "./limiter.js";
import { answerProviderSignIn } from "./provider-sign-in.js";
import { answerSignIn, SIGN_IN_PREFIX } from "./sign-in.js";
import type { OidcSignIn } from "../auth/oidc.js";

/** Where `npm run build` puts the page (dist/dashboard), from this module in src/ or dist/ alike. */
export const DEFAULT_ASSETS_DIR = fileURLToPath(new URL("../../../dist/dashboard/", import.meta.url));

/** Default lifetime of a session: 12 hours, whatever the activity (then sign in again). */
export const DEFAULT_SESSION_TTL_MS = 12 * 60 * 60 * 1000;

/** What the sessions need of the Authenticator (../auth/authenticator.ts). */
export interface SessionAuth {
  readonly sessionCookieName: string;
  authenticateSession(id: string): Promise<
    | {
        tokenId: string;
        name: string;
        workspace: { id: string; slug: string } | null;
        role?: RoleName;
        member?: { id: string; email: string };
      }
    | undefined
  >;
  forgetSession(id: string): void;
}

export interface DashboardOptions {
  store: Store;
  auth: SessionAuth;
  /** ctrl serves TLS, or its public URL is https: the cookie is Secure. */
  secure: boolean;
  /** The origin browsers reach ctrl at (`ctrl serve --public-url`); default: each request's own. */
  publicOrigin?: string;
  /** The built page; default DEFAULT_ASSETS_DIR. */
  assetsDir?: string;
  sessionTtlMs?: number;
  /** The sign-in's rate limit (default: ./limiter.ts PER_ADDRESS and OVERALL). */
  signInLimit?: { perAddress?: LimitPolicy; overall?: LimitPolicy };
  /** Members' sign-in through the installation's OpenID provider (./sign-in.ts); absent: none. */
  oidc?: OidcSignIn;
  /** A failure that is no answer of the page's (logged by the server). */
  onError?: (err: unknown) => void;
}

interface Asset {
  type: string;
  body: Buffer;
  gzip: Buffer | undefined;
}

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".json": "application/json",
  ".map": "application/json",
};

/**
 * Every file of the built page, read once: a request can only name one of these (no path is
 * ever joined from a URL). Their names carry no content hash, so browsers revalidate every file.
 */
export function loadAssets(dir: string): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  if (!existsSync(dir)) return assets;
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (statSync(p).isFile()) {
        const rel = relative(dir, p).split("\\").join("/");
        const ext = /\.[a-z0-9]+$/.exec(rel)?.[0] ?? "";
        const body = readFileSync(p);
        const type = TYPES[ext] ?? "application/octet-stream";
        const compressible = type.startsWith("text/") || type.includes("json") || type.includes("svg");
        assets.set(`/${rel}`, {
          type,
          body,
          gzip: compressible && body.byteLength > 512 ? gzipSync(body, { level: 9 }) : undefined,
        });
      }
    }
  };
  walk(dir);
  return assets;
}

export function createDashboardHandler(opts: DashboardOptions): (req: Request, res: Response) => void {
  const assets = loadAssets(opts.assetsDir ?? DEFAULT_ASSETS_DIR);
  const ttl = opts.sessionTtlMs ?? DEFAULT_SESSION_TTL_MS;
  const cookieName = opts.auth.sessionCookieName;

  const limiter = new SignInLimiter(opts.signInLimit?.perAddress, opts.signInLimit?.overall, Date.now());
  const signIn = async (req: Request, res: Response): Promise<void> => {
    if (refusedByLimit(limiter, req, res)) return;
    if (!(header(req, "content-type") ?? "").toLowerCase().startsWith("application/json"))
      return json(res, 415, { message: 'sign in with a JSON body: {"token": "…"}' });
    const text = await readBody(req);
    if (text === undefined) return json(res, 413, { message: "the sign-in body is too large" });
    let token: unknown;
    try {
      token = (JSON.parse(text) as { token?: unknown }).token;
    } catch {
      return json(res, 400, { message: "token: the body is not JSON" });
    }
    if (typeof token !== "string" || token.trim() === "" || token.length > 512)
      return json(res, 400, { message: "token: an API token is required" });
    const user = await findUserTokenByHash(opts.store.db, hashToken(token.trim()));
    // The same answer for an unknown and a revoked token, and nothing of the token echoed.
    if (!user) return json(res, 401, { message: "token: not a valid API token" });
    const session = await createSession(opts.store, user.id, ttl);
    json(
      res,
      200,
      { name: user.name, workspace: user.workspace, expiresAt: new Date(session.expiresAt).toISOString() },
      { "set-cookie": sessionCookie(session.id, { secure: opts.secure, maxAgeMs: ttl }) },
    );
  };

  const who = async (req: Request, res: Response): Promise<void> => {
    const id = readCookie(header(req, "cookie"), cookieName);
    const user = id === undefined ? undefined : await opts.auth.authenticateSession(id);
    if (!user)
      return json(res, 401, {
        message: "not signed in",
        oidc: opts.oidc ? { issuer: opts.oidc.settings.issuer } : null,
      });
    // A member's session names them (the provider's name, else their address) and their role.
    const member =
      user.member && user.workspace ? await findMember(opts.store.db, user.workspace.id, user.member.id) : undefined;
    json(res, 200, {
      name: member ? member.name || member.email : user.name,
      workspace: user.workspace,
      role: user.role ?? null,
      member: member ? { email: member.email } : null,
    });
  };

  const signOut = async (req: Request, res: Response): Promise<void> => {
    const id = readCookie(header(req, "cookie"), cookieName);
    if (id !== undefined) {
      // A sign-in's session ends with its member session (no longer listed).
      await deleteSession(opts.store, hashToken(id));
      opts.auth.forgetSession(id);
    }
    res.writeHead(204, {
      ...PAGE_HEADERS,
      "cache-control": "no-store",
      "set-cookie": sessionCookie("", { secure: opts.secure, maxAgeMs: 0 }),
    });
    res.end();
  };

  const serveAsset = (req: Request, res: Response, path: string): void => {
    const asset = assets.get(path === "/" ? "/index.html" : path);
    if (!asset) {
      if (path === "/" && assets.size === 0) {
        res.writeHead(503, { ...PAGE_HEADERS, "content-type": "text/plain; charset=utf-8" });
        res.end("The dashboard is not built: run `npm run build`.\n");
        return;
      }
      res.writeHead(404, PAGE_HEADERS);
      res.end();
      return;
    }
    const gzip = asset.gzip !== undefined && /\bgzip\b/.test(header(req, "accept-encoding") ?? "");
    const body = gzip && asset.gzip ? asset.gzip : asset.body;
    res.writeHead(200, {
      ...PAGE_HEADERS,
      "content-type": asset.type,
      "content-length": String(body.byteLength),
      "cache-control": "no-cache",
      vary: "accept-encoding",
      ...(gzip ? { "content-encoding": "gzip" } : {}),
    });
    if (req.method === "HEAD") res.end();
    else res.end(body);
  };

  return (req, res) => {
    const path = (req.url ?? "/").split("?", 1)[0] ?? "/";
    const method = req.method ?? "GET";
    const work = async (): Promise<void> => {
      const browser = {
        store: opts.store,
        oidc: opts.oidc,
        secure: opts.secure,
        publicOrigin: opts.publicOrigin,
        limiter,
      };
      if (await answerProviderSignIn(req, res, path, browser)) return;
      if (path.startsWith(SIGN_IN_PREFIX)) return answerSignIn(req, res, path, opts.oidc, limiter);
      if (path === "/dashboard/session") {
        if (method === "GET") return who(req, res);
        if (method !== "POST" && method !== "DELETE") return json(res, 405, { message: "GET, POST or DELETE" });
        // Signing in or out changes state: only from the dashboard's own page.
        const refusal = crossSiteRefusal({
          ownOrigin: ownOrigin(req, opts.secure, opts.publicOrigin),
          origin: header(req, "origin"),
          secFetchSite: header(req, "sec-fetch-site"),
        });
        if (refusal !== undefined) return json(res, 403, { message: refusal });
        return method === "POST" ? signIn(req, res) : signOut(req, res);
      }
      if (method !== "GET" && method !== "HEAD") {
        res.writeHead(404, PAGE_HEADERS);
        res.end();
        return;
      }
      serveAsset(req, res, path);
    };
    work().catch((err: unknown) => {
      opts.onError?.(err);
      if (!res.headersSent) json(res, 500, { message: "the dashboard could not answer; see ctrl's log" });
      else res.end();
    });
  };
}

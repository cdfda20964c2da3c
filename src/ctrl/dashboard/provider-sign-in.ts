// The dashboard's sign-in through the installation's OpenID provider: ctrl is the provider's
// client (../auth/oidc.ts, the authorization code flow with PKCE) and takes the answer on its own
// origin, so no token ever reaches the page.
//
//   GET /auth/oidc/dashboard?workspace=<slug>  → 303 to the provider (the page's "Sign in with …" link)
//   GET /auth/oidc/callback?code=…&state=…     → the session cookie, 303 to the page
//
// The callback makes a member session (client "dashboard", what `krane session list` shows) and a
// cookie session acting as it (../domain/sessions.ts): revoking the member session ends the
// browser's access. The sign-in is bound to the browser that started it: the start sets a
// short-lived cookie holding the sign-in's state, and the callback is refused unless it carries
// the same state (so nobody can hand a victim the answer to a sign-in of their own and have the
// victim's browser signed in as them). That cookie is SameSite=Lax because the provider's redirect
// back is a navigation from another site, which a Strict cookie would not be sent with; it holds
// nothing that signs anyone in. Every refusal is a plain page with its reason; nothing is made.
import type { Store } from "../db/store.js";
import { createSession } from "../domain/sessions.js";
import { DomainError, HTTP_STATUS } from "../errors.js";
import { ProviderUnavailable, SignInRefused, type OidcSignIn } from "../auth/oidc.js";
import { readCookie, sessionCookie } from "../auth/browser.js";
import { header, ownOrigin, PAGE_HEADERS, refusedByLimit, type Request, type Response } from "./answers.js";
import type { SignInLimiter } from "./limiter.js";

export const DASHBOARD_START = "/auth/oidc/dashboard";
export const DASHBOARD_CALLBACK = "/auth/oidc/callback";

/** The sign-in under way lasts this long at most in the browser (as ../domain/member-sessions.ts LOGIN_TTL_MS). */
const PENDING_COOKIE_S = 600;

function pendingCookieName(secure: boolean): string {
  return secure ? "__Host-krane_signin" : "krane_signin";
}

function pendingCookie(value: string, secure: boolean): string {
  const parts = [
    `${pendingCookieName(secure)}=${value}`,
    "Path=/",
    "HttpOnly",
    "SameSite=Lax",
    `Max-Age=${value === "" ? 0 : PENDING_COOKIE_S}`,
  ];
  if (secure) parts.push("Secure");
  return parts.join("; ");
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** A refusal as a page: its reason and a way back (no script, so the strict CSP holds). */
function refusalPage(res: Response, status: number, message: string, secure: boolean): void {
  const body = `<!doctype html><html lang="en"><meta charset="utf-8"><title>Sign-in refused · krane</title><link rel="stylesheet" href="/assets/main.css"><main class="signin"><h1>Sign-in refused</h1><p class="error" role="alert">${escapeHtml(message)}</p><p><a href="/">Back to the sign-in</a></p></main></html>\n`;
  res.writeHead(status, {
    ...PAGE_HEADERS,
    "content-type": "text/html; charset=utf-8",
    "cache-control": "no-store",
    "content-length": String(Buffer.byteLength(body)),
    "set-cookie": pendingCookie("", secure),
  });
  res.end(body);
}

function redirect(res: Response, location: string, cookies: string[]): void {
  res.writeHead(303, { ...PAGE_HEADERS, location, "cache-control": "no-store", "set-cookie": cookies });
  res.end();
}

export interface ProviderSignInOptions {
  store: Store;
  oidc: OidcSignIn | undefined;
  secure: boolean;
  /** ctrl's public URL (the redirect URI's origin); default: the request's own. */
  publicOrigin?: string;
  limiter: SignInLimiter;
}

/** Answers GET /auth/oidc/dashboard and /auth/oidc/callback; false: the path is neither. */
export async function answerProviderSignIn(
  req: Request,
  res: Response,
  path: string,
  opts: ProviderSignInOptions,
): Promise<boolean> {
  if (path !== DASHBOARD_START && path !== DASHBOARD_CALLBACK) return false;
  const { oidc, secure } = opts;
  if (!oidc) {
    refusalPage(
      res,
      404,
      "this ctrl has no OpenID provider (ctrl serve --oidc-issuer): sign in with an API token",
      secure,
    );
    return true;
  }
  if (req.method !== "GET") {
    refusalPage(res, 405, "GET", secure);
    return true;
  }
  if (refusedByLimit(opts.limiter, req, res)) return true;
  const origin = ownOrigin(req, secure, opts.publicOrigin);
  const url = new URL(req.url ?? "/", origin);
  const redirectUri = `${origin}${DASHBOARD_CALLBACK}`;
  try {
    if (path === DASHBOARD_START) {
      const workspace = (url.searchParams.get("workspace") ?? "").trim();
      if (workspace !== "" && !/^[a-z0-9][a-z0-9-]{0,62}$/.test(workspace))
        throw new DomainError("invalid_argument", "workspace: not a workspace slug", "workspace");
      const { authorizationUrl, state } = await oidc.begin({ redirectUri, workspace });
      redirect(res, authorizationUrl, [pendingCookie(state, secure)]);
      return true;
    }
    const state = url.searchParams.get("state") ?? "";
    const started = readCookie(header(req, "cookie"), pendingCookieName(secure));
    // Not started in this browser (or started too long ago): refused before the state is taken.
    if (started === undefined || state === "" || started !== state)
      throw new SignInRefused("this sign-in was not started in this browser, or took too long: sign in again");
    const done = await oidc.complete(url.href, "dashboard", req.socket.remoteAddress ?? "");
    const session = await createSession(opts.store, done.tokens.sessionId, done.tokens.expiresAt - Date.now());
    redirect(res, "/", [
      sessionCookie(session.id, { secure, maxAgeMs: session.expiresAt - Date.now() }),
      pendingCookie("", secure),
    ]);
    return true;
  } catch (err) {
    if (err instanceof DomainError) refusalPage(res, HTTP_STATUS[err.code], err.message, secure);
    else if (err instanceof SignInRefused) refusalPage(res, 401, err.message, secure);
    else if (err instanceof ProviderUnavailable) refusalPage(res, 503, err.message, secure);
    else throw err;
    return true;
  }
}

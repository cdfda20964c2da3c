// Sign-in through the installation's OpenID provider, on ctrl's API port beside the RPCs (no
// credential exists yet, so these are plain JSON requests, rate-limited like the dashboard's
// sign-in). The CLI's `krane login` uses them with a loopback redirect (../auth/oidc.ts):
//
//   POST /auth/oidc/begin     {"redirect_uri", "workspace"}   → {"authorization_url"}
//   POST /auth/oidc/complete  {"callback_url", "client"?}     → the session (below)
//   POST /auth/oidc/refresh   {"refresh_token"}               → the session with new tokens
//
// "client" is "cli" (the default) or "dashboard", as `krane session list` shows it.
// A session answer: {"session_id", "access_token", "refresh_token", "access_expires_at",
// "expires_at", "workspace": {"id", "slug"}?, "member": {"email", "role", "subject"}?} (times as
// ISO 8601). Refusals are {"message"} with 400 (bad input, naming the field), 401 (the provider's
// answer does not hold, or the session is over), 403 (no member), 409 (several workspaces: name
// one), 429 (too many attempts), 503 (the provider did not answer), 404 (no provider configured).
import { ProviderUnavailable, SignInRefused, type OidcSignIn } from "../auth/oidc.js";
import { checkRedirectUri } from "../auth/oidc-rules.js";
import type { SessionTokens } from "../domain/member-sessions.js";
import { DomainError, HTTP_STATUS } from "../errors.js";
import { header, json, readBody, refusedByLimit, type Request, type Response } from "./answers.js";
import type { SignInLimiter } from "./limiter.js";

export const SIGN_IN_PREFIX = "/auth/oidc/";

function sessionAnswer(t: SessionTokens, extra: object = {}): object {
  return {
    session_id: t.sessionId,
    access_token: t.accessToken,
    refresh_token: t.refreshToken,
    access_expires_at: new Date(t.accessExpiresAt).toISOString(),
    expires_at: new Date(t.expiresAt).toISOString(),
    ...extra,
  };
}

async function body(req: Request): Promise<Record<string, unknown>> {
  if (!(header(req, "content-type") ?? "").toLowerCase().startsWith("application/json"))
    throw new DomainError("invalid_argument", "body: send JSON (content-type application/json)");
  const text = await readBody(req);
  if (text === undefined) throw new DomainError("invalid_argument", "body: too large");
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new DomainError("invalid_argument", "body: not JSON");
  }
  if (v === null || typeof v !== "object" || Array.isArray(v))
    throw new DomainError("invalid_argument", "body: expected an object");
  return v as Record<string, unknown>;
}

function field(b: Record<string, unknown>, name: string, max: number): string {
  const v = b[name] ?? "";
  if (typeof v !== "string" || v.length > max)
    throw new DomainError("invalid_argument", `${name}: expected a string of at most ${max} characters`, name);
  return v;
}

/** Answers /auth/oidc/… (oidc undefined: the installation has no provider, 404). */
export async function answerSignIn(
  req: Request,
  res: Response,
  path: string,
  oidc: OidcSignIn | undefined,
  limiter: SignInLimiter,
): Promise<void> {
  if (!oidc)
    return json(res, 404, { message: "this ctrl has no OpenID provider (ctrl serve --oidc-issuer): use an API token" });
  if (req.method !== "POST") return json(res, 405, { message: "POST" });
  if (refusedByLimit(limiter, req, res)) return;
  try {
    const b = await body(req);
    // The peer's address (a proxy's, behind one): shown in `krane session list`.
    const ip = req.socket.remoteAddress ?? "";
    const what = path.slice(SIGN_IN_PREFIX.length);
    if (what === "begin") {
      const redirectUri = checkRedirectUri(field(b, "redirect_uri", 200));
      const workspace = field(b, "workspace", 64).trim();
      const { authorizationUrl } = await oidc.begin({ redirectUri, workspace });
      return json(res, 200, { authorization_url: authorizationUrl });
    }
    if (what === "complete") {
      const client = field(b, "client", 16) || "cli";
      if (client !== "cli" && client !== "dashboard")
        throw new DomainError("invalid_argument", 'client: "cli" or "dashboard"', "client");
      const done = await oidc.complete(field(b, "callback_url", 4096), client, ip);
      return json(
        res,
        200,
        sessionAnswer(done.tokens, {
          workspace: done.workspace,
          member: { email: done.member.email, role: done.member.role, subject: done.member.subject },
        }),
      );
    }
    if (what === "refresh") {
      const t = await oidc.refresh(field(b, "refresh_token", 200), ip);
      if (!t) return json(res, 401, { message: "the session is over or was revoked: krane login" });
      return json(res, 200, sessionAnswer(t));
    }
    return json(res, 404, { message: "begin, complete or refresh" });
  } catch (err) {
    if (err instanceof DomainError) return json(res, HTTP_STATUS[err.code], { message: err.message });
    if (err instanceof SignInRefused) return json(res, 401, { message: err.message });
    if (err instanceof ProviderUnavailable) return json(res, 503, { message: err.message });
    throw err;
  }
}

// What a browser's call carries instead of a bearer token (pure): the session cookie, and the
// checks that make a cookie-authenticated call safe from other sites (CSRF).
//
// The cookie is HttpOnly (no script reads it, so an injected script cannot send the session
// elsewhere), SameSite=Strict (a browser attaches it to no request that another site starts)
// and, under TLS, Secure with the __Host- prefix (no subdomain or plain-http page can set or
// shadow it). On top of that every call made with the cookie must come from ctrl's own origin:
// a browser states the origin of a POST in `Origin` (and, since 2020, who started it in
// `Sec-Fetch-Site`), which a page of another site cannot forge. A call without `Origin` is not
// a browser's fetch and is refused with a cookie: scripts and the CLI use bearer tokens.

/** The cookie's name: with the __Host- prefix under TLS (browsers then require Secure, Path=/ and no Domain). */
export function sessionCookieName(secure: boolean): string {
  return secure ? "__Host-krane_session" : "krane_session";
}

/** The value of cookie `name` in a Cookie header, or undefined. */
export function readCookie(header: string | null | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() !== name) continue;
    const value = part.slice(eq + 1).trim();
    // Session ids are base64url; anything else is not one of ours.
    return /^[A-Za-z0-9_-]{1,128}$/.test(value) ? value : undefined;
  }
  return undefined;
}

/** The Set-Cookie header that starts a session (maxAgeMs > 0) or ends it (0). */
export function sessionCookie(value: string, opts: { secure: boolean; maxAgeMs: number }): string {
  const parts = [
    `${sessionCookieName(opts.secure)}=${opts.maxAgeMs > 0 ? value : ""}`,
    "Path=/",
    "HttpOnly",
    "SameSite=Strict",
    `Max-Age=${Math.max(0, Math.floor(opts.maxAgeMs / 1000))}`,
  ];
  if (opts.secure) parts.push("Secure");
  return parts.join("; ");
}

export interface BrowserRequest {
  /** The request's own origin, e.g. http://127.0.0.1:7070 (scheme and the Host/:authority it was sent to). */
  ownOrigin: string;
  origin: string | null;
  secFetchSite: string | null;
}

/** Why a cookie-authenticated request is refused as cross-site, or undefined when it is ctrl's own page. */
export function crossSiteRefusal(req: BrowserRequest): string | undefined {
  if (req.secFetchSite !== null && req.secFetchSite !== "same-origin")
    return `a call with the session cookie must come from the dashboard itself (Sec-Fetch-Site: ${req.secFetchSite.slice(0, 32)})`;
  if (req.origin === null)
    return "a call with the session cookie must state its Origin (scripts use a bearer token instead)";
  if (req.origin !== req.ownOrigin)
    return `a call with the session cookie must come from ${req.ownOrigin}, not ${req.origin.slice(0, 200)}`;
  return undefined;
}

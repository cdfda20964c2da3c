// Header rules of the proxy, pure: what goes upstream (hop-by-hop headers and the names listed
// in Connection dropped, X-Forwarded-For/Proto/Host and X-Request-Id set) and what comes back
// (hop-by-hop dropped again, the request id added). Also the checks that turn a malformed
// request into a 400 before anything is dialled.
import { REQUEST_ID_HEADER } from "../contracts/headers.js";

/** Connection-specific headers (RFC 9110 §7.6.1) plus those undici refuses or HTTP/2 forbids. */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "http2-settings",
  // undici cannot do 100-continue; Node's server already answered it (traffic §1).
  "expect",
]);

const requestIdRe = /^[A-Za-z0-9._:@+=/-]{1,128}$/;

/** A client's request id is kept when it is short and plain; otherwise the proxy makes one. */
export function isSaneRequestId(v: string | undefined): v is string {
  return v !== undefined && requestIdRe.test(v);
}

// reg-name / IPv4 / [IPv6], optional port (RFC 3986 §3.2.2); no userinfo, no spaces.
const hostRe = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~!$&'()*+,;=%-]+)(?::\d{1,5})?$/;

/** A Host (or :authority) value the proxy accepts. */
export function isValidHost(v: string): boolean {
  return v.length > 0 && v.length <= 255 && hostRe.test(v);
}

function connectionTokens(raw: readonly string[]): Set<string> | undefined {
  let tokens: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if ((raw[i] ?? "").toLowerCase() !== "connection") continue;
    for (const t of (raw[i + 1] ?? "").split(",")) {
      const name = t.trim().toLowerCase();
      if (name) (tokens ??= new Set()).add(name);
    }
  }
  return tokens;
}

export interface ForwardContext {
  /** The TCP peer of this hop. */
  readonly clientAddress: string;
  /** "http" here (the sentinel terminates no TLS); a gateway in front sets its own. */
  readonly proto: string;
  /** The request's Host / :authority. */
  readonly host: string | undefined;
  readonly requestId: string;
}

/**
 * The headers to send upstream, as a flat [name, value, …] list built from the client's raw
 * headers (HTTP/2 pseudo-headers are dropped; `host` carries :authority instead).
 * X-Forwarded-For gets the client appended; X-Forwarded-Proto and -Host are kept when a proxy in
 * front (the gateway) set them, else set from this hop.
 */
export function upstreamHeaders(raw: readonly string[], ctx: ForwardContext): string[] {
  const drop = connectionTokens(raw);
  const out: string[] = [];
  let xff: string | undefined;
  let hasProto = false;
  let hasHost = false;
  let sawHost = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] ?? "";
    const value = raw[i + 1] ?? "";
    if (name.charCodeAt(0) === 58 /* ':' */) continue;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || drop?.has(lower)) continue;
    switch (lower) {
      case "x-forwarded-for":
        xff = xff === undefined ? value : `${xff}, ${value}`;
        continue;
      case REQUEST_ID_HEADER:
        continue;
      case "x-forwarded-proto":
        if (hasProto) continue;
        hasProto = true;
        break;
      case "x-forwarded-host":
        if (hasHost) continue;
        hasHost = true;
        break;
      case "host":
        if (sawHost) continue;
        sawHost = true;
        break;
    }
    out.push(name, value);
  }
  if (!sawHost && ctx.host !== undefined) out.push("host", ctx.host);
  out.push("x-forwarded-for", xff === undefined ? ctx.clientAddress : `${xff}, ${ctx.clientAddress}`);
  if (!hasProto) out.push("x-forwarded-proto", ctx.proto);
  if (!hasHost && ctx.host !== undefined) out.push("x-forwarded-host", ctx.host);
  out.push(REQUEST_ID_HEADER, ctx.requestId);
  return out;
}

export type HeaderValue = string | string[] | undefined;

/** The upstream response's headers minus hop-by-hop ones, plus the request id. */
export function downstreamHeaders(
  headers: Record<string, HeaderValue>,
  requestId: string,
): Record<string, string | string[]> {
  const conn = headers.connection;
  const drop =
    conn === undefined ? undefined : connectionTokens(["connection", Array.isArray(conn) ? conn.join(",") : conn]);
  const out: Record<string, string | string[]> = {};
  for (const name in headers) {
    const v = headers[name];
    if (v === undefined || HOP_BY_HOP.has(name) || drop?.has(name)) continue;
    out[name] = v;
  }
  if (out[REQUEST_ID_HEADER] === undefined) out[REQUEST_ID_HEADER] = requestId;
  return out;
}

/** True when the request has no body (HTTP/1.1 framing: no Content-Length > 0, no Transfer-Encoding). */
export function http1HasNoBody(headers: Record<string, HeaderValue>): boolean {
  if (headers["transfer-encoding"] !== undefined) return false;
  const cl = headers["content-length"];
  return cl === undefined || cl === "0";
}

/** Methods a retry cannot repeat a side effect of (RFC 9110 §9.2.2). */
export function isIdempotent(method: string): boolean {
  return (
    method === "GET" ||
    method === "HEAD" ||
    method === "OPTIONS" ||
    method === "PUT" ||
    method === "DELETE" ||
    method === "TRACE"
  );
}

// The plain HTTP answers of ctrl's API port beside the RPCs (./http.ts, ./sign-in.ts): headers
// every answer carries, JSON answers, and reading a small request body.
import type * as http from "node:http";
import type * as http2 from "node:http2";
import type { SignInLimiter } from "./limiter.js";

export type Request = http.IncomingMessage | http2.Http2ServerRequest;
export type Response = http.ServerResponse | http2.Http2ServerResponse;

/** Headers every page answer carries: nothing from another origin, no framing, no sniffing, no referrer. */
export const PAGE_HEADERS: Record<string, string> = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
};

export function header(req: Request, name: string): string | null {
  const v = req.headers[name];
  return typeof v === "string" ? v : null;
}

export function json(res: Response, status: number, body: unknown, extra: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    ...PAGE_HEADERS,
    "content-type": "application/json",
    "cache-control": "no-store",
    "content-length": String(Buffer.byteLength(text)),
    ...extra,
  });
  res.end(text);
}

/** At most this much of a body is read (a token is about 60 bytes, a callback URL a few hundred). */
const MAX_BODY = 4096;

/** Answers 429 when the limiter says this address must wait (true: answered). */
export function refusedByLimit(limiter: SignInLimiter, req: Request, res: Response): boolean {
  const wait = limiter.take(req.socket.remoteAddress ?? "", Date.now());
  if (wait <= 0) return false;
  const seconds = Math.ceil(wait / 1000);
  json(
    res,
    429,
    { message: `too many sign-in attempts: try again in ${seconds} s` },
    { "retry-after": String(seconds) },
  );
  return true;
}

/**
 * The origin a request was sent to: ctrl's public URL when it has one (a proxy's; never a
 * forwarded header, which anyone can send), else the scheme and its Host or :authority, e.g.
 * http://127.0.0.1:7070.
 */
export function ownOrigin(req: Request, secure: boolean, publicOrigin?: string): string {
  if (publicOrigin !== undefined) return publicOrigin;
  const authority = "authority" in req && typeof req.authority === "string" ? req.authority : req.headers.host;
  return `${secure ? "https" : "http"}://${authority ?? ""}`;
}

export async function readBody(req: Request): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.byteLength;
    if (size > MAX_BODY) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

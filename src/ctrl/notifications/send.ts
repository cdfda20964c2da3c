// One attempt at one channel: POST a body to a Slack-compatible or generic webhook, or send a
// message through the installation's SMTP server (nodemailer). A failure throws DeliveryError
// saying why in a few words (the receiver's status and the start of its answer, a refused
// connection, a timeout) and, for a 429 or 503 with Retry-After, how long the receiver asked
// to be left alone.
//
// The generic webhook is signed like the audit log's sink (../audit/sink.ts: X-Krane-Signature
// over "<X-Krane-Timestamp>.<body>"), and carries the event's id in X-Krane-Delivery and
// Idempotency-Key: the same on every attempt, so a receiver drops a repeat. Redirects are not
// followed (a receiver could otherwise send ctrl's request anywhere).
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import nodemailer from "nodemailer";
import type { NotificationBody } from "../../contracts/notifications.js";
import { DELIVERY_HEADER, SIGNATURE_HEADER, signDelivery, TIMESTAMP_HEADER } from "../audit/sink.js";
import { isLocalHost } from "../validate/notifications.js";
import { emailMessage, slackMessage } from "./format.js";

export const EVENT_HEADER = "x-krane-event";

export class DeliveryError extends Error {
  constructor(
    message: string,
    /** The receiver asked for this much quiet (Retry-After). */
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = "DeliveryError";
  }
}

/** Retry-After: delay-seconds or an HTTP date. */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (header === null || header.trim() === "") return undefined;
  if (/^\d+$/.test(header.trim())) return Math.min(Number(header.trim()), 3600) * 1000;
  const at = Date.parse(header);
  return Number.isFinite(at) ? Math.min(Math.max(0, at - now), 3_600_000) : undefined;
}

function describe(err: unknown): string {
  if (err instanceof DeliveryError) return err.message;
  if (err instanceof Error) {
    if (err.name === "TimeoutError") return "the receiver did not answer in time";
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    if (cause?.code) return `${cause.code}${cause.message ? `: ${cause.message}` : ""}`;
    return err.message;
  }
  return String(err);
}

/** Resolves a hostname to its addresses (node:dns's lookup, or a stand-in in tests). */
export type Resolve = (hostname: string) => Promise<string[]>;

export const systemResolve: Resolve = async (hostname) =>
  (await lookup(hostname, { all: true, verbatim: true })).map((a) => a.address);

/**
 * Refuses a receiver whose name resolves to this machine or a link-local address (a cloud's
 * metadata service): the URL was checked by its name when the channel was added, and a name can
 * point anywhere. A name that resolves again differently between this check and the connection
 * is not caught here.
 */
export async function refuseLocalReceiver(url: string, resolve: Resolve = systemResolve): Promise<void> {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, "");
  if (isIP(host) !== 0) return; // an address was checked as such
  let addresses: string[];
  try {
    addresses = await resolve(host);
  } catch (err) {
    throw new DeliveryError(`the receiver's host ${host} does not resolve: ${describe(err)}`);
  }
  const local = addresses.find((a) => isLocalHost(a));
  if (local !== undefined)
    throw new DeliveryError(
      `the receiver's host ${host} resolves to ${local}, on this machine or link-local (the installation's --notify-allow-loopback allows it)`,
    );
}

export interface PostOptions {
  timeoutMs: number;
  signal?: AbortSignal;
}

async function post(url: string, body: string, headers: Record<string, string>, o: PostOptions): Promise<void> {
  let res: Response;
  try {
    res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", "user-agent": "krane", ...headers },
      body,
      redirect: "manual",
      signal: AbortSignal.any([...(o.signal ? [o.signal] : []), AbortSignal.timeout(o.timeoutMs)]),
    });
  } catch (err) {
    throw new DeliveryError(describe(err));
  }
  const text = await res.text().catch(() => "");
  if (res.status >= 200 && res.status < 300) return;
  const said = text.trim().replace(/\s+/g, " ").slice(0, 120);
  throw new DeliveryError(
    `the receiver answered ${res.status}${said ? `: ${said}` : ""}`,
    res.status === 429 || res.status === 503 ? retryAfterMs(res.headers.get("retry-after")) : undefined,
  );
}

export async function sendWebhook(url: string, secret: string, b: NotificationBody, o: PostOptions): Promise<void> {
  const body = JSON.stringify(b);
  const timestamp = String(Math.floor(Date.now() / 1000));
  await post(
    url,
    body,
    {
      [TIMESTAMP_HEADER]: timestamp,
      [SIGNATURE_HEADER]: signDelivery(secret, timestamp, body),
      [DELIVERY_HEADER]: b.id,
      "idempotency-key": b.id,
      [EVENT_HEADER]: b.type,
    },
    o,
  );
}

export async function sendSlack(url: string, b: NotificationBody, o: PostOptions): Promise<void> {
  // Slack ignores the headers; a relay in between can drop repeats by them.
  await post(url, JSON.stringify(slackMessage(b)), { [DELIVERY_HEADER]: b.id, [EVENT_HEADER]: b.type }, o);
}

export interface SmtpConnection {
  host: string;
  port: number;
  security: string;
  username: string;
  password: string | undefined;
  from: string;
}

function transport(s: SmtpConnection, timeoutMs: number) {
  return nodemailer.createTransport({
    host: s.host,
    port: s.port,
    secure: s.security === "tls",
    requireTLS: s.security === "starttls",
    ignoreTLS: s.security === "none",
    auth: s.username === "" ? undefined : { user: s.username, pass: s.password ?? "" },
    connectionTimeout: timeoutMs,
    greetingTimeout: timeoutMs,
    socketTimeout: timeoutMs,
    disableFileAccess: true,
    disableUrlAccess: true,
  });
}

/** Connects, greets and (with a username) signs in; throws DeliveryError saying why not. */
export async function checkSmtpServer(s: SmtpConnection, timeoutMs: number): Promise<void> {
  const t = transport(s, timeoutMs);
  try {
    await t.verify();
  } catch (err) {
    throw new DeliveryError(describe(err));
  } finally {
    t.close();
  }
}

export async function sendEmail(s: SmtpConnection, to: readonly string[], b: NotificationBody, timeoutMs: number) {
  const m = emailMessage(b);
  const t = transport(s, timeoutMs);
  try {
    await t.sendMail({
      from: s.from,
      to: [...to],
      subject: m.subject,
      text: m.text,
      // The same on every attempt: a mail system (and the tests) can tell a repeat.
      messageId: `<${b.id}@krane.notifications>`,
      headers: { [DELIVERY_HEADER]: b.id, [EVENT_HEADER]: b.type },
    });
  } catch (err) {
    throw new DeliveryError(describe(err));
  } finally {
    t.close();
  }
}

// Validation of NotificationService requests: channels (a URL that is https://, or a loopback one
// where the installation allows it; a webhook's key; email recipients; the events and
// environments subscribed to) and the installation's SMTP server. Pure; URLs, keys and passwords are never echoed.
import { isIP } from "node:net";
import { isNotificationEvent, type NotificationEventType } from "../../contracts/notifications.js";
import { invalidArgument } from "../errors.js";
import { workspaceRef } from "./api.js";
import * as r from "./rules.js";

export const CHANNEL_LIMITS = {
  urlMax: 2048,
  secretMin: 16,
  secretMax: 256,
  recipientsMax: 20,
  addressMax: 254,
  environmentsMax: 64,
} as const;

export type ChannelType = "slack" | "webhook" | "email";

export type ChannelTarget =
  { type: "slack"; url: string } | { type: "webhook"; url: string; secret: string } | { type: "email"; to: string[] };

export interface ChannelInput {
  workspace: string;
  name: string;
  target: ChannelTarget;
  /** Sorted, distinct; []: every event. */
  events: NotificationEventType[];
  /** "project/environment", sorted, distinct; []: every environment. */
  environments: string[];
}

/** Whether a URL's host is this machine or link-local (cloud metadata) or unspecified. */
export function isLocalHost(hostname: string): boolean {
  const h = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (h === "localhost" || h.endsWith(".localhost")) return true;
  const kind = isIP(h);
  if (kind === 4) return /^(127\.|169\.254\.|0\.)/.test(h);
  if (kind === 6)
    return h === "::1" || h === "::" || /^fe[89ab][0-9a-f]:/.test(h) || /^::ffff:(127|169\.254|0)\./.test(h);
  return false;
}

/**
 * A receiver's URL: https://, or http(s):// to this machine when the installation allows loopback
 * receivers (tests, a relay beside ctrl). Link-local addresses (cloud metadata services) go with
 * loopback: a workspace must not make ctrl call its own machine's services.
 */
export function receiverUrl(field: string, value: string, allowLoopback: boolean): string {
  if (value === "") throw invalidArgument(field, "is required");
  if (value.length > CHANNEL_LIMITS.urlMax)
    throw invalidArgument(field, `must be at most ${CHANNEL_LIMITS.urlMax} characters`);
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw invalidArgument(field, "is not a URL");
  }
  const local = isLocalHost(u.hostname);
  if (local && !allowLoopback)
    throw invalidArgument(
      field,
      "must not point at this machine (loopback and link-local addresses need the installation's --notify-allow-loopback)",
    );
  if (u.protocol !== "https:" && !(u.protocol === "http:" && local))
    throw invalidArgument(field, "must be an https:// URL (http:// only to a loopback address)");
  if (u.hash !== "") throw invalidArgument(field, "must not have a #fragment");
  return u.toString();
}

const ADDRESS =
  /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/** An email address (addr-spec without comments or quoted local parts). */
export function emailAddress(field: string, value: string): string {
  if (value === "") throw invalidArgument(field, "is required");
  if (value.length > CHANNEL_LIMITS.addressMax || !ADDRESS.test(value))
    throw invalidArgument(field, "must be an email address such as ops@example.com");
  return value;
}

function sortedDistinct<T extends string>(field: string, values: readonly T[]): T[] {
  const seen = new Set<string>();
  values.forEach((v, i) => {
    if (seen.has(v)) throw invalidArgument(`${field}[${i}]`, "is listed twice");
    seen.add(v);
  });
  return [...values].sort();
}

export function validateEvents(field: string, events: readonly string[]): NotificationEventType[] {
  const out: NotificationEventType[] = [];
  events.forEach((e, i) => {
    if (!isNotificationEvent(e))
      throw invalidArgument(`${field}[${i}]`, `is not an event krane notifies about (krane notify events lists them)`);
    out.push(e);
  });
  return sortedDistinct(field, out);
}

/** "project/environment" (slugs). */
export function validateEnvironmentNames(field: string, envs: readonly string[]): string[] {
  r.list(field, envs, CHANNEL_LIMITS.environmentsMax);
  envs.forEach((e, i) => {
    const [p, env, more] = e.split("/");
    if (p === undefined || env === undefined || more !== undefined)
      throw invalidArgument(`${field}[${i}]`, 'must be "project/environment"');
    r.slug(`${field}[${i}]`, p);
    r.slug(`${field}[${i}]`, env);
  });
  return sortedDistinct(field, envs);
}

type TargetCase =
  | { case: "slack"; value: { url: string } }
  | { case: "webhook"; value: { url: string; secret: string } }
  | { case: "email"; value: { to: string[] } }
  | { case: undefined; value?: undefined };

export function validateAddChannel(
  req: { workspace: string; name: string; target: TargetCase; events: string[]; environments: string[] },
  allowLoopback: boolean,
): ChannelInput {
  const base = {
    workspace: workspaceRef("workspace", req.workspace),
    name: r.slug("name", req.name),
    events: validateEvents("events", req.events),
    environments: validateEnvironmentNames("environments", req.environments),
  };
  const t = req.target;
  switch (t.case) {
    case "slack":
      return { ...base, target: { type: "slack", url: receiverUrl("slack.url", t.value.url, allowLoopback) } };
    case "webhook": {
      const url = receiverUrl("webhook.url", t.value.url, allowLoopback);
      const secret = t.value.secret;
      if (secret.length < CHANNEL_LIMITS.secretMin || secret.length > CHANNEL_LIMITS.secretMax)
        throw invalidArgument(
          "webhook.secret",
          `must be ${CHANNEL_LIMITS.secretMin} to ${CHANNEL_LIMITS.secretMax} characters`,
        );
      // eslint-disable-next-line no-control-regex
      if (/[\u0000-\u001f\u007f]/.test(secret))
        throw invalidArgument("webhook.secret", "must not contain control characters");
      return { ...base, target: { type: "webhook", url, secret } };
    }
    case "email": {
      const to = t.value.to;
      if (to.length === 0) throw invalidArgument("email.to", "needs at least one address");
      r.list("email.to", to, CHANNEL_LIMITS.recipientsMax);
      to.forEach((a, i) => emailAddress(`email.to[${i}]`, a));
      return { ...base, target: { type: "email", to: sortedDistinct("email.to", to) } };
    }
    default:
      throw invalidArgument("target", "is required: slack, webhook or email");
  }
}

export function validateChannelRef(req: { workspace: string; name: string }): { workspace: string; name: string } {
  return { workspace: workspaceRef("workspace", req.workspace), name: r.slug("name", req.name) };
}

// ---------------------------------------------------------------- SMTP

export type SmtpSecurity = "starttls" | "tls" | "none";

export interface SmtpInput {
  host: string;
  port: number;
  security: SmtpSecurity;
  username: string;
  password: string;
  from: string;
}

const HOSTNAME =
  /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

const DEFAULT_PORT: Record<SmtpSecurity, number> = { starttls: 587, tls: 465, none: 25 };

/** null: remove the server (an empty host). */
export function validateSmtpServer(req: {
  host: string;
  port: number;
  security: string;
  username: string;
  password: string;
  from: string;
}): SmtpInput | null {
  if (req.host === "") return null;
  const host = req.host.toLowerCase();
  if (!HOSTNAME.test(host) && isIP(host.replace(/^\[|\]$/g, "")) === 0)
    throw invalidArgument("host", "must be a hostname or an IP address");
  const security = (req.security === "" ? "starttls" : req.security) as SmtpSecurity;
  if (!Object.hasOwn(DEFAULT_PORT, security)) throw invalidArgument("security", 'must be "starttls", "tls" or "none"');
  const port = req.port === 0 ? DEFAULT_PORT[security] : r.intRange("port", req.port, 1, 65_535);
  const username = r.text("username", req.username, 256);
  if (req.password.length > 1024) throw invalidArgument("password", "must be at most 1024 characters");
  if (username !== "" && req.password === "") throw invalidArgument("password", "is required with a username");
  if (username === "" && req.password !== "") throw invalidArgument("username", "is required with a password");
  return { host, port, security, username, password: req.password, from: emailAddress("from", req.from) };
}
